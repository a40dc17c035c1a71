//! A port of llama.cpp's PEG parser (common/peg-parser.cpp, b11434 and b11312) as far as
//! llama-server's final parse of a reply uses it: the parse runs with
//! `COMMON_PEG_PARSE_FLAG_LENIENT` (common/chat.cpp:1471), so reaching the end of the input
//! inside a literal, an `until`, a string or a repetition is "need more input", not a failure,
//! and such a result is mapped to a message like a success (chat.cpp:1478 throws only on
//! `result.fail()`). The AST is mapped by [`Mapper`], a port of `common_chat_peg_mapper::map`
//! (common/chat-peg-parser.cpp:315).

/// A parser node's index in its [`Grammar`].
pub type Id = usize;

/// One parser (common/peg-parser.h `common_peg_*_parser`). Rules, schemas and `ac` wrappers are
/// transparent (they add no tag the mapper reads) and are not represented.
#[derive(Debug, Clone)]
pub enum Node {
    Eps,
    End,
    Lit(String),
    Seq(Vec<Id>),
    Choice(Vec<Id>),
    /// child, min, max (`None`: unbounded)
    Rep(Id, u32, Option<u32>),
    And(Id),
    Not(Id),
    Any,
    Space,
    /// ranges, negated, min, max
    Chars(Vec<(char, char)>, bool, u32, Option<u32>),
    /// string content up to the delimiter, escapes read (peg-parser.cpp:600)
    Str(u8),
    Until(Vec<String>),
    Tag(&'static str, Id),
    Atomic(Id),
    /// another node, patched in later (recursive rules: json-value)
    Ref(Id),
}

/// A grammar: the nodes and the root.
#[derive(Debug, Clone, Default)]
pub struct Grammar {
    nodes: Vec<Node>,
    json: Option<Id>,
    pub root: Id,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Ok,
    Fail,
    More,
}

#[derive(Debug, Clone)]
struct Res {
    st: St,
    start: usize,
    end: usize,
    nodes: Vec<usize>,
}

impl Res {
    fn new(st: St, start: usize, end: usize) -> Res {
        Res {
            st,
            start,
            end,
            nodes: Vec::new(),
        }
    }
}

/// One AST node (a tag).
#[derive(Debug, Clone)]
pub struct Ast {
    pub tag: &'static str,
    pub start: usize,
    pub end: usize,
    pub children: Vec<usize>,
}

/// Builder methods (common/peg-parser.cpp `common_peg_parser_builder`).
impl Grammar {
    pub fn add(&mut self, n: Node) -> Id {
        self.nodes.push(n);
        self.nodes.len() - 1
    }
    /// Replaces node `id` (ties a recursive rule's knot).
    pub fn set(&mut self, id: Id, n: Node) {
        self.nodes[id] = n;
    }
    pub fn eps(&mut self) -> Id {
        self.add(Node::Eps)
    }
    pub fn end(&mut self) -> Id {
        self.add(Node::End)
    }
    pub fn lit(&mut self, s: &str) -> Id {
        self.add(Node::Lit(s.to_string()))
    }
    pub fn seq(&mut self, v: &[Id]) -> Id {
        self.add(Node::Seq(v.to_vec()))
    }
    pub fn choice(&mut self, v: &[Id]) -> Id {
        self.add(Node::Choice(v.to_vec()))
    }
    pub fn opt(&mut self, c: Id) -> Id {
        self.add(Node::Rep(c, 0, Some(1)))
    }
    pub fn star(&mut self, c: Id) -> Id {
        self.add(Node::Rep(c, 0, None))
    }
    pub fn plus(&mut self, c: Id) -> Id {
        self.add(Node::Rep(c, 1, None))
    }
    pub fn space(&mut self) -> Id {
        self.add(Node::Space)
    }
    pub fn until(&mut self, d: &[&str]) -> Id {
        self.add(Node::Until(d.iter().map(|s| s.to_string()).collect()))
    }
    pub fn tag(&mut self, t: &'static str, c: Id) -> Id {
        self.add(Node::Tag(t, c))
    }
    pub fn atomic(&mut self, c: Id) -> Id {
        self.add(Node::Atomic(c))
    }
    pub fn peek(&mut self, c: Id) -> Id {
        self.add(Node::And(c))
    }
    pub fn not(&mut self, c: Id) -> Id {
        self.add(Node::Not(c))
    }
    pub fn any(&mut self) -> Id {
        self.add(Node::Any)
    }
    pub fn chars(&mut self, ranges: &[(char, char)], neg: bool, min: u32, max: Option<u32>) -> Id {
        self.add(Node::Chars(ranges.to_vec(), neg, min, max))
    }
    /// `"` string-content `"` (json-string).
    pub fn json_string(&mut self) -> Id {
        let q = self.lit("\"");
        let s = self.add(Node::Str(b'"'));
        self.seq(&[q, s, q])
    }
    /// json-number (peg-parser.cpp:1220).
    pub fn json_number(&mut self) -> Id {
        let minus = self.lit("-");
        let minus = self.opt(minus);
        let zero = self.lit("0");
        let d19 = self.chars(&[('1', '9')], false, 1, Some(1));
        let d09 = self.chars(&[('0', '9')], false, 0, None);
        let nz = self.seq(&[d19, d09]);
        let int = self.choice(&[zero, nz]);
        let dot = self.lit(".");
        let digits = self.chars(&[('0', '9')], false, 1, None);
        let frac = self.seq(&[dot, digits]);
        let frac = self.opt(frac);
        let e1 = self.lit("e");
        let e2 = self.lit("E");
        let e = self.choice(&[e1, e2]);
        let sign = self.chars(&[('+', '+'), ('-', '-')], false, 1, Some(1));
        let sign = self.opt(sign);
        let exp = self.seq(&[e, sign, digits]);
        let exp = self.opt(exp);
        let cont = self.chars(
            &[
                ('0', '9'),
                ('.', '.'),
                ('e', 'e'),
                ('E', 'E'),
                ('+', '+'),
                ('-', '-'),
            ],
            false,
            1,
            Some(1),
        );
        let not = self.not(cont);
        self.seq(&[minus, int, frac, exp, not])
    }
    /// json-value (peg-parser.cpp:1284): object, array, string, number, bool, null.
    pub fn json(&mut self) -> Id {
        if let Some(j) = self.json {
            return j;
        }
        let value = self.add(Node::Eps);
        self.json = Some(value);
        let ws = self.space();
        let (open, close, colon, comma) =
            (self.lit("{"), self.lit("}"), self.lit(":"), self.lit(","));
        let key = self.json_string();
        let member = self.seq(&[key, ws, colon, ws, value]);
        let more = self.seq(&[ws, comma, ws, member]);
        let more = self.star(more);
        let members = self.seq(&[member, more, ws, close]);
        let body = self.choice(&[close, members]);
        let object = self.seq(&[open, ws, body]);
        let (lb, rb) = (self.lit("["), self.lit("]"));
        let more = self.seq(&[ws, comma, ws, value]);
        let more = self.star(more);
        let elements = self.seq(&[value, more, ws, rb]);
        let body = self.choice(&[rb, elements]);
        let array = self.seq(&[lb, ws, body]);
        let string = self.json_string();
        let number = self.json_number();
        let (t, f, n) = (self.lit("true"), self.lit("false"), self.lit("null"));
        let boolean = self.choice(&[t, f]);
        let all = self.choice(&[object, array, string, number, boolean, n]);
        self.nodes[value] = Node::Ref(all);
        value
    }
}

struct Ctx<'a> {
    input: &'a [u8],
    ast: Vec<Ast>,
}

fn char_len(b: u8) -> usize {
    match b {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

impl Grammar {
    /// Parses `input` from the root, leniently; `None` when the parse fails (llama-server's
    /// HTTP 500), else the AST nodes in visiting order.
    pub fn parse(&self, input: &str) -> Option<(Vec<Ast>, Vec<usize>)> {
        let mut ctx = Ctx {
            input: input.as_bytes(),
            ast: Vec::new(),
        };
        let r = self.run(self.root, &mut ctx, 0);
        if r.st == St::Fail {
            return None;
        }
        Some((ctx.ast, r.nodes))
    }

    fn run(&self, id: Id, ctx: &mut Ctx, at: usize) -> Res {
        let len = ctx.input.len();
        match &self.nodes[id] {
            Node::Eps => Res::new(St::Ok, at, at),
            Node::End => Res::new(if at >= len { St::Ok } else { St::Fail }, at, at),
            Node::Lit(s) => {
                let mut pos = at;
                for &b in s.as_bytes() {
                    if pos >= len {
                        return Res::new(St::More, at, pos);
                    }
                    if ctx.input[pos] != b {
                        return Res::new(St::Fail, at, at);
                    }
                    pos += 1;
                }
                Res::new(St::Ok, at, pos)
            }
            Node::Seq(children) => {
                let mut pos = at;
                let mut nodes = Vec::new();
                for &c in children {
                    let r = self.run(c, ctx, pos);
                    if r.st == St::Fail {
                        return Res::new(St::Fail, at, r.end);
                    }
                    nodes.extend(r.nodes);
                    if r.st == St::More {
                        return Res {
                            st: St::More,
                            start: at,
                            end: r.end,
                            nodes,
                        };
                    }
                    pos = r.end;
                }
                Res {
                    st: St::Ok,
                    start: at,
                    end: pos,
                    nodes,
                }
            }
            Node::Choice(children) => {
                for &c in children {
                    let r = self.run(c, ctx, at);
                    if r.st != St::Fail {
                        return r;
                    }
                }
                Res::new(St::Fail, at, at)
            }
            Node::Rep(c, min, max) => self.rep(*c, *min, *max, ctx, at),
            Node::And(c) => {
                let r = self.run(*c, ctx, at);
                Res::new(r.st, at, at)
            }
            Node::Not(c) => {
                let r = self.run(*c, ctx, at);
                match r.st {
                    St::Ok => Res::new(St::Fail, at, at),
                    St::More => Res::new(St::More, at, at),
                    St::Fail => Res::new(St::Ok, at, at),
                }
            }
            Node::Any => {
                if at >= len {
                    Res::new(St::More, at, at)
                } else {
                    Res::new(St::Ok, at, at + char_len(ctx.input[at]))
                }
            }
            Node::Space => {
                let mut pos = at;
                while pos < len && is_space(ctx.input[pos]) {
                    pos += 1;
                }
                Res::new(St::Ok, at, pos)
            }
            Node::Chars(ranges, neg, min, max) => chars(ctx.input, at, ranges, *neg, *min, *max),
            Node::Str(d) => string_content(ctx.input, at, *d),
            Node::Until(delims) => until(ctx.input, at, delims),
            Node::Tag(tag, c) => {
                let r = self.run(*c, ctx, at);
                if r.st == St::Fail {
                    return r;
                }
                ctx.ast.push(Ast {
                    tag,
                    start: r.start.min(len),
                    end: r.end.min(len),
                    children: r.nodes,
                });
                Res {
                    st: r.st,
                    start: r.start,
                    end: r.end,
                    nodes: vec![ctx.ast.len() - 1],
                }
            }
            Node::Atomic(c) => {
                let mut r = self.run(*c, ctx, at);
                if r.st == St::More {
                    r.nodes.clear();
                }
                r
            }
            Node::Ref(c) => self.run(*c, ctx, at),
        }
    }

    fn rep(&self, c: Id, min: u32, max: Option<u32>, ctx: &mut Ctx, at: usize) -> Res {
        let len = ctx.input.len();
        let mut pos = at;
        let mut count = 0;
        let mut nodes = Vec::new();
        while max.is_none_or(|m| count < m) {
            if pos >= len {
                break;
            }
            let r = self.run(c, ctx, pos);
            match r.st {
                St::Ok => {
                    if r.end == pos {
                        break;
                    }
                    nodes.extend(r.nodes);
                    pos = r.end;
                    count += 1;
                }
                St::More => {
                    nodes.extend(r.nodes);
                    return Res {
                        st: St::More,
                        start: at,
                        end: r.end,
                        nodes,
                    };
                }
                St::Fail => break,
            }
        }
        if count < min {
            let st = if pos >= len { St::More } else { St::Fail };
            return Res {
                st,
                start: at,
                end: pos,
                nodes,
            };
        }
        Res {
            st: St::Ok,
            start: at,
            end: pos,
            nodes,
        }
    }
}

fn chars(
    input: &[u8],
    at: usize,
    ranges: &[(char, char)],
    neg: bool,
    min: u32,
    max: Option<u32>,
) -> Res {
    let mut pos = at;
    let mut count = 0;
    while max.is_none_or(|m| count < m) {
        if pos >= input.len() {
            if count >= min {
                return Res::new(St::Ok, at, pos);
            }
            return Res::new(St::More, at, pos);
        }
        let n = char_len(input[pos]).min(input.len() - pos);
        let c = std::str::from_utf8(&input[pos..pos + n])
            .ok()
            .and_then(|s| s.chars().next())
            .unwrap_or('\u{fffd}');
        let hit = ranges.iter().any(|&(a, b)| a <= c && c <= b) != neg;
        if !hit {
            break;
        }
        pos += n;
        count += 1;
    }
    if count < min {
        let st = if pos >= input.len() {
            St::More
        } else {
            St::Fail
        };
        return Res::new(st, at, pos);
    }
    Res::new(St::Ok, at, pos)
}

fn string_content(input: &[u8], at: usize, delim: u8) -> Res {
    let mut pos = at;
    while pos < input.len() {
        let c = input[pos];
        if c == delim {
            return Res::new(St::Ok, at, pos);
        }
        if c == b'\\' {
            pos += 1;
            if pos >= input.len() {
                return Res::new(St::More, at, pos - 1);
            }
            let e = input[pos];
            if e == delim || b"\\/bfnrt".contains(&e) {
                pos += 1;
            } else if e == b'u' {
                let save = pos - 1;
                pos += 1;
                for _ in 0..4 {
                    if pos >= input.len() {
                        return Res::new(St::More, at, save);
                    }
                    if !input[pos].is_ascii_hexdigit() {
                        return Res::new(St::Fail, at, at);
                    }
                    pos += 1;
                }
            } else {
                return Res::new(St::Fail, at, at);
            }
        } else {
            pos += char_len(c);
        }
    }
    Res::new(St::More, at, pos.min(input.len()))
}

fn until(input: &[u8], at: usize, delims: &[String]) -> Res {
    let mut pos = at;
    while pos < input.len() {
        let rest = &input[pos..];
        let hit = delims.iter().filter(|d| !d.is_empty()).any(|d| {
            let d = d.as_bytes();
            rest.starts_with(d) || d.starts_with(rest)
        });
        if hit {
            return Res::new(St::Ok, at, pos);
        }
        pos += char_len(input[pos]);
    }
    Res::new(St::More, at, input.len())
}

/// The message llama.cpp maps the AST to (`common_chat_peg_mapper`,
/// common/chat-peg-parser.cpp:284-460).
#[derive(Debug, Clone, Default)]
pub struct Message {
    pub content: String,
    pub reasoning: String,
    /// (name, arguments as llama.cpp writes them)
    pub calls: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Cur {
    None,
    Pending,
    Done(usize),
}

/// `common_chat_peg_mapper::map` (chat-peg-parser.cpp:315).
#[derive(Default)]
pub struct Mapper {
    pub msg: Message,
    pending: Option<(String, String)>,
    cur: Option<Cur>,
    args_buffer: String,
    arg_count: usize,
    quote_pending: bool,
}

fn escape_inner(s: &str) -> String {
    let e = serde_json::to_string(s).unwrap_or_default();
    e[1..e.len() - 1].to_string()
}

/// Unclosed `{` outside strings (chat-peg-parser.cpp:42 `json_brace_depth`).
fn brace_depth(s: &str) -> i32 {
    let (mut depth, mut in_str, mut esc) = (0, false, false);
    for c in s.chars() {
        if esc {
            esc = false;
            continue;
        }
        if c == '\\' && in_str {
            esc = true;
            continue;
        }
        if c == '"' {
            in_str = !in_str;
            continue;
        }
        if !in_str {
            if c == '{' {
                depth += 1;
            } else if c == '}' {
                depth -= 1;
            }
        }
    }
    depth
}

impl Mapper {
    fn current(&mut self) -> Option<&mut (String, String)> {
        match self.cur? {
            Cur::None => None,
            Cur::Pending => self.pending.as_mut(),
            Cur::Done(i) => self.msg.calls.get_mut(i),
        }
    }

    fn has_current(&self) -> bool {
        matches!(self.cur, Some(Cur::Pending) | Some(Cur::Done(_)))
    }

    fn args_target(&mut self) -> &mut String {
        let named = self.current().is_some_and(|c| !c.0.is_empty());
        if named {
            &mut self.current().unwrap().1
        } else {
            &mut self.args_buffer
        }
    }

    /// Visits the AST from `roots` in llama.cpp's order (pre-order, peg-parser.cpp:188).
    pub fn map_all(&mut self, ast: &[Ast], roots: &[usize], text: &str) {
        for &r in roots {
            self.visit(ast, r, text);
        }
        if self.msg.reasoning.chars().all(|c| " \n\r\t".contains(c)) {
            self.msg.reasoning.clear();
        }
    }

    fn visit(&mut self, ast: &[Ast], id: usize, text: &str) {
        let n = &ast[id];
        self.map(n.tag, text.get(n.start..n.end).unwrap_or(""));
        for &c in &n.children {
            self.visit(ast, c, text);
        }
    }

    fn map(&mut self, tag: &str, text: &str) {
        match tag {
            "reasoning" => self.msg.reasoning.push_str(text),
            "content" => self.msg.content.push_str(text),
            "tool-open" => {
                self.pending = Some(Default::default());
                self.cur = Some(Cur::Pending);
                self.arg_count = 0;
                self.args_buffer.clear();
                self.quote_pending = false;
            }
            "tool-name" if self.has_current() => {
                let buf = std::mem::take(&mut self.args_buffer);
                let c = self.current().unwrap();
                c.0 = text.trim_end().to_string();
                if !buf.is_empty() {
                    c.1 = buf;
                } else if c.1.is_empty() {
                    c.1 = "{".to_string();
                }
                if let Some(p) = self.pending.take() {
                    self.msg.calls.push(p);
                    self.cur = Some(Cur::Done(self.msg.calls.len() - 1));
                }
            }
            "tool-args" if self.has_current() => {
                let t = text.trim_end();
                if t.starts_with('{') {
                    *self.args_target() = t.to_string();
                }
            }
            "tool-arg-open" => self.quote_pending = false,
            "tool-arg-name" if self.has_current() => {
                let mut entry = if self.arg_count > 0 {
                    ",".to_string()
                } else {
                    String::new()
                };
                entry.push_str(&serde_json::to_string(text.trim()).unwrap_or_default());
                entry.push(':');
                self.arg_count += 1;
                let t = self.args_target();
                if t.is_empty() {
                    t.push('{');
                }
                t.push_str(&entry);
            }
            "tool-arg-value" | "tool-arg-string-value" if self.has_current() => {
                let string = tag == "tool-arg-string-value";
                let mut add = String::new();
                if text.is_empty() && string {
                    add.push('"');
                    self.quote_pending = true;
                } else if string {
                    if !self.quote_pending {
                        add.push('"');
                        self.quote_pending = true;
                    }
                    add.push_str(&escape_inner(text));
                } else if !text.is_empty() {
                    add.push_str(&normalize_quotes(text));
                }
                self.args_target().push_str(&add);
            }
            "tool-arg-close" if self.has_current() && self.quote_pending => {
                self.args_target().push('"');
                self.quote_pending = false;
            }
            "tool-close" if self.has_current() => self.close(),
            _ => {}
        }
    }

    fn close(&mut self) {
        let buf = std::mem::take(&mut self.args_buffer);
        let quote = std::mem::take(&mut self.quote_pending);
        let c = self.current().unwrap();
        if c.0.is_empty() && !buf.is_empty() {
            c.1 = buf;
        }
        if quote {
            c.1.push('"');
        }
        for _ in 0..brace_depth(&c.1).max(0) {
            c.1.push('}');
        }
        if let Some(p) = self.pending.take() {
            if !p.0.is_empty() {
                self.msg.calls.push(p);
            }
            self.cur = Some(Cur::None);
        }
    }
}

/// Python-style single-quoted strings to JSON (chat-peg-parser.cpp:84
/// `normalize_quotes_to_json`), and `True` / `False` / `None` to JSON outside strings.
pub fn normalize_quotes(input: &str) -> String {
    let b: Vec<char> = input.chars().collect();
    let mut out = String::new();
    let (mut sq, mut dq) = (false, false);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == '\\' && i + 1 < b.len() {
            let n = b[i + 1];
            if sq && n == '\'' {
                out.push('\'');
            } else {
                out.push(c);
                out.push(n);
            }
            i += 2;
            continue;
        }
        if dq {
            out.push(c);
            if c == '"' {
                dq = false;
            }
        } else if sq {
            if c == '\'' {
                out.push('"');
                sq = false;
            } else if c == '"' {
                out.push_str("\\\"");
            } else {
                out.push(c);
            }
        } else if c == '"' {
            dq = true;
            out.push(c);
        } else if c == '\'' {
            sq = true;
            out.push('"');
        } else {
            let word = |w: &str| {
                let wc: Vec<char> = w.chars().collect();
                b[i..].starts_with(&wc)
                    && (i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
                    && b.get(i + wc.len())
                        .is_none_or(|x| !(x.is_alphanumeric() || *x == '_'))
            };
            if word("True") {
                out.push_str("true");
                i += 4;
                continue;
            } else if word("False") {
                out.push_str("false");
                i += 5;
                continue;
            } else if word("None") {
                out.push_str("null");
                i += 4;
                continue;
            }
            out.push(c);
        }
        i += 1;
    }
    out
}
