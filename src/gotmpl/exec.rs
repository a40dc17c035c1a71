//! Execution of a parsed Go template (Go 1.24 `text/template` exec.go and funcs.go): dot and
//! `$` variables with Go's scoping, field/key/method chains, `if`/`with`/`range`/`template`,
//! `break`/`continue`, the builtin functions, Ollama's FuncMap (template/template.go `funcs`),
//! and the `missingkey` option — under a step, byte and depth budget.

use std::fmt::Write as _;
use std::rc::Rc;

use super::parse::{Arg, Branch, BranchKind, Cmd, Node, Pipe, Pos, Tree, col_of, line_of};
use super::value::{List, Value, fmt_v, go_float_shortest, json_string, print_top};
use super::{ErrorKind, GoTemplateError};
use crate::budget::{Budget, MARK};

/// A civil date (year, month 1–12, day 1–31) for Ollama's `currentDate`/`yesterdayDate`.
pub type Date = (i32, u32, u32);

/// How one execution runs.
#[derive(Debug, Clone, Copy)]
pub struct ExecOptions {
    /// Ollama's FuncMap (`json`, `currentDate`, `yesterdayDate`, `toTypeScriptType`) is
    /// installed. Off for the legacy path's final pass, whose template Ollama builds without
    /// `Funcs` (template.go `Execute`: `template.New("").AddParseTree`).
    pub ollama_funcs: bool,
    /// `Option("missingkey=zero")` (Ollama's `Parse`); off: Go's default (`invalid`).
    pub missingkey_zero: bool,
    /// `{{define}}`d templates are reachable (off for the legacy final pass, as above).
    pub defines: bool,
    /// The date `currentDate` returns; `None`: calling it is an error (a pure renderer has no
    /// clock — the caller passes the exchange's date).
    pub today: Option<Date>,
    /// Steps (`fuel`), created bytes (`max_bytes`) and `template` call depth
    /// (`recursion_limit`).
    pub budget: Budget,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            ollama_funcs: true,
            missingkey_zero: true,
            defines: true,
            today: None,
            budget: Budget::default(),
        }
    }
}

/// Ollama's FuncMap names (template/template.go `funcs`).
pub const OLLAMA_FUNCS: &[&str] = &["json", "currentDate", "yesterdayDate", "toTypeScriptType"];

/// Go's builtin function names (text/template funcs.go `builtins`).
pub const BUILTINS: &[&str] = &[
    "and", "call", "html", "index", "slice", "js", "len", "not", "or", "print", "printf",
    "println", "urlquery", "eq", "ge", "gt", "le", "lt", "ne",
];

enum Flow {
    Normal,
    Break,
    Continue,
}

type R<T> = Result<T, GoTemplateError>;

pub(crate) struct Exec<'t> {
    pub src: &'t str,
    pub name: &'t str,
    pub tree: &'t Tree,
    pub opts: ExecOptions,
    pub out: String,
    vars: Vec<(String, Value)>,
    depth: usize,
    steps: u64,
    created: u64,
}

impl<'t> Exec<'t> {
    pub fn new(src: &'t str, name: &'t str, tree: &'t Tree, opts: ExecOptions) -> Self {
        Exec {
            src,
            name,
            tree,
            opts,
            out: String::new(),
            vars: Vec::new(),
            depth: 0,
            steps: 0,
            created: 0,
        }
    }

    /// Runs `nodes` with `data` as dot and `$`.
    pub fn run(&mut self, nodes: &[Node], data: Value) -> R<()> {
        self.vars = vec![("$".into(), data.clone())];
        self.walk(&data, nodes).map(|_| ())
    }

    fn err(&self, pos: Pos, ctx: &str, msg: impl Into<String>) -> GoTemplateError {
        let mut c = ctx.to_owned();
        if c.chars().count() > 20 {
            c = format!("{}...", c.chars().take(20).collect::<String>());
        }
        let msg = msg.into();
        GoTemplateError {
            kind: if msg.starts_with(MARK) {
                ErrorKind::Limit
            } else {
                ErrorKind::Exec
            },
            name: self.name.to_owned(),
            line: line_of(self.src, pos),
            col: Some(col_of(self.src, pos)),
            context: Some(c),
            message: msg,
        }
    }

    fn step(&mut self, pos: Pos) -> R<()> {
        self.steps += 1;
        if self.steps > self.opts.budget.fuel {
            return Err(self.err(
                pos,
                "",
                format!("{MARK}: more than {} steps", self.opts.budget.fuel),
            ));
        }
        Ok(())
    }

    fn charge(&mut self, pos: Pos, bytes: usize) -> R<()> {
        self.created += bytes as u64;
        if self.created > self.opts.budget.max_bytes() {
            return Err(self.err(
                pos,
                "",
                format!(
                    "{MARK}: more than {} bytes created",
                    self.opts.budget.max_bytes()
                ),
            ));
        }
        Ok(())
    }

    fn emit(&mut self, pos: Pos, s: &str) -> R<()> {
        self.charge(pos, s.len())?;
        self.out.push_str(s);
        Ok(())
    }

    fn walk(&mut self, dot: &Value, nodes: &[Node]) -> R<Flow> {
        for n in nodes {
            match n {
                Node::Text(t) => {
                    self.steps += 1;
                    let p = 0;
                    self.emit(p, t)?;
                }
                Node::Action(pipe) => {
                    self.step(pipe.pos)?;
                    let v = self.eval_pipeline(dot, pipe)?;
                    if pipe.decl.is_empty() {
                        let mut s = String::new();
                        print_top(&v, &mut s);
                        self.emit(pipe.pos, &s)?;
                    }
                }
                Node::Branch(b) => {
                    self.step(b.pos)?;
                    let f = match b.kind {
                        BranchKind::Range => self.walk_range(dot, b)?,
                        _ => self.walk_if_with(dot, b)?,
                    };
                    if !matches!(f, Flow::Normal) {
                        return Ok(f);
                    }
                }
                Node::Template { pos, name, pipe } => {
                    self.step(*pos)?;
                    self.walk_template(dot, *pos, name, pipe.as_ref())?;
                }
                Node::Break(_) => return Ok(Flow::Break),
                Node::Continue(_) => return Ok(Flow::Continue),
            }
        }
        Ok(Flow::Normal)
    }

    fn walk_if_with(&mut self, dot: &Value, b: &Branch) -> R<Flow> {
        self.nest(b.pos)?;
        let r = self.walk_if_with_inner(dot, b);
        self.depth -= 1;
        r
    }

    /// One more level of `if`/`with`/`range`/`template` nesting, within
    /// `budget.recursion_limit` (the stack a render may use).
    fn nest(&mut self, pos: Pos) -> R<()> {
        if self.depth >= self.opts.budget.recursion_limit {
            return Err(self.err(
                pos,
                "",
                format!(
                    "{MARK}: exceeded maximum template depth ({}; template calls and nested if/with/range)",
                    self.opts.budget.recursion_limit
                ),
            ));
        }
        self.depth += 1;
        Ok(())
    }

    fn walk_if_with_inner(&mut self, dot: &Value, b: &Branch) -> R<Flow> {
        let mark = self.vars.len();
        let v = self.eval_pipeline(dot, &b.pipe)?;
        let f = if v.truth() {
            if b.kind == BranchKind::With {
                self.walk(&v, &b.list)?
            } else {
                self.walk(dot, &b.list)?
            }
        } else if let Some(e) = &b.else_list {
            self.walk(dot, e)?
        } else {
            Flow::Normal
        };
        self.vars.truncate(mark);
        Ok(f)
    }

    fn walk_range(&mut self, dot: &Value, b: &Branch) -> R<Flow> {
        self.nest(b.pos)?;
        let r = self.walk_range_inner(dot, b);
        self.depth -= 1;
        r
    }

    fn walk_range_inner(&mut self, dot: &Value, b: &Branch) -> R<Flow> {
        let mark = self.vars.len();
        let v = self.eval_pipeline(dot, &b.pipe)?;
        // the items are visited one at a time: `range N` over an int counts lazily (Go 1.22
        // `range` over an int), so `{{range 1000000000000}}` costs steps, not memory
        let mut flow = Flow::Normal;
        let empty = match &v {
            Value::List(l) => {
                for (i, x) in l.items.iter().enumerate() {
                    if self.range_item(b, Value::Int(i as i64), x)? {
                        break;
                    }
                }
                l.items.is_empty()
            }
            Value::Map(m) if !m.ordered => {
                for (k, x) in m.entries.iter() {
                    if self.range_item(b, Value::str(k.as_str()), x)? {
                        break;
                    }
                }
                m.entries.is_empty()
            }
            Value::Int(n) => {
                if b.pipe.decl.len() > 1 {
                    return Err(self.err(
                        b.pos,
                        "range",
                        "can't use two iteration variables over int",
                    ));
                }
                for i in 0..(*n).max(0) {
                    if self.range_item(b, Value::Int(i), &Value::Int(i))? {
                        break;
                    }
                }
                *n <= 0
            }
            Value::Invalid | Value::Nil => true,
            other => {
                let mut s = String::new();
                fmt_v(other, &mut s);
                return Err(self.err(b.pos, "range", format!("range can't iterate over {s}")));
            }
        };
        if empty && let Some(e) = &b.else_list {
            flow = self.walk(dot, e)?;
        }
        if matches!(flow, Flow::Break | Flow::Continue) {
            // break/continue in a range's else list belong to an outer range
        } else {
            flow = Flow::Normal;
        }
        self.vars.truncate(mark);
        Ok(flow)
    }

    /// One iteration of a `range`: one step of the budget, the declared variables set to
    /// `k`/`elem`, the body walked with `elem` as dot. Returns true on `{{break}}`.
    fn range_item(&mut self, b: &Branch, k: Value, elem: &Value) -> R<bool> {
        self.step(b.pos)?;
        let n = b.pipe.decl.len();
        if n > 0 {
            if b.pipe.is_assign {
                if n > 1 {
                    self.set_var(&b.pipe.decl[0], k);
                    self.set_var(&b.pipe.decl[1], elem.clone());
                } else {
                    self.set_var(&b.pipe.decl[0], elem.clone());
                }
            } else {
                // evalPipeline pushed the declared variables; setTopVar
                let len = self.vars.len();
                if n > 1 {
                    self.vars[len - 2].1 = k;
                }
                self.vars[len - 1].1 = elem.clone();
            }
        }
        let inner = self.vars.len();
        let f = self.walk(elem, &b.list)?;
        self.vars.truncate(inner);
        Ok(matches!(f, Flow::Break))
    }

    fn walk_template(&mut self, dot: &Value, pos: Pos, name: &str, pipe: Option<&Pipe>) -> R<()> {
        let body = if self.opts.defines {
            self.tree.defines.get(name).cloned()
        } else {
            None
        };
        let Some(body) = body else {
            return Err(self.err(
                pos,
                &format!("template {name:?}"),
                format!("template {name:?} not defined"),
            ));
        };
        self.nest(pos)?;
        let new_dot = match pipe {
            Some(p) => self.eval_pipeline(dot, p)?,
            None => Value::Invalid,
        };
        let saved = std::mem::replace(&mut self.vars, vec![("$".into(), new_dot.clone())]);
        let r = self.walk(&new_dot, &body);
        self.depth -= 1;
        self.vars = saved;
        r.map(|_| ())
    }

    fn set_var(&mut self, name: &str, v: Value) {
        if let Some(slot) = self.vars.iter_mut().rev().find(|(n, _)| n == name) {
            slot.1 = v;
        }
    }

    fn var(&self, pos: Pos, name: &str) -> R<Value> {
        match self.vars.iter().rev().find(|(n, _)| n == name) {
            Some((_, v)) => Ok(v.clone()),
            None => Err(self.err(pos, name, format!("undefined variable: {name}"))),
        }
    }

    fn eval_pipeline(&mut self, dot: &Value, pipe: &Pipe) -> R<Value> {
        let mut value: Option<Value> = None;
        for cmd in &pipe.cmds {
            let mut v = self.eval_command(dot, cmd, value.take())?;
            // "If the object has type interface{}, dig down one level to the thing inside."
            if matches!(v, Value::Nil) {
                v = Value::Invalid;
            }
            value = Some(v);
        }
        let value = value.unwrap_or_default();
        for d in &pipe.decl {
            if pipe.is_assign {
                self.set_var(d, value.clone());
            } else {
                self.vars.push((d.clone(), value.clone()));
            }
        }
        Ok(value)
    }

    fn not_a_function(&self, cmd: &Cmd, final_: &Option<Value>) -> R<()> {
        if cmd.args.len() > 1 || final_.is_some() {
            return Err(self.err(
                cmd.pos,
                &cmd.text,
                format!(
                    "can't give argument to non-function {}",
                    arg_text(&cmd.args[0])
                ),
            ));
        }
        Ok(())
    }

    fn eval_command(&mut self, dot: &Value, cmd: &Cmd, final_: Option<Value>) -> R<Value> {
        let first = &cmd.args[0];
        let rest = &cmd.args[1..];
        match first {
            Arg::Field(p, ids) => {
                self.eval_field_chain(dot, dot.clone(), *p, ids, rest, final_, first)
            }
            Arg::Chain(p, base, ids) => {
                if matches!(**base, Arg::Nil(_)) {
                    return Err(self.err(*p, &arg_text(first), "indirection through explicit nil"));
                }
                let recv = self.eval_arg(dot, base)?;
                self.eval_field_chain(dot, recv, *p, ids, rest, final_, first)
            }
            Arg::Ident(p, name) => self.eval_function(dot, *p, name, rest, final_),
            Arg::Pipe(_, pipe) => {
                self.not_a_function(cmd, &final_)?;
                self.eval_pipeline(dot, pipe)
            }
            Arg::Variable(p, ids) => {
                let v = self.var(*p, &ids[0])?;
                if ids.len() == 1 {
                    self.not_a_function(cmd, &final_)?;
                    return Ok(v);
                }
                self.eval_field_chain(dot, v, *p, &ids[1..], rest, final_, first)
            }
            Arg::Nil(p) => Err(self.err(*p, "nil", "nil is not a command")),
            Arg::Dot(_) => {
                self.not_a_function(cmd, &final_)?;
                Ok(dot.clone())
            }
            lit => {
                self.not_a_function(cmd, &final_)?;
                Ok(literal(lit))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn eval_field_chain(
        &mut self,
        dot: &Value,
        mut recv: Value,
        pos: Pos,
        ids: &[String],
        args: &[Arg],
        final_: Option<Value>,
        node: &Arg,
    ) -> R<Value> {
        let n = ids.len();
        for id in &ids[..n - 1] {
            recv = self.eval_field(dot, pos, node, id, &[], None, recv)?;
        }
        self.eval_field(dot, pos, node, &ids[n - 1], args, final_, recv)
    }

    #[allow(clippy::too_many_arguments)]
    fn eval_field(
        &mut self,
        _dot: &Value,
        pos: Pos,
        node: &Arg,
        name: &str,
        args: &[Arg],
        final_: Option<Value>,
        recv: Value,
    ) -> R<Value> {
        let ctx = arg_text(node);
        let has_args = !args.is_empty() || final_.is_some();
        match &recv {
            Value::Invalid => Ok(Value::Invalid),
            Value::Nil => Err(self.err(
                pos,
                &ctx,
                format!("nil pointer evaluating interface {{}}.{name}"),
            )),
            Value::Struct(s) => {
                if let Some((_, m)) = s.methods.iter().find(|(n, _)| *n == name) {
                    if has_args {
                        let got = args.len() + usize::from(final_.is_some());
                        return Err(self.err(
                            pos,
                            &ctx,
                            format!("wrong number of args for {name}: want 0 got {got}"),
                        ));
                    }
                    return Ok(m(s));
                }
                match s.get(name) {
                    Some(v) => {
                        if has_args {
                            return Err(self.err(
                                pos,
                                &ctx,
                                format!("{name} has arguments but cannot be invoked as function"),
                            ));
                        }
                        Ok(v.clone())
                    }
                    None => Err(self.err(
                        pos,
                        &ctx,
                        format!("can't evaluate field {name} in type {}", s.type_name),
                    )),
                }
            }
            Value::Map(m) if !m.ordered => {
                if has_args {
                    return Err(self.err(
                        pos,
                        &ctx,
                        format!("{name} is not a method but has arguments"),
                    ));
                }
                match m.get(name) {
                    Some(v) => Ok(v.clone()),
                    None if self.opts.missingkey_zero => Ok(Value::Nil),
                    None => Ok(Value::Invalid),
                }
            }
            other => Err(self.err(
                pos,
                &ctx,
                format!("can't evaluate field {name} in type {}", other.type_name()),
            )),
        }
    }

    /// An argument's value (exec.go `evalArg` for an `any`/`reflect.Value` parameter).
    fn eval_arg(&mut self, dot: &Value, a: &Arg) -> R<Value> {
        self.step(a.pos())?;
        match a {
            Arg::Dot(_) => Ok(dot.clone()),
            Arg::Nil(p) => Err(self.err(*p, "nil", "cannot assign nil to reflect.Value")),
            Arg::Field(p, ids) => self.eval_field_chain(dot, dot.clone(), *p, ids, &[], None, a),
            Arg::Variable(p, ids) => {
                let v = self.var(*p, &ids[0])?;
                if ids.len() == 1 {
                    return Ok(v);
                }
                self.eval_field_chain(dot, v, *p, &ids[1..], &[], None, a)
            }
            Arg::Pipe(_, pipe) => self.eval_pipeline(dot, pipe),
            Arg::Ident(p, name) => self.eval_function(dot, *p, name, &[], None),
            Arg::Chain(p, base, ids) => {
                let recv = self.eval_arg(dot, base)?;
                self.eval_field_chain(dot, recv, *p, ids, &[], None, a)
            }
            lit => Ok(literal(lit)),
        }
    }

    fn eval_args(&mut self, dot: &Value, args: &[Arg], final_: Option<Value>) -> R<Vec<Value>> {
        let mut out = Vec::with_capacity(args.len() + 1);
        for a in args {
            out.push(self.eval_arg(dot, a)?);
        }
        if let Some(f) = final_ {
            out.push(f);
        }
        Ok(out)
    }

    /// [`Self::eval_args`] for a function whose parameters from `first` on are `any`
    /// (exec.go `evalArg`: a `nil` constant is then the nil interface, not an error).
    fn eval_any_args(
        &mut self,
        dot: &Value,
        args: &[Arg],
        final_: Option<Value>,
        first: usize,
    ) -> R<Vec<Value>> {
        let mut out = Vec::with_capacity(args.len() + 1);
        for (i, a) in args.iter().enumerate() {
            match a {
                Arg::Nil(p) if i >= first => {
                    self.step(*p)?;
                    out.push(Value::Nil);
                }
                a => out.push(self.eval_arg(dot, a)?),
            }
        }
        if let Some(f) = final_ {
            out.push(f);
        }
        Ok(out)
    }

    fn arity(&self, pos: Pos, name: &str, nargs: usize, n: usize, at_least: bool) -> R<()> {
        if (at_least && nargs < n) || (!at_least && nargs != n) {
            let w = if at_least { "at least " } else { "" };
            return Err(self.err(
                pos,
                name,
                format!("wrong number of args for {name}: want {w}{n} got {nargs}"),
            ));
        }
        Ok(())
    }

    /// A builtin or Ollama function call: the name checked, then one helper per function (the
    /// arguments evaluated as Go does for that function, its arity checked, its result built).
    fn eval_function(
        &mut self,
        dot: &Value,
        pos: Pos,
        name: &str,
        args: &[Arg],
        final_: Option<Value>,
    ) -> R<Value> {
        let known =
            BUILTINS.contains(&name) || (self.opts.ollama_funcs && OLLAMA_FUNCS.contains(&name));
        if !known {
            return Err(self.err(pos, name, format!("{name:?} is not a defined function")));
        }
        let nargs = args.len() + usize::from(final_.is_some());
        match name {
            "and" | "or" => {
                self.arity(pos, name, nargs, 1, true)?;
                self.and_or(dot, name == "or", args, final_)
            }
            "not" => {
                self.arity(pos, name, nargs, 1, false)?;
                let v = self.eval_args(dot, args, final_)?;
                Ok(Value::Bool(!v[0].truth()))
            }
            "len" => {
                self.arity(pos, name, nargs, 1, false)?;
                let v = self.eval_args(dot, args, final_)?;
                self.len_of(pos, name, &v[0])
            }
            "index" => {
                self.arity(pos, name, nargs, 1, true)?;
                let v = self.eval_args(dot, args, final_)?;
                self.index_of(pos, name, &v)
            }
            "slice" => {
                self.arity(pos, name, nargs, 1, true)?;
                let v = self.eval_args(dot, args, final_)?;
                self.slice_of(pos, name, &v)
            }
            "eq" | "ne" | "lt" | "le" | "gt" | "ge" => {
                let v = self.eval_args(dot, args, final_)?;
                self.compare(pos, name, nargs, &v)
            }
            "print" | "println" => {
                let v = self.eval_any_args(dot, args, final_, 0)?;
                let s = if name == "print" {
                    sprint(&v)
                } else {
                    sprintln(&v)
                };
                self.charge(pos, s.len())?;
                Ok(Value::str(s))
            }
            "printf" => {
                self.arity(pos, name, nargs, 1, true)?;
                let v = self.eval_any_args(dot, args, final_, 1)?;
                self.printf(pos, name, &v)
            }
            "html" | "js" | "urlquery" => {
                let v = self.eval_any_args(dot, args, final_, 0)?;
                self.escape(pos, name, &v)
            }
            "call" => Err(self.err(
                pos,
                name,
                "call: function values do not exist in Ollama's data (unsupported)",
            )),
            "json" => {
                self.arity(pos, name, nargs, 1, false)?;
                let v = self.eval_any_args(dot, args, final_, 0)?;
                let s = json_string(&v[0]);
                self.charge(pos, s.len())?;
                Ok(Value::str(s))
            }
            "currentDate" | "yesterdayDate" => {
                let v = self.eval_args(dot, args, final_)?;
                self.date(pos, name, &v)
            }
            "toTypeScriptType" => {
                self.arity(pos, name, nargs, 1, false)?;
                let v = self.eval_args(dot, args, final_)?;
                Ok(Value::str(match &v[0] {
                    Value::Struct(s) if s.type_name == "api.ToolProperty" => ts_type_of(s),
                    _ => "any".to_owned(),
                }))
            }
            _ => Err(self.err(pos, name, format!("{name:?} is not a defined function"))),
        }
    }

    /// funcs.go's "error calling NAME: …" for a function that failed on its arguments.
    fn call_err(&self, pos: Pos, name: &str, msg: impl std::fmt::Display) -> GoTemplateError {
        self.err(pos, name, format!("error calling {name}: {msg}"))
    }

    /// `and`/`or` short-circuit (Go 1.18+): the first false (`and`) or true (`or`) argument,
    /// else the last; a piped-in final value is the last without being tested.
    fn and_or(&mut self, dot: &Value, or: bool, args: &[Arg], final_: Option<Value>) -> R<Value> {
        let mut last = Value::Invalid;
        for a in args {
            last = self.eval_arg(dot, a)?;
            if last.truth() == or {
                return Ok(last);
            }
        }
        if let Some(f) = final_ {
            last = f;
        }
        Ok(last)
    }

    /// `len`: bytes of a string, items of a slice, entries of a map.
    fn len_of(&self, pos: Pos, name: &str, v: &Value) -> R<Value> {
        match v {
            Value::Str(s) => Ok(Value::Int(s.len() as i64)),
            Value::List(l) => Ok(Value::Int(l.items.len() as i64)),
            Value::Map(m) if !m.ordered => Ok(Value::Int(m.entries.len() as i64)),
            Value::Invalid | Value::Nil => Err(self.call_err(pos, name, "len of nil pointer")),
            o => Err(self.call_err(pos, name, format!("len of type {}", o.type_name()))),
        }
    }

    /// `index X i j …`: `v[0]` indexed by each of `v[1..]` in turn.
    fn index_of(&self, pos: Pos, name: &str, v: &[Value]) -> R<Value> {
        let mut item = v[0].clone();
        for ix in &v[1..] {
            item = self.index_once(pos, name, &item, ix)?;
        }
        Ok(item)
    }

    /// One step of `index`: a slice or string by an int, a map by a string key.
    fn index_once(&self, pos: Pos, name: &str, item: &Value, ix: &Value) -> R<Value> {
        let err = |msg: String| Err(self.call_err(pos, name, msg));
        match (item, ix) {
            (Value::List(l), Value::Int(i)) => {
                if *i < 0 || *i as usize >= l.items.len() {
                    return err(format!("index out of range: {i}"));
                }
                Ok(l.items[*i as usize].clone())
            }
            (Value::Str(s), Value::Int(i)) => {
                if *i < 0 || *i as usize >= s.len() {
                    return err(format!("index out of range: {i}"));
                }
                Ok(Value::Int(s.as_bytes()[*i as usize] as i64))
            }
            (Value::Map(m), Value::Str(k)) if !m.ordered => {
                Ok(m.get(k).cloned().unwrap_or(Value::Nil))
            }
            (Value::Invalid | Value::Nil, _) => err("index of untyped nil".into()),
            (Value::List(_) | Value::Str(_), o) => err(format!(
                "cannot index slice/array with type {}",
                o.type_name()
            )),
            (Value::Map(m), o) => err(format!(
                "value has type {}; should be string (map {})",
                o.type_name(),
                m.type_name
            )),
            (o, _) => err(format!("can't index item of type {}", o.type_name())),
        }
    }

    /// `slice X i j k`: a substring or a sub-slice, bounds checked as funcs.go does.
    fn slice_of(&self, pos: Pos, name: &str, v: &[Value]) -> R<Value> {
        let err = |msg: String| Err(self.call_err(pos, name, msg));
        let mut idx = Vec::new();
        for x in &v[1..] {
            match x {
                Value::Int(i) => idx.push(*i),
                o => {
                    return err(format!(
                        "cannot index slice/array with type {}",
                        o.type_name()
                    ));
                }
            }
        }
        let len = match &v[0] {
            Value::Str(s) => {
                if idx.len() > 2 {
                    return err("cannot 3-index slice a string".into());
                }
                s.len() as i64
            }
            Value::List(l) => l.items.len() as i64,
            Value::Invalid | Value::Nil => return err("slice of untyped nil".into()),
            o => return err(format!("can't slice item of type {}", o.type_name())),
        };
        if idx.len() > 3 {
            return err(format!("too many slice indexes: {}", idx.len()));
        }
        let lo = idx.first().copied().unwrap_or(0);
        let hi = idx.get(1).copied().unwrap_or(len);
        if lo < 0 || lo > len {
            return err(format!("index out of range: {lo}"));
        }
        if hi < 0 || hi > len {
            return err(format!("index out of range: {hi}"));
        }
        if lo > hi {
            return err(format!("invalid slice index: {lo} > {hi}"));
        }
        match &v[0] {
            Value::Str(s) => match s.get(lo as usize..hi as usize) {
                Some(t) => Ok(Value::str(t)),
                None => err("slice splits a UTF-8 character (unsupported)".into()),
            },
            Value::List(l) => Ok(Value::List(Rc::new(List {
                type_name: l.type_name,
                items: l.items[lo as usize..hi as usize].to_vec(),
                nil: false,
                stringer: l.stringer,
            }))),
            _ => unreachable!("checked above"),
        }
    }

    /// `eq ne lt le gt ge` on evaluated arguments (each checks its own arity after the
    /// arguments are evaluated, as funcs.go's do).
    fn compare(&self, pos: Pos, name: &str, nargs: usize, v: &[Value]) -> R<Value> {
        let r = match name {
            "eq" => {
                self.arity(pos, name, nargs, 1, true)?;
                eq(&v[0], &v[1..])
            }
            "ne" => {
                self.arity(pos, name, nargs, 2, false)?;
                eq(&v[0], &v[1..2]).map(|b| !b)
            }
            "lt" => {
                self.arity(pos, name, nargs, 2, false)?;
                lt(&v[0], &v[1])
            }
            "le" => {
                self.arity(pos, name, nargs, 2, false)?;
                lt(&v[0], &v[1]).and_then(|l| if l { Ok(true) } else { eq(&v[0], &v[1..2]) })
            }
            "gt" => {
                self.arity(pos, name, nargs, 2, false)?;
                lt(&v[0], &v[1]).and_then(|l| {
                    if l {
                        Ok(false)
                    } else {
                        eq(&v[0], &v[1..2]).map(|e| !e)
                    }
                })
            }
            _ => {
                self.arity(pos, name, nargs, 2, false)?;
                lt(&v[0], &v[1]).map(|l| !l)
            }
        };
        r.map(Value::Bool).map_err(|m| self.call_err(pos, name, m))
    }

    /// `printf FORMAT args…`: the widths and precisions limited to the bytes the budget has
    /// left, the result charged to it.
    fn printf(&mut self, pos: Pos, name: &str, v: &[Value]) -> R<Value> {
        let Value::Str(f) = &v[0] else {
            return Err(self.err(
                pos,
                name,
                format!(
                    "wrong type for value; expected string; got {}",
                    v[0].type_name()
                ),
            ));
        };
        let budget = self.opts.budget.max_bytes().saturating_sub(self.created);
        let s = sprintf(f, &v[1..], budget).map_err(|m| self.err(pos, name, m))?;
        self.charge(pos, s.len())?;
        Ok(Value::str(s))
    }

    /// `html`, `js`, `urlquery`: one string argument escaped as is, several printed first.
    fn escape(&mut self, pos: Pos, name: &str, v: &[Value]) -> R<Value> {
        let s = match v {
            [Value::Str(s)] => s.to_string(),
            _ => sprint(v),
        };
        let r = match name {
            "html" => html_escape(&s),
            "js" => js_escape(&s),
            _ => query_escape(&s),
        };
        self.charge(pos, r.len())?;
        Ok(Value::str(r))
    }

    /// Ollama's `currentDate` / `yesterdayDate`: the date the caller passed (no clock here).
    fn date(&self, pos: Pos, name: &str, v: &[Value]) -> R<Value> {
        if let Some(o) = v.iter().find(|x| !matches!(x, Value::Str(_))) {
            return Err(self.err(
                pos,
                name,
                format!(
                    "wrong type for value; expected string; got {}",
                    o.type_name()
                ),
            ));
        }
        let Some(d) = self.opts.today else {
            return Err(self.err(pos, name, format!("error calling {name}: no date given (the renderer has no clock: pass the exchange's date)")));
        };
        let d = if name == "yesterdayDate" {
            add_days(d, -1)
        } else {
            d
        };
        Ok(Value::str(format!("{:04}-{:02}-{:02}", d.0, d.1, d.2)))
    }
}

fn literal(a: &Arg) -> Value {
    match a {
        Arg::Bool(_, b) => Value::Bool(*b),
        Arg::Int(_, i) => Value::Int(*i),
        Arg::Float(_, f) => Value::Float(*f),
        Arg::Str(_, s) => Value::Str(s.clone()),
        _ => Value::Invalid,
    }
}

/// An operand as Go's node `String()` shows it in `at <…>` error context.
fn arg_text(a: &Arg) -> String {
    match a {
        Arg::Field(_, ids) => ids.iter().map(|i| format!(".{i}")).collect(),
        Arg::Variable(_, ids) => {
            let mut s = ids[0].clone();
            for i in &ids[1..] {
                s.push('.');
                s.push_str(i);
            }
            s
        }
        Arg::Dot(_) => ".".into(),
        Arg::Nil(_) => "nil".into(),
        Arg::Bool(_, b) => b.to_string(),
        Arg::Int(_, i) => i.to_string(),
        Arg::Float(_, f) => go_float_shortest(*f, 21),
        Arg::Str(_, s) => format!("{s:?}"),
        Arg::Ident(_, n) => n.clone(),
        Arg::Pipe(..) => "(…)".into(),
        Arg::Chain(_, b, ids) => {
            let mut s = arg_text(b);
            for i in ids {
                s.push('.');
                s.push_str(i);
            }
            s
        }
    }
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Kind {
    Invalid,
    Bool,
    Int,
    Float,
    Str,
    Other,
}

fn kind(v: &Value) -> Kind {
    match v {
        Value::Invalid | Value::Nil => Kind::Invalid,
        Value::Bool(_) => Kind::Bool,
        Value::Int(_) => Kind::Int,
        Value::Float(_) => Kind::Float,
        Value::Str(_) => Kind::Str,
        _ => Kind::Other,
    }
}

/// funcs.go `eq`: true if `a` equals any of `bs`; basic kinds must match (int/uint aside),
/// else "incompatible types for comparison".
fn eq(a: &Value, bs: &[Value]) -> Result<bool, String> {
    if bs.is_empty() {
        return Err("missing argument for comparison".into());
    }
    let k1 = kind(a);
    for b in bs {
        let k2 = kind(b);
        let truth = if k1 != k2 {
            if k1 != Kind::Invalid && k2 != Kind::Invalid {
                return Err("incompatible types for comparison".into());
            }
            false
        } else {
            match (a, b) {
                (Value::Bool(x), Value::Bool(y)) => x == y,
                (Value::Int(x), Value::Int(y)) => x == y,
                (Value::Float(x), Value::Float(y)) => x == y,
                (Value::Str(x), Value::Str(y)) => x == y,
                _ if k1 == Kind::Invalid => true,
                _ => return Err(format!("non-comparable type {}", b.type_name())),
            }
        };
        if truth {
            return Ok(true);
        }
    }
    Ok(false)
}

/// funcs.go `lt`: ordered basic kinds of the same kind.
fn lt(a: &Value, b: &Value) -> Result<bool, String> {
    let (k1, k2) = (kind(a), kind(b));
    if matches!(k1, Kind::Invalid | Kind::Other | Kind::Bool)
        || matches!(k2, Kind::Invalid | Kind::Other | Kind::Bool)
    {
        return Err("invalid type for comparison".into());
    }
    if k1 != k2 {
        return Err("incompatible types for comparison".into());
    }
    Ok(match (a, b) {
        (Value::Int(x), Value::Int(y)) => x < y,
        (Value::Float(x), Value::Float(y)) => x < y,
        (Value::Str(x), Value::Str(y)) => x < y,
        _ => false,
    })
}

fn operand(v: &Value, out: &mut String) {
    match v {
        Value::Invalid | Value::Nil => out.push_str("<nil>"),
        v => fmt_v(v, out),
    }
}

/// `fmt.Sprint`: spaces between operands when neither is a string.
pub fn sprint(args: &[Value]) -> String {
    let mut s = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 && !matches!(a, Value::Str(_)) && !matches!(args[i - 1], Value::Str(_)) {
            s.push(' ');
        }
        operand(a, &mut s);
    }
    s
}

/// `fmt.Sprintln`: spaces always, a newline at the end.
pub fn sprintln(args: &[Value]) -> String {
    let mut s = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        operand(a, &mut s);
    }
    s.push('\n');
    s
}

/// `fmt.Sprintf` for the verbs templates use: `%v %s %d %q %t %f %e %g %x %X %c %%` with
/// flags `-+# 0`, width and precision; Go's `%!verb(type=value)`, `%!v(MISSING)` and
/// `%!(EXTRA …)` for mismatches. `budget`: the most bytes a width may ask for.
pub fn sprintf(f: &str, args: &[Value], budget: u64) -> Result<String, String> {
    let mut out = String::new();
    let mut ai = 0;
    let b = f.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c != b'%' {
            let start = i;
            while i < b.len() && b[i] != b'%' {
                i += 1;
            }
            out.push_str(&f[start..i]);
            continue;
        }
        i += 1;
        let Some(spec) = parse_spec(b, &mut i) else {
            out.push_str("%!(NOVERB)");
            break;
        };
        spec.check_budget(out.len(), budget)?;
        let Some(verb) = f[i..].chars().next() else {
            out.push_str("%!(NOVERB)");
            break;
        };
        i += verb.len_utf8();
        if verb == '%' {
            out.push('%');
            continue;
        }
        let Some(arg) = args.get(ai) else {
            let _ = write!(out, "%!{verb}(MISSING)");
            continue;
        };
        ai += 1;
        let (body, numeric) = format_verb(verb, arg, &spec);
        spec.pad(&mut out, &body, numeric);
    }
    if ai < args.len() {
        extra_args(&mut out, &args[ai..]);
    }
    Ok(out)
}

/// The flags, width and precision of one `%` directive.
struct Spec {
    minus: bool,
    plus: bool,
    zero: bool,
    space: bool,
    sharp: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

/// The flags, width and precision after a `%` at `b[*i]`, leaving `*i` at the verb; `None`
/// when a number is "crazy long" (Go stops parsing the verb there: `%!(NOVERB)`).
fn parse_spec(b: &[u8], i: &mut usize) -> Option<Spec> {
    let (mut minus, mut plus, mut zero, mut space, mut sharp) = (false, false, false, false, false);
    while *i < b.len() {
        match b[*i] {
            b'-' => minus = true,
            b'+' => plus = true,
            b'0' => zero = true,
            b' ' => space = true,
            b'#' => sharp = true,
            _ => break,
        }
        *i += 1;
    }
    let width = parsenum(b, i)?;
    let mut prec: Option<usize> = None;
    if *i < b.len() && b[*i] == b'.' {
        *i += 1;
        prec = Some(parsenum(b, i)?.unwrap_or(0));
    }
    Some(Spec {
        minus,
        plus,
        zero,
        space,
        sharp,
        width,
        prec,
    })
}

/// fmt's parsenum: a number past 10^6 is "crazy long" — Go stops parsing the verb there (the
/// rest of the format is consumed: `%!(NOVERB)`), so no width or precision exceeds 10,000,009
/// (Go 1.24 `fmt/print.go`: `tooLarge`, `parsenum`). `Some(None)`: no digits.
fn parsenum(b: &[u8], i: &mut usize) -> Option<Option<usize>> {
    let mut num: Option<usize> = None;
    while *i < b.len() && b[*i].is_ascii_digit() {
        if num.is_some_and(|n| n > 1_000_000) {
            *i = b.len();
            return None;
        }
        num = Some(num.unwrap_or(0) * 10 + (b[*i] - b'0') as usize);
        *i += 1;
    }
    Some(num)
}

impl Spec {
    /// The widths and precisions of all verbs together draw on the one budget: what this verb
    /// may build (padding plus precision digits) is checked before it is built; `written`: the
    /// bytes already formatted.
    fn check_budget(&self, written: usize, budget: u64) -> Result<(), String> {
        let asked = (written as u64)
            .saturating_add(self.width.unwrap_or(0) as u64)
            .saturating_add(self.prec.unwrap_or(0) as u64);
        if asked > budget {
            return Err(format!(
                "{MARK}: printf widths and precisions ask for {asked} bytes, more than the {budget} bytes left"
            ));
        }
        Ok(())
    }

    /// `body` padded to the width: spaces on the left (`-`: on the right), zeros after the
    /// sign for a number with `0`.
    fn pad(&self, out: &mut String, body: &str, numeric: bool) {
        let w = self.width.unwrap_or(0);
        let n = body.chars().count();
        if n < w {
            let pad = w - n;
            if self.minus {
                out.push_str(body);
                out.push_str(&" ".repeat(pad));
            } else if self.zero && numeric {
                let (sgn, digits) = match body.strip_prefix('-') {
                    Some(d) => ("-", d),
                    None => ("", body),
                };
                out.push_str(sgn);
                out.push_str(&"0".repeat(pad));
                out.push_str(digits);
            } else {
                out.push_str(&" ".repeat(pad));
                out.push_str(body);
            }
        } else {
            out.push_str(body);
        }
    }
}

/// One verb applied to one operand, before padding: the text, and whether it is a number
/// (zero padding applies). A verb that does not fit the operand is Go's `%!verb(type=value)`.
fn format_verb(verb: char, arg: &Value, spec: &Spec) -> (String, bool) {
    let Spec {
        plus,
        space,
        sharp,
        prec,
        ..
    } = *spec;
    let mut numeric = false;
    let body = match (verb, arg) {
        ('v', a)
        | ('s', a @ (Value::Str(_) | Value::List(_) | Value::Map(_) | Value::Struct(_))) => {
            let mut s = String::new();
            operand(a, &mut s);
            if verb == 's'
                && let Some(p) = prec
            {
                s = s.chars().take(p).collect();
            }
            numeric = matches!(a, Value::Int(_) | Value::Float(_));
            s
        }
        ('q', Value::Str(s)) => match prec {
            // the precision cuts the string before it is quoted
            Some(p) => go_quote(&s.chars().take(p).collect::<String>()),
            None => go_quote(s),
        },
        ('q', Value::Int(n)) => quote_rune(*n),
        ('o' | 'O' | 'b', Value::Int(n)) => {
            numeric = true;
            int_in_base(verb, *n, spec)
        }
        ('U', Value::Int(n)) => format!("U+{:04X}", *n as u32),
        ('T', a) => match a {
            Value::Nil | Value::Invalid => "<nil>".to_owned(),
            a => a.type_name(),
        },
        ('t', Value::Bool(b)) => b.to_string(),
        ('d', Value::Int(n)) => {
            numeric = true;
            sign(n.to_string(), plus, space)
        }
        ('c', Value::Int(n)) => char::from_u32(*n as u32).unwrap_or('\u{fffd}').to_string(),
        ('x' | 'X', Value::Int(n)) => {
            numeric = true;
            let s = if *n < 0 {
                format!("-{:x}", n.unsigned_abs())
            } else {
                format!("{n:x}")
            };
            let s = if sharp { format!("0x{s}") } else { s };
            if verb == 'X' { s.to_uppercase() } else { s }
        }
        ('x' | 'X', Value::Str(s)) => {
            let h: String = s.bytes().map(|b| format!("{b:02x}")).collect();
            if verb == 'X' { h.to_uppercase() } else { h }
        }
        ('f' | 'F', Value::Float(x)) => {
            numeric = true;
            sign(fixed(*x, prec.unwrap_or(6)), plus, space)
        }
        ('e', Value::Float(x)) => {
            numeric = true;
            sign(go_exp(*x, prec.unwrap_or(6)), plus, space)
        }
        ('g', Value::Float(x)) => {
            numeric = true;
            sign(
                go_float_shortest(*x, 21.min(prec.map(|p| p as i32).unwrap_or(21))),
                plus,
                space,
            )
        }
        (_, a) => bad_verb(verb, a),
    };
    (body, numeric)
}

/// fmt's badVerb: `%!verb(type=value)`, `%!verb(<nil>)` for a nil operand.
fn bad_verb(verb: char, arg: &Value) -> String {
    if matches!(arg, Value::Nil | Value::Invalid) {
        return format!("%!{verb}(<nil>)");
    }
    let mut s = String::new();
    operand(arg, &mut s);
    format!("%!{verb}({}={s})", arg.type_name())
}

/// `%q` of an int: strconv.QuoteRune.
fn quote_rune(n: i64) -> String {
    let c = char::from_u32(n as u32).unwrap_or('\u{fffd}');
    match c {
        '\'' => "'\\''".to_owned(),
        '"' => "'\"'".to_owned(),
        c => {
            let q = go_quote(&c.to_string());
            format!("'{}'", &q[1..q.len() - 1])
        }
    }
}

/// `%b`, `%o`, `%O` of an int (`#`: `0` before octal; `%O`: `0o`), signed.
fn int_in_base(verb: char, n: i64, spec: &Spec) -> String {
    let digits = match verb {
        'b' => format!("{:b}", n.unsigned_abs()),
        _ => format!("{:o}", n.unsigned_abs()),
    };
    let prefix = match verb {
        'O' => "0o",
        'o' if spec.sharp => "0",
        _ => "",
    };
    let s = format!("{prefix}{digits}");
    sign(
        if n < 0 { format!("-{s}") } else { s },
        spec.plus,
        spec.space,
    )
}

/// fmt's `%!(EXTRA type=value, …)` for the operands no verb used.
fn extra_args(out: &mut String, rest: &[Value]) {
    out.push_str("%!(EXTRA ");
    for (k, a) in rest.iter().enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        let mut s = String::new();
        operand(a, &mut s);
        let _ = write!(out, "{}={s}", a.type_name());
    }
    out.push(')');
}

fn sign(s: String, plus: bool, space: bool) -> String {
    if s.starts_with('-') {
        s
    } else if plus {
        format!("+{s}")
    } else if space {
        format!(" {s}")
    } else {
        s
    }
}

/// `%.Nf` of `x` for any N (Rust's formatter takes at most 65,535): an f64's exact decimal
/// expansion ends within 1,074 fractional digits, the rest are zeros.
fn fixed(x: f64, prec: usize) -> String {
    const EXACT: usize = 1100;
    let mut s = format!("{:.*}", prec.min(EXACT), x);
    if prec > EXACT && x.is_finite() {
        s.extend(std::iter::repeat_n('0', prec - EXACT));
    }
    s
}

fn go_exp(x: f64, prec: usize) -> String {
    // an f64 has at most 767 significant decimal digits; past them the mantissa is zeros
    const EXACT: usize = 800;
    let p = prec.min(EXACT);
    let s = format!("{x:.p$e}");
    let s = if prec > EXACT && x.is_finite() {
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        format!("{m}{}e{e}", "0".repeat(prec - EXACT))
    } else {
        s
    };
    let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
}

/// Go `strconv.Quote`.
pub fn go_quote(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            '\u{7}' => o.push_str("\\a"),
            '\u{8}' => o.push_str("\\b"),
            '\u{c}' => o.push_str("\\f"),
            '\u{b}' => o.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(o, "\\x{:02x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// text/template `HTMLEscapeString`.
pub fn html_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => o.push_str("&#34;"),
            '\'' => o.push_str("&#39;"),
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '\0' => o.push('\u{fffd}'),
            c => o.push(c),
        }
    }
    o
}

/// text/template `JSEscapeString`.
pub fn js_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '\'' => o.push_str("\\'"),
            '"' => o.push_str("\\\""),
            '<' => o.push_str("\\u003C"),
            '>' => o.push_str("\\u003E"),
            '&' => o.push_str("\\u0026"),
            '=' => o.push_str("\\u003D"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04X}", c as u32);
            }
            c => o.push(c),
        }
    }
    o
}

/// net/url `QueryEscape`.
pub fn query_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                o.push(b as char)
            }
            b' ' => o.push('+'),
            b => {
                let _ = write!(o, "%{b:02X}");
            }
        }
    }
    o
}

/// api/types.go `ToolProperty.ToTypeScriptType`.
pub fn ts_type_of(s: &super::value::Struct) -> String {
    if let Some(Value::List(any_of)) = s.get("AnyOf")
        && !any_of.items.is_empty()
    {
        return any_of
            .items
            .iter()
            .map(|p| match p {
                Value::Struct(p) => ts_type_of(p),
                _ => "any".into(),
            })
            .collect::<Vec<_>>()
            .join(" | ");
    }
    let types: Vec<String> = match s.get("Type") {
        Some(Value::List(l)) => l
            .items
            .iter()
            .filter_map(|t| match t {
                Value::Str(s) => Some(s.to_string()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    if types.is_empty() {
        return "any".into();
    }
    types
        .iter()
        .map(|t| match t.as_str() {
            "string" => "string",
            "number" | "integer" => "number",
            "boolean" => "boolean",
            "array" => "any[]",
            "object" => "Record<string, any>",
            "null" => "null",
            _ => "any",
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// `d` plus `n` days (Go `time.AddDate(0, 0, n)`), with the `time` crate's calendar; an
/// out-of-range date stays as it is.
pub fn add_days(d: Date, n: i64) -> Date {
    let month = u8::try_from(d.1)
        .ok()
        .and_then(|m| time::Month::try_from(m).ok());
    let day = u8::try_from(d.2).ok();
    let (Some(month), Some(day)) = (month, day) else {
        return d;
    };
    match time::Date::from_calendar_date(d.0, month, day)
        .ok()
        .and_then(|t| t.checked_add(time::Duration::days(n)))
    {
        Some(t) => (t.year(), u8::from(t.month()) as u32, t.day() as u32),
        None => d,
    }
}
