//! Lexer and parser for Go `text/template` (Go 1.24 `text/template/parse`: lex.go, parse.go,
//! node.go): `{{`/`}}` actions with `{{- `/` -}}` trim markers, `{{/* comments */}}`,
//! pipelines with `|`, parenthesised pipelines, field chains (`.A.B`, `$x.A`, `(…).A`),
//! variables (`$`, `$x := …`, `$x = …`, `range $i, $e := …`), literals (strings, raw strings,
//! chars, numbers, `true`/`false`/`nil`), and the actions `if`/`else if`/`else with`/`else`,
//! `range` (with `else`, `break`, `continue`), `with`, `define`, `template`, `block`, `end`.
//!
//! As in Go, functions and variables are checked at parse time (`function "x" not defined`,
//! `undefined variable "$x"`), and errors read `template: NAME:LINE: message`.

use std::collections::HashMap;
use std::rc::Rc;

use super::GoTemplateError;

/// A byte offset into the template text.
pub type Pos = usize;

/// One node of a template's list (Go `parse.Node` kinds that can appear in a `ListNode`).
#[derive(Debug, Clone)]
pub enum Node {
    /// Literal text, already trimmed by adjacent trim markers.
    Text(Rc<str>),
    /// `{{pipeline}}`: prints the pipeline's value unless it declares variables.
    Action(Pipe),
    /// `{{if}}`, `{{with}}`, `{{range}}`.
    Branch(Box<Branch>),
    /// `{{template "name" pipeline}}` (also the call half of `{{block}}`).
    Template {
        pos: Pos,
        name: String,
        pipe: Option<Pipe>,
    },
    Break(Pos),
    Continue(Pos),
}

/// Which control structure a [`Branch`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BranchKind {
    If,
    With,
    Range,
}

/// `{{if|with|range pipeline}} list {{else}} else_list {{end}}`.
#[derive(Debug, Clone)]
pub struct Branch {
    pub kind: BranchKind,
    pub pos: Pos,
    pub pipe: Pipe,
    pub list: Vec<Node>,
    pub else_list: Option<Vec<Node>>,
}

/// A pipeline: optional variable declarations, then commands separated by `|`.
#[derive(Debug, Clone)]
pub struct Pipe {
    pub pos: Pos,
    /// `=` (assign existing) rather than `:=` (declare).
    pub is_assign: bool,
    /// Declared or assigned variable names, with `$`.
    pub decl: Vec<String>,
    pub cmds: Vec<Cmd>,
}

/// One command: the operands of one pipeline stage.
#[derive(Debug, Clone)]
pub struct Cmd {
    pub pos: Pos,
    pub args: Vec<Arg>,
    /// The command's source text, for error context (`at <…>`).
    pub text: String,
}

/// An operand.
#[derive(Debug, Clone)]
pub enum Arg {
    /// `.A.B`: field/key/method chain on dot.
    Field(Pos, Vec<String>),
    /// `$x.A.B` (`$` alone: the data passed to Execute).
    Variable(Pos, Vec<String>),
    /// `.`
    Dot(Pos),
    Nil(Pos),
    Bool(Pos, bool),
    /// A numeric constant: an integer when it is one (Go's ideal constant), else a float.
    Int(Pos, i64),
    Float(Pos, f64),
    Str(Pos, Rc<str>),
    /// A function name.
    Ident(Pos, String),
    /// `( pipeline )`.
    Pipe(Pos, Box<Pipe>),
    /// `(…).A.B`: fields on a non-field operand.
    Chain(Pos, Box<Arg>, Vec<String>),
}

impl Arg {
    pub fn pos(&self) -> Pos {
        match self {
            Arg::Field(p, _)
            | Arg::Variable(p, _)
            | Arg::Dot(p)
            | Arg::Nil(p)
            | Arg::Bool(p, _)
            | Arg::Int(p, _)
            | Arg::Float(p, _)
            | Arg::Str(p, _)
            | Arg::Ident(p, _)
            | Arg::Pipe(p, _)
            | Arg::Chain(p, _, _) => *p,
        }
    }
}

/// A parsed template: the main list and the `define`d ones.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    pub root: Vec<Node>,
    pub defines: HashMap<String, Rc<Vec<Node>>>,
}

// ---------------------------------------------------------------- lexer

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Text(String),
    Open { pos: Pos },
    Close { pos: Pos },
    Space,
    Declare,
    Assign,
    Pipe,
    LParen,
    RParen,
    Comma,
    Str(String),
    Char(i64),
    Number(String),
    Bool(bool),
    Nil,
    Dot,
    Field(String),
    Var(String),
    Ident(String),
    Keyword(&'static str),
    Eof,
}

const KEYWORDS: &[&str] = &[
    "block", "break", "continue", "define", "else", "end", "if", "range", "template", "with",
];

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_alnum(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

struct Lexer<'a> {
    src: &'a str,
    name: &'a str,
    pos: usize,
    out: Vec<(Pos, Tok)>,
    paren: usize,
}

impl<'a> Lexer<'a> {
    fn err(&self, at: Pos, msg: impl Into<String>) -> GoTemplateError {
        GoTemplateError::parse(self.name, line_of(self.src, at), msg)
    }

    fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    fn run(mut self) -> Result<Vec<(Pos, Tok)>, GoTemplateError> {
        let mut trim_next = false;
        loop {
            let start = self.pos;
            let next = self.rest().find("{{").map(|i| self.pos + i);
            let end = next.unwrap_or(self.src.len());
            let mut text = &self.src[start..end];
            if trim_next {
                text = text.trim_start_matches([' ', '\t', '\r', '\n']);
            }
            let Some(open) = next else {
                if !text.is_empty() {
                    self.out.push((start, Tok::Text(text.to_owned())));
                }
                self.out.push((self.src.len(), Tok::Eof));
                return Ok(self.out);
            };
            let b = self.src.as_bytes();
            let left_trim = b.len() > open + 3 && b[open + 2] == b'-' && is_space(b[open + 3]);
            if left_trim {
                text = text.trim_end_matches([' ', '\t', '\r', '\n']);
            }
            if !text.is_empty() {
                self.out.push((start, Tok::Text(text.to_owned())));
            }
            self.pos = open + 2 + if left_trim { 2 } else { 0 };
            // comment: `{{/*` right after the delimiter (and trim marker)
            if self.rest().starts_with("/*") {
                let Some(close) = self.rest()[2..].find("*/") else {
                    return Err(self.err(open, "unclosed comment"));
                };
                self.pos += 2 + close + 2;
                match self.at_right_delim() {
                    Some(trim) => {
                        self.pos += if trim { 4 } else { 2 };
                        trim_next = trim;
                    }
                    None => return Err(self.err(open, "comment ends before closing delimiter")),
                }
                continue;
            }
            self.out.push((open, Tok::Open { pos: open }));
            trim_next = self.inside_action(open)?;
        }
    }

    /// `Some(trim)` when the input is at `}}` or ` -}}`.
    fn at_right_delim(&self) -> Option<bool> {
        let r = self.rest().as_bytes();
        if r.len() >= 4 && is_space(r[0]) && r[1] == b'-' && &r[2..4] == b"}}" {
            return Some(true);
        }
        if r.starts_with(b"}}") {
            return Some(false);
        }
        None
    }

    /// Lexes one action's tokens up to and including the right delimiter; returns whether it
    /// carried a right trim marker.
    fn inside_action(&mut self, open: Pos) -> Result<bool, GoTemplateError> {
        self.paren = 0;
        loop {
            if let Some(trim) = self.at_right_delim() {
                if self.paren > 0 {
                    return Err(self.err(open, "unclosed left paren"));
                }
                let at = self.pos + if trim { 2 } else { 0 };
                self.pos += if trim { 4 } else { 2 };
                self.out.push((at, Tok::Close { pos: at }));
                return Ok(trim);
            }
            let start = self.pos;
            let Some(c) = self.rest().chars().next() else {
                return Err(self.err(open, "unclosed action"));
            };
            match c {
                '\n' | '\r' | ' ' | '\t' => {
                    // a space run; the one before ` -}}` belongs to the trim marker
                    while let Some(&b) = self.rest().as_bytes().first() {
                        if !is_space(b) || self.at_right_delim().is_some() {
                            break;
                        }
                        self.pos += 1;
                    }
                    self.out.push((start, Tok::Space));
                }
                '=' => {
                    self.pos += 1;
                    self.out.push((start, Tok::Assign));
                }
                ':' => {
                    if !self.rest().starts_with(":=") {
                        return Err(self.err(start, "expected :="));
                    }
                    self.pos += 2;
                    self.out.push((start, Tok::Declare));
                }
                '|' => {
                    self.pos += 1;
                    self.out.push((start, Tok::Pipe));
                }
                ',' => {
                    self.pos += 1;
                    self.out.push((start, Tok::Comma));
                }
                '(' => {
                    self.pos += 1;
                    self.paren += 1;
                    self.out.push((start, Tok::LParen));
                }
                ')' => {
                    if self.paren == 0 {
                        return Err(self.err(start, "unexpected right paren"));
                    }
                    self.pos += 1;
                    self.paren -= 1;
                    self.out.push((start, Tok::RParen));
                }
                '"' => {
                    let s = self.quoted(start)?;
                    self.out.push((start, Tok::Str(s)));
                }
                '`' => {
                    let Some(end) = self.rest()[1..].find('`') else {
                        return Err(self.err(start, "unterminated raw quoted string"));
                    };
                    let s = self.rest()[1..1 + end].replace('\r', "");
                    self.pos += end + 2;
                    self.out.push((start, Tok::Str(s)));
                }
                '\'' => {
                    let v = self.char_const(start)?;
                    self.out.push((start, Tok::Char(v)));
                }
                '$' => {
                    let n = 1 + self.rest()[1..]
                        .chars()
                        .take_while(|&c| is_alnum(c))
                        .map(char::len_utf8)
                        .sum::<usize>();
                    let v = self.rest()[..n].to_owned();
                    self.pos += n;
                    self.out.push((start, Tok::Var(v)));
                }
                '.' => {
                    let next = self.rest()[1..].chars().next();
                    if next.is_some_and(|c| c.is_ascii_digit()) {
                        let n = self.number(start)?;
                        self.out.push((start, Tok::Number(n)));
                    } else if next.is_some_and(is_alnum) {
                        let n = self.rest()[1..]
                            .chars()
                            .take_while(|&c| is_alnum(c))
                            .map(char::len_utf8)
                            .sum::<usize>();
                        let f = self.rest()[1..1 + n].to_owned();
                        self.pos += 1 + n;
                        self.out.push((start, Tok::Field(f)));
                    } else {
                        self.pos += 1;
                        self.out.push((start, Tok::Dot));
                    }
                }
                '+' | '-' | '0'..='9' => {
                    let n = self.number(start)?;
                    self.out.push((start, Tok::Number(n)));
                }
                c if is_alnum(c) => {
                    let n = self
                        .rest()
                        .chars()
                        .take_while(|&c| is_alnum(c))
                        .map(char::len_utf8)
                        .sum::<usize>();
                    let w = &self.rest()[..n];
                    let tok = match w {
                        "true" => Tok::Bool(true),
                        "false" => Tok::Bool(false),
                        "nil" => Tok::Nil,
                        _ => match KEYWORDS.iter().find(|k| **k == w) {
                            Some(k) => Tok::Keyword(k),
                            None => Tok::Ident(w.to_owned()),
                        },
                    };
                    self.pos += n;
                    self.out.push((start, tok));
                }
                c => {
                    return Err(self.err(start, format!("unexpected {c:?} in command")));
                }
            }
        }
    }

    fn number(&mut self, start: Pos) -> Result<String, GoTemplateError> {
        let n = self
            .rest()
            .char_indices()
            .take_while(|&(i, c)| {
                c.is_ascii_alphanumeric()
                    || c == '.'
                    || c == '_'
                    || ((c == '+' || c == '-') && (i == 0 || self.exp_sign_ok(i)))
            })
            .map(|(_, c)| c.len_utf8())
            .sum::<usize>();
        let s = self.rest()[..n].to_owned();
        self.pos += n;
        if s == "+" || s == "-" {
            return Err(self.err(start, format!("bad number syntax: {s:?}")));
        }
        Ok(s)
    }

    fn exp_sign_ok(&self, i: usize) -> bool {
        let b = self.rest().as_bytes();
        let hex = self.rest().trim_start_matches(['+', '-']).starts_with("0x")
            || self.rest().trim_start_matches(['+', '-']).starts_with("0X");
        let p = b[i - 1];
        if hex {
            p == b'p' || p == b'P'
        } else {
            p == b'e' || p == b'E'
        }
    }

    fn quoted(&mut self, start: Pos) -> Result<String, GoTemplateError> {
        let mut out = String::new();
        let mut it = self.rest()[1..].char_indices();
        while let Some((i, c)) = it.next() {
            match c {
                '"' => {
                    self.pos += 1 + i + 1;
                    return Ok(out);
                }
                '\n' => break,
                '\\' => {
                    let Some((_, e)) = it.next() else { break };
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        'a' => out.push('\x07'),
                        'b' => out.push('\x08'),
                        'f' => out.push('\x0c'),
                        'v' => out.push('\x0b'),
                        '\\' => out.push('\\'),
                        '"' => out.push('"'),
                        '\'' => return Err(self.err(start, "invalid syntax (\\' in string)")),
                        'x' | 'u' | 'U' => {
                            let len = match e {
                                'x' => 2,
                                'u' => 4,
                                _ => 8,
                            };
                            let hex: String =
                                (0..len).filter_map(|_| it.next().map(|x| x.1)).collect();
                            let v = u32::from_str_radix(&hex, 16)
                                .map_err(|_| self.err(start, "invalid syntax"))?;
                            if e == 'x' {
                                // a byte; only ASCII keeps the string valid UTF-8
                                out.push(char::from_u32(v).filter(|_| v < 0x80).ok_or_else(
                                    || {
                                        self.err(
                                            start,
                                            "\\x escape above 0x7f is not UTF-8 (unsupported)",
                                        )
                                    },
                                )?);
                            } else {
                                out.push(
                                    char::from_u32(v)
                                        .ok_or_else(|| self.err(start, "invalid syntax"))?,
                                );
                            }
                        }
                        '0'..='7' => {
                            let mut v = e.to_digit(8).unwrap_or(0);
                            for _ in 0..2 {
                                let d = it.next().and_then(|x| x.1.to_digit(8));
                                v = v * 8 + d.ok_or_else(|| self.err(start, "invalid syntax"))?;
                            }
                            out.push(char::from_u32(v).filter(|_| v < 0x80).ok_or_else(|| {
                                self.err(
                                    start,
                                    "octal escape above 0x7f is not UTF-8 (unsupported)",
                                )
                            })?);
                        }
                        _ => return Err(self.err(start, "invalid syntax")),
                    }
                }
                c => out.push(c),
            }
        }
        Err(self.err(start, "unterminated quoted string"))
    }

    fn char_const(&mut self, start: Pos) -> Result<i64, GoTemplateError> {
        let r = &self.rest()[1..];
        let mut it = r.char_indices();
        let (v, used) = match it.next() {
            Some((_, '\\')) => {
                let (_, e) = it
                    .next()
                    .ok_or_else(|| self.err(start, "unterminated character constant"))?;
                let v = match e {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '\\' => '\\',
                    '\'' => '\'',
                    '0' => '\0',
                    _ => return Err(self.err(start, "unsupported escape in character constant")),
                };
                (v as i64, 1 + e.len_utf8())
            }
            Some((_, c)) if c != '\'' && c != '\n' => (c as i64, c.len_utf8()),
            _ => return Err(self.err(start, "unterminated character constant")),
        };
        if !r[used..].starts_with('\'') {
            return Err(self.err(start, "unterminated character constant"));
        }
        self.pos += 1 + used + 1;
        Ok(v)
    }
}

/// 1-based line of byte offset `pos`.
pub fn line_of(src: &str, pos: Pos) -> usize {
    1 + src[..pos.min(src.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
}

/// Go's `ErrorContext` column: bytes since the last newline (0-based).
pub fn col_of(src: &str, pos: Pos) -> usize {
    let pos = pos.min(src.len());
    match src[..pos].rfind('\n') {
        Some(nl) => pos - nl - 1,
        None => pos,
    }
}

// ---------------------------------------------------------------- parser

struct Parser<'a> {
    src: &'a str,
    name: &'a str,
    toks: Vec<(Pos, Tok)>,
    i: usize,
    funcs: &'a dyn Fn(&str) -> bool,
    vars: Vec<String>,
    range_depth: usize,
    /// Nesting of control structures and parenthesised pipelines (bounded: [`MAX_NESTING`]).
    depth: usize,
    defines: HashMap<String, Rc<Vec<Node>>>,
}

enum Stop {
    End,
    Else(Pos),
    Eof,
}

impl<'a> Parser<'a> {
    fn err(&self, pos: Pos, msg: impl Into<String>) -> GoTemplateError {
        GoTemplateError::parse(self.name, line_of(self.src, pos), msg)
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.i].1
    }

    fn peek_pos(&self) -> Pos {
        self.toks[self.i].0
    }

    fn next(&mut self) -> (Pos, Tok) {
        let t = self.toks[self.i].clone();
        if self.i + 1 < self.toks.len() {
            self.i += 1;
        }
        t
    }

    fn next_non_space(&mut self) -> (Pos, Tok) {
        loop {
            let t = self.next();
            if t.1 != Tok::Space {
                return t;
            }
        }
    }

    fn peek_non_space(&mut self) -> Tok {
        while *self.peek() == Tok::Space {
            self.i += 1;
        }
        self.peek().clone()
    }

    fn expect_close(&mut self, context: &str) -> Result<(), GoTemplateError> {
        let (p, t) = self.next_non_space();
        match t {
            Tok::Close { .. } => Ok(()),
            t => Err(self.err(p, format!("unexpected {} in {context}", tok_desc(&t)))),
        }
    }

    /// Parses a list until `{{end}}`, `{{else}}` or EOF.
    fn list(&mut self, top: bool) -> Result<(Vec<Node>, Stop), GoTemplateError> {
        let mut nodes = Vec::new();
        loop {
            let (pos, tok) = self.next();
            match tok {
                Tok::Text(t) => nodes.push(Node::Text(t.into())),
                Tok::Eof => return Ok((nodes, Stop::Eof)),
                Tok::Open { .. } => {
                    let (kpos, k) = {
                        let save = self.i;
                        let t = self.next_non_space();
                        self.i = save;
                        t
                    };
                    match k {
                        Tok::Keyword("end") => {
                            self.next_non_space();
                            self.expect_close("end")?;
                            return Ok((nodes, Stop::End));
                        }
                        Tok::Keyword("else") => {
                            self.next_non_space();
                            return Ok((nodes, Stop::Else(kpos)));
                        }
                        Tok::Keyword("define") => {
                            self.next_non_space();
                            if !top {
                                return Err(self.err(kpos, "unexpected <define> in command"));
                            }
                            self.define(kpos)?;
                        }
                        _ => {
                            if let Some(n) = self.action()? {
                                nodes.push(n);
                            }
                        }
                    }
                }
                t => return Err(self.err(pos, format!("unexpected {}", tok_desc(&t)))),
            }
        }
    }

    fn define(&mut self, pos: Pos) -> Result<(), GoTemplateError> {
        let (p, t) = self.next_non_space();
        let Tok::Str(name) = t else {
            return Err(self.err(p, "unexpected token in define clause"));
        };
        self.expect_close("define clause")?;
        let saved = std::mem::replace(&mut self.vars, vec!["$".into()]);
        let saved_range = std::mem::take(&mut self.range_depth);
        let (body, stop) = self.list(false)?;
        self.vars = saved;
        self.range_depth = saved_range;
        match stop {
            Stop::End => {}
            Stop::Else(p) => return Err(self.err(p, "unexpected {{else}}")),
            Stop::Eof => return Err(self.err(pos, "unexpected EOF")),
        }
        self.add_define(name, body);
        Ok(())
    }

    fn add_define(&mut self, name: String, body: Vec<Node>) {
        // Go's AddParseTree: an empty body does not replace an existing definition
        let empty = body
            .iter()
            .all(|n| matches!(n, Node::Text(t) if t.trim().is_empty()));
        if empty && self.defines.contains_key(&name) {
            return;
        }
        self.defines.insert(name, Rc::new(body));
    }

    /// After `{{`: an action (keyword or pipeline).
    fn action(&mut self) -> Result<Option<Node>, GoTemplateError> {
        let save = self.i;
        let (kpos, k) = self.next_non_space();
        match k {
            Tok::Keyword("if") => self.control(BranchKind::If, kpos).map(Some),
            Tok::Keyword("with") => self.control(BranchKind::With, kpos).map(Some),
            Tok::Keyword("range") => self.control(BranchKind::Range, kpos).map(Some),
            Tok::Keyword("break") | Tok::Keyword("continue") => {
                let is_break = k == Tok::Keyword("break");
                if self.range_depth == 0 {
                    let w = if is_break { "break" } else { "continue" };
                    return Err(self.err(kpos, format!("{{{{{w}}}}} outside {{{{range}}}}")));
                }
                self.expect_close(if is_break {
                    "{{break}}"
                } else {
                    "{{continue}}"
                })?;
                Ok(Some(if is_break {
                    Node::Break(kpos)
                } else {
                    Node::Continue(kpos)
                }))
            }
            Tok::Keyword("template") | Tok::Keyword("block") => {
                let is_block = k == Tok::Keyword("block");
                let (p, t) = self.next_non_space();
                let Tok::Str(name) = t else {
                    return Err(self.err(p, "unexpected token in template clause"));
                };
                let pipe = if matches!(self.peek_non_space(), Tok::Close { .. }) {
                    self.next();
                    None
                } else {
                    Some(self.pipeline("template clause", false)?)
                };
                if is_block {
                    let saved = std::mem::replace(&mut self.vars, vec!["$".into()]);
                    let (body, stop) = self.list(false)?;
                    self.vars = saved;
                    match stop {
                        Stop::End => {}
                        Stop::Else(p) => return Err(self.err(p, "unexpected {{else}}")),
                        Stop::Eof => return Err(self.err(kpos, "unexpected EOF")),
                    }
                    self.add_define(name.clone(), body);
                }
                Ok(Some(Node::Template {
                    pos: kpos,
                    name,
                    pipe,
                }))
            }
            Tok::Keyword(w) => Err(self.err(kpos, format!("unexpected <{w}> in command"))),
            _ => {
                self.i = save;
                let pipe = self.pipeline("command", true)?;
                Ok(Some(Node::Action(pipe)))
            }
        }
    }

    fn control(&mut self, kind: BranchKind, pos: Pos) -> Result<Node, GoTemplateError> {
        self.enter(pos)?;
        let r = self.control_inner(kind, pos);
        self.depth -= 1;
        r
    }

    /// One more level of nesting; Go's parser stops parenthesised pipelines at 10000
    /// ("max expression depth exceeded"); toolscope stops every nesting at [`MAX_NESTING`]
    /// so a hostile template cannot exhaust the stack.
    fn enter(&mut self, pos: Pos) -> Result<(), GoTemplateError> {
        if self.depth >= MAX_NESTING {
            return Err(self.err(
                pos,
                format!(
                    "max expression depth exceeded (toolscope nests at most {MAX_NESTING} levels)"
                ),
            ));
        }
        self.depth += 1;
        Ok(())
    }

    fn control_inner(&mut self, kind: BranchKind, pos: Pos) -> Result<Node, GoTemplateError> {
        let mark = self.vars.len();
        let ctx = match kind {
            BranchKind::If => "if",
            BranchKind::With => "with",
            BranchKind::Range => "range",
        };
        let pipe = self.pipeline(ctx, kind == BranchKind::Range)?;
        if kind == BranchKind::Range {
            self.range_depth += 1;
        }
        let (list, stop) = self.list(false)?;
        if kind == BranchKind::Range {
            self.range_depth -= 1;
        }
        let else_list = match stop {
            Stop::End => None,
            Stop::Eof => return Err(self.err(pos, "unexpected EOF")),
            Stop::Else(epos) => {
                // `{{else if …}}` / `{{else with …}}`: a nested branch that ends with ours
                match self.peek_non_space() {
                    Tok::Keyword("if") if kind == BranchKind::If => {
                        let (p, _) = self.next_non_space();
                        let inner = self.control(BranchKind::If, p)?;
                        Some(vec![inner])
                    }
                    Tok::Keyword("with") if kind == BranchKind::With => {
                        let (p, _) = self.next_non_space();
                        let inner = self.control(BranchKind::With, p)?;
                        Some(vec![inner])
                    }
                    _ => {
                        self.expect_close("else")?;
                        let (l, stop) = self.list(false)?;
                        match stop {
                            Stop::End => Some(l),
                            Stop::Else(p) => {
                                return Err(self.err(p, "expected end; found {{else}}"));
                            }
                            Stop::Eof => return Err(self.err(epos, "unexpected EOF")),
                        }
                    }
                }
            }
        };
        self.vars.truncate(mark);
        Ok(Node::Branch(Box::new(Branch {
            kind,
            pos,
            pipe,
            list,
            else_list,
        })))
    }

    /// A pipeline up to `}}` (consumed) or `)` (not consumed). `multi_decl`: `$i, $e :=`.
    fn pipeline(&mut self, ctx: &str, multi_decl: bool) -> Result<Pipe, GoTemplateError> {
        let pos = self.peek_pos();
        let mut decl = Vec::new();
        let mut is_assign = false;
        // declarations
        let save = self.i;
        if let Tok::Var(v) = self.peek_non_space() {
            let vpos = self.peek_pos();
            self.next();
            match self.peek_non_space() {
                Tok::Declare | Tok::Assign => {
                    is_assign = *self.peek() == Tok::Assign;
                    self.next();
                    decl.push(v);
                }
                Tok::Comma if multi_decl => {
                    self.next();
                    let (p2, t2) = self.next_non_space();
                    let Tok::Var(v2) = t2 else {
                        return Err(self.err(p2, format!("unexpected {} in {ctx}", tok_desc(&t2))));
                    };
                    match self.next_non_space() {
                        (_, Tok::Declare) => {}
                        (_, Tok::Assign) => is_assign = true,
                        (p3, t3) => {
                            return Err(
                                self.err(p3, format!("unexpected {} in {ctx}", tok_desc(&t3)))
                            );
                        }
                    }
                    decl.push(v);
                    decl.push(v2);
                }
                Tok::Comma => {
                    return Err(self.err(vpos, format!("too many declarations in {ctx}")));
                }
                _ => self.i = save,
            }
        } else {
            self.i = save;
        }
        if is_assign {
            for v in &decl {
                if !self.vars.contains(v) {
                    return Err(self.err(pos, format!("undefined variable {v:?}")));
                }
            }
        }
        let mut cmds = Vec::new();
        loop {
            match self.peek_non_space() {
                Tok::Close { .. } => {
                    self.next();
                    break;
                }
                Tok::RParen => break,
                Tok::Eof => return Err(self.err(pos, "unclosed action")),
                _ => {
                    let c = self.command(ctx)?;
                    cmds.push(c);
                    if *self.peek() == Tok::Pipe {
                        self.next();
                        if matches!(self.peek_non_space(), Tok::Close { .. } | Tok::RParen) {
                            return Err(self.err(pos, "missing command after pipe"));
                        }
                    }
                }
            }
        }
        if !is_assign {
            for v in &decl {
                self.vars.push(v.clone());
            }
        }
        if cmds.is_empty() {
            return Err(self.err(pos, format!("missing value for {ctx}")));
        }
        for (i, c) in cmds.iter().enumerate().skip(1) {
            if matches!(
                c.args[0],
                Arg::Bool(..)
                    | Arg::Dot(_)
                    | Arg::Nil(_)
                    | Arg::Int(..)
                    | Arg::Float(..)
                    | Arg::Str(..)
            ) {
                return Err(self.err(
                    c.pos,
                    format!("non executable command in pipeline stage {}", i + 1),
                ));
            }
        }
        Ok(Pipe {
            pos,
            is_assign,
            decl,
            cmds,
        })
    }

    fn command(&mut self, ctx: &str) -> Result<Cmd, GoTemplateError> {
        let pos = self.peek_pos();
        let mut args = Vec::new();
        let mut end = pos;
        loop {
            self.peek_non_space();
            let a = self.operand()?;
            let Some(a) = a else { break };
            args.push(a);
            end = self.peek_pos();
            match self.peek() {
                Tok::Space => {
                    self.next();
                    if matches!(self.peek(), Tok::Close { .. } | Tok::RParen | Tok::Pipe) {
                        break;
                    }
                }
                Tok::Close { .. } | Tok::RParen | Tok::Pipe => break,
                t => {
                    let t = t.clone();
                    return Err(self.err(
                        self.peek_pos(),
                        format!("unexpected {} in operand", tok_desc(&t)),
                    ));
                }
            }
        }
        if args.is_empty() {
            let (p, t) = (self.peek_pos(), self.peek().clone());
            return Err(self.err(p, format!("unexpected {} in {ctx}", tok_desc(&t))));
        }
        let text = self.src[pos..end.max(pos)].trim().to_owned();
        Ok(Cmd { pos, args, text })
    }

    fn operand(&mut self) -> Result<Option<Arg>, GoTemplateError> {
        let Some(term) = self.term()? else {
            return Ok(None);
        };
        let mut fields = Vec::new();
        // Go's operand(): the merged node takes the position of the first chained field
        let chain_pos = self.peek_pos();
        while let Tok::Field(f) = self.peek().clone() {
            self.next();
            fields.push(f);
        }
        if fields.is_empty() {
            return Ok(Some(term));
        }
        Ok(Some(match term {
            Arg::Field(_, mut id) => {
                id.extend(fields);
                Arg::Field(chain_pos, id)
            }
            Arg::Variable(_, mut id) => {
                id.extend(fields);
                Arg::Variable(chain_pos, id)
            }
            Arg::Bool(p, _)
            | Arg::Str(p, _)
            | Arg::Int(p, _)
            | Arg::Float(p, _)
            | Arg::Nil(p)
            | Arg::Dot(p) => {
                return Err(self.err(p, "unexpected . after term"));
            }
            t => Arg::Chain(chain_pos, Box::new(t), fields),
        }))
    }

    fn term(&mut self) -> Result<Option<Arg>, GoTemplateError> {
        let (pos, tok) = (self.peek_pos(), self.peek().clone());
        let a = match tok {
            Tok::Ident(name) => {
                if !(self.funcs)(&name) {
                    return Err(self.err(pos, format!("function {name:?} not defined")));
                }
                Arg::Ident(pos, name)
            }
            Tok::Dot => Arg::Dot(pos),
            Tok::Nil => Arg::Nil(pos),
            Tok::Var(v) => {
                if !self.vars.contains(&v) {
                    return Err(self.err(pos, format!("undefined variable {v:?}")));
                }
                Arg::Variable(pos, vec![v])
            }
            Tok::Field(f) => Arg::Field(pos, vec![f]),
            Tok::Bool(b) => Arg::Bool(pos, b),
            Tok::Char(c) => Arg::Int(pos, c),
            Tok::Number(n) => number(&n)
                .ok_or_else(|| self.err(pos, format!("illegal number syntax: {n:?}")))?(
                pos
            ),
            Tok::Str(s) => Arg::Str(pos, s.into()),
            Tok::LParen => {
                self.next();
                self.enter(pos)?;
                let p = self.pipeline("parenthesized pipeline", false);
                self.depth -= 1;
                let p = p?;
                match self.next() {
                    (_, Tok::RParen) => {}
                    (p2, t) => {
                        return Err(self.err(
                            p2,
                            format!("unclosed right paren: unexpected {}", tok_desc(&t)),
                        ));
                    }
                }
                return Ok(Some(Arg::Pipe(pos, Box::new(p))));
            }
            _ => return Ok(None),
        };
        self.next();
        Ok(Some(a))
    }
}

/// The deepest nesting of `if`/`with`/`range`/`block` and parenthesised pipelines a template
/// may have (real chat templates nest a handful of levels).
pub const MAX_NESTING: usize = 100;

type ArgCtor = Box<dyn Fn(Pos) -> Arg>;

/// A Go numeric literal as the ideal constant text/template makes of it (exec.go
/// `idealConstant`: an int unless written with a '.' or an exponent).
fn number(s: &str) -> Option<ArgCtor> {
    let clean = s.replace('_', "");
    let (neg, body) = match clean.strip_prefix('-') {
        Some(b) => (true, b.to_owned()),
        None => (false, clean.trim_start_matches('+').to_owned()),
    };
    let lower = body.to_ascii_lowercase();
    let int = if let Some(h) = lower.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()
    } else if let Some(o) = lower.strip_prefix("0o") {
        i64::from_str_radix(o, 8).ok()
    } else if let Some(b) = lower.strip_prefix("0b") {
        i64::from_str_radix(b, 2).ok()
    } else if lower.len() > 1 && lower.starts_with('0') && lower.bytes().all(|b| b.is_ascii_digit())
    {
        i64::from_str_radix(&lower[1..], 8).ok()
    } else {
        lower.parse::<i64>().ok()
    };
    if let Some(i) = int {
        let v = if neg { -i } else { i };
        return Some(Box::new(move |p| Arg::Int(p, v)));
    }
    // what is left has a '.' or an exponent (or overflows int64): exec.go `idealConstant`
    // makes it a float64 even when integral (`1.0`, `1e3`), so `eq 1 1.0` is an error
    let f: f64 = lower.parse().ok()?;
    let v = if neg { -f } else { f };
    Some(Box::new(move |p| Arg::Float(p, v)))
}

fn tok_desc(t: &Tok) -> String {
    match t {
        Tok::Close { .. } => "\"}}\"".into(),
        Tok::Open { .. } => "\"{{\"".into(),
        Tok::Eof => "EOF".into(),
        Tok::Keyword(k) => format!("<{k}>"),
        Tok::Ident(i) => format!("<{i}>"),
        Tok::Str(s) => format!("{s:?}"),
        Tok::Number(n) => n.clone(),
        Tok::Field(f) => format!("<.{f}>"),
        Tok::Var(v) => format!("<{v}>"),
        Tok::Pipe => "\"|\"".into(),
        Tok::RParen => "\")\"".into(),
        Tok::LParen => "\"(\"".into(),
        Tok::Comma => "\",\"".into(),
        Tok::Declare => "\":=\"".into(),
        Tok::Assign => "\"=\"".into(),
        Tok::Dot => "<.>".into(),
        t => format!("{t:?}"),
    }
}

/// Parses `src` as Go's `template.New(name).Funcs(…).Parse(src)` does; `is_func` says which
/// function names exist (builtins plus the caller's FuncMap).
///
/// Errors: `template: NAME:LINE: message` (Go's parse error shape), e.g. `unclosed action`,
/// `function "x" not defined`, `undefined variable "$x"`, `unexpected {{end}}`.
pub fn parse(
    name: &str,
    src: &str,
    is_func: &dyn Fn(&str) -> bool,
) -> Result<Tree, GoTemplateError> {
    let toks = Lexer {
        src,
        name,
        pos: 0,
        out: Vec::new(),
        paren: 0,
    }
    .run()?;
    let mut p = Parser {
        src,
        name,
        toks,
        i: 0,
        funcs: is_func,
        vars: vec!["$".into()],
        range_depth: 0,
        depth: 0,
        defines: HashMap::new(),
    };
    let (root, stop) = p.list(true)?;
    match stop {
        Stop::Eof => {}
        Stop::End => {
            let at = p.toks[p.i.saturating_sub(1)].0;
            return Err(p.err(at, "unexpected {{end}}"));
        }
        Stop::Else(at) => return Err(p.err(at, "unexpected {{else}}")),
    }
    Ok(Tree {
        root,
        defines: p.defines,
    })
}
