//! The syntax tree of a `.co` file (spec §4).
//!
//! Every node carries the [`Span`] of its text in the original file (`span` field). The tree
//! keeps the source structure: sugar is not desugared (a multi-item `parallel a by 2, b by 3` is
//! one [`Parallel`] with two [`ParallelItem`]s; a bare `x = e` is an [`Assignment`] whether it
//! declares or re-assigns — semantic analysis decides, with lexical scoping, spec §4.4/§6).
//! Literal values keep their lexed types; names keep their spans.

use crate::source::Span;
use crate::token::{AtomicOp, ElemType, FloatLit, IntLit, MathFn, StrLit};

/// A whole `.co` file: its top-level regions in source order.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    /// The regions, in source order.
    pub items: Vec<Item>,
    /// The `main` identifiers of the global `main` function definitions in the host text
    /// (see [`crate::preprocess::Preprocessed::main_definitions`]).
    pub main_definitions: Vec<Span>,
    /// The macro expansions inside `__co__` functions: the invocation and the text it became
    /// (for notes on diagnostics at an invocation, see
    /// [`crate::diagnostics::Diagnostics::note_macro_expansions`]).
    pub macro_expansions: Vec<(Span, String)>,
}

/// One top-level region (spec §1.1).
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// Host C++ text, copied verbatim.
    Host(Span),
    /// A parsed `__co__` function.
    CoFunction(CoFunction),
    /// A top-level `__device__` / `__co_device__` declaration, verbatim.
    Device(Span),
    /// A `__cok__ { … }` block: `span` covers all of it, `body` the text between the braces.
    Cok {
        /// The whole block.
        span: Span,
        /// The text between the outer braces.
        body: Span,
    },
}

/// A name with its location.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ident {
    /// The name as written.
    pub name: String,
    /// Where it was written.
    pub span: Span,
}

/// A possibly qualified C++ name `a::b::c` (for `call` and intrinsics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path {
    /// The segments, at least one.
    pub segments: Vec<Ident>,
    /// The whole path.
    pub span: Span,
}

/// A `__co__` function (spec §4.1, §7).
#[derive(Debug, Clone, PartialEq)]
pub struct CoFunction {
    /// From `__co__` through the closing `}`.
    pub span: Span,
    /// The declared return type.
    pub ret: ReturnType,
    /// The function name.
    pub name: Ident,
    /// The parameters in order.
    pub params: Vec<Param>,
    /// The body.
    pub body: Block,
}

/// A function's return type.
#[derive(Debug, Clone, PartialEq)]
pub enum ReturnType {
    /// `void`.
    Void(Span),
    /// `auto` (inferred from `return` statements).
    Auto(Span),
    /// A scalar or spanned type.
    Type(TypeExpr),
}

/// A parameter (spec §7.2): `[global] type [&] [name]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// The whole parameter.
    pub span: Span,
    /// `global` keyword, if written (device-resident data).
    pub global: Option<Span>,
    /// The type.
    pub ty: TypeExpr,
    /// `&` (copy-in/copy-out host data), if written.
    pub by_ref: Option<Span>,
    /// The name; `None` for an unnamed (placeholder) parameter.
    pub name: Option<Ident>,
}

/// A parameter or return type.
#[derive(Debug, Clone, PartialEq)]
pub enum TypeExpr {
    /// A scalar type (`int`, `bool`, or an element type).
    Scalar(ScalarType, Span),
    /// `stream`.
    Stream(Span),
    /// An element type with a shape: `f32 [M, 64]`, `s32 mdspan<2>`, `f16 mdspan[?, 8]`.
    Spanned {
        /// The whole type.
        span: Span,
        /// The element type.
        elem: ElemType,
        /// The element type's span.
        elem_span: Span,
        /// The shape.
        shape: ParamShape,
    },
}

impl TypeExpr {
    /// The span of the whole type.
    pub fn span(&self) -> Span {
        match self {
            TypeExpr::Scalar(_, span) | TypeExpr::Stream(span) => *span,
            TypeExpr::Spanned { span, .. } => *span,
        }
    }
}

/// A scalar type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScalarType {
    /// `int` (s32, immutable when declared, spec §5.2).
    Int,
    /// `bool`.
    Bool,
    /// An element type (`s32`, `f32`, …; mutable when declared).
    Elem(ElemType),
}

impl ScalarType {
    /// The canonical spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ScalarType::Int => "int",
            ScalarType::Bool => "bool",
            ScalarType::Elem(e) => e.as_str(),
        }
    }
}

/// The shape of a parameter or return type.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamShape {
    /// `[d0, d1, …]` (also written `mdspan[d0, …]`).
    Dims(Vec<ParamDim>),
    /// `mdspan<N>`: rank only, every extent anonymous-dynamic.
    Rank {
        /// The rank.
        rank: u64,
        /// The span of `mdspan<N>`.
        span: Span,
    },
}

/// One dimension of a parameter shape (spec §4.1 `pdim`).
#[derive(Debug, Clone, PartialEq)]
pub enum ParamDim {
    /// `?`: an anonymous runtime extent.
    Dynamic(Span),
    /// `??`: an unbounded extent (only for `global` parameters).
    Unbounded(Span),
    /// A symbolic dimension name.
    Symbol(Ident),
    /// A constant integer expression (literals, `+ - * / %`, parentheses).
    Const(Expr),
}

/// A `{ … }` block, or the single statement used as a body (spec §4.2 `body`).
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// The braces, or the single statement.
    pub span: Span,
    /// The statements.
    pub stmts: Vec<Stmt>,
    /// Whether braces were written (`false` for a single-statement body).
    pub braced: bool,
}

/// A statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Stmt {
    /// The whole statement, including its `;`.
    pub span: Span,
    /// What it is.
    pub kind: StmtKind,
}

/// The statement kinds (spec §4.2 and the sections it refers to).
#[derive(Debug, Clone, PartialEq)]
pub enum StmtKind {
    /// `;`
    Empty,
    /// A nested `{ … }` block (a scope of its own).
    Block(Block),
    /// `[mdspan[<N>]] name : shape;`
    MdspanDecl(MdspanDecl),
    /// `ituple[<N>] name = value;`
    ItupleDecl(ItupleDecl),
    /// `[storage] [mutable] [type] a [= v], b …;`
    ScalarDecl(ScalarDecl),
    /// `[storage] T [shape] a[2] {v}, …;`
    SpannedDecl(SpannedDecl),
    /// `frag …` fragment declarations (tier 3).
    FragDecl(FragDecl),
    /// `[storage] event[<N>] e[2] = ready, …;`
    EventDecl(EventDecl),
    /// `a = e, b.at(i) += f, …;` — a bare `name = e` may declare (sema decides, spec §4.4).
    Assign(Vec<Assignment>),
    /// A DMA/TMA copy statement (spec §14, §20.2). Boxed: it is much larger than most
    /// statements.
    Dma(Box<DmaStmt>),
    /// `name = dma.any;` / `name = tma.any;` — a placeholder future.
    DmaAny {
        /// The placeholder's name.
        name: Ident,
        /// `dma` or `tma`.
        engine: DmaEngine,
    },
    /// An MMA statement (tier 3, spec §20.3), with an optional `[[schedule(…)]]`. Boxed: it is
    /// much larger than most statements.
    Mma(Box<MmaStmt>),
    /// `reduce_max(…)`, `reduce_sum(…)`, `all_reduce_sum(…)`, `copy(…)` on fragments.
    FragOp(FragOp),
    /// `wait a, b.at(k), e[1];`
    Wait(Vec<Expr>),
    /// `trigger[.cluster] e, … [after f, …];`
    Trigger(Trigger),
    /// A call statement: `call f(…)`, an intrinsic, `__lib_*`, an atomic, `__bar_*`.
    Call(Call),
    /// `assert(cond, "message");`
    Assert {
        /// The condition.
        cond: Expr,
        /// The message (adjacent strings concatenated).
        message: StrLit,
    },
    /// `print(…)`, `println(…)`, `print!(…)`, `println!(…)`.
    Print(Print),
    /// `swap(a, b)` / `rotate(a, b, c)` (parentheses optional).
    Swap {
        /// `true` for `rotate`.
        rotate: bool,
        /// The names.
        names: Vec<Ident>,
    },
    /// `return [value];`
    Return(Option<Expr>),
    /// `sync.shared;`, `sync.global;`, `sync.local;`
    Sync(Storage, Span),
    /// `sync.barrier : level;`
    Barrier(LevelRef),
    /// `sync.fence : level[<storage>];`
    Fence {
        /// The level.
        level: LevelRef,
        /// The optional storage qualifier.
        storage: Option<(Storage, Span)>,
    },
    /// `__cpp__("…");`
    Cpp(StrLit),
    /// `break;`
    Break,
    /// `continue;`
    Continue,
    /// `yield;`
    Yield,
    /// `__pragma_croq_intrinsic_prefix("p");` / `…_namespace("n");` (spec §17.2).
    IntrinsicPragma {
        /// `true` for a namespace registration.
        namespace: bool,
        /// The registered name.
        name: StrLit,
    },
    /// Inline assembly (spec §17.4).
    Asm(Asm),
    /// `parallel … by …` (spec §8).
    Parallel(Parallel),
    /// `with … in …` (spec §9.1).
    With(With),
    /// `foreach …` (spec §9.1, §9.2).
    Foreach(Foreach),
    /// `inthreads[.async] (pred) body` (spec §10).
    Inthreads {
        /// `.async`, if written.
        is_async: Option<Span>,
        /// The predicate.
        pred: Expr,
        /// The body.
        body: Block,
    },
    /// `while (cond) body`.
    While {
        /// The condition.
        cond: Expr,
        /// The body.
        body: Block,
    },
    /// `if (cond) body [else body]` (the condition may be a `call`).
    If {
        /// The condition.
        cond: Expr,
        /// The then-branch.
        then_body: Block,
        /// The else-branch.
        else_body: Option<Block>,
    },
    /// `apply {i, j} in acc.span body` (tier 3).
    Apply {
        /// The bound names.
        names: Vec<Ident>,
        /// The fragment whose shape is iterated.
        target: Ident,
        /// The body.
        body: Block,
    },
}

/// `[mdspan[<N>]] name : value`.
#[derive(Debug, Clone, PartialEq)]
pub struct MdspanDecl {
    /// `mdspan` keyword, if written.
    pub keyword: Option<Span>,
    /// `<N>`, if written.
    pub rank: Option<(u64, Span)>,
    /// The name.
    pub name: Ident,
    /// The shape expression.
    pub value: Expr,
}

/// `ituple[<N>] name = value`.
#[derive(Debug, Clone, PartialEq)]
pub struct ItupleDecl {
    /// `<N>`, if written.
    pub rank: Option<(u64, Span)>,
    /// The name.
    pub name: Ident,
    /// The value.
    pub value: Expr,
}

/// Storage qualifiers (spec §11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Storage {
    /// `global`
    Global,
    /// `shared`
    Shared,
    /// `local`
    Local,
}

impl Storage {
    /// The keyword.
    pub fn as_str(self) -> &'static str {
        match self {
            Storage::Global => "global",
            Storage::Shared => "shared",
            Storage::Local => "local",
        }
    }
}

/// Scalar declarations.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalarDecl {
    /// Storage qualifier, if written.
    pub storage: Option<(Storage, Span)>,
    /// `mutable`, if written.
    pub mutable: Option<Span>,
    /// The type, if written (`mutable x = 0;` has none).
    pub ty: Option<(ScalarType, Span)>,
    /// The declared names.
    pub items: Vec<ScalarItem>,
}

/// One name of a scalar declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalarItem {
    /// The whole item.
    pub span: Span,
    /// The name.
    pub name: Ident,
    /// The initialiser, if any.
    pub init: Option<ScalarInit>,
}

/// A scalar initialiser.
#[derive(Debug, Clone, PartialEq)]
pub enum ScalarInit {
    /// `= value` (the value may be a call, [`ExprKind::Call`]).
    Assign(Expr),
    /// `{value}`.
    Brace(Expr),
}

/// Spanned-data declarations `[storage] T [shape] a, b[2] {0};`.
#[derive(Debug, Clone, PartialEq)]
pub struct SpannedDecl {
    /// Storage qualifier, if written.
    pub storage: Option<(Storage, Span)>,
    /// The element type.
    pub elem: ElemType,
    /// The element type's span.
    pub elem_span: Span,
    /// The shape.
    pub shape: Shape,
    /// The declared names.
    pub items: Vec<SpannedItem>,
}

/// The shape of a declaration.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// `[item, …]`: shape items (integers, spliced mdspans/ituples, derivations, §13.1).
    List {
        /// The brackets.
        span: Span,
        /// The items.
        items: Vec<Expr>,
    },
    /// `[auto]`: inferred.
    Auto(Span),
}

/// One name of a spanned or fragment declaration: `name[d0][d1] {init}`.
#[derive(Debug, Clone, PartialEq)]
pub struct SpannedItem {
    /// The whole item.
    pub span: Span,
    /// The name.
    pub name: Ident,
    /// Array dimensions (spanned arrays, §11.5).
    pub array_dims: Vec<Expr>,
    /// Uniform initialiser `{v}`.
    pub init: Option<Expr>,
}

/// Fragment declarations: `frag T [shape] a {v};` or `frag[.T] mc[2][3] {v};`.
#[derive(Debug, Clone, PartialEq)]
pub struct FragDecl {
    /// The element type, if written.
    pub elem: Option<(ElemType, Span)>,
    /// The shape, if written.
    pub shape: Option<Shape>,
    /// The declared names.
    pub items: Vec<SpannedItem>,
}

/// Event declarations (spec §15.1, §20.1).
#[derive(Debug, Clone, PartialEq)]
pub struct EventDecl {
    /// Storage qualifier, if written.
    pub storage: Option<(Storage, Span)>,
    /// `event<N>` arrival count, if written.
    pub arrivals: Option<(IntLit, Span)>,
    /// The declared events.
    pub items: Vec<EventItem>,
}

/// One event of a declaration: `name[2] = ready`.
#[derive(Debug, Clone, PartialEq)]
pub struct EventItem {
    /// The whole item.
    pub span: Span,
    /// The name.
    pub name: Ident,
    /// Array dimensions.
    pub dims: Vec<Expr>,
    /// `= ready`, if written.
    pub ready: Option<Span>,
}

/// One assignment of an assignment statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    /// The whole assignment.
    pub span: Span,
    /// The target: an [`ExprKind::Ident`] or an element access [`ExprKind::At`].
    pub target: Expr,
    /// `=` or a compound operator.
    pub op: AssignOp,
    /// The value (may be a call, [`ExprKind::Call`], only for `=`).
    pub value: Expr,
    /// `o++;` / `++o;` / `o--;` / `--o;`: the span of the `++`/`--` (the assignment is then
    /// `o += 1` / `o -= 1`, with a literal `1` at that span).
    pub step: Option<Span>,
}

/// Assignment operators (spec §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AssignOp {
    /// `=`
    Assign,
    /// `+=`
    Add,
    /// `-=`
    Sub,
    /// `*=`
    Mul,
    /// `/=`
    Div,
    /// `%=`
    Rem,
}

impl AssignOp {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            AssignOp::Assign => "=",
            AssignOp::Add => "+=",
            AssignOp::Sub => "-=",
            AssignOp::Mul => "*=",
            AssignOp::Div => "/=",
            AssignOp::Rem => "%=",
        }
    }
}

/// `dma` or `tma`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DmaEngine {
    /// `dma`
    Dma,
    /// `tma` (sm_90+)
    Tma,
}

impl DmaEngine {
    /// The keyword.
    pub fn as_str(self) -> &'static str {
        match self {
            DmaEngine::Dma => "dma",
            DmaEngine::Tma => "tma",
        }
    }
}

/// A DMA/TMA statement: `[f =] dma.copy[.async][attrs] src => dst [after g];`.
#[derive(Debug, Clone, PartialEq)]
pub struct DmaStmt {
    /// The future bound to the result, if any.
    pub future: Option<Ident>,
    /// `dma` or `tma`.
    pub engine: DmaEngine,
    /// The operation and its configuration.
    pub op: DmaOp,
    /// The span of the operation keyword (`.copy`, …).
    pub op_span: Span,
    /// `.async`, if written.
    pub is_async: Option<Span>,
    /// Modifiers after the operation, in source order.
    pub attrs: Vec<DmaAttr>,
    /// The source (a spanned value, view, future, `f.data`, array element).
    pub src: Expr,
    /// The destination.
    pub dst: DmaDest,
    /// `after g`, if written.
    pub after: Option<Ident>,
}

/// DMA operations.
#[derive(Debug, Clone, PartialEq)]
pub enum DmaOp {
    /// `.copy`
    Copy,
    /// `.load` (TMA only)
    Load,
    /// `.pad<{low}, {high}, {mid}, value>`
    Pad(PadConfig),
    /// `.transp<p0, p1, …>`
    Transp(Vec<(IntLit, Span)>),
}

/// The configuration of `dma.pad`.
#[derive(Debug, Clone, PartialEq)]
pub struct PadConfig {
    /// Low padding per dimension.
    pub low: Vec<Expr>,
    /// High padding per dimension.
    pub high: Vec<Expr>,
    /// Interior padding per dimension.
    pub mid: Vec<Expr>,
    /// The padding value.
    pub value: Expr,
}

/// A DMA/TMA/MMA modifier with its span.
#[derive(Debug, Clone, PartialEq)]
pub struct DmaAttr {
    /// The modifier.
    pub kind: DmaAttrKind,
    /// Its span.
    pub span: Span,
}

/// DMA/TMA modifiers (spec §4.6 `dma_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DmaAttrKind {
    /// `.swiz[<N>]` / `.swizzle[<N>]`, N ∈ {32, 64, 128}.
    Swizzle(Option<u32>),
    /// `.sp[<a:b>]`.
    Sparse(Option<(u64, u64)>),
    /// `.zfill`
    Zfill,
    /// `.promote<N>`, N ∈ {64, 128, 256}.
    Promote(u32),
    /// `.multicast`
    Multicast,
    /// `.evict_first`
    EvictFirst,
    /// `.evict_last`
    EvictLast,
}

/// A DMA destination.
#[derive(Debug, Clone, PartialEq)]
pub enum DmaDest {
    /// `=> shared` / `=> local` / `=> global`: a fresh buffer.
    Storage(Storage, Span),
    /// Existing data, a view, or `select(…)`.
    Expr(Expr),
}

/// An MMA statement with its optional `[[schedule(k_tiles(…))]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct MmaStmt {
    /// `[[schedule(k_tiles(…))]]`, if written.
    pub schedule: Option<Attribute>,
    /// The operation.
    pub kind: MmaKind,
}

/// MMA operations (spec §4.6 MMA family).
#[derive(Debug, Clone, PartialEq)]
pub enum MmaKind {
    /// `acc = mma.fill[.T] value;`
    FillNew {
        /// The accumulator name.
        name: Ident,
        /// `.T`, if written.
        elem: Option<(ElemType, Span)>,
        /// The fill value.
        value: Expr,
    },
    /// `mma.fill acc, value;`
    Fill {
        /// The fragment.
        frag: Expr,
        /// The fill value.
        value: Expr,
    },
    /// `a = mma.load[.frag][.swiz<N>][.async] src;`
    LoadNew {
        /// The fragment name.
        name: Ident,
        /// `.frag`, if written.
        frag: Option<Span>,
        /// `.swiz…`, if written.
        swizzle: Option<DmaAttr>,
        /// `.async`, if written.
        is_async: Option<Span>,
        /// The source view.
        src: Expr,
    },
    /// `mma.load src, frag;`
    Load {
        /// The source view.
        src: Expr,
        /// The destination fragment.
        frag: Expr,
    },
    /// `[q =] mma.<layout>[.async|.sp|.scale] acc, a, b[, …];`
    Exec {
        /// The operation future (`.async` form), if any.
        future: Option<Ident>,
        /// Operand layouts.
        layout: MmaLayout,
        /// Plain, async, sparse or block-scaled.
        variant: MmaExecVariant,
        /// The accumulator.
        acc: Expr,
        /// Operand A.
        a: Expr,
        /// Operand B.
        b: Expr,
    },
    /// `mma.store[.async|.transp|.mask] frag, dst[, row[, col]];`
    Store {
        /// Which store.
        variant: MmaStoreVariant,
        /// The fragment.
        frag: Expr,
        /// The destination view.
        dst: Expr,
    },
    /// `mma.scale frag, view, value;`
    Scale {
        /// The fragment.
        frag: Expr,
        /// The scale view.
        view: Expr,
        /// The value.
        value: Expr,
    },
}

/// MMA operand layouts `.row.col` etc.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MmaLayout {
    /// `.row.col`
    RowCol,
    /// `.row.row`
    RowRow,
    /// `.col.col`
    ColCol,
    /// `.col.row`
    ColRow,
}

impl MmaLayout {
    /// The layout as written.
    pub fn as_str(self) -> &'static str {
        match self {
            MmaLayout::RowCol => "row.col",
            MmaLayout::RowRow => "row.row",
            MmaLayout::ColCol => "col.col",
            MmaLayout::ColRow => "col.row",
        }
    }
}

/// Variants of an MMA execution.
#[derive(Debug, Clone, PartialEq)]
pub enum MmaExecVariant {
    /// Synchronous.
    Plain,
    /// `.async` (needs a future name).
    Async(Span),
    /// `.sp[.async]`: sparse, with an optional metadata fragment.
    Sparse {
        /// The `.sp` keyword.
        span: Span,
        /// `.async` after `.sp` (needs a future name), if written.
        is_async: Option<Span>,
        /// The metadata fragment.
        metadata: Option<Expr>,
    },
    /// `.scale`: block-scaled, with the scale view and value.
    Scale {
        /// The `.scale` keyword.
        span: Span,
        /// The scale-factor view.
        view: Expr,
        /// The scale value.
        value: Expr,
    },
}

/// Variants of `mma.store`.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // only ever stored inside `MmaKind::Store`, itself boxed
pub enum MmaStoreVariant {
    /// `mma.store`
    Plain,
    /// `mma.store.async`
    Async(Span),
    /// `mma.store.transp`
    Transp(Span),
    /// `mma.store.mask frag, dst, rows[, cols]`
    Mask {
        /// The `.mask` keyword.
        span: Span,
        /// The row guard.
        rows: Expr,
        /// The column guard.
        cols: Option<Expr>,
    },
}

/// Fragment operations (spec §20.3).
#[derive(Debug, Clone, PartialEq)]
pub enum FragOp {
    /// `reduce_max(dst, src, axis)`
    ReduceMax {
        /// Destination fragment.
        dst: Expr,
        /// Source fragment.
        src: Expr,
        /// The axis literal.
        axis: (IntLit, Span),
    },
    /// `reduce_sum(dst, src, axis)`
    ReduceSum {
        /// Destination fragment.
        dst: Expr,
        /// Source fragment.
        src: Expr,
        /// The axis literal.
        axis: (IntLit, Span),
    },
    /// `all_reduce_sum(frag)`
    AllReduceSum(Expr),
    /// `copy(dst, src)`
    Copy {
        /// Destination fragment.
        dst: Expr,
        /// Source fragment.
        src: Expr,
    },
}

/// `trigger[.cluster] targets [after futures]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Trigger {
    /// `.cluster`, if written.
    pub cluster: Option<Span>,
    /// The events (identifiers, `e[i]…`, `e.at(k)`).
    pub targets: Vec<Expr>,
    /// The futures after `after`.
    pub after: Vec<Expr>,
}

/// A `print`/`println` statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Print {
    /// `println` rather than `print`.
    pub newline: bool,
    /// `!`: evaluated by the translator at compile time.
    pub compile_time: bool,
    /// The arguments (strings are [`ExprKind::Str`]).
    pub args: Vec<Expr>,
}

/// A call-like construct (spec §4.8 `call_stmt`).
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The whole call.
    pub span: Span,
    /// What is called.
    pub kind: CallKind,
    /// Template arguments (`call` and intrinsics only).
    pub template_args: Vec<TemplateArg>,
    /// The arguments.
    pub args: Vec<Expr>,
}

/// The callee of a [`Call`].
#[derive(Debug, Clone, PartialEq)]
pub enum CallKind {
    /// `call name…` of a device function.
    Device(Path),
    /// A registered intrinsic (no `call` keyword).
    Intrinsic(Path),
    /// `__lib_*`.
    Lib(Ident),
    /// `__atomic_*`.
    Atomic(AtomicOp, Span),
    /// `__bar_arrive`.
    BarArrive(Span),
    /// `__bar_sync`.
    BarSync(Span),
}

/// A template argument (spec §4.8 `targ`).
#[derive(Debug, Clone, PartialEq)]
pub enum TemplateArg {
    /// A scalar type keyword.
    Type(ScalarType, Span),
    /// A value: integers, names, `x.span`, `#v`, arithmetic, `cdiv`, `x(i)`.
    Value(Expr),
}

/// Inline assembly (spec §17.4).
#[derive(Debug, Clone, PartialEq)]
pub struct Asm {
    /// `volatile`, if written.
    pub volatile: Option<Span>,
    /// The template.
    pub template: StrLit,
    /// Output operands.
    pub outputs: Vec<AsmOperand>,
    /// Input operands.
    pub inputs: Vec<AsmOperand>,
    /// Clobbers.
    pub clobbers: Vec<StrLit>,
}

/// An asm operand `[name] "constraint"(expr)`.
#[derive(Debug, Clone, PartialEq)]
pub struct AsmOperand {
    /// The whole operand.
    pub span: Span,
    /// `[name]`, if written.
    pub name: Option<Ident>,
    /// The constraint string.
    pub constraint: StrLit,
    /// The operand expression.
    pub expr: Expr,
}

/// An attribute `[[name(…)]]` (spec §8.8, §20.3).
#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    /// From `[[` through `]]`.
    pub span: Span,
    /// Which attribute.
    pub kind: AttributeKind,
}

/// Attributes.
#[derive(Debug, Clone, PartialEq)]
pub enum AttributeKind {
    /// `[[launch_bounds(max_threads[, min_blocks[, max_cluster]])]]` (`_` allowed).
    LaunchBounds(Vec<Expr>),
    /// `[[maxnreg(n)]]`
    MaxNReg(Expr),
    /// `[[schedule(k_tiles(i, j, …))]]`
    Schedule(Vec<(IntLit, Span)>),
}

/// `parallel …` (spec §4.7, §8).
#[derive(Debug, Clone, PartialEq)]
pub struct Parallel {
    /// `[[launch_bounds]]` / `[[maxnreg]]` attributes (apply to the outermost item).
    pub attrs: Vec<Attribute>,
    /// `.async`, if written (outermost item).
    pub is_async: Option<Span>,
    /// `<s>` stream binding, if written (outermost item).
    pub stream: Option<Ident>,
    /// The level items, outermost first: `a by 2, b by 3` is sugar for nested blocks.
    pub items: Vec<ParallelItem>,
    /// The body of the innermost item.
    pub body: Block,
}

/// One level of a parallel-by: binder, bound, optional level note.
#[derive(Debug, Clone, PartialEq)]
pub struct ParallelItem {
    /// The whole item.
    pub span: Span,
    /// The bound names.
    pub binder: ParallelBinder,
    /// The bound expression after `by`; for a tuple binder always an [`ExprKind::Mdspan`].
    pub bound: Expr,
    /// `: level…`, if written.
    pub level: Option<LevelNote>,
}

/// The binder of a parallel-by item.
#[derive(Debug, Clone, PartialEq)]
pub enum ParallelBinder {
    /// `by N` (no name).
    Anonymous,
    /// `p by N`: a bounded integer.
    Name(Ident),
    /// `[t =] {x, y} by [a, b]`.
    Tuple {
        /// The tuple's name, if written.
        name: Option<Ident>,
        /// The component names.
        components: Vec<Ident>,
    },
}

/// Parallel levels (spec §8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// `device`
    Device,
    /// `cluster`
    Cluster,
    /// `block`
    Block,
    /// `group-4`
    Group4,
    /// `group`
    Group,
    /// `thread`
    Thread,
    /// `term`
    Term,
}

impl Level {
    /// The keyword.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Device => "device",
            Level::Cluster => "cluster",
            Level::Block => "block",
            Level::Group4 => "group-4",
            Level::Group => "group",
            Level::Thread => "thread",
            Level::Term => "term",
        }
    }
}

/// A level keyword with its span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelRef {
    /// The level.
    pub level: Level,
    /// The keyword's span.
    pub span: Span,
}

/// `: level[(target)][<cooperative>]`.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelNote {
    /// From `:` on.
    pub span: Span,
    /// The level.
    pub level: LevelRef,
    /// `(cpu)` after `device`.
    pub target: Option<Ident>,
    /// `<cooperative>`, if written.
    pub cooperative: Option<Span>,
}

/// `with … [where a <-> b, …] body`.
#[derive(Debug, Clone, PartialEq)]
pub struct With {
    /// The binders.
    pub items: Vec<Within>,
    /// `where a <-> b` pairs (parsed; not supported by the CUDA backend).
    pub swaps: Vec<(Ident, Ident)>,
    /// The body.
    pub body: Block,
}

/// One `x in shape` binder of `with`/`foreach`.
#[derive(Debug, Clone, PartialEq)]
pub struct Within {
    /// The whole binder.
    pub span: Span,
    /// The names.
    pub binder: WithBinder,
    /// The `in` operand (int or mdspan expression).
    pub bound: Expr,
}

/// Names of a `with` binder (spec §5.4).
#[derive(Debug, Clone, PartialEq)]
pub enum WithBinder {
    /// `k in …`: a bounded ituple.
    Name(Ident),
    /// `[idx =] {i, j} in …`: bounded integers (and a bounded ituple `idx`).
    Tuple {
        /// The tuple's name, if written.
        name: Option<Ident>,
        /// The components.
        components: Vec<Ident>,
    },
}

/// `foreach … [: suffixes] body`.
#[derive(Debug, Clone, PartialEq)]
pub struct Foreach {
    /// What is iterated.
    pub items: ForeachItems,
    /// `: unroll(n)`, `: vectorize(v, w)`.
    pub suffixes: Vec<LoopSuffix>,
    /// The body.
    pub body: Block,
}

/// The two forms of `foreach`.
#[derive(Debug, Clone, PartialEq)]
pub enum ForeachItems {
    /// `foreach k in 16, …` — sugar for `with … { foreach … }`.
    Within(Vec<Within>),
    /// `foreach i, j(1:-1), c = k(2:)` — existing `with` variables.
    Ranges(Vec<Range>),
}

/// One iterated variable with an optional range (spec §9.2).
#[derive(Debug, Clone, PartialEq)]
pub struct Range {
    /// The whole item.
    pub span: Span,
    /// `c =` fresh local name, if written.
    pub local: Option<Ident>,
    /// The bounded variable iterated.
    pub var: Ident,
    /// `(lo:hi:step)`, if written.
    pub bounds: Option<RangeBounds>,
}

/// `(lo:hi:step)`.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeBounds {
    /// The parentheses.
    pub span: Span,
    /// Start offset.
    pub lo: Option<Expr>,
    /// End offset (relative to the bound).
    pub hi: Option<Expr>,
    /// Step literal.
    pub step: Option<(IntLit, Span)>,
}

/// Loop suffix attributes.
#[derive(Debug, Clone, PartialEq)]
pub enum LoopSuffix {
    /// `unroll` / `unroll(n)`.
    Unroll {
        /// The suffix.
        span: Span,
        /// The factor, if written.
        factor: Option<(IntLit, Span)>,
    },
    /// `vectorize(v, w)`.
    Vectorize {
        /// The suffix.
        span: Span,
        /// The variable.
        var: Ident,
        /// The width.
        width: Expr,
    },
}

/// An expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    /// The whole expression.
    pub span: Span,
    /// What it is.
    pub kind: ExprKind,
}

/// Expression kinds (spec §4.5, §12, §13).
#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// An integer literal; negative when written `-N` (the parser folds the minus).
    Int(IntLit),
    /// A floating literal (`inf` is an infinite f32; `-1.5f` folded).
    Float(FloatLit),
    /// `true` / `false`.
    Bool(bool),
    /// A string literal (adjacent strings concatenated); only meaningful as an argument.
    Str(StrLit),
    /// `nullptr`.
    Null,
    /// `_` (wildcard in view operations, `launch_bounds`).
    Wildcard,
    /// A name.
    Ident(Ident),
    /// `a::b` (only in template arguments).
    Path(Path),
    /// `[a, b, …]`: an mdspan literal / concatenation (a shape list).
    Mdspan(Vec<Expr>),
    /// `{a, b, …}`: an ituple literal / concatenation.
    Ituple(Vec<Expr>),
    /// A unary operator.
    Unary {
        /// The operator.
        op: UnaryOp,
        /// The operand.
        operand: Box<Expr>,
    },
    /// A binary operator.
    Binary {
        /// The operator.
        op: BinaryOp,
        /// Left operand.
        lhs: Box<Expr>,
        /// Right operand.
        rhs: Box<Expr>,
    },
    /// `c ? a : b`.
    Ternary {
        /// The condition.
        cond: Box<Expr>,
        /// Value if true.
        then_value: Box<Expr>,
        /// Value if false.
        else_value: Box<Expr>,
    },
    /// `#v`: upper bound of a bounded variable.
    UpperBound(Ident),
    /// `&x` / `&a.at(i)`: an address (print/call/asm arguments only).
    AddressOf(Box<Expr>),
    /// `|size_expr|`: element count.
    Count(Box<Expr>),
    /// `|T|`: element size in bytes.
    SizeOf(ScalarType),
    /// `cdiv(a, b)`.
    Cdiv(Box<Expr>, Box<Expr>),
    /// A math built-in call.
    Math {
        /// The function.
        func: MathFn,
        /// The arguments.
        args: Vec<Expr>,
    },
    /// `__to<T>(e)` / `__to<"C++ type">(e)`.
    Cast {
        /// The target type.
        target: CastTarget,
        /// The operand (may be `nullptr` for C++ casts).
        operand: Box<Expr>,
    },
    /// `select(index, a, b, …)`.
    Select {
        /// The runtime index.
        index: Box<Expr>,
        /// The candidates.
        items: Vec<Expr>,
    },
    /// A call (`call f(…)`, intrinsic, `__lib_*`, atomic, `__bar_*`); the parser allows it only
    /// as a whole initialiser/assigned value or `if` condition (spec §17.1).
    Call(Box<Call>),
    /// `x(i)`: dimension / component selection (also `v(-1)` get-ith).
    DimSelect {
        /// The selected-from value.
        base: Box<Expr>,
        /// The index.
        index: Box<Expr>,
    },
    /// `a[i]`: array element (spanned arrays, event arrays).
    Index {
        /// The array.
        base: Box<Expr>,
        /// The index.
        index: Box<Expr>,
    },
    /// `x[(1), (0), 4]`, `x.span[…]` (mdspan derivation) or `t{(2), (0)}` (ituple derivation).
    Derive {
        /// The base value.
        base: Box<Expr>,
        /// `true` for the `{…}` (ituple) form.
        ituple: bool,
        /// The items.
        items: Vec<DeriveItem>,
    },
    /// `x.span`.
    Span(Box<Expr>),
    /// `x.data`.
    Data(Box<Expr>),
    /// `x.mdata`.
    Mdata(Box<Expr>),
    /// `x.at(i, j)`: element access.
    At {
        /// The spanned value.
        base: Box<Expr>,
        /// The indices.
        indices: Vec<Expr>,
    },
    /// A view operation (spec §13.3), chained left to right.
    View {
        /// The viewed value.
        base: Box<Expr>,
        /// The operation.
        op: ViewOp,
    },
    /// `x.map<storage>(offset, size)` / `x.remap<…>(…)`: buffer mapping (parsed so that sema
    /// can reject it on CUDA, spec §20.4).
    BufferMap {
        /// The mapped value.
        base: Box<Expr>,
        /// `true` for `.remap`.
        remap: bool,
        /// The storage.
        storage: (Storage, Span),
        /// Offset and size.
        args: Vec<Expr>,
    },
}

/// One item of a derivation list.
#[derive(Debug, Clone, PartialEq)]
pub enum DeriveItem {
    /// `(k)`: dimension/component `k` of the base (literal or name).
    Dim(Box<Expr>),
    /// Any other value, used as is.
    Value(Expr),
}

/// The target of `__to`.
#[derive(Debug, Clone, PartialEq)]
pub enum CastTarget {
    /// `__to<T>`.
    Type(ScalarType, Span),
    /// `__to<"C++ type">`: a verbatim C cast.
    Cpp(StrLit, Span),
}

/// Unary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `!` (level 11)
    Not,
    /// `~` (level 14)
    BitNot,
    /// `-` (level 14, ours: ⚠ §4.5)
    Neg,
    /// prefix `++`
    PreInc,
    /// prefix `--`
    PreDec,
    /// postfix `++`
    PostInc,
    /// postfix `--`
    PostDec,
}

impl UnaryOp {
    /// The operator as written (postfix forms marked `x++`).
    pub fn as_str(self) -> &'static str {
        match self {
            UnaryOp::Not => "!",
            UnaryOp::BitNot => "~",
            UnaryOp::Neg => "neg",
            UnaryOp::PreInc => "++x",
            UnaryOp::PreDec => "--x",
            UnaryOp::PostInc => "x++",
            UnaryOp::PostDec => "x--",
        }
    }
}

/// Binary operators with the precedence levels of spec §4.5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `||` (2)
    Or,
    /// `&&` (3)
    And,
    /// `==` (4)
    Eq,
    /// `!=` (4)
    Ne,
    /// `<` (5)
    Lt,
    /// `<=` (5)
    Le,
    /// `>` (5)
    Gt,
    /// `>=` (5)
    Ge,
    /// `<<` (6)
    Shl,
    /// `>>` (6)
    Shr,
    /// `+` (7)
    Add,
    /// `-` (7)
    Sub,
    /// `*` (8)
    Mul,
    /// `/` (8)
    Div,
    /// `%` (8)
    Rem,
    /// `#+` (9)
    BoundedAdd,
    /// `#-` (9)
    BoundedSub,
    /// `#*` (10)
    BoundedMul,
    /// `#/` (10)
    BoundedDiv,
    /// `#%` (10)
    BoundedRem,
    /// `&` (12)
    BitAnd,
    /// `^` (12)
    BitXor,
    /// `|` (12)
    BitOr,
    /// `#` composition (13)
    Compose,
}

impl BinaryOp {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            BinaryOp::Or => "||",
            BinaryOp::And => "&&",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Shl => "<<",
            BinaryOp::Shr => ">>",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
            BinaryOp::BoundedAdd => "#+",
            BinaryOp::BoundedSub => "#-",
            BinaryOp::BoundedMul => "#*",
            BinaryOp::BoundedDiv => "#/",
            BinaryOp::BoundedRem => "#%",
            BinaryOp::BitAnd => "&",
            BinaryOp::BitXor => "^",
            BinaryOp::BitOr => "|",
            BinaryOp::Compose => "#",
        }
    }

    /// The precedence level of spec §4.5 (higher binds tighter).
    pub fn level(self) -> u8 {
        match self {
            BinaryOp::Or => 2,
            BinaryOp::And => 3,
            BinaryOp::Eq | BinaryOp::Ne => 4,
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => 5,
            BinaryOp::Shl | BinaryOp::Shr => 6,
            BinaryOp::Add | BinaryOp::Sub => 7,
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => 8,
            BinaryOp::BoundedAdd | BinaryOp::BoundedSub => 9,
            BinaryOp::BoundedMul | BinaryOp::BoundedDiv | BinaryOp::BoundedRem => 10,
            BinaryOp::BitAnd | BinaryOp::BitXor | BinaryOp::BitOr => 12,
            BinaryOp::Compose => 13,
        }
    }
}

/// View operations (spec §13.3).
#[derive(Debug, Clone, PartialEq)]
pub enum ViewOp {
    /// `.chunkat(f0, f1, …)`
    Chunkat(Vec<Expr>),
    /// `.chunk(f…).at(i…)`
    Chunk {
        /// The factors.
        factors: Vec<Expr>,
        /// The tile indices.
        at: Vec<Expr>,
    },
    /// `.subspan(e… [: strides…])[.step(s…)][.at(i…)]`
    Subspan(TileView),
    /// `.modspan(e… [: strides…])[.step(s…)][.at(i…)]`
    Modspan(TileView),
    /// `.view(e… [: strides…])[.from(o…)]`
    Window {
        /// The extents.
        extents: Vec<Expr>,
        /// Explicit strides after `:`, if written.
        strides: Option<Vec<Expr>>,
        /// The origin, if written.
        from: Option<Vec<Expr>>,
    },
    /// `.span_as([d…])` / `.span_as(d…)`: the arguments as written (shape items).
    SpanAs(Vec<Expr>),
    /// `.sqz()`
    Sqz,
}

/// The operands of `.subspan` / `.modspan`.
#[derive(Debug, Clone, PartialEq)]
pub struct TileView {
    /// The tile extents.
    pub extents: Vec<Expr>,
    /// Explicit strides after `:`, if written.
    pub strides: Option<Vec<Expr>>,
    /// `.step(…)`, if written.
    pub step: Option<Vec<Expr>>,
    /// `.at(…)`, if written.
    pub at: Option<Vec<Expr>>,
}
