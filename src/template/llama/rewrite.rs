//! The llama.cpp profile's source rewrite: every binary operator whose llama.cpp semantics
//! differ from minijinja's becomes a call of the function that implements it ([`super::ops`]),
//! and operator chains are re-associated as llama.cpp's parser groups them.
//!
//! `a ~ b` → `__llama_op_concat(a, b)`, `x not in y` → `__llama_op_not_in(x, y)`; `and` / `or`,
//! `//` and `**` stay (llama.cpp's lexer has no `//` / `**`). The template is parsed with
//! minijinja's own parser (the `unstable_machinery` AST, same syntax as the render) and the
//! calls are spliced into the source text at token positions, so the operands keep their exact
//! text (parentheses, filters, calls inside them are rewritten recursively). Grouping follows
//! llama.cpp (`common/jinja/parser.cpp`, build 11434): `+`, `-` and `~` share one precedence
//! level and associate to the left (`parse_additive_expression`; Jinja2 binds `~` tighter, so
//! `a + b ~ c` is `(a + b) ~ c` in llama.cpp, `a + (b ~ c)` in minijinja), comparisons and
//! `in` chain to the left (`parse_comparison_expression`: `a == b == c` is `(a == b) == c`).
//!
//! A chain of more than eight operators of one level is one variadic call
//! (`__llama_op_chain(a, "+", b, "~", c)`, [`super::ops::Op::CHAIN_FUNCTION`]) so that long
//! chains stay within minijinja's parser nesting limit; the walk itself uses no recursion along
//! operator and postfix chains, and stops (no rewrite) past [`MAX_DEPTH`] nested expressions.
//!
//! [`Rewritten::source_offset`] maps a byte offset in the rewritten text back to the template
//! as given, so render errors keep the template's own line and column.

use minijinja::machinery::{Token, ast, parse, tokenize};
use minijinja::syntax::SyntaxConfig;

use super::ops::Op;

/// The rewritten template text and its offset map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    /// The text minijinja compiles.
    pub text: String,
    /// `(offset in text, offset in the source, copied)`: a copied segment maps byte for byte,
    /// an inserted one maps to its insertion point.
    segments: Vec<(usize, usize, bool)>,
}

impl Rewritten {
    /// The byte offset in the template as given for `offset` in [`Self::text`].
    pub fn source_offset(&self, offset: usize) -> usize {
        let i = self.segments.partition_point(|s| s.0 <= offset);
        match i.checked_sub(1).map(|i| self.segments[i]) {
            Some((out, src, true)) => src + (offset - out),
            Some((_, src, false)) => src,
            None => offset,
        }
    }
}

/// The syntax the render compiles with (render.rs `build_env`: trim_blocks, lstrip_blocks).
fn syntax() -> SyntaxConfig {
    SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
        .unwrap_or_default()
}

/// Rewrites `source`'s binary operators into [`Op`] calls. `None`: nothing to rewrite, or the
/// template does not parse (the render then reports minijinja's own syntax error on the
/// source as given), or the rewrite failed ([`try_rewrite`]; the source is then rendered
/// unchanged).
pub fn rewrite(source: &str) -> Option<Rewritten> {
    try_rewrite(source).ok().flatten()
}

/// [`rewrite`] with its failure: `Ok(None)` when the template does not parse or has no
/// operator to rewrite; `Err` when a node boundary is not a token boundary or the rewritten
/// text does not parse (a defect of the rewrite, tested over the corpus).
pub fn try_rewrite(source: &str) -> Result<Option<Rewritten>, String> {
    let Ok(ast) = parse(source, "<template>", syntax()) else {
        return Ok(None);
    };
    let mut toks = Vec::new();
    for t in tokenize(source, false, syntax()) {
        let (tok, span) = t.map_err(|e| e.to_string())?;
        let kind = match tok {
            Token::ParenOpen => Tk::Open,
            Token::ParenClose => Tk::Close,
            Token::Ident("not") => Tk::Not,
            _ => Tk::Other,
        };
        toks.push((kind, span.start_offset as usize, span.end_offset as usize));
    }
    let mut rw = Rw::new(toks);
    rw.stmt(&ast);
    if rw.failed {
        return Err("a node boundary is not a token boundary".into());
    }
    if rw.edits.is_empty() {
        return Ok(None);
    }
    let out = rw.apply(source);
    parse(&out.text, "<template>", syntax())
        .map_err(|e| format!("the rewritten template does not parse: {e}"))?;
    Ok(Some(out))
}

/// The first operator llama.cpp's Jinja lexer does not have: `//` or `**` (it knows only the
/// single-character `*`, `/`, `%`, common/jinja/lexer.h `ordered_mapping_table`, build
/// 11434), as `(byte offset of the second character, that character)`: llama.cpp lexes `//`
/// as two `/`, and its parser (parser.cpp `parse_primary`) stops at the second with
/// "Unexpected token: / of type 22", so llama-server refuses the template. Operators inside
/// strings, raw blocks and comments are text. `None`: none, or the template does not lex.
pub fn unsupported_operator(source: &str) -> Option<(usize, &'static str)> {
    for t in tokenize(source, false, syntax()) {
        let (tok, span) = t.ok()?;
        match tok {
            Token::FloorDiv => return Some((span.start_offset as usize + 1, "/")),
            Token::Pow => return Some((span.start_offset as usize + 1, "*")),
            _ => {}
        }
    }
    None
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tk {
    Open,
    Close,
    Not,
    Other,
}

/// An edit at a source offset: closers first, then operator replacements, then openers (outer
/// before inner, by visiting order).
#[derive(Debug)]
struct Edit {
    pos: usize,
    rank: u8,
    seq: usize,
    delete: usize,
    text: String,
}

struct Rw {
    toks: Vec<(Tk, usize, usize)>,
    by_start: std::collections::HashMap<usize, usize>,
    by_end: std::collections::HashMap<usize, usize>,
    pair: Vec<Option<usize>>,
    edits: Vec<Edit>,
    seq: usize,
    failed: bool,
    depth: usize,
    /// memo of [`Rw::inner`] starts by node address
    starts: std::collections::HashMap<usize, usize>,
}

/// One operand chain to fold left: operands and the operator before each but the first
/// (with its token range).
type Chain<'e, 'a> = (Vec<&'e ast::Expr<'a>>, Vec<(Op, usize, usize)>);

impl Rw {
    fn new(toks: Vec<(Tk, usize, usize)>) -> Rw {
        let mut pair = vec![None; toks.len()];
        let mut stack = Vec::new();
        for (i, t) in toks.iter().enumerate() {
            match t.0 {
                Tk::Open => stack.push(i),
                Tk::Close => {
                    if let Some(j) = stack.pop() {
                        pair[i] = Some(j);
                        pair[j] = Some(i);
                    }
                }
                _ => {}
            }
        }
        Rw {
            by_start: toks.iter().enumerate().map(|(i, t)| (t.1, i)).collect(),
            by_end: toks.iter().enumerate().map(|(i, t)| (t.2, i)).collect(),
            toks,
            pair,
            edits: Vec::new(),
            seq: 0,
            failed: false,
            depth: 0,
            starts: std::collections::HashMap::new(),
        }
    }

    fn apply(mut self, source: &str) -> Rewritten {
        self.edits.sort_by_key(|e| (e.pos, e.rank, e.seq));
        let mut text = String::with_capacity(source.len() + self.edits.len() * 16);
        let mut segments = Vec::new();
        let mut cur = 0;
        for e in &self.edits {
            let pos = e.pos.max(cur);
            segments.push((text.len(), cur, true));
            text.push_str(&source[cur..pos]);
            segments.push((text.len(), pos, false));
            text.push_str(&e.text);
            cur = pos + e.delete;
        }
        segments.push((text.len(), cur, true));
        text.push_str(&source[cur..]);
        Rewritten { text, segments }
    }

    /// Token index starting / ending at a byte offset (a node boundary is a token boundary).
    fn tok_at_start(&mut self, off: usize) -> usize {
        self.by_start.get(&off).copied().unwrap_or_else(|| {
            self.failed = true;
            0
        })
    }

    fn tok_at_end(&mut self, off: usize) -> usize {
        self.by_end.get(&off).copied().unwrap_or_else(|| {
            self.failed = true;
            0
        })
    }

    /// A node's own byte range: minijinja's span end is exact; its start is not for every node
    /// kind (a comparison's span starts at the token before it, a postfix chain's at its last
    /// `.`), so a node with a leftmost operand starts where that operand does (with the
    /// parentheses around that operand). Walks the leftmost spine without recursion (a
    /// template may chain thousands of operators).
    fn inner(&mut self, e: &ast::Expr<'_>) -> (usize, usize) {
        let end = span_of(e).end_offset as usize;
        let key = |x: &ast::Expr<'_>| x as *const ast::Expr<'_> as usize;
        let mut spine = vec![e];
        let mut cur = e;
        let mut known = None;
        loop {
            if let Some(&s) = self.starts.get(&key(cur)) {
                known = Some(s);
                break;
            }
            match self.leftmost(cur) {
                Some(c) => {
                    spine.push(c);
                    cur = c;
                }
                None => break,
            }
        }
        let mut start = known.unwrap_or(span_of(cur).start_offset as usize);
        self.starts.insert(key(cur), start);
        // bottom-up: each node starts where its leftmost child's outer range starts
        for i in (1..spine.len()).rev() {
            let child_end = span_of(spine[i]).end_offset as usize;
            start = self.expand(start, child_end).0;
            self.starts.insert(key(spine[i - 1]), start);
        }
        (start, end)
    }

    /// The child a node's range starts with (`None`: the node's own span start is exact).
    fn leftmost<'e, 'a>(&mut self, e: &'e ast::Expr<'a>) -> Option<&'e ast::Expr<'a>> {
        use ast::Expr as E;
        match e {
            E::Var(_) | E::Const(_) | E::List(_) | E::Map(_) | E::Tuple(_) => None,
            E::UnaryOp(s) => (matches!(s.op, ast::UnaryOpKind::Not)
                && (self.not_in(s).is_some()
                    || !self.starts_with_not(s.span().start_offset as usize)))
            .then_some(&s.expr),
            E::BinOp(s) => Some(&s.left),
            E::Compare(s) => Some(&s.expr),
            E::IfExpr(s) => Some(&s.true_expr),
            E::Filter(s) => s.expr.as_ref(),
            E::Test(s) => Some(&s.expr),
            E::GetAttr(s) => Some(&s.expr),
            E::GetItem(s) => Some(&s.expr),
            E::Slice(s) => Some(&s.expr),
            E::Call(s) => Some(&s.expr),
        }
    }

    fn starts_with_not(&self, off: usize) -> bool {
        self.by_start
            .get(&off)
            .is_some_and(|&i| self.toks[i].0 == Tk::Not)
    }

    /// A node's range with the parentheses that group it (`(a ~ b)` for the operand `a ~ b`):
    /// matching pairs right around it.
    fn outer(&mut self, e: &ast::Expr<'_>) -> (usize, usize) {
        let (s, t) = self.inner(e);
        self.expand(s, t)
    }

    /// A byte range widened by the matching parentheses right around it.
    fn expand(&mut self, s: usize, t: usize) -> (usize, usize) {
        let (mut i, mut j) = (self.tok_at_start(s), self.tok_at_end(t));
        if self.failed {
            return (s, t);
        }
        while i > 0
            && j + 1 < self.toks.len()
            && self.toks[i - 1].0 == Tk::Open
            && self.pair[i - 1] == Some(j + 1)
        {
            i -= 1;
            j += 1;
        }
        (self.toks[i].1, self.toks[j].2)
    }

    fn parenthesized(&mut self, e: &ast::Expr<'_>) -> bool {
        self.outer(e) != self.inner(e)
    }

    /// The token right after an operand: the operator.
    fn op_token(&mut self, left: &ast::Expr<'_>) -> usize {
        let end = self.outer(left).1;
        self.tok_at_end(end) + 1
    }

    /// `x not in y`: minijinja's `not (x in y)` whose `not` stands after `x`. Returns the
    /// token range of `not in`.
    fn not_in(&mut self, u: &ast::UnaryOp<'_>) -> Option<(usize, usize)> {
        let ast::Expr::BinOp(b) = &u.expr else {
            return None;
        };
        if !matches!(b.op, ast::BinOpKind::In) {
            return None;
        }
        let i = self.op_token(&b.left);
        (self.toks.get(i)?.0 == Tk::Not).then_some((i, i + 1))
    }

    fn stmts(&mut self, body: &[ast::Stmt<'_>]) {
        for s in body {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &ast::Stmt<'_>) {
        use ast::Stmt as S;
        match s {
            S::Template(t) => self.stmts(&t.children),
            S::EmitExpr(e) => self.expr(&e.expr),
            S::EmitRaw(_) | S::Continue(_) | S::Break(_) => {}
            S::ForLoop(f) => {
                self.expr(&f.iter);
                if let Some(x) = &f.filter_expr {
                    self.expr(x);
                }
                self.stmts(&f.body);
                self.stmts(&f.else_body);
            }
            S::IfCond(c) => {
                self.expr(&c.expr);
                self.stmts(&c.true_body);
                self.stmts(&c.false_body);
            }
            S::WithBlock(w) => {
                for (_, v) in &w.assignments {
                    self.expr(v);
                }
                self.stmts(&w.body);
            }
            S::Set(x) => self.expr(&x.expr),
            S::SetBlock(x) => {
                if let Some(f) = &x.filter {
                    self.expr(f);
                }
                self.stmts(&x.body);
            }
            S::AutoEscape(a) => {
                self.expr(&a.enabled);
                self.stmts(&a.body);
            }
            S::FilterBlock(f) => {
                self.expr(&f.filter);
                self.stmts(&f.body);
            }
            S::Block(b) => self.stmts(&b.body),
            S::Import(i) => self.expr(&i.expr),
            S::FromImport(i) => self.expr(&i.expr),
            S::Extends(e) => self.expr(&e.name),
            S::Include(i) => self.expr(&i.name),
            S::Macro(m) => {
                for d in &m.defaults {
                    self.expr(d);
                }
                self.stmts(&m.body);
            }
            S::CallBlock(c) => {
                self.call(&c.call);
                for d in &c.macro_decl.defaults {
                    self.expr(d);
                }
                self.stmts(&c.macro_decl.body);
            }
            S::Do(d) => self.call(&d.call),
        }
    }

    fn call(&mut self, c: &ast::Call<'_>) {
        self.expr(&c.expr);
        self.args(&c.args);
    }

    fn args(&mut self, args: &[ast::CallArg<'_>]) {
        for a in args {
            match a {
                ast::CallArg::Pos(e)
                | ast::CallArg::Kwarg(_, e)
                | ast::CallArg::PosSplat(e)
                | ast::CallArg::KwargSplat(e) => self.expr(e),
            }
        }
    }

    fn expr(&mut self, e: &ast::Expr<'_>) {
        if self.failed || self.depth >= MAX_DEPTH {
            self.failed = true;
            return;
        }
        self.depth += 1;
        self.expr_inner(e);
        self.depth -= 1;
    }

    fn expr_inner(&mut self, e: &ast::Expr<'_>) {
        use ast::Expr as E;
        match e {
            E::Var(_) | E::Const(_) => {}
            E::Slice(s) => {
                self.expr(&s.expr);
                for x in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                    self.expr(x);
                }
            }
            E::UnaryOp(u) => {
                if let (Some((i, j)), E::BinOp(b)) = (self.not_in(u), &u.expr) {
                    let chain = (vec![&b.left, &b.right], vec![(Op::NotIn, i, j)]);
                    self.fold(chain);
                } else {
                    self.expr(&u.expr);
                }
            }
            E::BinOp(b) => match op_of(b.op) {
                None => {
                    self.expr(&b.left);
                    self.expr(&b.right);
                }
                Some(op) if level(op).is_some() => {
                    let chain = self.flatten(e);
                    self.fold(chain);
                }
                Some(op) => {
                    let i = self.op_token(&b.left);
                    self.fold((vec![&b.left, &b.right], vec![(op, i, i)]));
                }
            },
            E::Compare(c) => {
                let mut operands = vec![&c.expr];
                let mut ops = Vec::new();
                for o in &c.ops {
                    let i = self.op_token(operands[operands.len() - 1]);
                    let (op, j) = match o.op {
                        ast::CompareOpKind::Eq => (Op::Eq, i),
                        ast::CompareOpKind::Ne => (Op::Ne, i),
                        ast::CompareOpKind::Lt => (Op::Lt, i),
                        ast::CompareOpKind::Lte => (Op::Le, i),
                        ast::CompareOpKind::Gt => (Op::Gt, i),
                        ast::CompareOpKind::Gte => (Op::Ge, i),
                        ast::CompareOpKind::In => (Op::In, i),
                        ast::CompareOpKind::NotIn => (Op::NotIn, i + 1),
                    };
                    ops.push((op, i, j));
                    operands.push(&o.expr);
                }
                self.fold((operands, ops));
            }
            E::IfExpr(x) => {
                self.expr(&x.true_expr);
                self.expr(&x.test_expr);
                if let Some(f) = &x.false_expr {
                    self.expr(f);
                }
            }
            E::Filter(f) => {
                if let Some(x) = &f.expr {
                    self.expr(x);
                }
                self.args(&f.args);
            }
            E::Test(t) => {
                self.expr(&t.expr);
                self.args(&t.args);
            }
            E::GetAttr(g) => self.expr(&g.expr),
            E::GetItem(g) => {
                self.expr(&g.expr);
                self.expr(&g.subscript_expr);
            }
            E::Call(c) => self.call(c),
            E::List(l) => {
                for x in &l.items {
                    self.expr(x);
                }
            }
            E::Tuple(t) => {
                for x in &t.items {
                    self.expr(x);
                }
            }
            E::Map(m) => {
                for (k, v) in m.keys.iter().zip(&m.values) {
                    self.expr(k);
                    self.expr(v);
                }
            }
        }
    }

    /// The operands of a chain of one precedence level ([`level`]: `+ - ~`, or `* / %`) not
    /// grouped by parentheses, in source order, with the operator before each but the first.
    /// Jinja2 binds `~` tighter than `+`/`-`, so minijinja's tree for `a + b ~ c` is
    /// `a + (b ~ c)`: a right operand of the same llama.cpp level is taken apart too. An
    /// in-order walk with an explicit stack (a template may chain thousands of operators).
    fn flatten<'e, 'a>(&mut self, e: &'e ast::Expr<'a>) -> Chain<'e, 'a> {
        enum Item<'e, 'a> {
            Node(&'e ast::Expr<'a>),
            Op(Op, usize),
        }
        let root_level = self.chain_level(e);
        let (mut operands, mut ops) = (Vec::new(), Vec::new());
        let mut stack = vec![Item::Node(e)];
        while let Some(item) = stack.pop() {
            match item {
                Item::Op(op, i) => ops.push((op, i, i)),
                Item::Node(n) => match n {
                    ast::Expr::BinOp(b)
                        if self.chain_level(n) == root_level
                            && (std::ptr::eq(n, e) || !self.parenthesized(n)) =>
                    {
                        let i = self.op_token(&b.left);
                        let op = op_of(b.op).unwrap_or(Op::Add);
                        stack.push(Item::Node(&b.right));
                        stack.push(Item::Op(op, i));
                        stack.push(Item::Node(&b.left));
                    }
                    _ => operands.push(n),
                },
            }
        }
        (operands, ops)
    }

    /// The [`level`] of a rewritten binary operator node whose operands may join a chain.
    fn chain_level(&self, e: &ast::Expr<'_>) -> Option<u8> {
        match e {
            ast::Expr::BinOp(b) => op_of(b.op).and_then(level),
            _ => None,
        }
    }

    /// `o1 op1 o2 … on` → `__llama_op_chain(o1, "op1", o2, …, on)`, folded left to right.
    fn fold_variadic(
        &mut self,
        first: usize,
        operands: Vec<&ast::Expr<'_>>,
        ops: Vec<(Op, usize, usize)>,
    ) {
        // minijinja takes at most 2000 arguments per call: groups of CHAIN_GROUP operators,
        // each group's call the first operand of the next
        let groups = ops.len().div_ceil(CHAIN_GROUP);
        self.edits.push(Edit {
            pos: first,
            rank: 2,
            seq: self.seq,
            delete: 0,
            text: format!("{}(", Op::CHAIN_FUNCTION).repeat(groups),
        });
        for (k, &(op, i, j)) in ops.iter().enumerate() {
            let close = if k > 0 && k % CHAIN_GROUP == 0 {
                ")"
            } else {
                ""
            };
            if !self.replace_tokens(i, j, format!("{close},{:?},", op.symbol())) {
                return;
            }
        }
        let end = self.outer(operands[operands.len() - 1]).1;
        self.edits.push(Edit {
            pos: end,
            rank: 0,
            seq: self.seq,
            delete: 0,
            text: ")".to_owned(),
        });
        for o in operands {
            self.expr(o);
        }
    }

    /// Replaces an operator's source, tokens `i` to `j`, with `text` (an edit of this chain);
    /// false, and the rewrite failed, when the tokens are not known.
    fn replace_tokens(&mut self, i: usize, j: usize, text: String) -> bool {
        let (Some(a), Some(b)) = (self.toks.get(i).copied(), self.toks.get(j).copied()) else {
            self.failed = true;
            return false;
        };
        self.edits.push(Edit {
            pos: a.1,
            rank: 1,
            seq: self.seq,
            delete: b.2 - a.1,
            text,
        });
        true
    }

    /// `o1 op1 o2 op2 o3` → `f2(f1(o1, o2), o3)`: the openers before `o1`, each operator's
    /// tokens replaced by `, `, a `)` after each later operand; then the operands themselves.
    fn fold(&mut self, (operands, ops): Chain<'_, '_>) {
        if operands.len() != ops.len() + 1 {
            self.failed = true;
            return;
        }
        self.seq += 1;
        let first = self.outer(operands[0]).0;
        if ops.len() > NESTED_CHAIN {
            return self.fold_variadic(first, operands, ops);
        }
        let opener: String = ops
            .iter()
            .rev()
            .map(|(op, _, _)| format!("{}(", op.function()))
            .collect();
        self.edits.push(Edit {
            pos: first,
            rank: 2,
            seq: self.seq,
            delete: 0,
            text: opener,
        });
        for (k, &(_, i, j)) in ops.iter().enumerate() {
            if !self.replace_tokens(i, j, ",".to_owned()) {
                return;
            }
            let end = self.outer(operands[k + 1]).1;
            self.edits.push(Edit {
                pos: end,
                rank: 0,
                seq: self.seq,
                delete: 0,
                text: ")".to_owned(),
            });
        }
        for o in operands {
            self.expr(o);
        }
    }
}

/// Chains longer than this become one [`Op::CHAIN_FUNCTION`] call instead of nested calls
/// (minijinja's parser limits nesting to 150 levels).
const NESTED_CHAIN: usize = 8;

/// Operators per [`Op::CHAIN_FUNCTION`] call (minijinja takes at most 2000 arguments).
const CHAIN_GROUP: usize = 900;

/// Expression nesting the rewrite follows; deeper (a hostile template: minijinja's parser
/// bounds nesting except in postfix, filter and operator chains) the template is rendered
/// with minijinja's operators.
const MAX_DEPTH: usize = 400;

/// The precedence level of an operator that chains left to right in both grammars' sense of a
/// level: llama.cpp's `parse_additive_expression` (`+ - ~`) and
/// `parse_multiplicative_expression` (`* / %`).
fn level(op: Op) -> Option<u8> {
    match op {
        Op::Add | Op::Sub | Op::Concat => Some(0),
        Op::Mul | Op::Div | Op::Rem => Some(1),
        _ => None,
    }
}

fn span_of(e: &ast::Expr<'_>) -> minijinja::machinery::Span {
    use ast::Expr as E;
    match e {
        E::Var(s) => s.span(),
        E::Const(s) => s.span(),
        E::Slice(s) => s.span(),
        E::UnaryOp(s) => s.span(),
        E::BinOp(s) => s.span(),
        E::Compare(s) => s.span(),
        E::IfExpr(s) => s.span(),
        E::Filter(s) => s.span(),
        E::Test(s) => s.span(),
        E::GetAttr(s) => s.span(),
        E::GetItem(s) => s.span(),
        E::Call(s) => s.span(),
        E::List(s) => s.span(),
        E::Tuple(s) => s.span(),
        E::Map(s) => s.span(),
    }
}

/// The [`Op`] minijinja's binary operator is rewritten to (`None`: kept).
fn op_of(k: ast::BinOpKind) -> Option<Op> {
    use ast::BinOpKind as K;
    Some(match k {
        K::Eq => Op::Eq,
        K::Ne => Op::Ne,
        K::Lt => Op::Lt,
        K::Lte => Op::Le,
        K::Gt => Op::Gt,
        K::Gte => Op::Ge,
        K::Add => Op::Add,
        K::Sub => Op::Sub,
        K::Mul => Op::Mul,
        K::Div => Op::Div,
        K::Rem => Op::Rem,
        K::Concat => Op::Concat,
        K::In => Op::In,
        K::ScAnd | K::ScOr | K::FloorDiv | K::Pow => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(src: &str) -> String {
        try_rewrite(src)
            .unwrap()
            .map(|r| r.text)
            .unwrap_or_else(|| src.to_owned())
    }

    #[test]
    fn floor_division_and_power_are_refused_as_llama_cpp_refuses_them() {
        // llama-server b11434 with `--chat-template-file` holding `{{ 7 // 2 }}` exits with
        // "common_chat_templates_init: error: Unexpected token: / of type 22" (its lexer has
        // single-character `*` `/` only, common/jinja/lexer.h; parser.cpp parse_primary);
        // outside expressions (strings, raw blocks, comments) the characters are text
        use crate::template::Profile;
        use crate::template::{CompiledTemplate, RenderErrorKind, RenderOptions};
        let opts = RenderOptions {
            profile: Some(Profile::LLAMA_CPP),
            ..Default::default()
        };
        for (src, at, ch) in [
            ("a\n{{ 7 // 2 }}", (2, 7), "/"),
            ("{% set x = 2 ** 3 %}", (1, 15), "*"),
        ] {
            let Err(e) = CompiledTemplate::compile(src, &opts) else {
                panic!("{src}: compiled");
            };
            assert_eq!(e.kind, RenderErrorKind::Syntax, "{e}");
            assert_eq!((e.line, e.column), (Some(at.0), Some(at.1)), "{e}");
            assert!(
                e.message
                    .starts_with(&format!("Unexpected token: {ch} of type 22")),
                "{e}"
            );
        }
        let ok = "{{ '// x ** y' }}{% raw %}{{ 1 // 2 }}{% endraw %}{# 2 ** 3 #}";
        assert!(CompiledTemplate::compile(ok, &opts).is_ok());
        // the transformers profile keeps Jinja2's operators
        let t = CompiledTemplate::compile("{{ 7 // 2 }}", &RenderOptions::default());
        assert!(t.is_ok());
    }

    #[test]
    fn operators_become_calls_with_their_operands_text() {
        assert_eq!(rw("{{ a ~ b }}"), "{{ __llama_op_concat(a , b) }}");
        assert_eq!(
            rw("{% if x not in y %}1{% endif %}"),
            "{% if __llama_op_not_in(x , y) %}1{% endif %}"
        );
        assert_eq!(
            rw("{% if not x in y %}1{% endif %}"),
            "{% if not __llama_op_in(x , y) %}1{% endif %}"
        );
        assert_eq!(rw("{{ f(a~b) }}"), "{{ f(__llama_op_concat(a,b)) }}");
        assert_eq!(
            rw("{{ m.a['b'] ~ c|upper }}"),
            "{{ __llama_op_concat(m.a['b'] , c|upper) }}"
        );
        assert_eq!(
            rw("{{ x is not none and y ~ z }}"),
            "{{ x is not none and __llama_op_concat(y , z) }}"
        );
        // and / or stay minijinja's (same semantics in llama.cpp)
        assert_eq!(rw("{{ a and b or c }}"), "{{ a and b or c }}");
    }

    #[test]
    fn grouping_follows_llama_cpp() {
        // parser.cpp parse_additive_expression: + - ~ one level, left to right
        assert_eq!(
            rw("{{ a + b ~ c }}"),
            "{{ __llama_op_concat(__llama_op_add(a , b) , c) }}"
        );
        assert_eq!(
            rw("{{ a - b ~ c ~ d }}"),
            "{{ __llama_op_concat(__llama_op_concat(__llama_op_sub(a , b) , c) , d) }}"
        );
        // parentheses keep their grouping (and their text)
        assert_eq!(
            rw("{{ a + (b ~ c) }}"),
            "{{ __llama_op_add(a , (__llama_op_concat(b , c))) }}"
        );
        assert_eq!(
            rw("{{ (a ~ b) ~ c }}"),
            "{{ __llama_op_concat((__llama_op_concat(a , b)) , c) }}"
        );
        // multiplicative binds tighter in both grammars
        assert_eq!(
            rw("{{ a + b * c }}"),
            "{{ __llama_op_add(a , __llama_op_mul(b , c)) }}"
        );
        // comparisons chain to the left (parse_comparison_expression)
        assert_eq!(
            rw("{{ a == b != c }}"),
            "{{ __llama_op_ne(__llama_op_eq(a , b) , c) }}"
        );
        assert_eq!(
            rw("{{ a ~ b == c not in d }}"),
            "{{ __llama_op_not_in(__llama_op_eq(__llama_op_concat(a , b) , c) , d) }}"
        );
    }

    #[test]
    fn statements_and_offsets() {
        let src = "{%- set x = ns.a + [1] -%}\n{% for i in xs if i > 0 %}{{ i * 2 }}{% endfor %}";
        let r = try_rewrite(src).unwrap().unwrap();
        assert_eq!(
            r.text,
            "{%- set x = __llama_op_add(ns.a , [1]) -%}\n{% for i in xs if __llama_op_gt(i , 0) %}{{ __llama_op_mul(i , 2) }}{% endfor %}"
        );
        // every copied byte maps back to itself
        let at = r.text.find("[1]").unwrap();
        assert_eq!(r.source_offset(at), src.find("[1]").unwrap());
        let at = r.text.find("xs").unwrap();
        assert_eq!(r.source_offset(at), src.find("xs").unwrap());
        // an inserted call maps to where its first operand starts
        let at = r.text.find("__llama_op_mul").unwrap();
        assert_eq!(r.source_offset(at), src.find("i * 2").unwrap());
        // no operator: nothing to compile differently
        assert_eq!(try_rewrite("{{ a.b }}").unwrap(), None);
        // a template that does not parse is left to the render's own syntax error
        assert_eq!(try_rewrite("{{ a ~ }}").unwrap(), None);
    }

    #[test]
    fn macros_calls_filters_and_literals() {
        assert_eq!(
            rw(
                "{% macro f(a, b=1 + 2) %}{{ a ~ b }}{% endmacro %}{{ f('x' ~ 1, b=[1] + [2]) | trim }}"
            ),
            "{% macro f(a, b=__llama_op_add(1 , 2)) %}{{ __llama_op_concat(a , b) }}{% endmacro %}{{ f(__llama_op_concat('x' , 1), b=__llama_op_add([1] , [2])) | trim }}"
        );
        assert_eq!(
            rw("{{ {'k': a ~ b}[c ~ d] }}{{ (a, b ~ c) }}{{ x if a in b else y ~ z }}"),
            "{{ {'k': __llama_op_concat(a , b)}[__llama_op_concat(c , d)] }}{{ (a, __llama_op_concat(b , c)) }}{{ x if __llama_op_in(a , b) else __llama_op_concat(y , z) }}"
        );
        assert_eq!(
            rw("{{ xs[1:n - 1] }}{{ -a + b }}{{ 'a' 'b' ~ c }}"),
            "{{ xs[1:__llama_op_sub(n , 1)] }}{{ __llama_op_add(-a , b) }}{{ __llama_op_concat('a' 'b' , c) }}"
        );
    }
}

#[cfg(test)]
mod long_chains {
    use super::*;

    #[test]
    fn long_and_deep_chains_stay_rewritten_or_fall_back_without_crashing() {
        // a long chain is one variadic call (no nesting for minijinja's parser to refuse)
        let src = format!("{{{{ 1 + 2 ~ 'x'{} }}}}", " ~ 'y' + 1".repeat(3000));
        let r = try_rewrite(&src).unwrap().expect("rewritten");
        // 6002 operators: 7 calls of at most 900 (minijinja takes 2000 arguments per call)
        let head = format!(
            "{{{{ {}1 ,\"+\", 2 ,\"~\", 'x' ,\"~\", 'y' ,\"+\", 1",
            "__llama_op_chain(".repeat(7)
        );
        assert!(r.text.starts_with(&head), "{}", &r.text[..200]);
        // evaluated left to right as llama.cpp groups it: ((1 + 2) ~ 'x') ~ 'y' + 1 …
        let opts = crate::template::RenderOptions {
            profile: Some(crate::template::Profile::LLAMA_CPP),
            ..Default::default()
        };
        let out = crate::template::CompiledTemplate::compile(&src, &opts)
            .unwrap()
            .render_context(&serde_json::json!({}))
            .unwrap();
        assert_eq!(out, format!("3x{}", "y1".repeat(3000)));
        // nesting deeper than MAX_DEPTH (a postfix chain) is not followed: no rewrite, no crash
        let deep = format!("{{{{ x{} ~ 'a' }}}}", ".y".repeat(5000));
        assert!(try_rewrite(&deep).is_err());
        assert_eq!(rewrite(&deep), None);
    }
}
