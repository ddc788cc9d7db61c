//! The checked program ("HIR"): the output of semantic analysis (`sema::check`) and the input of
//! lowering and code generation (`lower`, `emit::cuda`, `emit::rust`).
//!
//! Everything here has been resolved and checked: names are ids into per-function tables,
//! every expression carries its type, `auto` return types are resolved, parallel-by levels are
//! inferred and filled (spec §8.3), `with`/`foreach` are desugared into explicit loops, ituples
//! and mdspans are expanded into their components (index lists and shapes are always flat),
//! and the read/write sets of every buffer are known.
//!
//! Contract with the later stages (stable: items are added, never renamed):
//! - A [`Program`] is only handed to `lower` when `sema::check` reported no error. With errors,
//!   the program is still built (for tools), but may contain [`Ty::Error`] / [`HExprKind::Error`].
//! - Ids ([`ParamId`], [`VarId`], [`SymId`]) index the vectors of the enclosing [`Function`]
//!   (`params`, `locals`, `sym_dims`).
//! - Integer values that are shape extents (symbolic dimensions, `?` extents, `.span(i)`,
//!   `|x|`) have type `s32` in expressions; the emitter presents them as `int` even though the
//!   runtime keeps them as `size_t`/`unsigned`.
//! - Statements inside a [`ParallelTree`] body are device code; all others are host code.

pub(crate) mod arith;
pub mod frag;
pub mod mma;
mod same;
pub mod visit;

pub(crate) use same::same_expr;

use crate::source::Span;

// ---------------------------------------------------------------------------------------------
// Program and items
// ---------------------------------------------------------------------------------------------

/// A checked `.co` file.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    /// The top-level regions, in source order.
    pub items: Vec<Item>,
    /// The `main` identifiers of the global `main` function definitions in the host text
    /// (what a library build renames; see [`crate::preprocess::Preprocessed::main_definitions`]).
    pub main_definitions: Vec<Span>,
}

impl Program {
    /// The checked `__co__` functions, in source order.
    pub fn functions(&self) -> impl Iterator<Item = &Function> {
        self.items.iter().filter_map(|item| match item {
            Item::Function(f) => Some(f),
            _ => None,
        })
    }
}

/// One top-level region.
// A file has a handful of items; boxing `Function` would only complicate every match.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// Host C++ text, copied verbatim (the span covers the original text).
    Host(Span),
    /// A top-level `__device__` / `__co_device__` declaration, copied verbatim.
    Device(Span),
    /// A `__cok__ { … }` block: `span` is all of it, `body` the text between the braces (this
    /// text is what gets emitted).
    Cok {
        /// The whole block.
        span: Span,
        /// The text between the outer braces.
        body: Span,
    },
    /// A checked `__co__` function.
    Function(Function),
}

// ---------------------------------------------------------------------------------------------
// Ids
// ---------------------------------------------------------------------------------------------

/// Index of a parameter in [`Function::params`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ParamId(pub u32);

/// Index of a local in [`Function::locals`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub u32);

/// Index of a symbolic dimension in [`Function::sym_dims`] (which is sorted by name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SymId(pub u32);

/// A kernel launch of a function — a device-entry parallel-by, or a host-level DMA that is a
/// kernel of its own ([`KernelOrigin`]): its number in source order, from 0
/// ([`ParallelTree::id`]; [`Function::kernel_count`] of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelId(pub u32);

/// An element access (`x.at(…)` read or written) of a function: its number in source order,
/// from 0 ([`Function::access_count`] of them). Lowering decides per access whether it is
/// proven in bounds or guarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AccessId(pub u32);

/// An intra-block level of a kernel: its number within the kernel, in pre-order (an enclosing
/// level before the levels nested in it), from 0 ([`InnerParallel::id`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LevelId(pub u32);

/// An event of a function (spec-tier3 §2): its number in declaration order
/// ([`Function::events`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId(pub u32);

impl EventId {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl ParamId {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl VarId {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl SymId {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl KernelId {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl LevelId {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl AccessId {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

// ---------------------------------------------------------------------------------------------
// Functions, parameters, symbols, locals
// ---------------------------------------------------------------------------------------------

/// A checked `__co__` function (spec §7).
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// The function name (also the C++ wrapper's and the Rust wrapper's name).
    pub name: String,
    /// From `__co__` through the closing `}`.
    pub span: Span,
    /// `file:line:col` of the `__co__` keyword (for doc comments of generated wrappers).
    pub location: String,
    /// The signature as written, whitespace collapsed to single spaces, e.g.
    /// `__co__ f32 [N, 64] scale(f32 [N, 64] x, f32 k, stream s)` (for doc comments).
    pub co_signature: String,
    /// The return type, with `auto` resolved (to [`ReturnTy::Void`] when there is no `return`).
    pub ret: ReturnTy,
    /// The parameters in declaration order.
    pub params: Vec<Param>,
    /// The symbolic dimensions, sorted by name (runtime-abi §4: kernel argument order and the
    /// order of the `auto& N = x.shape()[i]` bindings).
    pub sym_dims: Vec<SymDim>,
    /// Checks evaluated at function entry, in order, after binding the symbolic dimensions and
    /// before any device copy (spec §7.4 step 3): static parameter extents, symbol consistency,
    /// positivity of hoistable parallel bounds and derived extents, dynamic thread counts.
    pub entry_checks: Vec<Check>,
    /// Every local of the function (scalars, global buffers, bounded variables), indexed by
    /// [`VarId`], in declaration order.
    pub locals: Vec<Local>,
    /// Whether any parallel-by is `.async` (spec §8.5): the Rust wrapper returns a `Pending`.
    pub is_async: bool,
    /// The stream parameters that some launch is bound to, sorted, without duplicates.
    pub streams: Vec<ParamId>,
    /// Whether the function contains any parallel-by or host-level DMA anywhere (spec §7.4
    /// step 4): exactly then the wrapper makes device copies of non-`global` spanned parameters
    /// (and copies `&` parameters back after each launch).
    pub has_parallel: bool,
    /// Number of kernel launches (device-entry parallel-bys and host-level DMAs made kernels),
    /// i.e. 1 + the largest [`ParallelTree::id`].
    pub kernel_count: u32,
    /// Number of element accesses, i.e. 1 + the largest [`AccessId`].
    pub access_count: u32,
    /// The shared events declared in its kernels (spec-tier3 §2), indexed by [`EventId`].
    pub events: Vec<Event>,
    /// The MMA fragments of its kernels (spec-tier3 §5), indexed by [`mma::FragId`].
    pub frags: Vec<mma::Frag>,
    /// The body (host code; kernels are [`StmtKind::Parallel`] statements).
    pub body: Vec<Stmt>,
    /// The C++ the function runs that the compiler cannot check (`call`, intrinsics,
    /// `__cpp__`, inline assembly), in source order: where, and what. Calling such a function
    /// is only sound when that code is.
    pub foreign_code: Vec<(Span, String)>,
}

impl Function {
    /// The parameter behind an id.
    pub fn param(&self, id: ParamId) -> Option<&Param> {
        self.params.get(id.index())
    }

    /// The local behind an id.
    pub fn local(&self, id: VarId) -> Option<&Local> {
        self.locals.get(id.index())
    }

    /// The symbolic dimension behind an id.
    pub fn sym(&self, id: SymId) -> Option<&SymDim> {
        self.sym_dims.get(id.index())
    }

    /// The name of a buffer as written (a parameter's or a declared buffer's; `?` for an id
    /// that is not in the function).
    pub fn buffer_name(&self, buffer: BufferRef) -> &str {
        match buffer {
            BufferRef::Param(p) => self.param(p).map_or("?", |p| p.name.as_str()),
            BufferRef::Local(v) => self.local(v).map_or("?", |l| l.name.as_str()),
        }
    }
}

/// The return type of a function (spec §7.3).
#[derive(Debug, Clone, PartialEq)]
pub enum ReturnTy {
    /// No value.
    Void,
    /// A scalar, returned by value.
    Scalar(ElemTy),
    /// Spanned data, returned as an owning host buffer (`spanned_data<T, R>` /
    /// `choreo::HostTensor<T, R>`). A declared `?` is rejected, but when the type comes from
    /// the returned value (`auto`, `T mdspan<N>`) dims may be [`Dim::Dynamic`] extents of a
    /// parameter or [`Dim::Expr`] extents of a returned global buffer.
    Spanned {
        /// The element type.
        elem: ElemTy,
        /// The extents.
        dims: Vec<Dim>,
    },
}

/// A parameter (spec §7.2).
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// The name; a generated `anon_N` (N counting unnamed parameters from 0) when unnamed.
    pub name: String,
    /// Whether the name was written in the source.
    pub named: bool,
    /// The whole parameter.
    pub span: Span,
    /// What kind of parameter it is.
    pub kind: ParamKind,
    /// The element type of a spanned parameter (`HostIn`, `HostInOut`, `Global`); `None` for
    /// scalars and streams.
    pub elem: Option<ElemTy>,
    /// The extents of a spanned parameter (empty for scalars and streams). A `?`/`??` extent is
    /// `Dim::Dynamic { param: <this>, dim }`; a name is `Dim::Sym`; a constant is `Dim::Const`.
    pub dims: Vec<Dim>,
    /// Which dims were written `??` (unbounded; only `global` parameters). Same length as `dims`.
    pub unbounded: Vec<bool>,
    /// How the function body uses the data (spanned parameters only; all `false` otherwise).
    pub access: Access,
}

impl Param {
    /// Whether this is spanned data (host or global).
    pub fn is_spanned(&self) -> bool {
        matches!(self.kind, ParamKind::HostIn | ParamKind::HostInOut | ParamKind::Global)
    }

    /// The type of the parameter as a value.
    pub fn ty(&self) -> Ty {
        match (&self.kind, self.elem) {
            (ParamKind::Scalar(t), _) => Ty::Scalar(*t),
            (ParamKind::Stream, _) => Ty::Stream,
            (ParamKind::Global, Some(elem)) => {
                Ty::Spanned(SpannedTy { elem, dims: self.dims.clone(), storage: Storage::Global })
            }
            (_, Some(elem)) => {
                Ty::Spanned(SpannedTy { elem, dims: self.dims.clone(), storage: Storage::Host })
            }
            (_, None) => Ty::Error,
        }
    }
}

/// Parameter kinds (spec §7.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// `T [d…] x`: host data, copied to the device at entry (when `has_parallel`), never back.
    HostIn,
    /// `T [d…] &x`: host data, copied in at entry and back after every launch.
    HostInOut,
    /// `global T [d…] x`: device-resident data, used in place.
    Global,
    /// A scalar by value (`int` is `S32`).
    Scalar(ElemTy),
    /// `stream s`: only binds launches; never passed to kernels.
    Stream,
}

/// Read/write use of a buffer over the whole function (host and kernels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access {
    /// Some element is read (`x.at(…)` as a value, or the left side of a compound assignment),
    /// or the whole buffer is returned.
    pub read: bool,
    /// Some element is written (element assignment or compound assignment).
    pub write: bool,
}

/// A symbolic dimension (spec §7.2): a runtime extent named in parameter shapes.
#[derive(Debug, Clone, PartialEq)]
pub struct SymDim {
    /// The name.
    pub name: String,
    /// Where it is bound: the first parameter (left to right) and its dim that mention it.
    pub bound_from: (ParamId, u32),
    /// The span of that first mention.
    pub span: Span,
}

/// A local of a function.
#[derive(Debug, Clone, PartialEq)]
pub struct Local {
    /// The name as written (locals of different scopes may share a name; ids are unique).
    pub name: String,
    /// The declaration's (or binder's) span.
    pub span: Span,
    /// The type. Scalars: `Scalar`/`BoundedInt`; global buffers: `Spanned` with
    /// `Storage::Global`; bounded variables: `BoundedInt` (components, parallel/with indices) or
    /// `BoundedItuple` (tuple names; never emitted: uses are expanded to the components).
    pub ty: Ty,
    /// Where the value lives.
    pub place: LocalPlace,
    /// Whether the program may assign it (`mutable`, element-typed scalars). Bounded `with`
    /// indices are not user-mutable but are assigned by [`StmtKind::For`]; the emitter must
    /// declare those non-const too (see [`LocalOrigin::WithIndex`]).
    pub mutable: bool,
    /// How it was introduced.
    pub origin: LocalOrigin,
    /// For global buffers: how the function uses the data (like [`Param::access`]).
    pub access: Access,
    /// For global buffers: whether some `return` returns it (the host wrapper then also creates
    /// a host `spanned_data` for it at the declaration, spec §11.2).
    pub returned: bool,
    /// For spanned arrays (`shared f16 [128, 64] stage[2]`, spec §11.5): how many leading
    /// dimensions of the type are array dimensions (0 for a plain buffer). The array is one
    /// buffer whose type has the array dimensions first; `stage[i]` is a view of it.
    pub array_dims: u32,
}

/// Where a local lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LocalPlace {
    /// A host scalar of the wrapper (passed to kernels by value when captured).
    HostScalar,
    /// A per-thread scalar inside a kernel.
    DeviceScalar,
    /// A global buffer declared in host code: device memory allocated by the wrapper at the
    /// declaration ([`StmtKind::DeclBuffer`]), freed at every exit; passed to kernels as a pointer.
    GlobalBuffer,
    /// A parallel-by index: computed by the kernel from `blockIdx`/`threadIdx` (see
    /// [`LocalOrigin::ParallelIndex`]); never declared by a statement.
    ParallelIndex,
    /// Not materialised: a bounded-ituple name whose uses were expanded to its components.
    Expanded,
    /// A `shared` buffer declared in a kernel (spec §11.3): one instance per block, placed in
    /// the kernel's shared-memory pool by lowering ([`crate::lower::KernelPlan::shared`]).
    SharedBuffer,
    /// A `local` buffer declared in a kernel (spec §11.3): a per-thread array of constant size.
    LocalBuffer,
    /// A `shared` scalar declared in a kernel (spec §11.1): one per block, no initialiser,
    /// placed in the shared-memory pool like a one-element buffer.
    SharedScalar,
    /// A data future whose data is a buffer the DMA allocated (`f = dma.copy x => shared;`,
    /// spec §14): a per-thread pointer to that buffer, so that `swap`/`rotate` and the
    /// re-binding of a placeholder can exchange buffers at run time. Its type is the data's
    /// (the type of `f.data`); it is declared by a [`StmtKind::Let`] without initialiser
    /// (a null pointer until a DMA binds it).
    Future,
    /// Data chosen at run time by `select(k, a, b, …)` (spec §14.3): a per-thread pointer to
    /// one of same-typed buffers, fixed by its [`StmtKind::Let`] (whose initialiser is an
    /// [`HExprKind::Select`]). Its type is the buffers' type.
    Selected,
}

/// How a local was introduced.
#[derive(Debug, Clone, PartialEq)]
pub enum LocalOrigin {
    /// A declaration statement (scalar or buffer), or an inferring `x = e`.
    Decl,
    /// Component `sub` of a parallel-by binder at `level` (bounded integer; upper bound
    /// `upper`). Block-level component `sub` is `blockIdx.{x,y,z}[sub]`.
    ParallelIndex {
        /// The binder's level after inference.
        level: Level,
        /// Which sub-dimension (0 = first written, most significant).
        sub: u32,
        /// The upper bound (the extent of that sub-dimension).
        upper: Dim,
    },
    /// A `with`/`foreach … in` index (bounded integer, current value 0 outside its loops).
    WithIndex {
        /// The upper bound.
        upper: Dim,
    },
    /// The fresh name of `foreach c = v(lo:hi)` (spec §9.2).
    RangeLocal {
        /// The bounded variable whose range it iterates.
        of: VarId,
    },
    /// A bounded-ituple name (`t` of `t = {x, y} by […]`, a bare `with` name): its components.
    Tuple {
        /// The component variables, in order.
        components: Vec<VarId>,
    },
    /// A data future ([`LocalPlace::Future`]).
    Future {
        /// For an asynchronous future: the per-thread local that holds the number of the
        /// copy group its DMA committed (what `wait` waits for; exchanged by `swap`).
        group: Option<VarId>,
    },
}

// ---------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------

/// A runtime check evaluated on the host (spec §19.2).
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// What is checked.
    pub kind: CheckKind,
    /// The failure message (spec wording). For `ParamExtent` it ends with `but got` and the
    /// emitter appends the actual value and a `.`.
    pub message: String,
    /// The source location the check comes from (for `file:line.col` in messages).
    pub span: Span,
}

/// The kinds of runtime checks.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckKind {
    /// `params[param].shape()[dim] == expected` (a constant parameter extent).
    ParamExtent {
        /// The parameter.
        param: ParamId,
        /// The dimension.
        dim: u32,
        /// The declared extent.
        expected: u64,
    },
    /// `params[param].shape()[dim] == <sym>`: a repeated symbolic dimension agrees with its
    /// binding (`sym_dims[sym].bound_from`).
    SymbolConsistent {
        /// The symbol.
        sym: SymId,
        /// The parameter that mentions it again.
        param: ParamId,
        /// Its dimension.
        dim: u32,
    },
    /// `value > 0` (a dynamic parallel bound or a derived extent). `value` is an s32 expression
    /// over parameters, symbols, extents and (for non-entry checks) host locals.
    Positive(HExpr),
    /// `threads <= limit` (dynamic threads per block, limit 1024).
    MaxThreads {
        /// The threads-per-block expression.
        threads: HExpr,
        /// The limit.
        limit: u64,
    },
    /// `value % factor == 0` (a block extent under a `cluster` level of `factor` blocks).
    MultipleOf {
        /// The s32 expression checked.
        value: HExpr,
        /// What it must be a multiple of (positive).
        factor: u64,
    },
}

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

/// Element ("fundamental") and scalar types (spec §5.1). `Bool` is a scalar type only (never an
/// element of spanned data); `int` is `S32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ElemTy {
    /// `bool` (scalars only).
    Bool,
    /// `s8`
    S8,
    /// `s16`
    S16,
    /// `s32` / `int`
    S32,
    /// `s64`
    S64,
    /// `u8`
    U8,
    /// `u16`
    U16,
    /// `u32`
    U32,
    /// `u64`
    U64,
    /// `f16` / `half`
    F16,
    /// `bf16` / `bfp16`
    Bf16,
    /// `f32` / `float`
    F32,
    /// `f64` / `double`
    F64,
    /// `tf32` (tier 3, MMA operands)
    Tf32,
    /// `f8_e4m3` / `f8` (tier 2)
    F8E4m3,
    /// `f8_e5m2` (tier 2)
    F8E5m2,
    /// `f8_ue4m3` (tier 3)
    F8Ue4m3,
    /// `f8_ue8m0` (tier 3)
    F8Ue8m0,
    /// `f6_e2m3` (tier 3)
    F6E2m3,
    /// `f6_e3m2` (tier 3)
    F6E3m2,
    /// `f4_e2m1` (tier 3)
    F4E2m1,
    /// `s6` (tier 3)
    S6,
    /// `u6` (tier 3)
    U6,
    /// `s4` (tier 3)
    S4,
    /// `u4` (tier 3)
    U4,
    /// `s2` (tier 3)
    S2,
    /// `u2` (tier 3)
    U2,
    /// `u1` (tier 3)
    U1,
    /// `bin1` (tier 3)
    Bin1,
}

impl ElemTy {
    /// The canonical Choreo spelling (`s32`, `f16`, `bool`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ElemTy::Bool => "bool",
            ElemTy::S8 => "s8",
            ElemTy::S16 => "s16",
            ElemTy::S32 => "s32",
            ElemTy::S64 => "s64",
            ElemTy::U8 => "u8",
            ElemTy::U16 => "u16",
            ElemTy::U32 => "u32",
            ElemTy::U64 => "u64",
            ElemTy::F16 => "f16",
            ElemTy::Bf16 => "bf16",
            ElemTy::F32 => "f32",
            ElemTy::F64 => "f64",
            ElemTy::Tf32 => "tf32",
            ElemTy::F8E4m3 => "f8_e4m3",
            ElemTy::F8E5m2 => "f8_e5m2",
            ElemTy::F8Ue4m3 => "f8_ue4m3",
            ElemTy::F8Ue8m0 => "f8_ue8m0",
            ElemTy::F6E2m3 => "f6_e2m3",
            ElemTy::F6E3m2 => "f6_e3m2",
            ElemTy::F4E2m1 => "f4_e2m1",
            ElemTy::S6 => "s6",
            ElemTy::U6 => "u6",
            ElemTy::S4 => "s4",
            ElemTy::U4 => "u4",
            ElemTy::S2 => "s2",
            ElemTy::U2 => "u2",
            ElemTy::U1 => "u1",
            ElemTy::Bin1 => "bin1",
        }
    }

    /// Whether this is an integer type: s8…s64, u8…u64, and the sub-byte integers (`s6 u6 s4
    /// u4 s2 u2 u1 bin1`, see [`Self::is_subbyte_int`]).
    pub fn is_int(self) -> bool {
        matches!(
            self,
            ElemTy::S8
                | ElemTy::S16
                | ElemTy::S32
                | ElemTy::S64
                | ElemTy::U8
                | ElemTy::U16
                | ElemTy::U32
                | ElemTy::U64
        ) || self.is_subbyte_int()
    }

    /// Whether this is a signed integer type (`s6 s4 s2` included; `bin1` holds 0 or 1 and
    /// counts as unsigned here: it promotes to `int` before any arithmetic, where the
    /// difference cannot be seen).
    pub fn is_signed_int(self) -> bool {
        matches!(
            self,
            ElemTy::S8
                | ElemTy::S16
                | ElemTy::S32
                | ElemTy::S64
                | ElemTy::S6
                | ElemTy::S4
                | ElemTy::S2
        )
    }

    /// Whether this is one of the sub-byte integers `s6 u6 s4 u4 s2 u2 u1 bin1` (spec-tier3
    /// §8): one byte per element with the value in its low bits, computed in `int`, stored back
    /// keeping the low bits (`bin1` converts like `bool`: nonzero is 1).
    pub fn is_subbyte_int(self) -> bool {
        matches!(
            self,
            ElemTy::S6
                | ElemTy::U6
                | ElemTy::S4
                | ElemTy::U4
                | ElemTy::S2
                | ElemTy::U2
                | ElemTy::U1
                | ElemTy::Bin1
        )
    }

    /// Whether this is a one-byte float computed in f32 (spec §5.7, spec-tier3 §8): the fp8
    /// types, `f8_ue4m3`, `f8_ue8m0`, `f6_e2m3`, `f6_e3m2` and `f4_e2m1`.
    pub fn is_narrow_float(self) -> bool {
        self.is_fp8() || self.is_tier3_float()
    }

    /// Whether this is one of the narrow floats that `__to` may only target on sm_90 and later
    /// (spec-tier3 §0): `f8_ue4m3`, `f8_ue8m0`, `f6_e2m3`, `f6_e3m2`, `f4_e2m1`.
    pub fn is_tier3_float(self) -> bool {
        matches!(
            self,
            ElemTy::F8Ue4m3 | ElemTy::F8Ue8m0 | ElemTy::F6E2m3 | ElemTy::F6E3m2 | ElemTy::F4E2m1
        )
    }

    /// Whether this is a floating-point type (including the narrow fp8/fp6/fp4 and tf32).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            ElemTy::F16
                | ElemTy::Bf16
                | ElemTy::F32
                | ElemTy::F64
                | ElemTy::Tf32
                | ElemTy::F8E4m3
                | ElemTy::F8E5m2
                | ElemTy::F8Ue4m3
                | ElemTy::F8Ue8m0
                | ElemTy::F6E2m3
                | ElemTy::F6E3m2
                | ElemTy::F4E2m1
        )
    }

    /// Size of one element in bytes (`|T|`; sub-byte types are stored one per byte).
    pub fn size_bytes(self) -> u64 {
        match self {
            ElemTy::S64 | ElemTy::U64 | ElemTy::F64 => 8,
            ElemTy::S32 | ElemTy::U32 | ElemTy::F32 | ElemTy::Tf32 => 4,
            ElemTy::S16 | ElemTy::U16 | ElemTy::F16 | ElemTy::Bf16 => 2,
            _ => 1,
        }
    }

    /// Bit width of an integer type (0 for others).
    pub fn int_bits(self) -> u32 {
        match self {
            ElemTy::U1 | ElemTy::Bin1 => 1,
            ElemTy::S2 | ElemTy::U2 => 2,
            ElemTy::S4 | ElemTy::U4 => 4,
            ElemTy::S6 | ElemTy::U6 => 6,
            ElemTy::S8 | ElemTy::U8 => 8,
            ElemTy::S16 | ElemTy::U16 => 16,
            ElemTy::S32 | ElemTy::U32 => 32,
            ElemTy::S64 | ElemTy::U64 => 64,
            _ => 0,
        }
    }

    /// Whether the type is implemented in tier 1 (integers of 8 to 64 bits, f16, bf16, f32,
    /// f64, bool).
    pub fn is_tier1(self) -> bool {
        (self.is_int() && !self.is_subbyte_int())
            || matches!(self, ElemTy::Bool | ElemTy::F16 | ElemTy::Bf16 | ElemTy::F32 | ElemTy::F64)
    }

    /// Whether this is one of the tier-2 fp8 types (`f8_e4m3`, `f8_e5m2`): stored as one byte,
    /// computed in f32 (spec §5.1, §5.7).
    pub fn is_fp8(self) -> bool {
        matches!(self, ElemTy::F8E4m3 | ElemTy::F8E5m2)
    }

    /// Whether the translator implements the type as an element or scalar type: all but `tf32`
    /// (an MMA operand type only).
    pub fn is_implemented(self) -> bool {
        self != ElemTy::Tf32
    }
}

/// Scalar types are element types (`int` is `S32`, `bool` is `Bool`).
pub type ScalarTy = ElemTy;

/// The checks of [`Function::entry_checks`] (also used for launch-time and in-place checks).
pub type EntryCheck = Check;

/// Where spanned data lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Storage {
    /// A host-resident parameter (non-`global`): the kernels use its device copy.
    Host,
    /// Device global memory (`global` parameters, buffers declared in host code).
    Global,
    /// `shared` (tier 2): per block.
    Shared,
    /// `local` (tier 2): per thread.
    Local,
}

impl Storage {
    /// The keyword (`global` for host parameters too: their device copies are global memory).
    pub fn as_str(self) -> &'static str {
        match self {
            Storage::Host | Storage::Global => "global",
            Storage::Shared => "shared",
            Storage::Local => "local",
        }
    }
}

/// A spanned (shaped) type: element type, row-major dense extents, storage.
#[derive(Debug, Clone, PartialEq)]
pub struct SpannedTy {
    /// The element type.
    pub elem: ElemTy,
    /// The extents (rank = `dims.len()`).
    pub dims: Vec<Dim>,
    /// Where the data lives.
    pub storage: Storage,
}

/// One extent of a shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Dim {
    /// A compile-time constant (positive).
    Const(u64),
    /// A symbolic dimension of the parameters.
    Sym(SymId),
    /// An anonymous runtime extent: `params[param].shape()[dim]` (`?` / `??`, `mdspan<N>`).
    Dynamic {
        /// The parameter.
        param: ParamId,
        /// The dimension.
        dim: u32,
    },
    /// A derived extent: an s32 expression over constants, parameters, symbols, extents and
    /// immutable host scalars (e.g. `cdiv(N, 64)`, `n`), evaluable on the host where the shape
    /// is used.
    Expr(Box<HExpr>),
}

impl Default for Dim {
    /// The extent 0 (an empty size, e.g. a kernel without shared memory).
    fn default() -> Dim {
        Dim::Const(0)
    }
}

impl Dim {
    /// The constant value, if static.
    pub fn as_const(&self) -> Option<u64> {
        match self {
            Dim::Const(c) => Some(*c),
            _ => None,
        }
    }

    /// The element count of a shape, when every extent is a constant and the product fits
    /// 64 bits.
    pub fn const_count(dims: &[Dim]) -> Option<u64> {
        dims.iter().try_fold(1u64, |acc, d| d.as_const().and_then(|c| acc.checked_mul(c)))
    }

    /// The extent as an s32 expression (a bounded derived extent loses its boundedness).
    pub fn to_expr(&self, span: Span) -> HExpr {
        let s32 = Ty::Scalar(ElemTy::S32);
        match self {
            Dim::Const(c) => arith::int_lit(*c as i128, span),
            Dim::Sym(s) => HExpr { kind: HExprKind::SymDim(*s), ty: s32, span },
            Dim::Dynamic { param, dim } => {
                HExpr { kind: HExprKind::ParamExtent { param: *param, dim: *dim }, ty: s32, span }
            }
            Dim::Expr(e) => {
                let mut e = (**e).clone();
                if e.ty.is_bounded() {
                    e.ty = s32;
                }
                e
            }
        }
    }

    /// The extent an s32 expression denotes (constants must be checked positive by the
    /// caller).
    pub fn from_expr(e: HExpr) -> Dim {
        match e.kind {
            HExprKind::Int(v) if v > 0 => Dim::Const(v as u64),
            HExprKind::SymDim(s) => Dim::Sym(s),
            HExprKind::ParamExtent { param, dim } => Dim::Dynamic { param, dim },
            _ => {
                let mut e = e;
                if e.ty.is_bounded() {
                    e.ty = Ty::Scalar(ElemTy::S32);
                }
                Dim::Expr(Box::new(e))
            }
        }
    }
}

/// The type of an expression or a local.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    /// A plain scalar value (prints bare).
    Scalar(ElemTy),
    /// A bounded integer value (spec §5.4): a parallel/with index, `#v`, or arithmetic involving
    /// one. Its runtime value is an `int` (s32); it prints in braces (`{3}`, spec §16).
    BoundedInt,
    /// A bounded ituple of the given rank (only as a print argument, expanded to components).
    BoundedItuple(u32),
    /// An ituple of the given rank (only as a print argument; expanded elsewhere).
    Ituple(u32),
    /// An mdspan of the given rank (only as a print argument; expanded elsewhere).
    Mdspan(u32),
    /// Spanned data (a parameter or a global buffer).
    Spanned(SpannedTy),
    /// A stream parameter.
    Stream,
    /// The address of an element of this type (print and call arguments only).
    Pointer(ElemTy),
    /// A string literal (print arguments only).
    String,
    /// No value.
    Void,
    /// The type of an expression that already produced an error (never in an error-free program).
    Error,
}

impl Ty {
    /// The scalar type of a value usable as a C++ scalar: `Scalar(t)` → `t`, `BoundedInt` → s32.
    pub fn scalar(&self) -> Option<ElemTy> {
        match self {
            Ty::Scalar(t) => Some(*t),
            Ty::BoundedInt => Some(ElemTy::S32),
            _ => None,
        }
    }

    /// Whether this is an integer scalar (including bounded integers).
    pub fn is_integer(&self) -> bool {
        matches!(self, Ty::BoundedInt) || matches!(self, Ty::Scalar(t) if t.is_int())
    }

    /// Whether this is a bounded value (prints in braces).
    pub fn is_bounded(&self) -> bool {
        matches!(self, Ty::BoundedInt | Ty::BoundedItuple(_))
    }
}

/// Parallel levels after inference (spec §8.2). Tier 1 has no `cluster`/`device`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// Grid level (`blockIdx`).
    Block,
    /// Warpgroup (128 threads).
    Group4,
    /// Warp (32 threads).
    Group,
    /// Thread.
    Thread,
}

impl Level {
    /// Threads of one instance of the level when nothing is nested in it: 128 for a
    /// warpgroup, 32 for a warp, 1 for a thread (and a block, which always nests its threads).
    pub fn unit_threads(self) -> u64 {
        match self {
            Level::Group4 => 128,
            Level::Group => 32,
            Level::Block | Level::Thread => 1,
        }
    }

    /// The keyword.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Block => "block",
            Level::Group4 => "group-4",
            Level::Group => "group",
            Level::Thread => "thread",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Expressions
// ---------------------------------------------------------------------------------------------

/// A typed expression.
#[derive(Debug, Clone, PartialEq)]
pub struct HExpr {
    /// What it is.
    pub kind: HExprKind,
    /// Its type (for operators: the result type).
    pub ty: Ty,
    /// Where it was written (synthesised nodes carry the span of what they came from).
    pub span: Span,
}

/// A spanned buffer: a parameter or a global buffer local.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BufferRef {
    /// A spanned parameter (host-resident: its device copy inside kernels; or `global`).
    Param(ParamId),
    /// A global buffer declared in the function.
    Local(VarId),
}

/// Which element of a buffer an access denotes.
#[derive(Debug, Clone, PartialEq)]
pub enum ElemIndex {
    /// One index per dimension of the buffer (s32, s64 or bounded), already flattened from
    /// ituples and translated from view coordinates to buffer coordinates: what every view
    /// that keeps the buffer's strides produces (`chunkat`, `subspan`, `view(…).from(…)`, …).
    Coords(Vec<HExpr>),
    /// The element's offset in elements from the buffer's start (s32 or s64): what a view that
    /// reinterprets the layout produces (`span_as`, `view(… : strides)`).
    Flat(Box<HExpr>),
}

impl ElemIndex {
    /// The index expressions (one for [`ElemIndex::Flat`]).
    pub fn exprs(&self) -> &[HExpr] {
        match self {
            ElemIndex::Coords(indices) => indices,
            ElemIndex::Flat(offset) => std::slice::from_ref(offset),
        }
    }

    /// The index expressions, mutably.
    pub fn exprs_mut(&mut self) -> &mut [HExpr] {
        match self {
            ElemIndex::Coords(indices) => indices,
            ElemIndex::Flat(offset) => std::slice::from_mut(offset),
        }
    }
}

/// Spanned data seen through a view (spec §13.3): a buffer, the extents the view has, and how
/// its coordinates map to the buffer's elements. A whole buffer is the identity view. Views
/// are resolved by semantic analysis: element accesses through them become [`HExprKind::At`]
/// of the buffer; statements that move whole views (DMA) carry them.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// The buffer underneath.
    pub buffer: BufferRef,
    /// The element type.
    pub elem: ElemTy,
    /// Where the buffer lives.
    pub storage: Storage,
    /// The view's extents (its rank is `dims.len()`). Inside kernels a [`Dim::Expr`] extent of a
    /// view may be a device expression (`view(n, 64)` with a per-thread `n`).
    pub dims: Vec<Dim>,
    /// How view coordinates map to the buffer.
    pub layout: Layout,
}

/// How a [`View`]'s coordinates map to its buffer's elements.
#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    /// Buffer coordinate `b` of view element `(i_0, …)` is `origin[b]`, plus `i_k` for the view
    /// dimension `k` with `map[k] == b` (each buffer dimension is mapped at most once, in
    /// increasing order; an unmapped one is fixed at its origin: `sqz`, array elements).
    Coords {
        /// The buffer coordinates of the view's first element (one per buffer dimension).
        origin: Vec<HExpr>,
        /// For each view dimension, the buffer dimension it moves along.
        map: Vec<u32>,
    },
    /// View element `(i_0, …)` is the buffer element at flat offset
    /// `offset + Σ i_k · strides[k]` (row-major flattening of the buffer).
    Flat {
        /// The flat offset of the view's first element.
        offset: Box<HExpr>,
        /// The stride of each view dimension, in elements of the buffer.
        strides: Vec<HExpr>,
    },
}

impl View {
    /// The identity view of a whole buffer of type `ty`.
    pub fn whole(buffer: BufferRef, ty: &SpannedTy, span: Span) -> View {
        let rank = ty.dims.len();
        View {
            buffer,
            elem: ty.elem,
            storage: ty.storage,
            dims: ty.dims.clone(),
            layout: Layout::Coords {
                origin: vec![arith::int_lit(0, span); rank],
                map: (0..rank as u32).collect(),
            },
        }
    }

    /// Whether this is the identity view of its whole buffer, whose extents are `buffer_dims`.
    pub fn is_whole(&self, buffer_dims: &[Dim]) -> bool {
        let Layout::Coords { origin, map } = &self.layout else { return false };
        self.dims == buffer_dims
            && origin.iter().all(|o| matches!(o.kind, HExprKind::Int(0)))
            && map.iter().enumerate().all(|(k, b)| *b as usize == k)
            && map.len() == buffer_dims.len()
    }

    /// The expressions of the view (coordinates, offsets, strides, extents), mutably.
    pub fn exprs_mut(&mut self) -> Vec<&mut HExpr> {
        let mut out: Vec<&mut HExpr> = Vec::new();
        match &mut self.layout {
            Layout::Coords { origin, .. } => out.extend(origin.iter_mut()),
            Layout::Flat { offset, strides } => {
                out.push(&mut **offset);
                out.extend(strides.iter_mut());
            }
        }
        for d in self.dims.iter_mut() {
            if let Dim::Expr(e) = d {
                out.push(&mut **e);
            }
        }
        out
    }

    /// The buffer element that view element `indices` (one per view dimension) denotes.
    pub fn element(&self, indices: Vec<HExpr>, span: Span) -> ElemIndex {
        match &self.layout {
            Layout::Coords { origin, map } => {
                let mut coords = origin.clone();
                for (k, i) in indices.into_iter().enumerate() {
                    if let Some(c) = map.get(k).and_then(|b| coords.get_mut(*b as usize)) {
                        *c = arith::add(c.clone(), i, span);
                    }
                }
                ElemIndex::Coords(coords)
            }
            Layout::Flat { offset, strides } => {
                let mut flat = (**offset).clone();
                for (i, s) in indices.into_iter().zip(strides) {
                    flat = arith::add(flat, arith::mul(i, s.clone(), span), span);
                }
                ElemIndex::Flat(Box::new(flat))
            }
        }
    }
}

/// Expression kinds.
#[derive(Debug, Clone, PartialEq)]
pub enum HExprKind {
    /// An integer literal or folded constant; the value fits `ty` (s32, s64, u32 or u64).
    Int(i128),
    /// A floating literal (`ty` f32 or f64; infinite for `inf`).
    Float(f64),
    /// `true` / `false`.
    Bool(bool),
    /// A string literal (print arguments only); the value as written (escapes processed), NOT
    /// `printf`-escaped: the emitter must escape `%` as `%%` (spec §16).
    Str(String),
    /// A local's current value (scalar, bounded index) or a whole global buffer (`return b;`).
    Var(VarId),
    /// A parameter's value (scalar) or a whole spanned parameter (`return a;`).
    Param(ParamId),
    /// A symbolic dimension's value (s32).
    SymDim(SymId),
    /// `params[param].shape()[dim]` for a `?` extent (s32).
    ParamExtent {
        /// The parameter.
        param: ParamId,
        /// The dimension.
        dim: u32,
    },
    /// A unary operator.
    Unary {
        /// The operator.
        op: UnOp,
        /// The operand.
        operand: Box<HExpr>,
    },
    /// A binary operator. Arithmetic operands may have different types: C++ usual arithmetic
    /// conversions apply and `ty` is the promoted result (bool for comparisons and `&& ||`).
    Binary {
        /// The operator.
        op: BinOp,
        /// Left operand.
        lhs: Box<HExpr>,
        /// Right operand.
        rhs: Box<HExpr>,
    },
    /// `c ? a : b` (both arms converted to `ty`).
    Ternary {
        /// The condition (bool, or a scalar tested against zero).
        cond: Box<HExpr>,
        /// Value if true.
        then_value: Box<HExpr>,
        /// Value if false.
        else_value: Box<HExpr>,
    },
    /// `cdiv(a, b)` = `(a + b - 1) / b` on integers.
    Cdiv(Box<HExpr>, Box<HExpr>),
    /// Element access `x.at(indices…)` of a buffer or a view of it (spec §12): the element of
    /// the buffer it denotes. Inside kernels the buffer is the device pointer (or the shared or
    /// local array). Buffers are row-major and dense.
    At {
        /// The buffer.
        buffer: BufferRef,
        /// Which element.
        index: ElemIndex,
        /// The access's number.
        id: AccessId,
    },
    /// A math built-in (spec §18); `ty` is the result type.
    Math {
        /// The function.
        func: MathFn,
        /// The arguments.
        args: Vec<HExpr>,
    },
    /// A conversion to `to` (`ty` = `Scalar(to)`): `__to<T>(e)` (`implicit: false`) or an
    /// implicit conversion inserted by sema on assignment/initialisation/argument passing.
    Cast {
        /// The target type.
        to: ElemTy,
        /// The operand.
        operand: Box<HExpr>,
        /// Whether sema inserted it.
        implicit: bool,
    },
    /// `__to<"C++ type">(e)`: a verbatim C cast (tier 2; kept for completeness).
    CppCast {
        /// The C++ type text.
        cpp_type: String,
        /// The operand.
        operand: Box<HExpr>,
    },
    /// An ituple value `{a, b, …}` (components flattened); only as a print argument.
    Ituple(Vec<HExpr>),
    /// An mdspan value `[a, b, …]` (extents); only as a print argument.
    Mdspan(Vec<Dim>),
    /// The address of an element, `&x.at(i)` or the first element of spanned data passed to
    /// a call (`ty` is [`Ty::Pointer`]): print and call/asm arguments only.
    Address {
        /// The buffer.
        buffer: BufferRef,
        /// Which element.
        index: ElemIndex,
    },
    /// `nullptr` (call arguments only; `ty` is [`Ty::Pointer`] of `u8`).
    Null,
    /// `select(index, a, b, …)` of same-typed data (spec §14.3): the address of the first
    /// element of `options[index]` (each an [`HExprKind::Address`]); `index` is proven in
    /// `[0, options.len())`. Initialises a [`LocalPlace::Selected`] pointer.
    Select {
        /// Which option.
        index: Box<HExpr>,
        /// The candidates' addresses.
        options: Vec<HExpr>,
    },
    /// A call of C++ device code (spec §17.1–§17.2): `call f<targs>(args)` or a registered
    /// intrinsic, emitted as written. `ty` is the type the caller declared for the result
    /// (`Void` for a call statement, `bool` as an `if` condition).
    Call {
        /// The callee, as C++ text (`my_sum`, `ns::f`).
        callee: String,
        /// Its template arguments (`my_sum<16>`), empty when none were written.
        targs: Vec<TemplateArg>,
        /// The arguments (spanned data is passed as the address of its first element).
        args: Vec<HExpr>,
    },
    /// `__atomic_op(x.at(i), v…)` (spec §18): atomically updates the element and gives its
    /// old value (`ty` is the element type).
    Atomic {
        /// The operation.
        op: AtomicOp,
        /// The buffer.
        buffer: BufferRef,
        /// The element.
        index: ElemIndex,
        /// The access's number (bounds checked like any element access).
        id: AccessId,
        /// The operands after the element (converted to the element type).
        args: Vec<HExpr>,
    },
    /// Placeholder for an expression that produced an error (never in an error-free program).
    Error,
}

/// A template argument of a C++ call (spec §17.1).
#[derive(Debug, Clone, PartialEq)]
pub enum TemplateArg {
    /// A scalar type.
    Type(ElemTy),
    /// A compile-time integer.
    Int(i128),
    /// A C++ name, as written (`ns::value`).
    Name(String),
}

/// Atomic operations (spec §18).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// `__atomic_add`
    Add,
    /// `__atomic_sub`
    Sub,
    /// `__atomic_exch`
    Exch,
    /// `__atomic_min`
    Min,
    /// `__atomic_max`
    Max,
    /// `__atomic_and`
    And,
    /// `__atomic_or`
    Or,
    /// `__atomic_xor`
    Xor,
    /// `__atomic_cas(x, compare, value)`
    Cas,
}

impl AtomicOp {
    /// The Choreo spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AtomicOp::Add => "__atomic_add",
            AtomicOp::Sub => "__atomic_sub",
            AtomicOp::Exch => "__atomic_exch",
            AtomicOp::Min => "__atomic_min",
            AtomicOp::Max => "__atomic_max",
            AtomicOp::And => "__atomic_and",
            AtomicOp::Or => "__atomic_or",
            AtomicOp::Xor => "__atomic_xor",
            AtomicOp::Cas => "__atomic_cas",
        }
    }

    /// The element types the operation supports (spec §18).
    pub fn supports(self, t: ElemTy) -> bool {
        use ElemTy::*;
        match self {
            AtomicOp::Add => matches!(t, S32 | U32 | U64 | F32 | F64 | F16),
            AtomicOp::Sub => matches!(t, S32 | U32),
            AtomicOp::Exch => matches!(t, S32 | U32 | U64 | F32),
            AtomicOp::Min | AtomicOp::Max | AtomicOp::And | AtomicOp::Or | AtomicOp::Xor => {
                matches!(t, S32 | U32 | S64 | U64)
            }
            AtomicOp::Cas => matches!(t, S32 | U32 | U64 | U16),
        }
    }

    /// The number of operands after the element.
    pub fn operands(self) -> usize {
        if self == AtomicOp::Cas { 2 } else { 1 }
    }
}

/// Unary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// `!` (bool operand)
    Not,
    /// `~` (integer operand)
    BitNot,
    /// `-` (numeric operand)
    Neg,
}

impl UnOp {
    /// The C++ operator.
    pub fn as_str(self) -> &'static str {
        match self {
            UnOp::Not => "!",
            UnOp::BitNot => "~",
            UnOp::Neg => "-",
        }
    }
}

/// Binary operators (bounded `#+ #- …` map to the plain ones; `p # n` is expanded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `||`
    Or,
    /// `&&`
    And,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<<` (right operand is an integer literal)
    Shl,
    /// `>>` (right operand is an integer literal)
    Shr,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` (truncating on integers)
    Div,
    /// `%` (integers only)
    Rem,
    /// `&`
    BitAnd,
    /// `^`
    BitXor,
    /// `|`
    BitOr,
}

impl BinOp {
    /// The C++ operator.
    pub fn as_str(self) -> &'static str {
        match self {
            BinOp::Or => "||",
            BinOp::And => "&&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::BitAnd => "&",
            BinOp::BitXor => "^",
            BinOp::BitOr => "|",
        }
    }

    /// Whether the result is `bool` (comparisons and logical operators).
    pub fn is_boolean(self) -> bool {
        matches!(
            self,
            BinOp::Or
                | BinOp::And
                | BinOp::Eq
                | BinOp::Ne
                | BinOp::Lt
                | BinOp::Le
                | BinOp::Gt
                | BinOp::Ge
        )
    }
}

/// Math built-ins (spec §18). Results follow the (promoted) argument type, except `Isfinite`
/// (bool).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MathFn {
    /// `__sqrt`
    Sqrt,
    /// `__rsqrt`
    Rsqrt,
    /// `__exp`
    Exp,
    /// `__exp2f`
    Exp2f,
    /// `__expm1`
    Expm1,
    /// `__log`
    Log,
    /// `__log1p`
    Log1p,
    /// `__pow(x, y)`
    Pow,
    /// `__sin`
    Sin,
    /// `__cos`
    Cos,
    /// `__tan`
    Tan,
    /// `__asin`
    Asin,
    /// `__acos`
    Acos,
    /// `__atan`
    Atan,
    /// `__atan2(y, x)`
    Atan2,
    /// `__sinh`
    Sinh,
    /// `__cosh`
    Cosh,
    /// `__tanh`
    Tanh,
    /// `__ceil`
    Ceil,
    /// `__floor`
    Floor,
    /// `__round`
    Round,
    /// `__fabs`
    Fabs,
    /// `__sign` (composite)
    Sign,
    /// `__isfinite` (bool result)
    Isfinite,
    /// `__max(a, b)`
    Max,
    /// `__min(a, b)`
    Min,
    /// `__fmaf(a, b, c)`
    Fmaf,
    /// `__frcp_rn`
    FrcpRn,
    /// `__gelu` (composite)
    Gelu,
    /// `__sigmoid` (composite)
    Sigmoid,
    /// `__softplus` (composite)
    Softplus,
    /// `__alignup(x, a)` (integers)
    Alignup,
    /// `__aligndown(x, a)` (integers)
    Aligndown,
}

impl MathFn {
    /// The Choreo spelling (`__sqrt`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            MathFn::Sqrt => "__sqrt",
            MathFn::Rsqrt => "__rsqrt",
            MathFn::Exp => "__exp",
            MathFn::Exp2f => "__exp2f",
            MathFn::Expm1 => "__expm1",
            MathFn::Log => "__log",
            MathFn::Log1p => "__log1p",
            MathFn::Pow => "__pow",
            MathFn::Sin => "__sin",
            MathFn::Cos => "__cos",
            MathFn::Tan => "__tan",
            MathFn::Asin => "__asin",
            MathFn::Acos => "__acos",
            MathFn::Atan => "__atan",
            MathFn::Atan2 => "__atan2",
            MathFn::Sinh => "__sinh",
            MathFn::Cosh => "__cosh",
            MathFn::Tanh => "__tanh",
            MathFn::Ceil => "__ceil",
            MathFn::Floor => "__floor",
            MathFn::Round => "__round",
            MathFn::Fabs => "__fabs",
            MathFn::Sign => "__sign",
            MathFn::Isfinite => "__isfinite",
            MathFn::Max => "__max",
            MathFn::Min => "__min",
            MathFn::Fmaf => "__fmaf",
            MathFn::FrcpRn => "__frcp_rn",
            MathFn::Gelu => "__gelu",
            MathFn::Sigmoid => "__sigmoid",
            MathFn::Softplus => "__softplus",
            MathFn::Alignup => "__alignup",
            MathFn::Aligndown => "__aligndown",
        }
    }

    /// The number of arguments.
    pub fn arity(self) -> usize {
        match self {
            MathFn::Pow
            | MathFn::Atan2
            | MathFn::Max
            | MathFn::Min
            | MathFn::Alignup
            | MathFn::Aligndown => 2,
            MathFn::Fmaf => 3,
            _ => 1,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Statements
// ---------------------------------------------------------------------------------------------

/// A statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Stmt {
    /// What it is.
    pub kind: StmtKind,
    /// Where it was written.
    pub span: Span,
}

/// The target of an assignment.
#[derive(Debug, Clone, PartialEq)]
pub enum Place {
    /// A mutable scalar local (inside a kernel, a captured host scalar is a per-thread copy).
    Var(VarId),
    /// A buffer element (device code only).
    Elem {
        /// The buffer.
        buffer: BufferRef,
        /// Which element.
        index: ElemIndex,
        /// The access's number.
        id: AccessId,
    },
}

/// Assignment operators.
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
    /// `%=` (integers only)
    Rem,
}

impl AssignOp {
    /// The C++ operator.
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

/// How a loop is unrolled (`foreach … : unroll`, `: unroll(n)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unroll {
    /// Completely (`#pragma unroll`).
    Full,
    /// By a factor of at least 1 (`#pragma unroll n`).
    Factor(u32),
}

/// Statement kinds.
#[derive(Debug, Clone, PartialEq)]
pub enum StmtKind {
    /// Declares scalar local `var` (host or device by context), with an initial value converted
    /// to the local's type; `None` for an uninitialised element-typed scalar (`s32 v;`).
    /// Also declares `with` indices (init `0`, see [`LocalOrigin::WithIndex`]).
    Let {
        /// The local.
        var: VarId,
        /// The initial value (already of the local's scalar type).
        init: Option<HExpr>,
    },
    /// Declares a global buffer in host code (spec §11.2): allocate `|shape|` elements of device
    /// memory; with `init`, fill every element with it (converted to the element type). When the
    /// local is `returned`, also create the host `spanned_data`.
    DeclBuffer {
        /// The buffer local.
        var: VarId,
        /// The uniform initial value `{v}`.
        init: Option<HExpr>,
    },
    /// `target op value`. For compound operators `value` is the right operand (the result is
    /// converted back to the target type, as in C++).
    Assign {
        /// What is assigned.
        target: Place,
        /// `=` or a compound operator.
        op: AssignOp,
        /// The value (for `=`: already converted to the target type).
        value: HExpr,
    },
    /// A nested scope (`{ … }`, and the scope of a desugared `with`).
    Block(Vec<Stmt>),
    /// `if (cond) then else`.
    If {
        /// Bool, or a scalar tested against zero.
        cond: HExpr,
        /// The then-branch.
        then_body: Vec<Stmt>,
        /// The else-branch (empty when absent).
        else_body: Vec<Stmt>,
    },
    /// `while (cond) body` (bool condition).
    While {
        /// The condition.
        cond: HExpr,
        /// The body.
        body: Vec<Stmt>,
    },
    /// One loop of a desugared `foreach` (spec §9.1–§9.2):
    /// `for (var = start; var < end; var += step) body` and then `var = 0`.
    /// Multi-variable `foreach` becomes nested `For`s, outer first. `var` is a with-index
    /// (declared earlier by a `Let`) or a `RangeLocal` (declared by the emitter as the loop
    /// variable; no reset needed).
    For {
        /// The loop variable.
        var: VarId,
        /// First value (s32).
        start: HExpr,
        /// One past the last value (s32).
        end: HExpr,
        /// The increment (positive literal).
        step: u64,
        /// Whether `var` must be reset to 0 after the loop (with-indices).
        reset: bool,
        /// `foreach … : unroll[(n)]`: what the loop asks of the compiler (`#pragma unroll`).
        unroll: Option<Unroll>,
        /// The body.
        body: Vec<Stmt>,
    },
    /// `break;` (innermost `For`/`While`).
    Break,
    /// `yield;` (spec §9.4): the executing thread leaves the kernel.
    Yield,
    /// `assert(cond, "message")` whose condition is only known at run time (spec §19.1): in
    /// host code the call fails with the message before anything after it runs; in a kernel
    /// the failing thread prints it and traps (the device's context is then unusable, which
    /// the runtime reports as an error of this and every later call).
    Assert {
        /// The condition (`bool`).
        cond: HExpr,
        /// The message as written.
        message: String,
    },
    /// `continue;`
    Continue,
    /// `print(…)` / `println(…)`: arguments concatenated without separators (spec §16); how
    /// each prints follows its type (string verbatim, integers `%lld`, floats `%f`, bool
    /// `true`/`false`, bounded values in braces, ituples `{a, b}`, mdspans `[a, b]`).
    Print {
        /// `println`.
        newline: bool,
        /// The arguments.
        args: Vec<HExpr>,
    },
    /// `return [value];` (host code only). A scalar value is converted to the return type; a
    /// spanned value is `Param(p)` or `Var(v)` of spanned type (spec §7.3 return lowering).
    Return(Option<HExpr>),
    /// A device-entry parallel-by: one kernel launch (host code only).
    Parallel(Box<ParallelTree>),
    /// An inner parallel-by level inside a kernel (device code only).
    InnerParallel(Box<InnerParallel>),
    /// A host-side check right here (a check that could not be hoisted to entry, e.g. the
    /// positivity of a buffer extent computed from host locals).
    Check(Check),
    /// `sync.global;` on the host: wait for all device work (`cudaDeviceSynchronize`).
    SyncGlobal,
    /// A barrier among threads of a kernel (spec §15): `sync.barrier : block;` / `sync.shared;`
    /// (every thread of the block), `sync.barrier : thread;` / `: group;` (the threads of a
    /// warp).
    Barrier(BarrierScope),
    /// A memory fence of a kernel (`sync.fence : …`, spec §15).
    Fence(FenceScope),
    /// A DMA copy in a kernel (spec §14).
    Dma(Box<Dma>),
    /// `wait f, …;` (spec §14.3): the executing thread waits until the asynchronous copies of
    /// the futures whose group locals are `groups` have completed, then the participants
    /// synchronise so that every one of them sees all the data.
    Wait {
        /// The group locals of the waited futures ([`LocalOrigin::Future::group`]).
        groups: Vec<VarId>,
        /// The group locals of waited TMA futures: each holds the number of the kernel's
        /// mbarrier its load completes.
        tma_groups: Vec<VarId>,
        /// Who waits together.
        participants: Participants,
    },
    /// `wait f, …;` on asynchronous TMA stores (`f = tma.copy.async …`, spec-tier3 §3.3 ⚠):
    /// the issuer waits until its bulk copies have completed (`cp.async.bulk.wait_group 0`),
    /// then the participants synchronise.
    TmaStoreWait {
        /// The group locals of the waited store futures.
        groups: Vec<VarId>,
        /// Who waits together.
        participants: Participants,
        /// The warpgroup role that issued the stores and waits (as [`Tma::role`]): its first
        /// thread waits, its named barrier follows; `None`: thread 0 and `participants`.
        role: Option<Vec<HExpr>>,
    },
    /// `swap(a, b)` / `rotate(a, b, c, …)` (spec §14.3): `a` takes `b`'s data (and pending
    /// copy group), `b` takes `c`'s, …, the last takes `a`'s.
    Rotate {
        /// The futures ([`LocalPlace::Future`] locals), in the written order.
        futures: Vec<VarId>,
        /// Their group locals, in the same order, when they are asynchronous.
        groups: Vec<VarId>,
    },
    /// An expression evaluated for its effect: a call statement or an atomic whose old value
    /// is not used (device code).
    Eval(HExpr),
    /// `__cpp__("…")` (spec §17.3): the text, emitted verbatim where the statement is.
    Cpp(String),
    /// Inline assembly (spec §17.4), device code.
    Asm(Box<Asm>),
    /// `__bar_arrive(id, n)` / `__bar_sync(id, n)`: PTX named barriers (`bar.arrive` /
    /// `bar.sync`), device code.
    NamedBarrier {
        /// `bar.sync` (wait) rather than `bar.arrive`.
        sync: bool,
        /// The barrier number (0–15; 15 is reserved by the compiler).
        id: HExpr,
        /// The number of threads (a multiple of 32).
        threads: HExpr,
    },
    /// A shared event's declaration (spec-tier3 §2.1): one thread of the block initialises its
    /// mbarriers, then the block synchronises.
    EventInit(EventId),
    /// `trigger e, …;`: each executing thread arrives once on each slot, in order.
    Trigger(Vec<EventSlot>),
    /// `wait e, …;` on events: each executing thread waits until the generation it expects
    /// of each slot has completed, in order.
    EventWait(Vec<EventSlot>),
    /// `trigger e after f0, f1, …;` (spec-tier3 §2.5): the loads of the futures completed the
    /// slot's current generation (they were armed on it, [`Tma::event`]); the issuer of the
    /// scope arrives once, which lets the generation complete when their bytes have landed.
    TriggerAfter(Box<TriggerAfter>),
    /// `trigger` / `wait` of a global event (spec-tier3 §2.4): its flag is byte `slot` of the
    /// zeroed device buffer `flags` the host declared. In device code `trigger` sets the flag
    /// (after a device fence) and `wait` spins until it is set, then clears it; with
    /// `elected`, thread 0 of the block does it between block barriers. In host code `trigger`
    /// sets the byte with `cudaMemset`.
    GlobalFlag {
        /// `wait` (else `trigger`).
        wait: bool,
        /// The flag bytes (a host-declared global `u8` buffer).
        flags: BufferRef,
        /// The slot (s32).
        slot: HExpr,
        /// The number of slots.
        slots: u32,
        /// Block-level code: one thread of the block acts for it.
        elected: bool,
    },
    /// An MMA statement of a warp (spec-tier3 §5): the warp's threads execute it together.
    Mma(Box<mma::MmaOp>),
    /// The barrier of a warpgroup role (the threads an enclosing `inthreads` selects, spec-tier3
    /// §7.1): named barrier [`crate::lower::roles::ROLE_BARRIER`] over the role's threads, as
    /// lowering planned the role ([`crate::lower::roles`]). Sema puts it after a plain
    /// `mma.store` to shared memory inside a role, where a block barrier would wait for
    /// threads that never come.
    RoleBarrier {
        /// The role's predicates, as [`Tma::role`].
        role: Vec<HExpr>,
    },
    /// `croq::cuda::setreg_inc(n)` / `setreg_dec(n)` (spec-tier3 §7.2): `setmaxnreg.inc|dec`
    /// with `regs` registers per thread, device code. Only made where the target has the
    /// instruction ([`crate::target::Target::setmaxnreg`]).
    SetMaxNReg {
        /// `.inc` (ask for more registers) rather than `.dec`.
        inc: bool,
        /// The register count (24–256, a multiple of 8).
        regs: u32,
    },
    /// A whole-buffer copy between global buffers in host code (spec §14.6): a device-to-device
    /// copy of the elements of the smaller one. (Any other host-level DMA — of views, padded,
    /// transposed — is a kernel of its own: a [`StmtKind::Parallel`] of
    /// [`KernelOrigin::HostDma`].)
    HostCopy {
        /// The source buffer.
        src: BufferRef,
        /// The destination buffer.
        dst: BufferRef,
        /// Elements to copy (the smaller element count).
        count: Dim,
    },
}

/// A shared event (spec-tier3 §2): per slot, a generation counter of the block that completes
/// when its arrival count of threads have triggered it. Lowered to one mbarrier per slot.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The name as written.
    pub name: String,
    /// The declarator.
    pub span: Span,
    /// The kernel that declares it.
    pub kernel: KernelId,
    /// The array extents (`e[4]` → `[4]`; empty for a single event).
    pub dims: Vec<u32>,
    /// `= ready`: generation 0 counts as complete (the first wait of each slot passes).
    pub ready: bool,
    /// `event<N>`: the arrival count written in the declaration.
    pub arrivals: Option<u32>,
    /// The shared buffer of its mbarriers (`u64`, one per slot; a [`LocalPlace::SharedBuffer`]).
    pub barriers: VarId,
    /// The per-thread phase bits of its slots for plain waits (`wait e[i]`; a mutable `u64`
    /// device scalar, bit i the parity slot i's next wait expects).
    pub phases: VarId,
    /// Where it is triggered, with the conditions under which a thread gets there.
    pub triggers: Vec<TriggerSite>,
    /// Triggered with `trigger.cluster` (spec-tier3 §2.6; the first such statement): each
    /// triggering thread arrives on the slot of every block of the cluster, and waits acquire
    /// at cluster scope.
    pub cluster: Option<crate::source::Span>,
    /// A `local event` (spec-tier3 §2.4): per slot a per-thread flag ([`Event::barriers`] is
    /// then a local `bool` buffer), set by `trigger`, waited for and cleared by `wait`, tested
    /// by `while (e)`.
    pub local: bool,
    /// A `global event` (spec-tier3 §2.4, host-declared): per slot a byte of a zeroed device
    /// buffer ([`Event::barriers`] is then that global `u8` buffer); its `trigger`s and `wait`s
    /// are [`StmtKind::GlobalFlag`] statements.
    pub global: bool,
}

impl Event {
    /// The number of slots (mbarriers).
    pub fn slots(&self) -> u32 {
        self.dims.iter().product()
    }
}

/// A `trigger` of an event: which threads of the block execute it, as far as the compiler can
/// tell (for the arrival count, spec-tier3 §2.7).
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerSite {
    /// The `trigger` statement.
    pub span: Span,
    /// The linear slot it arrives on (`e[i]`, through immutable locals like the conditions);
    /// `None` for a ring operand (`e.at(k)`), which arrives on every slot in turn.
    pub slot: Option<HExpr>,
    /// The predicates of the enclosing `inthreads`, outermost first, with immutable device
    /// scalars replaced by their initial values: a thread triggers when all hold.
    pub conditions: Vec<HExpr>,
    /// `trigger … after …`: only the issuer arrives (a fill event, one arrival per
    /// generation, spec-tier3 §2.7).
    pub fill: bool,
}

/// `trigger e after f0, f1, …;` (spec-tier3 §2.5).
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerAfter {
    /// The fill event's slot.
    pub slot: EventSlot,
    /// The group locals of the bound TMA futures (consumed: no `wait` needed).
    pub futures: Vec<VarId>,
    /// The issuing role, as [`Tma::role`]: `None` in block-level code.
    pub role: Option<Vec<HExpr>>,
}

/// One slot of an event named by `trigger` or `wait`.
#[derive(Debug, Clone, PartialEq)]
pub struct EventSlot {
    /// The event.
    pub event: EventId,
    /// Which slot, and how its phase is known.
    pub index: SlotIndex,
    /// The operand as written.
    pub span: Span,
}

/// How a `trigger`/`wait` operand selects a slot.
#[derive(Debug, Clone, PartialEq)]
pub enum SlotIndex {
    /// `e`, `e[i]`, `e[i][j]`: the slot's linear index (s32). Each thread tracks the slot's
    /// phase itself ([`Event::phases`]).
    Fixed(HExpr),
    /// `e.at(k)` on a one-dimensional ring of N slots: slot `k mod N`, generation `k / N`.
    Order(HExpr),
}

impl SlotIndex {
    /// The slot's linear index or the ring order.
    pub fn expr(&self) -> &HExpr {
        match self {
            SlotIndex::Fixed(e) | SlotIndex::Order(e) => e,
        }
    }
}

/// Rewrites every `%[name]` reference to a named operand in an asm template with what `f`
/// returns for the name (kept as written when it returns `None`); `%%` is a literal percent.
pub fn rewrite_named_operands(template: &str, mut f: impl FnMut(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("%%") {
            out.push_str("%%");
            rest = after;
            continue;
        }
        if let Some((name, after)) = tail.strip_prefix("%[").and_then(|t| t.split_once(']')) {
            if let Some(replacement) = f(name) {
                out.push_str(&replacement);
                rest = after;
                continue;
            }
        }
        out.push('%');
        rest = &tail[1..];
    }
    out.push_str(rest);
    out
}

/// Inline assembly (spec §17.4).
#[derive(Debug, Clone, PartialEq)]
pub struct Asm {
    /// `volatile`.
    pub volatile: bool,
    /// The template, as written (escapes processed).
    pub template: String,
    /// Output operands: a mutable scalar or an element (an element is written back from a
    /// temporary after the asm).
    pub outputs: Vec<AsmOutput>,
    /// Input operands.
    pub inputs: Vec<AsmInput>,
    /// Clobbers.
    pub clobbers: Vec<String>,
}

/// An output operand of inline assembly.
#[derive(Debug, Clone, PartialEq)]
pub struct AsmOutput {
    /// `[name]`, if written.
    pub name: Option<String>,
    /// The constraint (`=r`, `+r`, …).
    pub constraint: String,
    /// Where the output goes.
    pub place: Place,
    /// The place's scalar type.
    pub ty: ElemTy,
}

/// An input operand of inline assembly.
#[derive(Debug, Clone, PartialEq)]
pub struct AsmInput {
    /// `[name]`, if written.
    pub name: Option<String>,
    /// The constraint (`r`, `l`, `n`, …).
    pub constraint: String,
    /// The value.
    pub value: HExpr,
}

/// A DMA copy (spec §14) as what it does to elements: a loop over the copied box whose
/// iterations are shared by the participating threads. Each iteration runs `element` (the
/// assignment of one destination element, usually from one source element) with `indices`
/// bound to one point of the box; the bounds analysis and the emitters treat `element` as
/// the statement it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Dma {
    /// Whether this is a plain copy (`dma.copy`): box element `i` of the source goes to box
    /// element `i` of the destination (not a transposition or padding).
    pub plain: bool,
    /// The source view (what is read).
    pub src: View,
    /// The destination view (what is written).
    pub dst: View,
    /// The loop variables, one per dimension of the box (device locals without declaration:
    /// the emitter declares them in the loop).
    pub indices: Vec<VarId>,
    /// The box: the extents the loop variables run through (`[0, extent)` each).
    pub extents: Vec<Dim>,
    /// The assignment of one destination element ([`StmtKind::Assign`] of a
    /// [`Place::Elem`]).
    pub element: Stmt,
    /// Whether the copy is asynchronous (`dma.copy.async`): it may complete later, when the
    /// bound future is waited. The emitter may still copy at issue time.
    pub is_async: bool,
    /// Who executes the loop.
    pub participants: Participants,
    /// The future whose data is a buffer of this DMA (`=> shared`, `=> local`): made to
    /// point at the buffer before the copy.
    pub bind: Option<FutureBind>,
    /// For an asynchronous copy: the future's group local, set to the copy's group. For an
    /// asynchronous TMA load it holds the number of the kernel's mbarrier the copy completes
    /// (the barrier travels with the future through `swap`).
    pub group: Option<VarId>,
    /// A TMA transfer (tier 3 §3): the copy engine moves the box; the element loop above is
    /// only its meaning. `dma.copy.swiz<N>` has no TMA but a swizzle ([`Dma::swizzle`]).
    pub tma: Option<Box<Tma>>,
    /// `.swiz<N>` (tier 3 §4): the shared side of the copy is laid out swizzled with period
    /// `N` bytes (32, 64 or 128; 0 = none).
    pub swizzle: u32,
}

/// What a TMA statement needs besides the element loop (tier 3 §3.4, §10.2).
#[derive(Debug, Clone, PartialEq)]
pub struct Tma {
    /// `tma.copy` of a shared tile into global memory (else a load into shared memory).
    pub store: bool,
    /// The statement's number in its kernel: its tensor map is the kernel's trailing
    /// parameter of that number.
    pub index: u32,
    /// The root tensor of the global side (a parameter or a function-level global buffer).
    pub global: BufferRef,
    /// The box: the tile's extent along every dimension of the root tensor (1 for a dimension
    /// the view fixes), outermost first.
    pub box_dims: Vec<u64>,
    /// The tile origin's element coordinate in every dimension of the root tensor, outermost
    /// first (device expressions).
    pub coords: Vec<HExpr>,
    /// The shared side (the whole buffer, or a dense part of one): its first element.
    pub shared: View,
    /// `.evict_first` (`Some(true)`) / `.evict_last` (`Some(false)`).
    pub evict_first: Option<bool>,
    /// `.promote<B>` (64, 128 or 256; 128 by default).
    pub promote: u32,
    /// The mbarrier a synchronous load completes (its number in the kernel); an asynchronous
    /// load uses the one its future's group local names.
    pub barrier: u32,
    /// The warpgroup role that issues it (spec-tier3 §3.3, §7.1): the predicates of the
    /// enclosing `inthreads` (outermost first, through immutable locals) when the statement is
    /// in thread-level code under a warpgroup-selecting `inthreads`; `None` for block-level
    /// code (issuer: thread 0, scope: the block).
    pub role: Option<Vec<HExpr>>,
    /// The event slot a load bound by `trigger e after f` completes instead of its own
    /// mbarrier (spec-tier3 §2.5): the slot the trigger names, evaluated where the load is.
    pub event: Option<EventSlot>,
    /// `.multicast` (spec-tier3 §3.6): a load that cluster rank 0 issues for every block of
    /// the cluster (each block arms its own mbarrier at the same offset).
    pub multicast: bool,
}

/// Who executes a DMA (spec §14.5) or waits for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Participants {
    /// Every thread of the block (a DMA in block-level code): they share the loop and
    /// synchronise afterwards.
    Block,
    /// The threads of one instance of an intra-block level (a DMA in the body of a `group`
    /// level): they share the loop and synchronise afterwards.
    Level(LevelId),
    /// The threads of one instance of an intra-block level, inside an `inthreads` (or an
    /// `if`/`while`) whose condition depends on an intra-block index (`inthreads (g == 0)` in
    /// the body of `group` level `g`): the instance's threads all run the DMA or none does,
    /// but other instances may not, so they share the loop and synchronise among themselves
    /// only — never with a barrier of the whole block.
    SelectedInstance(LevelId),
    /// The executing thread alone (a DMA in thread-level code, or into `local` memory).
    Thread,
    /// Every thread of every block of the launch: a host-level DMA that is a kernel of its own
    /// ([`KernelOrigin::HostDma`]). The threads share the loop; the launch's end is the
    /// synchronisation.
    Grid,
}

/// How a DMA binds its future to the buffer it allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FutureBind {
    /// The future ([`LocalPlace::Future`]).
    pub future: VarId,
    /// The buffer this DMA statement allocated (a shared or local buffer declared just
    /// before it).
    pub buffer: VarId,
    /// Whether this DMA is the future's declaration (then it always points at `buffer`);
    /// otherwise it re-binds a placeholder, which keeps the buffer it already has (after a
    /// `swap`, another DMA's) and takes `buffer` only while it has none.
    pub first: bool,
}

/// Which threads a [`StmtKind::Barrier`] waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BarrierScope {
    /// The threads of the executing warp (`__syncwarp()`).
    Warp,
    /// The threads of the block (`__syncthreads()`).
    Block,
    /// Every thread of the grid (`cooperative_groups::this_grid().sync()`); only in kernels
    /// launched cooperatively, whose blocks are all resident at once.
    Grid,
    /// Every thread of the block's cluster (`barrier.cluster.arrive.release` + `wait.acquire`);
    /// only in kernels launched in clusters (spec-tier3 §1.2).
    Cluster,
}

/// Which observers a [`StmtKind::Fence`] orders memory operations for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FenceScope {
    /// The threads of the block (`__threadfence_block()`).
    Block,
    /// Every thread of the device (`__threadfence()`).
    Device,
}

/// The binder of one parallel-by level, after inference and filling.
#[derive(Debug, Clone, PartialEq)]
pub struct Binder {
    /// One entry per sub-dimension (1–3): the bounded-integer local, or `None` when anonymous
    /// (`parallel by 4`, implicit filled levels).
    pub vars: Vec<Option<VarId>>,
    /// The tuple name (`t` of `t = {x, y} by […]`), if written (uses are expanded).
    pub tuple: Option<VarId>,
    /// The extent of each sub-dimension (same length as `vars`).
    pub extents: Vec<Dim>,
    /// Whether the level was filled in by sema (spec §8.3 rule 4/5), i.e. not written.
    pub implicit: bool,
}

/// A device-entry parallel-by: one kernel and its launch (spec §8.4–§8.5). A host-level DMA
/// that is not a whole-buffer copy is one too ([`KernelOrigin::HostDma`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ParallelTree {
    /// Its number among the function's kernels, in source order.
    pub id: KernelId,
    /// What the kernel comes from.
    pub origin: KernelOrigin,
    /// The whole parallel-by (or DMA) statement.
    pub span: Span,
    /// `parallel.async`: the host does not wait for the kernel.
    pub is_async: bool,
    /// `parallel<s>`: the stream parameter the launch is bound to.
    pub stream: Option<ParamId>,
    /// The block level: up to three sub-dimensions, component `i` the block's index in
    /// dimension `i`. An implicit block level is one anonymous sub-dimension of extent 1.
    pub block: Binder,
    /// The kernel body (device code, run by every thread of every block). Intra-block levels
    /// are [`StmtKind::InnerParallel`] statements inside it.
    pub body: Vec<Stmt>,
    /// Host checks to run right before this launch (bounds that depend on host locals).
    pub launch_checks: Vec<Check>,
    /// `[[launch_bounds]]`, `[[maxnreg]]`, `block<cooperative>`.
    pub attrs: KernelAttrs,
    /// The `cluster` level around the block level (spec-tier3 §1.2), if written: its
    /// sub-dimensions (constant extents, at most 16 blocks in all) and their variables, which
    /// come from the block's rank in its cluster.
    pub cluster: Option<Binder>,
}

/// Where a kernel comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelOrigin {
    /// A device-entry parallel-by as written.
    ParallelBy,
    /// A DMA in host code that is not a whole-buffer copy (spec §14.6: views, `dma.pad`,
    /// `dma.transp`): a synchronous kernel whose body is that one DMA, shared by every thread of
    /// the launch ([`Participants::Grid`]). Its block level is implicit (one anonymous
    /// sub-dimension of extent 1): how many blocks and threads cover the DMA's box is lowering's
    /// decision, like the stream it runs on.
    HostDma,
}

/// How a kernel is compiled and launched, beyond its shape (spec §8.8, §8.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelAttrs {
    /// `[[launch_bounds(max_threads, min_blocks, max_cluster)]]` (`__launch_bounds__`).
    pub launch_bounds: Option<LaunchBounds>,
    /// `[[maxnreg(n)]]`: at most `n` registers per thread (`__maxnreg__`).
    pub max_registers: Option<u32>,
    /// `block<cooperative>`: launched with every block resident at once, so that the blocks
    /// can wait for each other ([`BarrierScope::Grid`]).
    pub cooperative: bool,
    /// The mbarriers of its TMA loads (tier 3 §10.1): slots after the shared pool, initialised
    /// at the kernel's start.
    pub tma_barriers: u32,
    /// Its TMA statements (each has a tensor map, a trailing kernel parameter).
    pub tma_maps: u32,
    /// The largest swizzle period of its transfers (0 = none): the shared pool's alignment
    /// is at least 8 times it.
    pub swizzle: u32,
}

/// The arguments of `__launch_bounds__`, resolved: `max_threads` is the written count, or
/// the kernel's own thread count for `_`/0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchBounds {
    /// Most threads per block the kernel is launched with.
    pub max_threads: u32,
    /// Fewest resident blocks per multiprocessor the compiler should allow for.
    pub min_blocks: Option<u32>,
    /// Most blocks per cluster.
    pub max_cluster: Option<u32>,
}

impl ParallelTree {
    /// Threads per block (spec §8.4): the thread total of the first intra-block level of the
    /// body (all of them agree, `E0611`), or 1 when the body has none.
    pub fn threads_per_block(&self) -> Dim {
        nested_levels(&self.body).first().map_or(Dim::Const(1), |l| l.thread_total())
    }
}

/// A host value used inside a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capture {
    /// A parameter (spanned: device pointer; scalar: by value). Never a stream.
    Param(ParamId),
    /// A host local (global buffer: device pointer; host scalar: by value, per-thread copy).
    Var(VarId),
    /// A symbolic dimension (by value).
    Sym(SymId),
    /// An anonymous extent `params[param].shape()[dim]` (by value).
    Extent(ParamId, u32),
}

/// An intra-block parallel-by level (group-4, group or thread) inside a kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct InnerParallel {
    /// Its number within the kernel (pre-order).
    pub id: LevelId,
    /// The parallel-by item this level comes from.
    pub span: Span,
    /// The inferred level.
    pub level: Level,
    /// The binder and extents of this level: one instance per combination of its indices,
    /// the first sub-dimension most significant (spec §8.4).
    pub binder: Binder,
    /// The body (device code, run by every thread of every instance).
    pub body: Vec<Stmt>,
}

impl InnerParallel {
    /// Threads of one instance of this level (spec §8.4): the thread total of the first level
    /// nested in its body (all of them agree, `E0611`), else the level's own unit
    /// ([`Level::unit_threads`]).
    pub fn threads_per_instance(&self) -> Dim {
        threads_per_instance(self.level, &self.body)
    }

    /// Threads of all instances of this level together: the product of its extents and
    /// [`InnerParallel::threads_per_instance`].
    pub fn thread_total(&self) -> Dim {
        let mut dims = self.binder.extents.clone();
        dims.push(self.threads_per_instance());
        arith::dim_product(&dims, self.span)
    }
}

/// Threads of one instance of a `level` whose body is `body` (see
/// [`InnerParallel::threads_per_instance`]; semantic analysis asks before the node exists).
pub fn threads_per_instance(level: Level, body: &[Stmt]) -> Dim {
    nested_levels(body)
        .first()
        .map_or_else(|| Dim::Const(level.unit_threads()), |l| l.thread_total())
}

/// The device-entry parallel-bys (kernels) of a function body, in source order (their
/// [`ParallelTree::id`] order).
pub fn kernels(body: &[Stmt]) -> Vec<&ParallelTree> {
    struct Kernels<'a>(Vec<&'a ParallelTree>);
    impl<'a> visit::Visitor<'a> for Kernels<'a> {
        fn stmt(&mut self, stmt: &'a Stmt) -> visit::Walk {
            match &stmt.kind {
                StmtKind::Parallel(tree) => {
                    self.0.push(tree);
                    visit::Walk::Skip
                }
                _ => visit::Walk::Continue,
            }
        }

        fn expr(&mut self, _: &'a HExpr) -> visit::Walk {
            visit::Walk::Skip
        }
    }
    let mut kernels = Kernels(Vec::new());
    visit::walk_stmts(&mut kernels, body);
    kernels.0
}

/// The intra-block levels directly inside `body` (through blocks, branches and loops, not
/// inside another level), in source order.
pub fn nested_levels(body: &[Stmt]) -> Vec<&InnerParallel> {
    struct Levels<'a>(Vec<&'a InnerParallel>);
    impl<'a> visit::Visitor<'a> for Levels<'a> {
        fn stmt(&mut self, stmt: &'a Stmt) -> visit::Walk {
            match &stmt.kind {
                StmtKind::InnerParallel(inner) => {
                    self.0.push(inner);
                    visit::Walk::Skip
                }
                // Another kernel's levels are not this one's.
                StmtKind::Parallel(_) => visit::Walk::Skip,
                _ => visit::Walk::Continue,
            }
        }

        fn expr(&mut self, _: &'a HExpr) -> visit::Walk {
            visit::Walk::Skip
        }
    }
    let mut levels = Levels(Vec::new());
    visit::walk_stmts(&mut levels, body);
    levels.0
}
