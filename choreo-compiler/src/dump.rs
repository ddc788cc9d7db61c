//! A stable, readable text dump of the syntax tree and of token lists, for snapshot tests and
//! `choreoc parse --dump` / `choreoc lex`.
//!
//! # Tree format
//!
//! An indented S-expression. A node is `(head L:C …)` where `L:C` is the 1-based line and
//! column (in characters) of the start of the node's span in the original file. Leaves that are
//! only a word with a location are written `word@L:C`:
//!
//! - names are quoted: `"a"@3:14` (also identifier expressions);
//! - keywords and flags that the AST records with a span: `global@3:18`, `async@4:11`,
//!   `block@4:30`, `f32@3:5`, `?@3:9`;
//! - literals are nodes with value and type: `(int 4:7 42 s32)`, `(float 4:7 1.5 f32)`,
//!   `(str 4:7 "a\n")`, `(str 4:7 raw "x")`, `(bool 4:7 true)`;
//! - operators are written by their symbol: `(+ 4:7 lhs rhs)`, `(= 4:3 target value)`,
//!   `(?: …)`; unary minus is `neg`, increments `++x` / `x++`; member forms by their dotted
//!   keyword: `(.at …)`, `(.chunkat …)`, `(.span …)`;
//! - host text, `__device__` declarations and `__cok__` blocks show their range and the first
//!   40 characters of their text, escaped: `(host 1:1-3:5 "#include <x>\n…")`.
//!
//! A node is printed on one line when it is short and holds no block; otherwise its leading
//! atoms stay on the head line and every further child gets its own line, indented by two
//! spaces. Fields the AST does not have (an absent `else`, no storage qualifier, …) are simply
//! not printed. The output depends only on the tree and the file text (no addresses, no maps),
//! so it is byte-for-byte reproducible.
//!
//! Every AST struct is destructured field by field and every enum matched without a wildcard,
//! so a new AST field or variant fails to compile here until the dump shows it.
//!
//! # Example
//!
//! For `#include <x>` followed by
//! `__co__ void f(f32 [N] a) {` / `  a.at(0) = 1.5f + -b * ~c;` / `}`:
//!
//! ```text
//! (file
//!   (host 1:1-2:1 "#include <x>\n")
//!   (co-function 2:1 "f"@2:13
//!     (ret void@2:8)
//!     (param 2:15 (spanned 2:15 f32@2:15 (dims "N"@2:20)) "a"@2:23)
//!     (block 2:26
//!       (assign 3:3
//!         (= 3:3
//!           (.at 3:3 "a"@3:3 (int 3:8 0 s32))
//!           (+ 3:13 (float 3:13 1.5 f32) (* 3:20 (neg 3:20 "b"@3:21) (~ 3:25 "c"@3:26))))))))
//! ```
//!
//! # Token format
//!
//! One token per line: `L:C kind text`, e.g. `3:5 keyword parallel`, `3:14 int 16 s32`,
//! `3:20 float 1.5 f32`, `3:30 str "a\n"`, `3:40 dotted .at`, `4:1 eof`.

use crate::ast::{
    Asm, AsmOperand, Assignment, Attribute, AttributeKind, Block, Call, CallKind, CastTarget,
    CoFunction, DeriveItem, DmaAttr, DmaAttrKind, DmaDest, DmaOp, DmaStmt, EventDecl, EventItem,
    Expr, ExprKind, File, Foreach, ForeachItems, FragDecl, FragOp, Ident, Item, ItupleDecl,
    LevelNote, LevelRef, LoopSuffix, MdspanDecl, MmaExecVariant, MmaKind, MmaStmt, MmaStoreVariant,
    PadConfig, Parallel, ParallelBinder, ParallelItem, Param, ParamDim, ParamShape, Path, Print,
    Range, RangeBounds, ReturnType, ScalarDecl, ScalarInit, ScalarItem, ScalarType, Shape,
    SpannedDecl, SpannedItem, Stmt, StmtKind, Storage, TemplateArg, TileView, Trigger, TypeExpr,
    ViewOp, With, WithBinder, Within,
};
use crate::source::{SourceDb, Span};
use crate::token::{ElemType, FloatLit, IntLit, StrLit, Token, TokenKind};
use std::fmt::Write as _;

/// Dumps a whole file's syntax tree (see the module documentation for the format). The result
/// ends with a newline.
pub fn dump_file(db: &SourceDb, file: &File) -> String {
    let dumper = Dumper { db };
    // `main_definitions` are facts about the host text, not syntax: not dumped.
    let File { items, main_definitions: _, macro_expansions: _ } = file;
    let mut root = Node::new("file").multiline();
    for item in items {
        root.push(dumper.item(item));
    }
    let mut out = String::new();
    Sx::List(root).render(0, &mut out);
    out.push('\n');
    out
}

/// Dumps a token list, one token per line: `L:C kind text` (see the module documentation).
pub fn dump_tokens(db: &SourceDb, tokens: &[Token]) -> String {
    let mut out = String::new();
    for token in tokens {
        let Token { kind, span } = token;
        let _ = write!(out, "{} ", pos(db, *span));
        match kind {
            TokenKind::Ident(name) => {
                let _ = write!(out, "ident {name}");
            }
            TokenKind::IntrinsicIdent(name) => {
                let _ = write!(out, "intrinsic {name}");
            }
            TokenKind::LibIdent(name) => {
                let _ = write!(out, "lib {name}");
            }
            TokenKind::Keyword(k) => {
                let _ = write!(out, "keyword {}", k.as_str());
            }
            TokenKind::ElemType(t) => {
                let _ = write!(out, "elem-type {}", t.as_str());
            }
            TokenKind::Math(m) => {
                let _ = write!(out, "math {}", m.as_str());
            }
            TokenKind::Atomic(a) => {
                let _ = write!(out, "atomic {}", a.as_str());
            }
            TokenKind::Dotted(d) => {
                let _ = write!(out, "dotted {}", d.as_str());
            }
            TokenKind::Punct(p) => {
                let _ = write!(out, "punct {}", p.as_str());
            }
            TokenKind::Int(lit) => {
                let _ = write!(out, "int {}", int_text(lit));
            }
            TokenKind::Float(lit) => {
                let _ = write!(out, "float {}", float_text(lit));
            }
            TokenKind::Str(lit) => {
                let _ = write!(out, "str {}", str_text(lit));
            }
            TokenKind::Error => {
                let _ = write!(out, "error {}", quote(db.snippet(*span)));
            }
            TokenKind::Eof => out.push_str("eof"),
        }
        out.push('\n');
    }
    out
}

/// Lines longer than this (flat) are broken.
const FLAT_WIDTH: usize = 80;
/// Host/device/cok text shown, in characters.
const EXCERPT_CHARS: usize = 40;

/// The intermediate tree that is laid out.
enum Sx {
    Atom(String),
    List(Node),
}

struct Node {
    head: String,
    items: Vec<Sx>,
    /// Always break (functions, blocks): statements are read one per line.
    force_multiline: bool,
}

impl Node {
    fn new(head: impl Into<String>) -> Node {
        Node { head: head.into(), items: Vec::new(), force_multiline: false }
    }

    fn multiline(mut self) -> Node {
        self.force_multiline = true;
        self
    }

    fn push(&mut self, item: impl Into<Sx>) {
        self.items.push(item.into());
    }

    fn with(mut self, item: impl Into<Sx>) -> Node {
        self.push(item);
        self
    }

    fn with_opt(mut self, item: Option<impl Into<Sx>>) -> Node {
        if let Some(item) = item {
            self.push(item);
        }
        self
    }

    fn with_all(mut self, items: impl IntoIterator<Item = impl Into<Sx>>) -> Node {
        self.items.extend(items.into_iter().map(Into::into));
        self
    }
}

impl From<Node> for Sx {
    fn from(node: Node) -> Sx {
        Sx::List(node)
    }
}

impl From<String> for Sx {
    fn from(atom: String) -> Sx {
        Sx::Atom(atom)
    }
}

impl From<&str> for Sx {
    fn from(atom: &str) -> Sx {
        Sx::Atom(atom.to_string())
    }
}

impl Sx {
    /// The length of the one-line form, or `None` if it exceeds `budget` or must break.
    /// Stops early, so laying out a deep tree stays linear.
    fn flat_len(&self, budget: usize) -> Option<usize> {
        match self {
            Sx::Atom(a) => (a.len() <= budget).then_some(a.len()),
            Sx::List(node) => {
                if node.force_multiline {
                    return None;
                }
                let mut len = 2 + node.head.len();
                if len > budget {
                    return None;
                }
                for item in &node.items {
                    len += 1 + item.flat_len(budget - len.min(budget))?;
                    if len > budget {
                        return None;
                    }
                }
                Some(len)
            }
        }
    }

    fn render_flat(&self, out: &mut String) {
        match self {
            Sx::Atom(a) => out.push_str(a),
            Sx::List(node) => {
                out.push('(');
                out.push_str(&node.head);
                for item in &node.items {
                    out.push(' ');
                    item.render_flat(out);
                }
                out.push(')');
            }
        }
    }

    fn render(&self, indent: usize, out: &mut String) {
        let node = match self {
            Sx::List(node) if self.flat_len(FLAT_WIDTH).is_none() => node,
            _ => return self.render_flat(out),
        };
        out.push('(');
        out.push_str(&node.head);
        let leading_atoms = node.items.iter().take_while(|i| matches!(i, Sx::Atom(_))).count();
        let (atoms, rest) = node.items.split_at(leading_atoms);
        for atom in atoms {
            out.push(' ');
            atom.render_flat(out);
        }
        for item in rest {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', indent + 2));
            item.render(indent + 2, out);
        }
        out.push(')');
    }
}

/// 1-based `line:col` of the start of `span`.
fn pos(db: &SourceDb, span: Span) -> String {
    let (line, col) = db.file(span.file).line_col(span.start as usize);
    format!("{line}:{col}")
}

fn quote(text: &str) -> String {
    format!("\"{}\"", escape(text))
}

/// Escapes `"`, `\` and control characters the way Rust string literals write them; every
/// other character (quotes `'`, non-ASCII text) is kept as is.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

fn int_text(lit: &IntLit) -> String {
    let IntLit { value, ty } = lit;
    format!("{value} {}", ty.name())
}

fn float_text(lit: &FloatLit) -> String {
    let FloatLit { value, is_f32 } = lit;
    format!("{value:?} {}", if *is_f32 { "f32" } else { "f64" })
}

fn str_text(lit: &StrLit) -> String {
    let StrLit { value, raw } = lit;
    if *raw { format!("raw {}", quote(value)) } else { quote(value) }
}

struct Dumper<'a> {
    db: &'a SourceDb,
}

impl Dumper<'_> {
    fn pos(&self, span: Span) -> String {
        pos(self.db, span)
    }

    /// A node `(head L:C …)`.
    fn node(&self, head: impl Into<String>, span: Span) -> Node {
        Node::new(head).with(self.pos(span))
    }

    /// A located word `word@L:C`.
    fn word(&self, word: &str, span: Span) -> String {
        format!("{word}@{}", self.pos(span))
    }

    fn ident(&self, ident: &Ident) -> String {
        let Ident { name, span } = ident;
        format!("{}@{}", quote(name), self.pos(*span))
    }

    fn opt_word(&self, word: &str, span: &Option<Span>) -> Option<String> {
        span.map(|s| self.word(word, s))
    }

    fn storage(&self, storage: &Option<(Storage, Span)>) -> Option<String> {
        storage.map(|(s, span)| self.word(s.as_str(), span))
    }

    fn elem(&self, elem: ElemType, span: Span) -> String {
        self.word(elem.as_str(), span)
    }

    fn scalar(&self, ty: ScalarType, span: Span) -> String {
        self.word(ty.as_str(), span)
    }

    fn int(&self, lit: &IntLit, span: Span) -> Node {
        self.node("int", span).with(int_text(lit))
    }

    fn rank(&self, rank: &Option<(u64, Span)>) -> Option<Node> {
        rank.map(|(n, span)| self.node("rank", span).with(n.to_string()))
    }

    /// Host text, device declarations, `__cok__` bodies: range plus an escaped excerpt.
    fn excerpt(&self, head: &str, span: Span) -> Node {
        let (end_line, end_col) = self.db.file(span.file).line_col(span.end as usize);
        let text = self.db.snippet(span);
        let mut shown: String = text.chars().take(EXCERPT_CHARS).collect();
        let truncated = shown.len() < text.len();
        shown = escape(&shown);
        if truncated {
            shown.push('…');
        }
        Node::new(head)
            .with(format!("{}-{end_line}:{end_col}", self.pos(span)))
            .with(format!("\"{shown}\""))
    }

    fn item(&self, item: &Item) -> Node {
        match item {
            Item::Host(span) => self.excerpt("host", *span),
            Item::Device(span) => self.excerpt("device", *span),
            Item::Cok { span, body } => {
                let mut node = self.excerpt("cok", *span);
                node.items.truncate(1);
                node.with(self.excerpt("body", *body))
            }
            Item::CoFunction(f) => self.co_function(f),
        }
    }

    fn co_function(&self, f: &CoFunction) -> Node {
        let CoFunction { span, ret, name, params, body } = f;
        let ret = match ret {
            ReturnType::Void(span) => Sx::Atom(self.word("void", *span)),
            ReturnType::Auto(span) => Sx::Atom(self.word("auto", *span)),
            ReturnType::Type(ty) => self.type_expr(ty),
        };
        self.node("co-function", *span)
            .multiline()
            .with(self.ident(name))
            .with(Node::new("ret").with(ret))
            .with_all(params.iter().map(|p| self.param(p)))
            .with(self.block(body))
    }

    fn param(&self, param: &Param) -> Node {
        let Param { span, global, ty, by_ref, name } = param;
        self.node("param", *span)
            .with_opt(self.opt_word("global", global))
            .with(self.type_expr(ty))
            .with_opt(self.opt_word("&", by_ref))
            .with_opt(name.as_ref().map(|n| self.ident(n)))
    }

    fn type_expr(&self, ty: &TypeExpr) -> Sx {
        match ty {
            TypeExpr::Scalar(t, span) => self.scalar(*t, *span).into(),
            TypeExpr::Stream(span) => self.word("stream", *span).into(),
            TypeExpr::Spanned { span, elem, elem_span, shape } => {
                let shape = match shape {
                    ParamShape::Dims(dims) => {
                        Node::new("dims").with_all(dims.iter().map(|d| self.param_dim(d)))
                    }
                    ParamShape::Rank { rank, span } => {
                        self.node("mdspan-rank", *span).with(rank.to_string())
                    }
                };
                self.node("spanned", *span).with(self.elem(*elem, *elem_span)).with(shape).into()
            }
        }
    }

    fn param_dim(&self, dim: &ParamDim) -> Sx {
        match dim {
            ParamDim::Dynamic(span) => self.word("?", *span).into(),
            ParamDim::Unbounded(span) => self.word("??", *span).into(),
            ParamDim::Symbol(name) => self.ident(name).into(),
            ParamDim::Const(e) => self.expr(e),
        }
    }

    fn block(&self, block: &Block) -> Node {
        let Block { span, stmts, braced } = block;
        let mut node = self.node("block", *span);
        if !braced {
            node.push("unbraced");
        }
        if !stmts.is_empty() {
            node = node.multiline();
        }
        node.with_all(stmts.iter().map(|s| self.stmt(s)))
    }

    fn stmt(&self, stmt: &Stmt) -> Node {
        let Stmt { span, kind } = stmt;
        let span = *span;
        match kind {
            StmtKind::Empty => self.node("empty", span),
            StmtKind::Block(b) => self.block(b),
            StmtKind::MdspanDecl(d) => {
                let MdspanDecl { keyword, rank, name, value } = d;
                self.node("mdspan-decl", span)
                    .with_opt(self.opt_word("mdspan", keyword))
                    .with_opt(self.rank(rank))
                    .with(self.ident(name))
                    .with(self.expr(value))
            }
            StmtKind::ItupleDecl(d) => {
                let ItupleDecl { rank, name, value } = d;
                self.node("ituple-decl", span)
                    .with_opt(self.rank(rank))
                    .with(self.ident(name))
                    .with(self.expr(value))
            }
            StmtKind::ScalarDecl(d) => self.scalar_decl(span, d),
            StmtKind::SpannedDecl(d) => {
                let SpannedDecl { storage, elem, elem_span, shape, items } = d;
                self.node("spanned-decl", span)
                    .with_opt(self.storage(storage))
                    .with(self.elem(*elem, *elem_span))
                    .with(self.shape(shape))
                    .with_all(items.iter().map(|i| self.spanned_item(i)))
            }
            StmtKind::FragDecl(d) => {
                let FragDecl { elem, shape, items } = d;
                self.node("frag-decl", span)
                    .with_opt(elem.map(|(e, s)| self.elem(e, s)))
                    .with_opt(shape.as_ref().map(|s| self.shape(s)))
                    .with_all(items.iter().map(|i| self.spanned_item(i)))
            }
            StmtKind::EventDecl(d) => {
                let EventDecl { storage, arrivals, items } = d;
                self.node("event-decl", span)
                    .with_opt(self.storage(storage))
                    .with_opt(
                        arrivals.map(|(lit, s)| Node::new("arrivals").with(self.int(&lit, s))),
                    )
                    .with_all(items.iter().map(|i| self.event_item(i)))
            }
            StmtKind::Assign(assignments) => {
                self.node("assign", span).with_all(assignments.iter().map(|a| self.assignment(a)))
            }
            StmtKind::Dma(d) => self.dma(span, d),
            StmtKind::DmaAny { name, engine } => {
                self.node("dma-any", span).with(self.ident(name)).with(engine.as_str())
            }
            StmtKind::Mma(m) => self.mma(span, m),
            StmtKind::FragOp(op) => self.frag_op(span, op),
            StmtKind::Wait(targets) => {
                self.node("wait", span).with_all(targets.iter().map(|t| self.expr(t)))
            }
            StmtKind::Trigger(t) => {
                let Trigger { cluster, targets, after } = t;
                let mut node = self
                    .node("trigger", span)
                    .with_opt(self.opt_word("cluster", cluster))
                    .with(Node::new("targets").with_all(targets.iter().map(|t| self.expr(t))));
                if !after.is_empty() {
                    node.push(Node::new("after").with_all(after.iter().map(|e| self.expr(e))));
                }
                node
            }
            StmtKind::Call(call) => self.call(call),
            StmtKind::Assert { cond, message } => {
                self.node("assert", span).with(self.expr(cond)).with(str_text(message))
            }
            StmtKind::Print(p) => {
                let Print { newline, compile_time, args } = p;
                let head = match (newline, compile_time) {
                    (false, false) => "print",
                    (false, true) => "print!",
                    (true, false) => "println",
                    (true, true) => "println!",
                };
                self.node(head, span).with_all(args.iter().map(|a| self.expr(a)))
            }
            StmtKind::Swap { rotate, names } => self
                .node(if *rotate { "rotate" } else { "swap" }, span)
                .with_all(names.iter().map(|n| self.ident(n))),
            StmtKind::Return(value) => {
                self.node("return", span).with_opt(value.as_ref().map(|v| self.expr(v)))
            }
            StmtKind::Sync(storage, storage_span) => {
                self.node("sync", span).with(self.word(storage.as_str(), *storage_span))
            }
            StmtKind::Barrier(level) => self.node("barrier", span).with(self.level_ref(level)),
            StmtKind::Fence { level, storage } => {
                self.node("fence", span).with(self.level_ref(level)).with_opt(self.storage(storage))
            }
            StmtKind::Cpp(text) => self.node("cpp", span).with(str_text(text)),
            StmtKind::Break => self.node("break", span),
            StmtKind::Continue => self.node("continue", span),
            StmtKind::Yield => self.node("yield", span),
            StmtKind::IntrinsicPragma { namespace, name } => {
                let head = if *namespace { "intrinsic-namespace" } else { "intrinsic-prefix" };
                self.node(head, span).with(str_text(name))
            }
            StmtKind::Asm(asm) => self.asm(span, asm),
            StmtKind::Parallel(p) => self.parallel(span, p),
            StmtKind::With(w) => {
                let With { items, swaps, body } = w;
                let mut node =
                    self.node("with", span).with_all(items.iter().map(|i| self.within(i)));
                if !swaps.is_empty() {
                    node.push(
                        Node::new("where").with_all(swaps.iter().map(|(a, b)| {
                            Node::new("<->").with(self.ident(a)).with(self.ident(b))
                        })),
                    );
                }
                node.with(self.block(body))
            }
            StmtKind::Foreach(f) => {
                let Foreach { items, suffixes, body } = f;
                let mut node = self.node("foreach", span);
                match items {
                    ForeachItems::Within(items) => {
                        node = node.with_all(items.iter().map(|i| self.within(i)))
                    }
                    ForeachItems::Ranges(ranges) => {
                        node = node.with_all(ranges.iter().map(|r| self.range(r)))
                    }
                }
                node.with_all(suffixes.iter().map(|s| self.loop_suffix(s))).with(self.block(body))
            }
            StmtKind::Inthreads { is_async, pred, body } => self
                .node("inthreads", span)
                .with_opt(self.opt_word("async", is_async))
                .with(self.expr(pred))
                .with(self.block(body)),
            StmtKind::While { cond, body } => {
                self.node("while", span).with(self.expr(cond)).with(self.block(body))
            }
            StmtKind::If { cond, then_body, else_body } => self
                .node("if", span)
                .with(self.expr(cond))
                .with(self.block(then_body))
                .with_opt(else_body.as_ref().map(|b| Node::new("else").with(self.block(b)))),
            StmtKind::Apply { names, target, body } => self
                .node("apply", span)
                .with(Node::new("names").with_all(names.iter().map(|n| self.ident(n))))
                .with(Node::new("in").with(self.ident(target)))
                .with(self.block(body)),
        }
    }

    fn scalar_decl(&self, span: Span, d: &ScalarDecl) -> Node {
        let ScalarDecl { storage, mutable, ty, items } = d;
        self.node("scalar-decl", span)
            .with_opt(self.storage(storage))
            .with_opt(self.opt_word("mutable", mutable))
            .with_opt(ty.map(|(t, s)| self.scalar(t, s)))
            .with_all(items.iter().map(|item| {
                let ScalarItem { span, name, init } = item;
                let init = init.as_ref().map(|init| match init {
                    ScalarInit::Assign(e) => Node::new("=").with(self.expr(e)),
                    ScalarInit::Brace(e) => Node::new("{}").with(self.expr(e)),
                });
                self.node("item", *span).with(self.ident(name)).with_opt(init)
            }))
    }

    fn shape(&self, shape: &Shape) -> Node {
        match shape {
            Shape::List { span, items } => {
                self.node("shape", *span).with_all(items.iter().map(|e| self.expr(e)))
            }
            Shape::Auto(span) => self.node("shape", *span).with("auto"),
        }
    }

    fn spanned_item(&self, item: &SpannedItem) -> Node {
        let SpannedItem { span, name, array_dims, init } = item;
        let mut node = self.node("item", *span).with(self.ident(name));
        if !array_dims.is_empty() {
            node.push(Node::new("array").with_all(array_dims.iter().map(|e| self.expr(e))));
        }
        node.with_opt(init.as_ref().map(|e| Node::new("{}").with(self.expr(e))))
    }

    fn event_item(&self, item: &EventItem) -> Node {
        let EventItem { span, name, dims, ready } = item;
        let mut node = self.node("item", *span).with(self.ident(name));
        if !dims.is_empty() {
            node.push(Node::new("array").with_all(dims.iter().map(|e| self.expr(e))));
        }
        node.with_opt(self.opt_word("ready", ready))
    }

    fn assignment(&self, a: &Assignment) -> Node {
        let Assignment { span, target, op, value, step } = a;
        let op = match (op, step) {
            (crate::ast::AssignOp::Add, Some(_)) => "++",
            (crate::ast::AssignOp::Sub, Some(_)) => "--",
            _ => op.as_str(),
        };
        self.node(op, *span).with(self.expr(target)).with(self.expr(value))
    }

    fn dma(&self, span: Span, d: &DmaStmt) -> Node {
        let DmaStmt { future, engine, op, op_span, is_async, attrs, src, dst, after } = d;
        let op = match op {
            DmaOp::Copy => self.node("op", *op_span).with("copy"),
            DmaOp::Load => self.node("op", *op_span).with("load"),
            DmaOp::Pad(config) => {
                let PadConfig { low, high, mid, value } = config;
                self.node("op", *op_span)
                    .with("pad")
                    .with(Node::new("low").with_all(low.iter().map(|e| self.expr(e))))
                    .with(Node::new("high").with_all(high.iter().map(|e| self.expr(e))))
                    .with(Node::new("mid").with_all(mid.iter().map(|e| self.expr(e))))
                    .with(Node::new("value").with(self.expr(value)))
            }
            DmaOp::Transp(perm) => self
                .node("op", *op_span)
                .with("transp")
                .with_all(perm.iter().map(|(lit, s)| self.int(lit, *s))),
        };
        let dst = match dst {
            DmaDest::Storage(storage, s) => Sx::Atom(self.word(storage.as_str(), *s)),
            DmaDest::Expr(e) => self.expr(e),
        };
        self.node("dma", span)
            .with_opt(future.as_ref().map(|f| self.ident(f)))
            .with(engine.as_str())
            .with(op)
            .with_opt(self.opt_word("async", is_async))
            .with_all(attrs.iter().map(|a| self.dma_attr(a)))
            .with(Node::new("src").with(self.expr(src)))
            .with(Node::new("dst").with(dst))
            .with_opt(after.as_ref().map(|a| Node::new("after").with(self.ident(a))))
    }

    fn dma_attr(&self, attr: &DmaAttr) -> String {
        let DmaAttr { kind, span } = attr;
        let word = match kind {
            DmaAttrKind::Swizzle(None) => "swizzle".to_string(),
            DmaAttrKind::Swizzle(Some(n)) => format!("swizzle<{n}>"),
            DmaAttrKind::Sparse(None) => "sp".to_string(),
            DmaAttrKind::Sparse(Some((a, b))) => format!("sp<{a}:{b}>"),
            DmaAttrKind::Zfill => "zfill".to_string(),
            DmaAttrKind::Promote(n) => format!("promote<{n}>"),
            DmaAttrKind::Multicast => "multicast".to_string(),
            DmaAttrKind::EvictFirst => "evict_first".to_string(),
            DmaAttrKind::EvictLast => "evict_last".to_string(),
        };
        self.word(&word, *span)
    }

    fn mma(&self, span: Span, m: &MmaStmt) -> Node {
        let MmaStmt { schedule, kind } = m;
        let op = match kind {
            MmaKind::FillNew { name, elem, value } => Node::new("fill-new")
                .with(self.ident(name))
                .with_opt(elem.map(|(e, s)| self.elem(e, s)))
                .with(self.expr(value)),
            MmaKind::Fill { frag, value } => {
                Node::new("fill").with(self.expr(frag)).with(self.expr(value))
            }
            MmaKind::LoadNew { name, frag, swizzle, is_async, src } => Node::new("load-new")
                .with(self.ident(name))
                .with_opt(self.opt_word("frag", frag))
                .with_opt(swizzle.as_ref().map(|a| self.dma_attr(a)))
                .with_opt(self.opt_word("async", is_async))
                .with(self.expr(src)),
            MmaKind::Load { src, frag } => {
                Node::new("load").with(self.expr(src)).with(self.expr(frag))
            }
            MmaKind::Exec { future, layout, variant, acc, a, b } => {
                let variant = match variant {
                    MmaExecVariant::Plain => None,
                    MmaExecVariant::Async(s) => Some(Sx::Atom(self.word("async", *s))),
                    MmaExecVariant::Sparse { span, is_async, metadata } => Some(
                        self.node("sp", *span)
                            .with_opt(self.opt_word("async", is_async))
                            .with_opt(metadata.as_ref().map(|m| self.expr(m)))
                            .into(),
                    ),
                    MmaExecVariant::Scale { span, view, value } => Some(
                        self.node("scale", *span)
                            .with(self.expr(view))
                            .with(self.expr(value))
                            .into(),
                    ),
                };
                Node::new("exec")
                    .with_opt(future.as_ref().map(|f| self.ident(f)))
                    .with(layout.as_str())
                    .with_opt(variant)
                    .with(self.expr(acc))
                    .with(self.expr(a))
                    .with(self.expr(b))
            }
            MmaKind::Store { variant, frag, dst } => {
                let variant = match variant {
                    MmaStoreVariant::Plain => None,
                    MmaStoreVariant::Async(s) => Some(Sx::Atom(self.word("async", *s))),
                    MmaStoreVariant::Transp(s) => Some(Sx::Atom(self.word("transp", *s))),
                    MmaStoreVariant::Mask { span, rows, cols } => Some(
                        self.node("mask", *span)
                            .with(self.expr(rows))
                            .with_opt(cols.as_ref().map(|c| self.expr(c)))
                            .into(),
                    ),
                };
                Node::new("store").with_opt(variant).with(self.expr(frag)).with(self.expr(dst))
            }
            MmaKind::Scale { frag, view, value } => Node::new("scale")
                .with(self.expr(frag))
                .with(self.expr(view))
                .with(self.expr(value)),
        };
        self.node("mma", span).with_opt(schedule.as_ref().map(|a| self.attribute(a))).with(op)
    }

    fn frag_op(&self, span: Span, op: &FragOp) -> Node {
        match op {
            FragOp::ReduceMax { dst, src, axis } => self
                .node("reduce_max", span)
                .with(self.expr(dst))
                .with(self.expr(src))
                .with(self.int(&axis.0, axis.1)),
            FragOp::ReduceSum { dst, src, axis } => self
                .node("reduce_sum", span)
                .with(self.expr(dst))
                .with(self.expr(src))
                .with(self.int(&axis.0, axis.1)),
            FragOp::AllReduceSum(frag) => self.node("all_reduce_sum", span).with(self.expr(frag)),
            FragOp::Copy { dst, src } => {
                self.node("copy", span).with(self.expr(dst)).with(self.expr(src))
            }
        }
    }

    fn call(&self, call: &Call) -> Node {
        let Call { span, kind, template_args, args } = call;
        let callee: Sx = match kind {
            CallKind::Device(path) => Node::new("device").with(self.path(path)).into(),
            CallKind::Intrinsic(path) => Node::new("intrinsic").with(self.path(path)).into(),
            CallKind::Lib(name) => Node::new("lib").with(self.ident(name)).into(),
            CallKind::Atomic(op, s) => self.word(op.as_str(), *s).into(),
            CallKind::BarArrive(s) => self.word("__bar_arrive", *s).into(),
            CallKind::BarSync(s) => self.word("__bar_sync", *s).into(),
        };
        let mut node = self.node("call", *span).with(callee);
        if !template_args.is_empty() {
            node.push(Node::new("template").with_all(template_args.iter().map(|t| match t {
                TemplateArg::Type(ty, s) => Sx::Atom(self.scalar(*ty, *s)),
                TemplateArg::Value(e) => self.expr(e),
            })));
        }
        node.with(Node::new("args").with_all(args.iter().map(|a| self.expr(a))))
    }

    fn path(&self, path: &Path) -> Node {
        let Path { segments, span } = path;
        self.node("path", *span).with_all(segments.iter().map(|s| self.ident(s)))
    }

    fn asm(&self, span: Span, asm: &Asm) -> Node {
        let Asm { volatile, template, outputs, inputs, clobbers } = asm;
        self.node("asm", span)
            .with_opt(self.opt_word("volatile", volatile))
            .with(str_text(template))
            .with(Node::new("outputs").with_all(outputs.iter().map(|o| self.asm_operand(o))))
            .with(Node::new("inputs").with_all(inputs.iter().map(|i| self.asm_operand(i))))
            .with(Node::new("clobbers").with_all(clobbers.iter().map(str_text)))
    }

    fn asm_operand(&self, op: &AsmOperand) -> Node {
        let AsmOperand { span, name, constraint, expr } = op;
        self.node("operand", *span)
            .with_opt(name.as_ref().map(|n| self.ident(n)))
            .with(str_text(constraint))
            .with(self.expr(expr))
    }

    fn attribute(&self, attr: &Attribute) -> Node {
        let Attribute { span, kind } = attr;
        match kind {
            AttributeKind::LaunchBounds(args) => {
                self.node("launch_bounds", *span).with_all(args.iter().map(|a| self.expr(a)))
            }
            AttributeKind::MaxNReg(n) => self.node("maxnreg", *span).with(self.expr(n)),
            AttributeKind::Schedule(tiles) => self.node("schedule", *span).with(
                Node::new("k_tiles").with_all(tiles.iter().map(|(lit, s)| self.int(lit, *s))),
            ),
        }
    }

    fn parallel(&self, span: Span, p: &Parallel) -> Node {
        let Parallel { attrs, is_async, stream, items, body } = p;
        self.node("parallel", span)
            .with_all(attrs.iter().map(|a| self.attribute(a)))
            .with_opt(self.opt_word("async", is_async))
            .with_opt(stream.as_ref().map(|s| Node::new("stream").with(self.ident(s))))
            .with_all(items.iter().map(|i| self.parallel_item(i)))
            .with(self.block(body))
    }

    fn parallel_item(&self, item: &ParallelItem) -> Node {
        let ParallelItem { span, binder, bound, level } = item;
        let mut node = self.node("item", *span);
        match binder {
            ParallelBinder::Anonymous => {}
            ParallelBinder::Name(name) => node.push(self.ident(name)),
            ParallelBinder::Tuple { name, components } => {
                node = node
                    .with_opt(name.as_ref().map(|n| self.ident(n)))
                    .with(Node::new("tuple").with_all(components.iter().map(|c| self.ident(c))))
            }
        }
        node.with(Node::new("by").with(self.expr(bound)))
            .with_opt(level.as_ref().map(|l| self.level_note(l)))
    }

    fn level_ref(&self, level: &LevelRef) -> String {
        let LevelRef { level, span } = level;
        self.word(level.as_str(), *span)
    }

    fn level_note(&self, note: &LevelNote) -> Node {
        let LevelNote { span, level, target, cooperative } = note;
        self.node("level", *span)
            .with(self.level_ref(level))
            .with_opt(target.as_ref().map(|t| Node::new("target").with(self.ident(t))))
            .with_opt(self.opt_word("cooperative", cooperative))
    }

    fn within(&self, within: &Within) -> Node {
        let Within { span, binder, bound } = within;
        let node = self.node("in", *span);
        let node = match binder {
            WithBinder::Name(name) => node.with(self.ident(name)),
            WithBinder::Tuple { name, components } => node
                .with_opt(name.as_ref().map(|n| self.ident(n)))
                .with(Node::new("tuple").with_all(components.iter().map(|c| self.ident(c)))),
        };
        node.with(self.expr(bound))
    }

    fn range(&self, range: &Range) -> Node {
        let Range { span, local, var, bounds } = range;
        self.node("range", *span)
            .with_opt(local.as_ref().map(|l| Node::new("local").with(self.ident(l))))
            .with(self.ident(var))
            .with_opt(bounds.as_ref().map(|b| self.range_bounds(b)))
    }

    fn range_bounds(&self, bounds: &RangeBounds) -> Node {
        let RangeBounds { span, lo, hi, step } = bounds;
        self.node("bounds", *span)
            .with_opt(lo.as_ref().map(|e| Node::new("lo").with(self.expr(e))))
            .with_opt(hi.as_ref().map(|e| Node::new("hi").with(self.expr(e))))
            .with_opt(step.as_ref().map(|(lit, s)| Node::new("step").with(self.int(lit, *s))))
    }

    fn loop_suffix(&self, suffix: &LoopSuffix) -> Node {
        match suffix {
            LoopSuffix::Unroll { span, factor } => {
                self.node("unroll", *span).with_opt(factor.as_ref().map(|(l, s)| self.int(l, *s)))
            }
            LoopSuffix::Vectorize { span, var, width } => {
                self.node("vectorize", *span).with(self.ident(var)).with(self.expr(width))
            }
        }
    }

    fn exprs(&self, exprs: &[Expr]) -> impl Iterator<Item = Sx> {
        exprs.iter().map(|e| self.expr(e))
    }

    fn expr(&self, expr: &Expr) -> Sx {
        let Expr { span, kind } = expr;
        let span = *span;
        let node = match kind {
            ExprKind::Int(lit) => self.int(lit, span),
            ExprKind::Float(lit) => self.node("float", span).with(float_text(lit)),
            ExprKind::Bool(b) => self.node("bool", span).with(b.to_string()),
            ExprKind::Str(lit) => self.node("str", span).with(str_text(lit)),
            ExprKind::Null => self.node("nullptr", span),
            ExprKind::Wildcard => self.node("_", span),
            ExprKind::Ident(ident) => return self.ident(ident).into(),
            ExprKind::Path(path) => self.path(path),
            ExprKind::Mdspan(items) => self.node("mdspan", span).with_all(self.exprs(items)),
            ExprKind::Ituple(items) => self.node("ituple", span).with_all(self.exprs(items)),
            ExprKind::Unary { op, operand } => {
                self.node(op.as_str(), span).with(self.expr(operand))
            }
            ExprKind::Binary { op, lhs, rhs } => {
                self.node(op.as_str(), span).with(self.expr(lhs)).with(self.expr(rhs))
            }
            ExprKind::Ternary { cond, then_value, else_value } => self
                .node("?:", span)
                .with(self.expr(cond))
                .with(self.expr(then_value))
                .with(self.expr(else_value)),
            ExprKind::UpperBound(name) => self.node("upper-bound", span).with(self.ident(name)),
            ExprKind::AddressOf(e) => self.node("address-of", span).with(self.expr(e)),
            ExprKind::Count(e) => self.node("count", span).with(self.expr(e)),
            ExprKind::SizeOf(ty) => self.node("sizeof", span).with(ty.as_str()),
            ExprKind::Cdiv(a, b) => self.node("cdiv", span).with(self.expr(a)).with(self.expr(b)),
            ExprKind::Math { func, args } => {
                self.node(func.as_str(), span).with_all(self.exprs(args))
            }
            ExprKind::Cast { target, operand } => {
                let target: Sx = match target {
                    CastTarget::Type(ty, s) => self.scalar(*ty, *s).into(),
                    CastTarget::Cpp(text, s) => {
                        self.node("cpp-type", *s).with(str_text(text)).into()
                    }
                };
                self.node("cast", span).with(target).with(self.expr(operand))
            }
            ExprKind::Select { index, items } => {
                self.node("select", span).with(self.expr(index)).with_all(self.exprs(items))
            }
            ExprKind::Call(call) => self.call(call),
            ExprKind::DimSelect { base, index } => {
                self.node("dim", span).with(self.expr(base)).with(self.expr(index))
            }
            ExprKind::Index { base, index } => {
                self.node("index", span).with(self.expr(base)).with(self.expr(index))
            }
            ExprKind::Derive { base, ituple, items } => self
                .node(if *ituple { "derive-ituple" } else { "derive" }, span)
                .with(self.expr(base))
                .with_all(items.iter().map(|item| match item {
                    DeriveItem::Dim(e) => Node::new("dim-of").with(self.expr(e)).into(),
                    DeriveItem::Value(e) => self.expr(e),
                })),
            ExprKind::Span(e) => self.node(".span", span).with(self.expr(e)),
            ExprKind::Data(e) => self.node(".data", span).with(self.expr(e)),
            ExprKind::Mdata(e) => self.node(".mdata", span).with(self.expr(e)),
            ExprKind::At { base, indices } => {
                self.node(".at", span).with(self.expr(base)).with_all(self.exprs(indices))
            }
            ExprKind::View { base, op } => self.view(span, base, op),
            ExprKind::BufferMap { base, remap, storage, args } => self
                .node(if *remap { ".remap" } else { ".map" }, span)
                .with(self.expr(base))
                .with(self.word(storage.0.as_str(), storage.1))
                .with_all(self.exprs(args)),
        };
        node.into()
    }

    fn list(&self, head: &str, exprs: &[Expr]) -> Node {
        Node::new(head).with_all(self.exprs(exprs))
    }

    fn view(&self, span: Span, base: &Expr, op: &ViewOp) -> Node {
        let base = self.expr(base);
        match op {
            ViewOp::Chunkat(factors) => {
                self.node(".chunkat", span).with(base).with_all(self.exprs(factors))
            }
            ViewOp::Chunk { factors, at } => self
                .node(".chunk", span)
                .with(base)
                .with(self.list("factors", factors))
                .with(self.list(".at", at)),
            ViewOp::Subspan(tile) => self.tile_view(".subspan", span, base, tile),
            ViewOp::Modspan(tile) => self.tile_view(".modspan", span, base, tile),
            ViewOp::Window { extents, strides, from } => self
                .node(".view", span)
                .with(base)
                .with(self.list("extents", extents))
                .with_opt(strides.as_ref().map(|s| self.list("strides", s)))
                .with_opt(from.as_ref().map(|f| self.list(".from", f))),
            ViewOp::SpanAs(items) => {
                self.node(".span_as", span).with(base).with_all(self.exprs(items))
            }
            ViewOp::Sqz => self.node(".sqz", span).with(base),
        }
    }

    fn tile_view(&self, head: &str, span: Span, base: Sx, tile: &TileView) -> Node {
        let TileView { extents, strides, step, at } = tile;
        self.node(head, span)
            .with(base)
            .with(self.list("extents", extents))
            .with_opt(strides.as_ref().map(|s| self.list("strides", s)))
            .with_opt(step.as_ref().map(|s| self.list(".step", s)))
            .with_opt(at.as_ref().map(|a| self.list(".at", a)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{BinaryOp, UnaryOp};
    use crate::source::FileId;
    use crate::token::IntLitType;

    /// Finds spans of needles in order, so a test can build nodes with real positions.
    struct Spans<'a> {
        src: &'a str,
        file: FileId,
        cursor: usize,
    }

    impl Spans<'_> {
        fn next(&mut self, needle: &str) -> Span {
            let at = self.cursor + self.src[self.cursor..].find(needle).expect(needle);
            self.cursor = at;
            Span::new(self.file, at..at + needle.len())
        }
    }

    fn expr(span: Span, kind: ExprKind) -> Expr {
        Expr { span, kind }
    }

    fn name(span: Span, text: &str) -> Ident {
        Ident { name: text.to_string(), span }
    }

    #[test]
    fn dumps_a_small_file_with_positions_escapes_and_layout() {
        let src = "#include <x>\n__co__ void f(f32 [N] a) {\n  a.at(0) = 1.5f + -b * ~c;\n\
                   }\n// \"quoted\"\ttab and more text that is longer than forty chars\n";
        let mut db = SourceDb::new();
        let file = db.add("d.co", src);
        let mut s = Spans { src, file, cursor: 0 };
        let host = s.next("#include <x>\n");
        let co = s.next("__co__");
        let void = s.next("void");
        let f = s.next("f(");
        let f = Span::new(file, f.range().start..f.range().start + 1);
        let f32_ = s.next("f32");
        let dims = s.next("[N]");
        let n = s.next("N");
        let a = s.next("a)");
        let a = Span::new(file, a.range().start..a.range().start + 1);
        let brace = s.next("{");
        let stmt_a = s.next("a.at");
        let stmt_a = Span::new(file, stmt_a.range().start..stmt_a.range().start + 1);
        let zero = s.next("0");
        let rparen = s.next(")");
        let lit = s.next("1.5f");
        let minus = s.next("-b");
        let b = s.next("b");
        let tilde = s.next("~c");
        let c = s.next("c");
        let semi = s.next(";");
        let close = s.next("}");
        let tail = Span::new(file, close.range().end..src.len());

        let at = expr(
            stmt_a.to(rparen),
            ExprKind::At {
                base: Box::new(expr(stmt_a, ExprKind::Ident(name(stmt_a, "a")))),
                indices: vec![expr(zero, ExprKind::Int(IntLit { value: 0, ty: IntLitType::S32 }))],
            },
        );
        let neg_b = expr(
            minus.to(b),
            ExprKind::Unary {
                op: UnaryOp::Neg,
                operand: Box::new(expr(b, ExprKind::Ident(name(b, "b")))),
            },
        );
        let not_c = expr(
            tilde.to(c),
            ExprKind::Unary {
                op: UnaryOp::BitNot,
                operand: Box::new(expr(c, ExprKind::Ident(name(c, "c")))),
            },
        );
        let product = expr(
            minus.to(c),
            ExprKind::Binary { op: BinaryOp::Mul, lhs: Box::new(neg_b), rhs: Box::new(not_c) },
        );
        let sum = expr(
            lit.to(c),
            ExprKind::Binary {
                op: BinaryOp::Add,
                lhs: Box::new(expr(lit, ExprKind::Float(FloatLit { value: 1.5, is_f32: true }))),
                rhs: Box::new(product),
            },
        );
        let assign = Stmt {
            span: stmt_a.to(semi),
            kind: StmtKind::Assign(vec![Assignment {
                span: stmt_a.to(c),
                target: at,
                op: crate::ast::AssignOp::Assign,
                value: sum,
                step: None,
            }]),
        };
        let function = CoFunction {
            span: co.to(close),
            ret: ReturnType::Void(void),
            name: name(f, "f"),
            params: vec![Param {
                span: f32_.to(a),
                global: None,
                ty: TypeExpr::Spanned {
                    span: f32_.to(dims),
                    elem: ElemType::F32,
                    elem_span: f32_,
                    shape: ParamShape::Dims(vec![ParamDim::Symbol(name(n, "N"))]),
                },
                by_ref: None,
                name: Some(name(a, "a")),
            }],
            body: Block { span: brace.to(close), stmts: vec![assign], braced: true },
        };
        let ast = File {
            items: vec![Item::Host(host), Item::CoFunction(function), Item::Host(tail)],
            main_definitions: Vec::new(),
            macro_expansions: Vec::new(),
        };
        let expected = r##"(file
  (host 1:1-2:1 "#include <x>\n")
  (co-function 2:1 "f"@2:13
    (ret void@2:8)
    (param 2:15 (spanned 2:15 f32@2:15 (dims "N"@2:20)) "a"@2:23)
    (block 2:26
      (assign 3:3
        (= 3:3
          (.at 3:3 "a"@3:3 (int 3:8 0 s32))
          (+ 3:13 (float 3:13 1.5 f32) (* 3:20 (neg 3:20 "b"@3:21) (~ 3:25 "c"@3:26)))))))
  (host 4:2-6:1 "\n// \"quoted\"\ttab and more text that is l…"))
"##;
        let dump = dump_file(&db, &ast);
        assert_eq!(dump, expected, "\n{dump}");
        // Deterministic.
        assert_eq!(dump_file(&db, &ast), dump);
    }

    #[test]
    fn escapes_only_quotes_backslashes_and_control_characters() {
        assert_eq!(
            escape("it's \"q\" \\ \n\r\t\u{1} é✓"),
            "it's \\\"q\\\" \\\\ \\n\\r\\t\\u{1} é✓"
        );
        assert_eq!(quote(""), "\"\"");
    }

    #[test]
    fn short_nodes_stay_on_one_line_and_long_ones_break() {
        let short = Sx::List(Node::new("a").with("1").with(Node::new("b").with("2")));
        let mut out = String::new();
        short.render(0, &mut out);
        assert_eq!(out, "(a 1 (b 2))");

        let long_atom = "x".repeat(50);
        let long = Sx::List(
            Node::new("top")
                .with("1:1")
                .with(Node::new("left").with(long_atom.clone()))
                .with(Node::new("right").with(long_atom.clone())),
        );
        let mut out = String::new();
        long.render(0, &mut out);
        assert_eq!(out, format!("(top 1:1\n  (left {long_atom})\n  (right {long_atom}))"));

        let forced = Sx::List(Node::new("block").multiline().with("1:1").with(Node::new("x")));
        let mut out = String::new();
        forced.render(2, &mut out);
        assert_eq!(out, "(block 1:1\n    (x))");
    }
}
