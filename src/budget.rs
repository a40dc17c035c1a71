//! The memory and time budget every template render runs under (seam 3 of the team plan).
//!
//! A chat template is code from whoever wrote the model card, the GGUF, or the session file a
//! colleague sent: `{{ 'a\nb'|indent(100000000000) }}` asks for 100 GB in one call. Every
//! environment toolscope renders with is built through [`install`], once, before any profile
//! layers its own filters (the transformers profile in [`super::render`], the llama.cpp
//! profile); it sets one budget for the whole render:
//!
//! * **fuel** ([`Budget::fuel`]): minijinja 3.1's single tracker (crate `minijinja`
//!   `vm/fuel.rs`). One fuel pays for one instruction *or* for [`BYTES_PER_FUEL`] bytes of
//!   data the engine creates: strings and list slots built by operators (`~`, `+`, `*`,
//!   slicing), literals, every filter/test/function/method result, and captured output. The
//!   built-ins that can create more than they are given (`indent`, `tojson`, `join`,
//!   `replace`, `format` widths, `batch`/`slice` fill, `list`, `range`, string and list `*`,
//!   minijinja-contrib's Python methods `str.replace`/`str.join`) check the size *before*
//!   allocating. So the bytes a render can create are at most `fuel × 64`
//!   ([`Budget::max_bytes`]): with the default 4 000 000 fuel, 256 MB in total — and at
//!   most 4 million instructions, far above what a chat template over a long conversation
//!   needs (every corpus template renders well inside it; an 8 MiB prompt costs 131,072).
//! * **recursion** ([`Budget::recursion_limit`]): macro calls, includes, recursive loops.
//! * Filters and functions toolscope adds (profiles' Python-compatible `tojson`, `indent`,
//!   `join`, …) call [`ensure_bytes`] with the size they are about to build, so they obey
//!   the same budget as the built-ins; the engine charges their result after it exists.
//!
//! Exceeding the budget is a render error of kind `Limit` with the template position
//! (`NAME:LINE:COL: …`) and a message naming the budget ([`exhausted_message`]), never an
//! allocation failure. The output cap of [`super::render::RenderOptions::max_output`] is
//! separate (it bounds the prompt, not the work).

use minijinja::{Environment, Error, ErrorKind, State};

/// Bytes of created data one fuel pays for (minijinja 3.1 `vm/fuel.rs`, `UNITS_PER_FUEL`:
/// one byte costs one unit, one fuel is 64 units).
pub const BYTES_PER_FUEL: u64 = 64;

/// The start of every budget error's message (`convert_error` in [`super::render`] maps it
/// to the `Limit` kind).
pub const MARK: &str = "template budget";

/// The budget of one render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Fuel per render: instructions plus created bytes / [`BYTES_PER_FUEL`].
    pub fuel: u64,
    /// Maximum nesting of macro calls, includes and recursive loops (minijinja caps it at 500).
    pub recursion_limit: usize,
}

impl Default for Budget {
    /// 4 000 000 fuel (≤ 256 MB created per render), recursion 250.
    fn default() -> Self {
        Budget {
            fuel: 4_000_000,
            recursion_limit: 250,
        }
    }
}

impl Budget {
    /// The most bytes a render can create: `fuel × 64`.
    pub fn max_bytes(&self) -> u64 {
        self.fuel.saturating_mul(BYTES_PER_FUEL)
    }
}

/// Sets `budget` on `env`. Call once, where the environment is built, before adding the
/// profile's own filters (which must call [`ensure_bytes`] before they allocate).
pub fn install(env: &mut Environment<'_>, budget: &Budget) {
    env.set_fuel(Some(budget.fuel));
    env.set_recursion_limit(budget.recursion_limit);
}

/// Checks, before allocating, that `bytes` more bytes fit in what is left of the render's
/// budget. `what` names the call for the message (`indent`, `tojson`).
///
/// Errors: `ErrorKind::InvalidOperation` whose detail starts with [`MARK`]:
/// `template budget: indent would build 400000000000 bytes, more than the 1279999872 bytes
/// left (budget 20000000 fuel = 1280000000 bytes)`. Without fuel tracking, always `Ok`.
pub fn ensure_bytes(state: &State, bytes: u64, what: &str) -> Result<(), Error> {
    let Some((consumed, remaining)) = state.fuel_levels() else {
        return Ok(());
    };
    let left = remaining.saturating_mul(BYTES_PER_FUEL);
    if bytes < left {
        return Ok(());
    }
    let total = consumed.saturating_add(remaining);
    Err(Error::new(
        ErrorKind::InvalidOperation,
        format!(
            "{MARK}: {what} would build {bytes} bytes, more than the {left} bytes left (budget {total} fuel = {} bytes); rendering stopped",
            total.saturating_mul(BYTES_PER_FUEL)
        ),
    ))
}

/// The message for a render that ran out of fuel: names the budget in instructions and bytes.
pub fn exhausted_message(fuel: u64) -> String {
    format!(
        "{MARK} exhausted: {fuel} fuel (one per instruction, or per {BYTES_PER_FUEL} bytes built: at most {} bytes); the template ran too long or built too much data; rendering stopped",
        fuel.saturating_mul(BYTES_PER_FUEL)
    )
}

/// minijinja's own fixed caps (crate `minijinja` 3.1 `value/ops.rs`, `functions.rs`): one
/// string or list repeat of at most 100,000,000 bytes or items, `range` of at most 100,000
/// items. When `detail` is one of their messages, the message to show for it (kind `Limit`).
pub fn engine_cap_message(detail: &str) -> Option<String> {
    let cap = match detail {
        "repeated string is too large" => "one string repeat builds at most 100000000 bytes",
        "repeated sequence is too large" => "one list repeat builds at most 100000000 items",
        "range has too many elements" => "range() yields at most 100000 items",
        _ => return None,
    };
    Some(format!("{MARK}: {detail} ({cap}); rendering stopped"))
}

/// An upper bound of the bytes that printing `value` builds — Python `str()`/`repr()`, or
/// `json.dumps` with `per_level` bytes of indentation per nesting level and `per_item` extra
/// bytes of separators per item — or `u64::MAX` as soon as it exceeds `limit`. Walks the value
/// without allocating, stopping at `limit`, so a lazily repeated list of 10⁸ items costs a
/// walk, not a string. Strings count 6 bytes per byte (the longest escape, `\u001b`).
pub fn print_bound(value: &minijinja::Value, per_level: usize, per_item: usize, limit: u64) -> u64 {
    fn walk(
        v: &minijinja::Value,
        depth: u64,
        per_level: u64,
        per_item: u64,
        limit: u64,
        acc: &mut u64,
    ) {
        use minijinja::value::ValueKind;
        if *acc > limit {
            return;
        }
        match v.kind() {
            ValueKind::String => {
                let n = v.as_str().map_or(0, str::len) as u64;
                *acc = acc.saturating_add(n.saturating_mul(6).saturating_add(2));
                return;
            }
            ValueKind::Seq | ValueKind::Map | ValueKind::Iterable => {}
            _ => {
                *acc = acc.saturating_add(32);
                return;
            }
        }
        let Ok(items) = v.try_iter() else {
            *acc = acc.saturating_add(32);
            return;
        };
        let is_map = v.kind() == ValueKind::Map;
        // per item: its own line at depth+1 and its separators
        let line = (depth + 1)
            .saturating_mul(per_level)
            .saturating_add(per_item)
            .saturating_add(3);
        for item in items {
            *acc = acc.saturating_add(line);
            if is_map {
                let child = v.get_item(&item).unwrap_or_default();
                walk(&item, depth + 1, per_level, per_item, limit, acc);
                walk(&child, depth + 1, per_level, per_item, limit, acc);
            } else {
                walk(&item, depth + 1, per_level, per_item, limit, acc);
            }
            if *acc > limit {
                return;
            }
        }
        // brackets and the closing line
        *acc = acc.saturating_add(depth.saturating_mul(per_level).saturating_add(3));
    }
    let mut acc = 0;
    walk(value, 0, per_level as u64, per_item as u64, limit, &mut acc);
    if acc > limit { u64::MAX } else { acc }
}

/// Bytes one list item costs in the budget: a `Value` slot and its allocation (a piece of
/// `str.split()` is a 24-byte `Value` plus an `Arc<str>` of at least 32 bytes).
pub const BYTES_PER_ITEM: u64 = 64;

/// Charges `bytes` of work already done or about to be done (scanning, copying) at one fuel
/// per [`BYTES_PER_FUEL`] bytes: what keeps a render's *time* within the budget when a call
/// reads far more than it returns (`s.find(x)` over 100 MB in a loop).
///
/// Errors: `ErrorKind::OutOfFuel` when the fuel runs out.
pub fn charge_work(state: &State, bytes: u64) -> Result<(), Error> {
    state.consume_fuel(bytes / BYTES_PER_FUEL)
}

/// The bytes `str.join(items)` builds: the printed items plus the separator between them.
fn join_bound(sep: usize, items: &minijinja::Value, limit: u64) -> u64 {
    let Ok(it) = items.try_iter() else {
        return 0;
    };
    let mut acc = 0u64;
    for item in it {
        let n = match item.as_str() {
            Some(s) => s.len() as u64,
            None => print_bound(&item, 0, 0, limit),
        };
        acc = acc.saturating_add(n).saturating_add(sep as u64);
        if acc > limit {
            return u64::MAX;
        }
    }
    acc
}

/// minijinja-contrib's Python string methods (`pycompat::unknown_method_callback`, crate
/// `minijinja-contrib` 3.1) within the render's budget: every call pays for reading its
/// string ([`charge_work`]), and the methods that can build more than they are given —
/// `format` (widths), `split`/`splitlines` (one list item per piece), `replace`, `join`,
/// case changes — check the size they would build ([`ensure_bytes`]) before building it.
/// Install with `Environment::set_unknown_method_callback`.
///
/// Errors: a `template budget` error ([`ensure_bytes`]) or `OutOfFuel`; otherwise what
/// pycompat returns.
pub fn bounded_method(
    state: &mut State,
    value: &minijinja::Value,
    method: &str,
    args: &[minijinja::Value],
) -> Result<minijinja::Value, Error> {
    if let Some(s) = value.as_str() {
        charge_work(state, s.len() as u64)?;
        let left = bytes_left(state);
        let len = s.len() as u64;
        let arg_str = |i: usize| args.get(i).and_then(|a| a.as_str());
        let bound = match method {
            "format" => {
                // every number in the format string may be a width or precision, every
                // field may print any argument
                let mut numbers = 0u64;
                let mut cur = 0u64;
                for b in s.bytes() {
                    if b.is_ascii_digit() {
                        cur = cur.saturating_mul(10).saturating_add(u64::from(b - b'0'));
                    } else {
                        numbers = numbers.saturating_add(cur);
                        cur = 0;
                    }
                }
                numbers = numbers.saturating_add(cur);
                let fields = s.bytes().filter(|&b| b == b'{').count() as u64;
                let printed = args.iter().fold(0u64, |a, v| {
                    a.saturating_add(match v.as_str() {
                        Some(t) => t.len() as u64,
                        None => print_bound(v, 0, 0, left),
                    })
                });
                len.saturating_add(numbers)
                    .saturating_add(fields.saturating_mul(printed))
            }
            "split" => {
                let max = args
                    .get(1)
                    .and_then(|a| a.as_i64())
                    .filter(|&m| m >= 0)
                    .map_or(u64::MAX, |m| m as u64 + 1);
                let pieces = match arg_str(0) {
                    Some(sep) if !sep.is_empty() => s.matches(sep).count() as u64 + 1,
                    _ => s.split_whitespace().count() as u64,
                };
                len.saturating_add(pieces.min(max).saturating_mul(BYTES_PER_ITEM))
            }
            "splitlines" => {
                let pieces = s.bytes().filter(|&b| b == b'\n').count() as u64 + 1;
                len.saturating_add(pieces.saturating_mul(BYTES_PER_ITEM))
            }
            "replace" => match (arg_str(0), arg_str(1)) {
                (Some(old), Some(new)) => {
                    let mut hits = if old.is_empty() {
                        s.chars().count() as u64 + 1
                    } else {
                        s.matches(old).count() as u64
                    };
                    if let Some(c) = args.get(2).and_then(|a| a.as_i64())
                        && c >= 0
                    {
                        hits = hits.min(c as u64);
                    }
                    len.saturating_add(hits.saturating_mul(new.len() as u64))
                }
                _ => 0,
            },
            "join" => match args.first() {
                Some(items) => join_bound(s.len(), items, left),
                None => 0,
            },
            // a case change can make a character longer (ß → SS; at most 3× in UTF-8)
            "upper" | "lower" | "title" | "capitalize" => len.saturating_mul(3),
            _ => 0,
        };
        ensure_bytes(state, bound, &format!("str.{method}"))?;
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

/// What is left of the render's budget in bytes (`u64::MAX` without fuel tracking).
pub fn bytes_left(state: &State) -> u64 {
    state.fuel_levels().map_or(u64::MAX, |(_, remaining)| {
        remaining.saturating_mul(BYTES_PER_FUEL)
    })
}

/// [`ensure_bytes`] for printing `value` ([`print_bound`]): call before `py_str`, `py_repr`,
/// `json.dumps` of a template value.
pub fn ensure_print(
    state: &State,
    value: &minijinja::Value,
    per_level: usize,
    per_item: usize,
    what: &str,
) -> Result<(), Error> {
    if value.kind() == minijinja::value::ValueKind::String {
        return Ok(()); // printed as is: it exists already
    }
    let bound = print_bound(value, per_level, per_item, bytes_left(state));
    ensure_bytes(state, bound, what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::{CompiledTemplate, RenderErrorKind, RenderOptions};
    use serde_json::json;

    /// Every allocating call of the kind the issue lists, each asking for far more than the
    /// budget: each must stop with a `Limit` error naming the budget, position included,
    /// without allocating (this test would abort the process otherwise).
    #[test]
    fn every_amplifying_call_is_bounded() {
        let cases = [
            "{{ 'a\nb'|indent(100000000000) }}",
            "{{ 'a\nb'|indent(width=100000000000, first=true) }}",
            "{{ messages|tojson(indent=1000000000)|length }}",
            "{{ ('ab' * 100000000)|length }}",
            "{{ (('a' * 90000000) ~ ('b' * 90000000))|length }}",
            "{% set ns = namespace(s='xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
            "{{ ([1] * 100000000)|list|length }}",
            "{{ range(100000000)|list|length }}",
            "{{ range(10)|join('x' * 50000000)|length }}",
            "{{ [1, 2, 3, 4]|join('x' * 90000000)|length }}",
            "{{ ('a' * 1000)|replace('a', 'b' * 1000000)|length }}",
            "{{ ('a' * 1000).replace('a', 'b' * 1000000)|length }}",
            "{{ ('y' * 3000000).join(['a'] * 1000)|length }}",
            "{{ '%1000000000s'|format('x')|length }}",
            "{{ [1]|batch(1000000000, 'x')|list|length }}",
            "{{ messages|tojson(indent=' ' * 90000000)|length }}",
        ];
        let opts = RenderOptions::default();
        let ctx = json!({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [1, [2, [3]]]}]});
        for src in cases {
            let e = CompiledTemplate::compile(src, &opts)
                .unwrap()
                .render_context(&ctx)
                .expect_err(src);
            assert_eq!(e.kind, RenderErrorKind::Limit, "{src}: {e}");
            assert!(e.message.contains(MARK), "{src}: {e}");
            assert!(e.line.is_some(), "{src}: no position: {e}");
        }
    }

    #[test]
    fn ordinary_use_stays_within_budget() {
        let src = "{{ messages|tojson(indent=2) }}|{{ 'a\nb'|indent(4, true) }}|{{ ['a', 'b']|join(', ') }}";
        let out = CompiledTemplate::compile(src, &RenderOptions::default())
            .unwrap()
            .render_context(&json!({"messages": [{"a": [1]}]}))
            .unwrap();
        // Python: json.dumps([{"a": [1]}], indent=2); jinja2 indent(4, True)
        assert_eq!(
            out,
            "[\n  {\n    \"a\": [\n      1\n    ]\n  }\n]|    a\n    b|a, b"
        );
    }

    #[test]
    fn print_bound_covers_the_real_size() {
        use crate::template::pyfmt::{JsonOptions, py_json_dumps, py_str};
        let v = crate::template::pyfmt::json_to_value(
            &json!({"a": [1, {"b": [2.5, "\u{1b}é"]}], "c": {}, "d": null, "e": [[[]]]}),
        );
        let opts = JsonOptions {
            indent: Some("   ".into()),
            separators: Some((" ,  ".into(), " :  ".into())),
            ensure_ascii: true,
            ..Default::default()
        };
        let pretty = py_json_dumps(&v, &opts).unwrap();
        assert!(
            pretty.len() as u64 <= print_bound(&v, 3, 8, u64::MAX),
            "{pretty}"
        );
        assert!(py_str(&v).len() as u64 <= print_bound(&v, 0, 0, u64::MAX));
        assert_eq!(print_bound(&v, 0, 0, 10), u64::MAX);
    }
}
