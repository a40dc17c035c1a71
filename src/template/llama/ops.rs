//! llama.cpp's binary operators (`common/jinja/runtime.cpp: binary_expression::execute_impl`,
//! build 11434, lines 112–300; identical in build 11312) as template functions.
//!
//! minijinja evaluates `+`, `~`, `in`, `==` … itself and an [`minijinja::Environment`] cannot
//! override them, so the llama.cpp profile rewrites every such operator in the template source
//! into a call of one of the functions registered here ([`super::rewrite`]): `a ~ b` →
//! `__llama_op_concat(a, b)`. The functions follow `execute_impl` branch by branch, with its
//! error texts:
//!
//! 1. `==` / `!=`: `value_t::equivalent` (value.h) — numbers (integers, floats, booleans) equal
//!    when their integer and float parts are equal (`1 == 1.0`, `true == 1`), strings by text,
//!    arrays and objects item by item (in order) and only when every item is immutable and
//!    hashable (`[[1]] == [[1]]` is false), `none == none`, `undefined == undefined`.
//! 2. an undefined operand: `x in undefined` is false (`not in`: true); `+` / `~` with a string
//!    on the other side concatenate the undefined as `""`; anything else is the error
//!    `Cannot perform operation OP on undefined values` (so `undefined in [..]` is an error).
//! 3. a `none` operand: `none in X` is a membership test (`test_is_in`); `+` / `~` with a string
//!    concatenate `none` as `""`; anything else `Cannot perform operation on null values`.
//! 4. two numbers (integers or floats, not booleans): `+ - *` (an integer unless a float is
//!    involved; computed in double precision), `/` (always a float), `%` (`fmod`), `< > <= >=`.
//! 5. two arrays: `+` concatenates; any other operator falls through to the error.
//! 6. an array on the right: `in` / `not in` (item equality as in 1.).
//! 7. a string on either side with `~` or `+`: both printed with `as_string` and joined
//!    (`"n=" + 1` → `"n=1"`).
//! 8. a string and an integer with `*`: repetition.
//! 9. two strings with `in`: substring.
//! 10. an object on the right with `in`: key lookup (an unhashable key is an error).
//! 11. anything else: `Unknown operator "OP" between LEFT and RIGHT` (type names `Integer`,
//!     `Float`, `String`, `Boolean`, `Array`, `Object`, `None`), e.g. `[..] in [..]`,
//!     `1 ~ 2`, `"a" < "b"`.
//!
//! Not reproduced: llama.cpp tells arrays from tuples (`value_tuple_t`, immutable: a tuple of
//! strings is hashable, `(1,) == [1]` is false); minijinja has one sequence type, treated here
//! as llama.cpp's (mutable) array.

use minijinja::value::{Value as JValue, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};

use super::jinja::as_string;

/// A binary operator of llama.cpp's Jinja grammar (`common/jinja/lexer.h`, the
/// `*_binary_operator` tokens, plus `in` / `not in`); `and` / `or` evaluate as in minijinja.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Concat,
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
    In,
    NotIn,
}

impl Op {
    /// Every operator, in the order the functions are registered.
    pub const ALL: [Op; 14] = [
        Op::Add,
        Op::Sub,
        Op::Mul,
        Op::Div,
        Op::Rem,
        Op::Concat,
        Op::Eq,
        Op::Ne,
        Op::Lt,
        Op::Gt,
        Op::Le,
        Op::Ge,
        Op::In,
        Op::NotIn,
    ];

    /// The operator as llama.cpp spells it in its messages (`op.value`).
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Add => "+",
            Op::Sub => "-",
            Op::Mul => "*",
            Op::Div => "/",
            Op::Rem => "%",
            Op::Concat => "~",
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Gt => ">",
            Op::Le => "<=",
            Op::Ge => ">=",
            Op::In => "in",
            Op::NotIn => "not in",
        }
    }

    /// The template function a long chain of operators is rewritten to:
    /// `__llama_op_chain(a, "+", b, "~", c)` is `(a + b) ~ c`.
    pub const CHAIN_FUNCTION: &'static str = "__llama_op_chain";

    /// The operator spelled `s` ([`Op::symbol`]).
    pub fn from_symbol(s: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.symbol() == s)
    }

    /// The template function the rewritten source calls for this operator.
    pub fn function(self) -> &'static str {
        match self {
            Op::Add => "__llama_op_add",
            Op::Sub => "__llama_op_sub",
            Op::Mul => "__llama_op_mul",
            Op::Div => "__llama_op_div",
            Op::Rem => "__llama_op_rem",
            Op::Concat => "__llama_op_concat",
            Op::Eq => "__llama_op_eq",
            Op::Ne => "__llama_op_ne",
            Op::Lt => "__llama_op_lt",
            Op::Gt => "__llama_op_gt",
            Op::Le => "__llama_op_le",
            Op::Ge => "__llama_op_ge",
            Op::In => "__llama_op_in",
            Op::NotIn => "__llama_op_not_in",
        }
    }
}

/// Registers one function per [`Op`] ([`Op::function`]) evaluating [`binary`], and
/// [`Op::CHAIN_FUNCTION`] folding `operand, "op", operand, …` left to right.
pub fn install(env: &mut Environment<'static>) {
    env.add_function(
        Op::CHAIN_FUNCTION,
        |state: &State, args: minijinja::value::Rest<JValue>| -> Result<JValue, Error> {
            let bad = || Error::new(ErrorKind::InvalidOperation, "malformed operator chain");
            let mut it = args.iter();
            let mut acc = it.next().cloned().ok_or_else(bad)?;
            while let (Some(sym), Some(r)) = (it.next(), it.next()) {
                let op = sym.as_str().and_then(Op::from_symbol).ok_or_else(bad)?;
                acc = apply(state, op, &acc, r)?;
                // each intermediate result is built (and copied by the next step): pay for
                // it, so a 20,000-term `~` chain costs what it copies (budget.rs)
                let built = match acc.as_str() {
                    Some(s) => s.len() as u64,
                    None => super::caps::untracked(state, || {
                        crate::budget::print_bound(&acc, 0, 0, u64::MAX)
                    }),
                };
                crate::budget::charge_work(state, built)?;
            }
            Ok(acc)
        },
    );
    for op in Op::ALL {
        env.add_function(
            op.function(),
            move |state: &State, l: &JValue, r: &JValue| apply(state, op, l, r),
        );
    }
}

/// [`binary`] within the render's memory budget (budget.rs), its operands read as llama.cpp
/// reads them: not marked "used" (caps.rs).
fn apply(state: &State, op: Op, l: &JValue, r: &JValue) -> Result<JValue, Error> {
    let size = |v: &JValue| {
        super::caps::untracked(state, || crate::budget::print_bound(v, 0, 0, u64::MAX))
    };
    let bound = match op {
        Op::Add | Op::Concat => size(l).saturating_add(size(r)),
        Op::Mul if is_str(l) || is_str(r) => {
            let n = r.as_i64().or(l.as_i64()).unwrap_or(0).max(0) as u64;
            size(l).saturating_add(size(r)).saturating_mul(n)
        }
        _ => 0,
    };
    super::caps::untracked(state, || {
        crate::budget::ensure_bytes(state, bound, op.symbol())
    })?;
    super::caps::untracked(state, || binary(op, l, r))
        .map_err(|m| Error::new(ErrorKind::InvalidOperation, m))
}

/// llama.cpp's type name of a value (`value_t::type()`, value.h).
pub fn type_name(v: &JValue) -> &'static str {
    match v.kind() {
        ValueKind::Undefined => "Undefined",
        ValueKind::None => "None",
        ValueKind::Bool => "Boolean",
        ValueKind::Number if v.is_integer() => "Integer",
        ValueKind::Number => "Float",
        ValueKind::String | ValueKind::Bytes => "String",
        ValueKind::Seq | ValueKind::Iterable => "Array",
        ValueKind::Map => "Object",
        _ => "Function",
    }
}

fn is_str(v: &JValue) -> bool {
    v.kind() == ValueKind::String
}

fn is_array(v: &JValue) -> bool {
    matches!(v.kind(), ValueKind::Seq | ValueKind::Iterable)
}

fn is_object(v: &JValue) -> bool {
    v.kind() == ValueKind::Map
}

/// `is_val<value_int>` or `is_val<value_float>` (booleans are neither).
fn is_number(v: &JValue) -> bool {
    v.kind() == ValueKind::Number
}

fn is_int(v: &JValue) -> bool {
    v.kind() == ValueKind::Number && v.is_integer()
}

/// `val_int` and `val_flt` of a numeric value (`value_int_t`, `value_float_t`, `value_bool_t`
/// constructors, value.h): an integer not exactly representable as a double has
/// `val_flt = ±inf`; a float's `val_int` is its truncation (0 when not finite).
fn num_parts(v: &JValue) -> Option<(i64, f64)> {
    match v.kind() {
        ValueKind::Bool => Some((i64::from(v.is_true()), f64::from(u8::from(v.is_true())))),
        ValueKind::Number if v.is_integer() => {
            let i = v.as_i64()?;
            let f = i as f64;
            let f = if f as i64 != i {
                if i < 0 {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }
            } else {
                f
            };
            Some((i, f))
        }
        ValueKind::Number => {
            let f = f64::try_from(v.clone()).ok()?;
            Some((if f.is_finite() { f as i64 } else { 0 }, f))
        }
        _ => None,
    }
}

/// `value_t::is_immutable() && is_hashable()` of an array item or object value: primitives
/// (not undefined), not arrays or objects (mutable).
fn immutable_hashable(v: &JValue) -> bool {
    matches!(
        v.kind(),
        ValueKind::None | ValueKind::Bool | ValueKind::Number | ValueKind::String
    )
}

fn items(v: &JValue) -> Vec<JValue> {
    v.try_iter().map(|it| it.collect()).unwrap_or_default()
}

/// `*a == *b`: `a->equivalent(*b)` (value.h, the `equivalent` of each value type).
pub fn equivalent(a: &JValue, b: &JValue) -> bool {
    match a.kind() {
        ValueKind::Bool | ValueKind::Number => match (num_parts(a), num_parts(b)) {
            (Some((ai, af)), Some((bi, bf))) => ai == bi && af == bf,
            _ => false,
        },
        ValueKind::String => is_str(b) && a.as_str() == b.as_str(),
        ValueKind::None => b.is_none(),
        ValueKind::Undefined => b.is_undefined(),
        ValueKind::Seq | ValueKind::Iterable => {
            if !is_array(b) {
                return false;
            }
            let (x, y) = (items(a), items(b));
            x.iter().all(immutable_hashable)
                && y.iter().all(immutable_hashable)
                && x.len() == y.len()
                && x.iter().zip(&y).all(|(p, q)| equivalent(p, q))
        }
        ValueKind::Map => {
            if !is_object(b) {
                return false;
            }
            let (x, y) = (items(a), items(b));
            let vals = |m: &JValue, keys: &[JValue]| -> Vec<JValue> {
                keys.iter()
                    .map(|k| m.get_item(k).unwrap_or(JValue::UNDEFINED))
                    .collect()
            };
            let (xv, yv) = (vals(a, &x), vals(b, &y));
            xv.iter().all(immutable_hashable)
                && yv.iter().all(immutable_hashable)
                && x.len() == y.len()
                && x.iter().zip(&y).all(|(p, q)| equivalent(p, q))
                && xv.iter().zip(&yv).all(|(p, q)| equivalent(p, q))
        }
        _ => false,
    }
}

/// `test_is_in(needle, haystack)` (value.cpp, build 11434 line 533).
pub fn test_is_in(needle: &JValue, haystack: &JValue) -> Result<bool, String> {
    if haystack.is_undefined() {
        return Ok(false);
    }
    if is_array(haystack) {
        return Ok(items(haystack).iter().any(|item| equivalent(needle, item)));
    }
    if is_str(haystack) {
        if !is_str(needle) {
            return Err(format!(
                "'in' test expects args[1] as string when args[0] is string, got args[1] as {}",
                type_name(needle)
            ));
        }
        let (h, n) = (
            haystack.as_str().unwrap_or(""),
            needle.as_str().unwrap_or(""),
        );
        return Ok(h.contains(n));
    }
    if is_object(haystack) {
        // value_object_t::has_key: the key must be immutable and hashable
        if !immutable_hashable(needle) {
            return Err(format!(
                "Object key of unhashable type: {}",
                type_name(needle)
            ));
        }
        return Ok(items(haystack).iter().any(|k| equivalent(k, needle)));
    }
    Err(format!(
        "'in' test expects iterable as first argument, got {}",
        type_name(haystack)
    ))
}

/// `binary_expression::execute_impl` for `l OP r` (both already evaluated; `and` / `or` are not
/// here). Errors: llama.cpp's exception text.
pub fn binary(op: Op, l: &JValue, r: &JValue) -> Result<JValue, String> {
    // runtime.cpp:127 equality operators
    match op {
        Op::Eq => return Ok(JValue::from(equivalent(l, r))),
        Op::Ne => return Ok(JValue::from(!equivalent(l, r))),
        _ => {}
    }
    let is_in = matches!(op, Op::In | Op::NotIn);
    let concat_op = matches!(op, Op::Add | Op::Concat);
    let membership = |member: bool| JValue::from(if op == Op::In { member } else { !member });
    // runtime.cpp:133 workaround_concat_null_with_str
    let concat_null = || -> Option<JValue> {
        let null = |v: &JValue| v.is_none() || v.is_undefined();
        if (null(l) && is_str(r)) || (null(r) && is_str(l)) {
            let a = if null(l) { String::new() } else { as_string(l) };
            let b = if null(r) { String::new() } else { as_string(r) };
            return Some(JValue::from(a + &b));
        }
        None
    };
    // runtime.cpp:157 undefined operands
    if l.is_undefined() || r.is_undefined() {
        if r.is_undefined() && is_in {
            return Ok(JValue::from(op == Op::NotIn));
        }
        if concat_op && let Some(v) = concat_null() {
            return Ok(v);
        }
        return Err(format!(
            "Cannot perform operation {} on undefined values",
            op.symbol()
        ));
    }
    // runtime.cpp:169 none operands
    if l.is_none() || r.is_none() {
        if !r.is_none() && is_in {
            return Ok(membership(test_is_in(l, r)?));
        }
        if concat_op && let Some(v) = concat_null() {
            return Ok(v);
        }
        return Err("Cannot perform operation on null values".to_owned());
    }
    // runtime.cpp:185 two numbers
    if is_number(l) && is_number(r) {
        let (_, a) = num_parts(l).unwrap_or((0, f64::NAN));
        let (_, b) = num_parts(r).unwrap_or((0, f64::NAN));
        let float = !is_int(l) || !is_int(r);
        let num = |x: f64| {
            if float {
                JValue::from(x)
            } else {
                JValue::from(x as i64)
            }
        };
        match op {
            Op::Add => return Ok(num(a + b)),
            Op::Sub => return Ok(num(a - b)),
            Op::Mul => return Ok(num(a * b)),
            Op::Div => return Ok(JValue::from(a / b)),
            Op::Rem => return Ok(num(a % b)),
            Op::Lt => return Ok(JValue::from(a < b)),
            Op::Gt => return Ok(JValue::from(a > b)),
            Op::Ge => return Ok(JValue::from(a >= b)),
            Op::Le => return Ok(JValue::from(a <= b)),
            _ => {}
        }
    }
    // runtime.cpp:227 arrays
    if is_array(l) && is_array(r) {
        if op == Op::Add {
            let mut all = items(l);
            all.extend(items(r));
            return Ok(JValue::from(all));
        }
    } else if is_array(r) {
        let member = test_is_in(l, r)?;
        if is_in {
            return Ok(membership(member));
        }
    }
    // runtime.cpp:251 string concatenation with ~ and +
    if (is_str(l) || is_str(r)) && concat_op {
        return Ok(JValue::from(as_string(l) + &as_string(r)));
    }
    // runtime.cpp:262 string repetition
    if op == Op::Mul && ((is_str(l) && is_int(r)) || (is_int(l) && is_str(r))) {
        let (s, n) = if is_str(l) { (l, r) } else { (r, l) };
        let n = n.as_i64().unwrap_or(0);
        let s = s.as_str().unwrap_or("");
        return Ok(JValue::from(if n <= 0 {
            String::new()
        } else {
            s.repeat(n as usize)
        }));
    }
    // runtime.cpp:278 string membership
    if is_str(l) && is_str(r) && is_in {
        return Ok(membership(test_is_in(l, r)?));
    }
    // runtime.cpp:289 key in object
    if is_object(r) {
        let member = test_is_in(l, r)?;
        if is_in {
            return Ok(membership(member));
        }
    }
    // runtime.cpp:299
    Err(format!(
        "Unknown operator \"{}\" between {} and {}",
        op.symbol(),
        type_name(l),
        type_name(r)
    ))
}

#[cfg(test)]
mod tests {
    //! Each expectation is read by hand from `common/jinja/runtime.cpp`
    //! (`binary_expression::execute_impl`, build 11434) and value.h / value.cpp; the line
    //! cited is the branch that decides it.

    use super::*;

    fn v(j: serde_json::Value) -> JValue {
        crate::template::pyfmt::json_to_value(&j)
    }

    fn ok(op: Op, l: JValue, r: JValue) -> JValue {
        binary(op, &l, &r).unwrap_or_else(|e| panic!("{op:?}: {e}"))
    }

    fn err(op: Op, l: JValue, r: JValue) -> String {
        binary(op, &l, &r).expect_err("an error")
    }

    const U: JValue = JValue::UNDEFINED;

    #[test]
    fn undefined_operands() {
        // :158 `anything in undefined` is false, `not in` true — even undefined in undefined
        assert_eq!(ok(Op::In, v("a".into()), U), JValue::from(false));
        assert_eq!(ok(Op::NotIn, U, U), JValue::from(true));
        // :168 undefined on the left of `in` (Seed-OSS `t in ("number", "integer")`)
        assert_eq!(
            err(Op::In, U, v(serde_json::json!(["number", "integer"]))),
            "Cannot perform operation in on undefined values"
        );
        assert_eq!(
            err(Op::NotIn, U, v(serde_json::json!(["x"]))),
            "Cannot perform operation not in on undefined values"
        );
        // :161 + and ~ with a string: undefined is "" (firefunction-v2 `s + "\n" + functions`)
        assert_eq!(ok(Op::Add, v("text".into()), U), JValue::from("text"));
        assert_eq!(ok(Op::Concat, U, v("x".into())), JValue::from("x"));
        // :168 otherwise an error, whatever the operator
        assert_eq!(
            err(Op::Add, U, JValue::from(1)),
            "Cannot perform operation + on undefined values"
        );
        assert_eq!(
            err(Op::Concat, U, U),
            "Cannot perform operation ~ on undefined values"
        );
        assert_eq!(
            err(Op::Lt, U, JValue::from(1)),
            "Cannot perform operation < on undefined values"
        );
        // :127 equality is decided before: undefined == undefined, not == none
        assert_eq!(ok(Op::Eq, U, U), JValue::from(true));
        assert_eq!(ok(Op::Eq, U, JValue::from(())), JValue::from(false));
        assert_eq!(ok(Op::Ne, JValue::from(()), U), JValue::from(true));
    }

    #[test]
    fn none_operands() {
        // :176 ~ with a string: none is "" (functionary-v3.2 `" Default=" ~ none`)
        assert_eq!(
            ok(Op::Concat, v(" Default=".into()), JValue::from(())),
            JValue::from(" Default=")
        );
        assert_eq!(
            ok(Op::Add, JValue::from(()), v("x".into())),
            JValue::from("x")
        );
        // :170 none in X is a lookup
        assert_eq!(
            ok(Op::In, JValue::from(()), v(serde_json::json!([null]))),
            JValue::from(true)
        );
        assert_eq!(
            ok(
                Op::NotIn,
                JValue::from(()),
                v(serde_json::json!({"low": 1}))
            ),
            JValue::from(true)
        );
        // value.cpp test_is_in: a string haystack wants a string needle
        assert_eq!(
            err(Op::In, JValue::from(()), v("abc".into())),
            "'in' test expects args[1] as string when args[0] is string, got args[1] as None"
        );
        // :182
        assert_eq!(
            err(Op::Concat, JValue::from(()), JValue::from(())),
            "Cannot perform operation on null values"
        );
        assert_eq!(
            err(Op::Add, JValue::from(()), JValue::from(1)),
            "Cannot perform operation on null values"
        );
        assert_eq!(
            err(Op::In, v("a".into()), JValue::from(())),
            "Cannot perform operation on null values"
        );
    }

    #[test]
    fn numbers() {
        // :185 integers stay integers, a float makes a float, / is always a float
        assert_eq!(
            ok(Op::Add, JValue::from(2), JValue::from(3)),
            JValue::from(5)
        );
        assert!(!ok(Op::Add, JValue::from(2), JValue::from(0.5)).is_integer());
        assert_eq!(
            ok(Op::Div, JValue::from(4), JValue::from(2)),
            JValue::from(2.0)
        );
        assert!(!ok(Op::Div, JValue::from(4), JValue::from(2)).is_integer());
        assert_eq!(
            ok(Op::Rem, JValue::from(7), JValue::from(3)),
            JValue::from(1)
        );
        assert_eq!(
            ok(Op::Lt, JValue::from(1), JValue::from(1.5)),
            JValue::from(true)
        );
        // booleans are not value_int / value_float: no arithmetic, no ordering
        assert_eq!(
            err(Op::Add, JValue::from(true), JValue::from(1)),
            "Unknown operator \"+\" between Boolean and Integer"
        );
        // but == compares val_int and val_flt: 1 == 1.0, true == 1 (value.h equivalent)
        assert_eq!(
            ok(Op::Eq, JValue::from(1), JValue::from(1.0)),
            JValue::from(true)
        );
        assert_eq!(
            ok(Op::Eq, JValue::from(true), JValue::from(1)),
            JValue::from(true)
        );
        assert_eq!(
            ok(Op::Eq, JValue::from(1), JValue::from(1.5)),
            JValue::from(false)
        );
        // strings do not order (:299)
        assert_eq!(
            err(Op::Lt, v("a".into()), v("b".into())),
            "Unknown operator \"<\" between String and String"
        );
    }

    #[test]
    fn strings_arrays_objects() {
        // :251 a string on either side of + or ~: as_string of both
        assert_eq!(
            ok(Op::Add, v("n=".into()), JValue::from(1)),
            JValue::from("n=1")
        );
        assert_eq!(
            ok(Op::Concat, JValue::from(1.5), v("x".into())),
            JValue::from("1.5x")
        );
        assert_eq!(
            ok(
                Op::Concat,
                v("t=".into()),
                v(serde_json::json!(["a", true]))
            ),
            JValue::from("t=['a', True]")
        );
        // ~ between two non-strings is not defined (Jinja2 prints both)
        assert_eq!(
            err(Op::Concat, JValue::from(1), JValue::from(2)),
            "Unknown operator \"~\" between Integer and Integer"
        );
        // :262 repetition
        assert_eq!(
            ok(Op::Mul, v("ab".into()), JValue::from(2)),
            JValue::from("abab")
        );
        assert_eq!(
            ok(Op::Mul, JValue::from(-1), v("ab".into())),
            JValue::from("")
        );
        // :227 arrays concatenate with +
        assert_eq!(
            ok(
                Op::Add,
                v(serde_json::json!([1])),
                v(serde_json::json!(["a"]))
            ),
            v(serde_json::json!([1, "a"]))
        );
        // :299 array in array (GigaChat3 `ty in ["number", "integer"]` with a type list)
        assert_eq!(
            err(
                Op::In,
                v(serde_json::json!(["string", "null"])),
                v(serde_json::json!(["number", "integer"]))
            ),
            "Unknown operator \"in\" between Array and Array"
        );
        // :240 needle in array by equivalence; :278 substring; :289 key in object
        assert_eq!(
            ok(Op::In, JValue::from(1.0), v(serde_json::json!([1]))),
            JValue::from(true)
        );
        assert_eq!(
            ok(Op::In, v("bc".into()), v("abc".into())),
            JValue::from(true)
        );
        assert_eq!(
            ok(Op::In, v("k".into()), v(serde_json::json!({"k": 1}))),
            JValue::from(true)
        );
        assert_eq!(
            ok(Op::NotIn, JValue::from(1), v(serde_json::json!({"1": 1}))),
            JValue::from(true)
        );
        assert_eq!(
            err(Op::In, v(serde_json::json!([1])), v(serde_json::json!({}))),
            "Object key of unhashable type: Array"
        );
        assert_eq!(
            err(Op::In, JValue::from(1), v("abc".into())),
            "Unknown operator \"in\" between Integer and String"
        );
        // value.h equivalent: arrays and objects equal only when their items are hashable
        assert_eq!(
            ok(
                Op::Eq,
                v(serde_json::json!([1, "a"])),
                v(serde_json::json!([1, "a"]))
            ),
            JValue::from(true)
        );
        assert_eq!(
            ok(
                Op::Eq,
                v(serde_json::json!([[1]])),
                v(serde_json::json!([[1]]))
            ),
            JValue::from(false)
        );
        assert_eq!(
            ok(
                Op::Eq,
                v(serde_json::json!({"a": 1})),
                v(serde_json::json!({"a": 1}))
            ),
            JValue::from(true)
        );
        assert_eq!(
            ok(Op::Eq, v("1".into()), JValue::from(1)),
            JValue::from(false)
        );
    }

    #[test]
    fn rendered_through_the_profile() {
        use crate::template::{CompiledTemplate, RenderOptions, profile::Profile};
        let opts = RenderOptions {
            profile: Some(Profile::LlamaCpp { build: 11434 }),
            ..Default::default()
        };
        let render = |src: &str, ctx: serde_json::Value| {
            CompiledTemplate::compile(src, &opts)
                .unwrap()
                .render_context(&ctx)
        };
        let ctx = serde_json::json!({"d": null, "ty": ["string", "null"]});
        assert_eq!(
            render("{{ 'Default=' ~ d ~ '.' }}", ctx.clone()).unwrap(),
            "Default=."
        );
        assert_eq!(
            render("{{ 's' + '\\n' + nothing }}", ctx.clone()).unwrap(),
            "s\n"
        );
        assert_eq!(render("{{ 1 + 2 ~ 'x' }}", ctx.clone()).unwrap(), "3x");
        let e = render(
            "line one\n{% if ty in ['number', 'integer'] %}n{% endif %}",
            ctx.clone(),
        )
        .unwrap_err();
        assert!(
            e.message
                .contains("Unknown operator \"in\" between Array and Array"),
            "{e}"
        );
        // the template's own position, not the rewritten text's
        assert_eq!((e.line, e.column), (Some(2), Some(7)), "{e}");
        let e = render("{% if t in ('a', 'b') %}{% endif %}", ctx).unwrap_err();
        assert!(
            e.message
                .contains("Cannot perform operation in on undefined values"),
            "{e}"
        );
    }
}
