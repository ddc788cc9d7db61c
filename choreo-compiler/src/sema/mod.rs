//! Semantic analysis, tier 1: `ast::File` → checked program ([`crate::hir::Program`]).
//!
//! [`check`] resolves names with proper lexical scoping (spec §4.4 ⚠, §6), types every
//! expression (§5), checks parameters and returns (§7), infers and fills parallel-by levels
//! (§8.3), desugars `with`/`foreach` (§9), computes entry checks (§19.2), kernel captures and
//! buffer read/write sets, and reports every tier-1 rejection rule of §21 as a located error.
//! Tier-2/3 constructs get one `E0901` each and checking continues. It never panics.
//!
//! Modules: `scope` (symbol tables), `types` (element types, promotion, conversions),
//! `fold` (constant folding, §4.5), `expr` (expressions), `shapes` (mdspan/ituple values and
//! extents), `stmt` (statements), `parallel` (parallel-by, level inference and filling),
//! `checks` (parameters, symbolic dimensions, entry checks, return types). What a kernel
//! captures from the host is computed once, by `lower` (`KernelPlan::captures`).
//!
//! # Error codes
//!
//! Names, declarations, types (§5, §6, §12, §13):
//! - `E0401` use of an undeclared name
//! - `E0402` name declared twice in one scope (incl. parameter/local and symbol clashes)
//! - `E0403` assignment to an immutable (incl. a bare `x = e` on an immutable outer `x`, §6 ⚠)
//! - `E0404` `int`/`bool` declaration without initialiser (ours, §5.2 ⚠)
//! - `E0405` type cannot be deduced (`mutable d;`)
//! - `E0406` initialiser/assigned value incompatible with the declared type (`bool b = 0;`)
//! - `E0407` operator not applicable to the operand types (`!n`, `n && m`, …)
//! - `E0408` right operand of `<<`/`>>` is not an integer literal
//! - `E0409` `%` / `%=` on floating-point operands (ours)
//! - `E0410` constant division (or `%`, `cdiv`) by zero
//! - `E0411` `f16` mixed with `bf16`
//! - `E0412` string or pointer variables
//! - `E0413` re-assignment that changes the kind/type of a name; whole-buffer assignment
//! - `E0414` an integer was expected (index, extent, shape item)
//! - `E0415` a value of the wrong kind here (spanned data, stream, string, `_`, ituple where an
//!   integer is required)
//! - `E0416` mutable, per-thread or bounded-current values in an mdspan/ituple/shape
//! - `E0417` rank mismatch in mdspan/ituple arithmetic
//! - `E0418` `+ - *` between two mdspans
//! - `E0419` non-positive (or otherwise invalid) extent
//! - `E0420` declared rank differs from the value's rank
//! - `E0421` mdspan bound with `=` / ituple value bound with `:` (kind mismatch)
//! - `E0422` invalid dimension/component selection `x(i)` / `x.span(i)` (non-constant, out of
//!   range)
//! - `E0423` `.span` of a value that has no shape
//! - `E0424` element access with the wrong number of indices
//! - `E0425` element access (read or write) in host code (§12 ⚠, §22.5)
//! - `E0426` `.at` on a value that is not spanned data
//! - `E0427` `#v` of a value that is not a bounded variable
//! - `E0428` invalid `__to` conversion (also: a sub-byte integer or bool as its source or target)
//! - `E0429` math built-in with wrong argument count or types
//! - `E0430` buffer initialiser `{v}` is not a scalar
//! - `E0431` global buffer declared inside a parallel-by
//! - `E0432` `global` scalar
//! - `E0433` `shared`/`local` declared in host code
//! - `E0434` `?:` arms of incompatible types
//! - `E0435` `[auto]` shape: nothing to infer it from
//! - `E0436` constant element index out of bounds
//!
//! Storage, views, spanned arrays (§11, §13.3, tier 2):
//! - `E0437` view operation given a wrong number of factors, extents, indices or strides for
//!   the data's rank
//! - `E0438` `chunkat` tiling factor that is not a bounded integer (or arithmetic on one)
//! - `E0439` view out of range: a tiling factor larger than the extent, a subspan larger than
//!   the source, a constant tile index or view offset outside the source, an empty `modspan`
//! - `E0440` `span_as` with a different element count, or of data that is not contiguous
//! - `E0441` `.sqz` not directly after `.subspan`, `.span_as` or `.view`
//! - `E0442` spanned arrays: non-constant or non-positive array dimensions, wrong number of
//!   array indices, constant array index out of bounds, an array used without `[i]`, `[i]` on
//!   something that is not an array
//! - `E0443` `local` buffer whose shape is not known at compile time
//! - `E0444` initialiser on a `shared` scalar
//!
//! DMA, futures, `inthreads` (§10, §14, tier 2):
//! - `E0445` DMA in a direction the GPU does not allow (§14.2: sync global → global in a
//!   kernel; async anything but global → shared)
//! - `E0446` DMA between different element types
//! - `E0447` DMA between different ranks
//! - `E0448` `.async` DMA without a named future
//! - `E0449` DMA into a new `shared`/`local` buffer in host code, or into a new `global`
//!   buffer in a kernel
//! - `E0450` futures: `wait` of a synchronous future or of something that is not a future,
//!   `swap`/`rotate` of futures of different types, scopes or kinds, a placeholder used
//!   before a DMA binds it or bound to something else than a new buffer, a future bound to
//!   another name
//! - `E0451` DMA configuration: `dma.pad` paddings of the wrong rank, not constant, or with
//!   interior padding; `dma.transp` that is not a permutation; `.load` on `dma`
//! - `E0452` `inthreads` in host code, with a predicate that is not a strictly divergent
//!   condition, or `.async` inside another `inthreads`
//! - `E0453` asynchronous DMA not waited on some path before the kernel ends, or issued
//!   again before its previous copy was waited
//! - `E0458` `dma.pad`/`dma.transp` into existing data whose (constant) shape is not the
//!   padded/transposed source's
//! - `E0459` a DMA `=> shared` in the body of a `group` level with several instances per
//!   block (they would share one buffer)
//! - `E0460` a TMA statement the copy engine cannot move (tier 3 §3.2): outside block-level
//!   code and outside a warpgroup role (thread-level code under an `inthreads` selecting
//!   warpgroups, §3.3), a tile that depends on an intra-block index in a role, in host code, a global side that is not a box of a global tensor, a box that is
//!   not a compile-time constant, above 256, of rank above 5 or with an inner extent that is
//!   not a multiple of 16 bytes, a shared side that is not contiguous, not 128-byte aligned
//!   or of another shape, sub-byte integers
//! - `E0461` `.swiz<N>` misuse (tier 3 §4): rows not a multiple of N bytes, part of a shared
//!   buffer, a swizzled `dma.copy` with no shared side or tiles of different shapes
//! - `E0463` a statement that rewrites the shared source of an asynchronous TMA store
//!   (`tma.copy.async`) before the store's `wait` (tier 3 §3.3 ⚠)
//! - `E0464` `.multicast` misuse (tier 3 §3.6): outside a kernel launched in clusters, on a
//!   store
//! - `E0465` `trigger.cluster` misuse (tier 3 §2.6): outside a kernel launched in clusters,
//!   on a local event, or on an event also triggered with a plain `trigger`
//! - `E0466` local or global event misuse (tier 3 §2.4): a local event declared on the host
//!   or a global one in device code, an arrival count `event<N>`, a ring operand
//!   `.at(order)`, `= ready`/`.cluster`/`after` on a global event, a host `wait` of one, a
//!   global event mixed with others or used by the instances of a `group` level
//! - `E0467` `while (e)` on a shared event ("event predicates require a local or global
//!   event", tier 3 §2.4 ⚠) or outside a parallel-by
//! - `E0470` event declaration in the wrong place or of the wrong form: `shared` on the host,
//!   inside `inthreads` or a loop, no storage, array extents that are not constants in
//!   [1, 64] (or more than 64 slots), an arrival count `event<N>` out of [1, 2^20 − 1]
//! - `E0471` `trigger`/`wait` operand that is not one event slot: a non-event, an event array
//!   without an index, indices that do not match the array, a constant index out of range,
//!   `.at(order)` on a single event or a multi-dimensional array, a non-integer or negative
//!   order; an event used as a value or assigned; `trigger` on the host; an increment nested
//!   in an order or index (only `e.at(o++)`, `e.at(++o)` and `--` forms), of a variable that is
//!   not a mutable integer of the thread, or whose variable another operand of the statement
//!   uses
//! - `E0472` an event that is triggered but never waited ("some asyncs are not explicitly
//!   waited")
//! - `E0475` a TMA statement or trigger-after of a warpgroup role under an `if`/`while` on a
//!   thread index inside the role (lowering reports roles that are not whole warpgroups)
//! - `E0476` `trigger e after f…` (tier 3 §2.5): not exactly one event, a dependency that is
//!   not a named asynchronous TMA load future (a `dma.copy.async` future has no completion
//!   event to bind), a future already waited or consumed twice, a consumed future waited, a
//!   future whose load is not in the trigger's block before it, an order whose variables change
//!   between load and trigger, an incremented order shared by several futures, a fill event
//!   also triggered without `after`
//! - `E0479` `trigger.cluster e after f` of a future that is not a multicast TMA load, or a
//!   plain `trigger e after f` of a multicast one (tier 3 §2.5, §2.6)
//! - `E0477` `o++;` / `--o;` statements on something other than a mutable integer local
//! - `E0478` an increment or decrement used as a value (not a statement of its own, not the
//!   direct argument of an event's `.at(…)`)
//!
//! Calls into C++ and built-ins (§17, §18):
//! - `E0454` `call` outside a parallel-by, a call result with no declared type, an argument
//!   that cannot cross into C++ (mdspan, ituple, event), a template argument that is not a
//!   compile-time constant, `nullptr` outside an argument
//! - `E0455` atomics: outside a parallel-by, wrong argument count, first argument not an
//!   element of shared or global data, element type the operation does not support
//! - `E0456` named barriers (`__bar_sync`/`__bar_arrive`: barrier 0–14, thread count a
//!   positive multiple of 32) and inline assembly (device only; outputs are mutable scalars or
//!   elements)
//! - `E0457` `select`: outside a parallel-by or where no data is named or copied, an index
//!   that is not an integer or not provably in range, candidates of different types or that
//!   are views
//!
//! Parameters and returns (§7):
//! - `E0501` scalar parameter passed by reference
//! - `E0502` `global` parameter passed by reference
//! - `E0503` `??` dimension on a non-`global` parameter
//! - `E0504` non-positive constant parameter extent
//! - `E0505` parameter dimension expression that is not constant
//! - `E0506` symbolic dimension named like a parameter
//! - `E0507` unknown symbol in the return type
//! - `E0508` `?` dimension in the return type (ours)
//! - `E0509` non-void function without `return`
//! - `E0510` `return` in a `void` function
//! - `E0511` `return` inside a parallel-by
//! - `E0512` value kind that cannot be returned (ituple, mdspan, bounded variable, stream)
//! - `E0513` returned spanned data inconsistent with the return type
//! - `E0514` scalar returned from a spanned function or vice versa; bare `return;` with a type
//! - `E0515` `global`/`&` on a stream or `global` on a scalar parameter
//! - `E0516` a stream used as a value
//!
//! Parallel-by (§8):
//! - `E0601` non-integer parallel bound
//! - `E0602` statically non-positive parallel bound
//! - `E0603` number of names differs from number of bounds
//! - `E0604` more than 3 sub-dimensions
//! - `E0605` `.async` on an inner level
//! - `E0606` level cannot be inferred
//! - `E0607` levels not strictly descending (`block` in `block`, `thread` containing `group`, …)
//! - `E0608` too many levels
//! - `E0609` more than 1024 threads per block (static; dynamic counts get an entry check)
//! - `E0610` thread extent under `group` not a multiple of 32
//! - `E0611` sibling inner parallel-bys with different thread totals
//! - `E0612` stream binding not on a block-level (outermost) parallel-by
//! - `E0613` stream binding to something that is not a `stream` parameter
//! - `E0614` ituple used as a parallel/with bound
//! - `E0615` level not meaningful for the CUDA target (`term`, bare `device`)
//! - `E0616` parallel bound not computable on the host (per-thread or bounded-current value)
//! - `E0617` `[[launch_bounds]]` / `[[maxnreg]]` misuse: not on a block-level parallel-by,
//!   arguments that are not compile-time integers in range, `max_threads` below the kernel's
//!   thread count, `_` with a run-time thread count
//! - `E0618` `group-4` misuse: a thread level under it that is not 128 threads, an explicit
//!   `group` inside it
//! - `E0619` `cluster` misuse: not outermost or not directly around an explicit block level,
//!   two in a kernel, extents not constant or above 16 blocks, a constant grid x extent not a
//!   multiple of the cluster size, with `<cooperative>` or attributes on the cluster statement,
//!   `sync.barrier : cluster` outside a cluster kernel
//! - `E0620` `croq::cuda::setreg_inc/dec` misuse: host code, not one compile-time register
//!   count in [24, 256] that is a multiple of 8, written directly in a non-block level
//!
//! Architecture:
//! - `E0805` construct the target architecture does not have (`group-4`, `cluster`,
//!   `setmaxnreg`): the message names the construct and the architecture, the label the
//!   minimum one
//!
//! Control flow, statements (§9, §15, §16):
//! - `E0701` `foreach` over something that is not a `with` variable
//! - `E0702` number of binder names differs from the rank
//! - `E0703` `_` as a binder name
//! - `E0704` duplicate `foreach c = …` local
//! - `E0705` `break`/`continue` outside a loop, `yield` outside a parallel-by
//! - `E0706` `while` condition is not `bool`
//! - `E0707` range offsets that are not integers
//! - `E0708` `if` condition is not a scalar
//! - `E0709` invalid range step
//! - `E0710` `print` argument that cannot be printed
//! - `E0711` synchronisation statement in the wrong place (`sync.global` in a kernel,
//!   `sync.shared`, `sync.barrier`, `sync.fence` on the host)
//! - `E0713` statically false `assert` ("choreo assertion abort: …")
//! - `E0714` `unroll(n)` factor that is not positive or exceeds the loop's trip count
//!
//! MMA (spec-tier3 §5, `sema::mma`):
//! - `E1001` MMA statement outside the body of a `: group` (warp) level
//! - `E1002` MMA operand shapes do not match ("MMA: matrix shapes do not match: …")
//! - `E1003` MMA tile that is not a rank-2 view with constant extents
//! - `E1004` `mma.fill` of a non-scalar ("Expect a scalar value for MMA fill.")
//! - `E1005` no MMA configuration, or one the architecture is too old for
//! - `E1006` a fragment used in two roles or configurations
//! - `E1007` a whole fragment array where one fragment is needed, or too many indices
//! - `E1008` fragment array index out of bounds
//! - `E1009` spanned data as a WMMA/mma.sync operand (direct operands are WGMMA's)
//! - `E1010` not a fragment where one is needed (operands: `mma.load`ed; accumulators: filled
//!   or loaded), or a fragment used as a value
//! - `E1011` fragment array extent that is not a constant in [1, 64]
//! - `E1012` `mma.load VIEW, frag` ("mma.loadR is only supported for WGMMA.")
//! - `E1013` WMMA tile whose last dimension is strided, or a WMMA store of another type
//! - `E1014` MMA tile of local memory, or empty
//! - `E1015` fragment assignment other than `+= -= *= /=` with a scalar
//! - `E1016` an accumulator (or loaded fragment) no MMA executes with
//! - `E1017` `mma.fill` or `mma.store` of an operand fragment
//! - `E1018` `mma.store` tile larger than the accumulator
//! - `E1019` `mma.load.swiz<N>` disagreeing with the swizzle of the copy that filled the tile
//! - `E1020` a WGMMA statement not executed by whole warpgroups, or a WGMMA configuration
//!   executed by a warp
//! - `E1021` a fragment as operand B of a WGMMA (B is a direct shared operand)
//! - `E1022` an MN-major operand of an 8-bit or tf32 WGMMA
//! - `E1023` a direct WGMMA operand that is not in shared memory
//! - `E1024` a direct WGMMA operand that no swizzled copy filled
//! - `E1025` a direct WGMMA operand that no matrix descriptor describes (not whole rows of its
//!   buffer; an array of buffers with rows wider than the swizzle period)
//! - `E1026` an asynchronous WGMMA waited more than once ("wait observes future 'q' more than
//!   once."), also from a loop it is not in
//! - `E1027` an asynchronous WGMMA never waited ("some asyncs are not explicitly waited: q.")
//! - `E1028` an accumulator named while its asynchronous WGMMA is not waited
//! - `E1029` a direct WGMMA operand that differs between the threads of a warpgroup
//! - `E1030` `[[schedule(k_tiles(…))]]` that is not a permutation of the execution's K steps
//! - `E1031` an index-dependent fragment operation on a WMMA accumulator (opaque layout)
//! - `E1032` a fragment whose layout cannot be inferred consistently
//! - `E1033` a fragment element accessed outside `apply`, or not at the iterated element
//! - `E1034` a malformed shaped fragment declaration (`frag T [shape] name`)
//! - `E1035` a fragment reduction over a dimension other than 1
//! - `E1036` no fragment layout to iterate or reduce (UNIFORM rows, accumulator not executed)
//! - `E1037` `all_reduce_sum` of a fragment that is not REPLICATED_1D
//! - `E1038` `all_reduce_sum` of a fragment with no layout yet
//! - `E1039` fragments of different shapes (`copy`, reductions, `apply` binders)
//! - `E1040` not a fragment where a fragment operation needs one
//! - `E1041` a shaped fragment that cannot be the register A operand of a WGMMA (RS mode)
//! - `E1046` a sparse MMA without its metadata operand (the implicit `<A>_mdata` form)
//! - `E1047` sparse metadata that is not an `mma.load`ed `u8 [M, K/8]` fragment
//! - `E1048` a sparse MMA whose K is not a multiple of 4
//! - `E1049` a sparse MMA whose compressed A is not K-major (`col.*`)
//! - `E1050` `[[schedule(k_tiles(…))]]` on a sparse MMA
//! - `E1051` `mma.scale` with no preceding plain WGMMA execution in the statement list
//! - `E1052` `mma.scale` of a fragment that is not an accumulator
//! - `E1053` a block scale `SA` that is not `[M, 1]` or `[1, M]`
//! - `E1054` block scale factors that are not f32
//! - `E1055` block-scaled MMA on an accumulator that is not a float WGMMA accumulator
//! - `E1056` a sparse WGMMA whose operands are not K-major (`mma.row.row.sp`)
//! - `E1057` operand B of a sparse WGMMA with a swizzle narrower than one instruction's K
//! - `E1066` a plain `mma.store` to shared memory under an `if`/`while` on an intra-block
//!   index (outside an `inthreads` role, or inside one): its barrier cannot count the threads
//!   that come (`sema::mma_store_role`)
//! - `E1067` the tile of a plain `mma.store` to shared memory in an `inthreads` role accessed
//!   by threads outside the role (the role's barrier does not order them)
//! - `E1069` a synchronous `inthreads` under an `if`/`while` on an intra-block index (its block
//!   barrier would wait for the threads the condition leaves out)
//! - `E1073` a register A operand of a sparse WGMMA (RS mode) that is not `[64, 16·n]`
//!   (8-bit: `[64, 32·n]`)
//!
//! Not supported:
//! - `E0901` construct of tier 2 or 3, not supported yet
//! - `E0902` construct not supported on the CUDA target (out of scope)
//!
//! Warnings: `W0401` lossy implicit conversion, `W0402` reinterpreting implicit conversion,
//! `W0601` nested parallel-by mixes annotated and unannotated levels, `W0603` `<cooperative>`
//! on a level other than the outermost block level (ignored), `W0604` `[[maxnreg]]` next to
//! `[[launch_bounds]]` (nvcc takes one; launch_bounds is kept), `W0605` `setmaxnreg` under a
//! condition that may split a warpgroup, `W0602` host mutable
//! assigned inside a parallel-by (changes a per-thread copy), `W0701` `foreach` step (upstream
//! ignores it), `W0403` a `chunkat`/`chunk` factor that does not divide the extent (the
//! remainder is in no tile), `W0404` `span_as` of a view that may not be contiguous,
//! `W0405` DMA whose source and destination shapes differ with neither inside the other,
//! `W0406` `.swiz` without a period (no swizzle), `W0407` element access of a shared buffer
//! that a swizzled copy wrote (it sees the physical layout), `W0408` a kernel that reads a
//! buffer it stored with TMA (visible only at the kernel's end), `W0409` a copy out of a shared
//! tile with another swizzle than the copy that wrote it,
//! `W0702` deprecated `sync.shared`, `W0705` a `println!` argument only known at run time,
//! `W0470` `trigger` outside `inthreads` (every thread of the block arrives),
//! `W0471` an event that is waited but never triggered, `W0472` a fill event (`trigger …
//! after`) declared with an arrival count other than 1.
//!
//! `W1001` an `mma.store` tile smaller than the accumulator (only its part is written),
//! `W1046` a read of a shared tile that `mma.store.async` wrote, before any synchronisation.
//!
//! Notes: `N0701` the output of a compile-time `print!`/`println!`; `N0473` an unswizzled copy
//! inheriting the swizzle of the `mma.load.swiz<N>` that reads its tile (spec-tier3 §4.3).

mod calls;
mod checks;
mod dma;
mod events;
mod events_cluster;
mod events_global;
mod events_local;
mod expr;
mod frag;
mod inthreads;
mod mma;
mod mma_scale;
mod mma_sparse;
mod mma_store_async;
mod mma_store_role;
use crate::hir::arith as fold;
mod parallel;
mod scope;
mod shapes;
mod steps;
mod stmt;
mod swizzle_infer;
mod tma;
mod tma_async;
mod types;
mod views;
mod wgmma;
mod wgmma_sparse;
mod wspipe;

use crate::ast;
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::hir::{
    self, Access, Check, Dim, HExpr, HExprKind, Local, LocalOrigin, LocalPlace, ParamId, ReturnTy,
    SpannedTy, SymId, Ty, VarId,
};
use crate::source::{SourceDb, Span};
use crate::target::Target;
use std::collections::{BTreeSet, HashMap};

pub use types::elem_from_token;

/// Checks a parsed file for `target` and builds its checked program (which is target-free:
/// the target only sets limits that are checked). Errors and warnings go to `diags`; the
/// returned program is meaningful for code generation only when no error was reported.
pub fn check(
    db: &SourceDb,
    file: &ast::File,
    target: Target,
    diags: &mut Diagnostics,
) -> hir::Program {
    let mut items = Vec::with_capacity(file.items.len());
    for item in &file.items {
        match item {
            ast::Item::Host(span) => items.push(hir::Item::Host(*span)),
            ast::Item::Device(span) => items.push(hir::Item::Device(*span)),
            ast::Item::Cok { span, body } => {
                items.push(hir::Item::Cok { span: *span, body: *body })
            }
            ast::Item::CoFunction(f) => {
                let checker = Checker::new(db, target, diags, f);
                items.push(hir::Item::Function(checker.run(f)));
            }
        }
    }
    hir::Program { items, main_definitions: file.main_definitions.clone() }
}

/// A checked value: what an expression denotes before it is used in a particular position.
#[derive(Debug, Clone)]
pub(crate) enum Val {
    /// A scalar (plain, bounded or bool).
    Scalar(HExpr),
    /// An ituple (`bounded`: a bounded ituple, or built from bounded values).
    Tuple {
        /// The components.
        items: Vec<HExpr>,
        /// Whether it is bounded (prints in braces).
        bounded: bool,
    },
    /// An mdspan (a shape).
    Shape(Vec<Dim>),
    /// A whole buffer (a parameter, or a buffer declared in the function).
    Buffer(hir::BufferRef, SpannedTy),
    /// A view of a buffer (spec §13.3), a buffer of a spanned array, or a named view.
    View(hir::View),
    /// A spanned array (spec §11.5): only `a[i]` makes it data. The type has the array
    /// dimensions first.
    Array(VarId, SpannedTy),
    /// A data future (spec §5.6): `f.data` and `f.span` are its data and shape.
    Future(scope::FutureSym),
    /// A string literal.
    Str(String),
    /// A stream parameter.
    Stream(ParamId),
    /// Already reported.
    Error,
}

impl Val {
    /// A short description of the value's type for messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Val::Scalar(e) => types::ty_name(&e.ty),
            Val::Tuple { items, bounded: true } => format!("bounded ituple<{}>", items.len()),
            Val::Tuple { items, .. } => format!("ituple<{}>", items.len()),
            Val::Shape(dims) => format!("mdspan<{}>", dims.len()),
            Val::Buffer(_, t) => types::ty_name(&Ty::Spanned(t.clone())),
            Val::View(v) => format!(
                "{} (a view)",
                types::ty_name(&Ty::Spanned(SpannedTy {
                    elem: v.elem,
                    dims: v.dims.clone(),
                    storage: v.storage
                }))
            ),
            Val::Array(_, t) => format!("array of {}", types::ty_name(&Ty::Spanned(t.clone()))),
            Val::Future(_) => "future".to_string(),
            Val::Str(_) => "string".to_string(),
            Val::Stream(_) => "stream".to_string(),
            Val::Error => "<error>".to_string(),
        }
    }
}

/// Where statements are being checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Region {
    /// Host code of the wrapper.
    Host,
    /// Device code (inside a kernel) at the given level.
    Device(hir::Level),
}

/// State while checking the statements of one kernel.
#[derive(Debug, Default)]
pub(crate) struct KernelFrame {
    /// How many intra-block levels the kernel has so far (the next [`hir::LevelId`]).
    pub(crate) levels: u32,
    /// Host checks to run before the launch.
    pub(crate) launch_checks: Vec<Check>,
    /// Whether the kernel is launched cooperatively (`block<cooperative>`).
    pub(crate) cooperative: bool,
    /// Whether the kernel is launched in thread-block clusters (`sync.barrier : cluster`).
    pub(crate) cluster: bool,
    /// How many `group-4` levels enclose the statement being checked.
    pub(crate) group4_depth: u32,
    /// Whether the kernel is warp-specialised (an `inthreads.async` at a `group-4` level,
    /// spec-tier3 §7.1) or redistributes registers (`setmaxnreg`): it then gets an occupancy
    /// bound of one block per multiprocessor unless `[[launch_bounds]]` says otherwise.
    pub(crate) register_roles: bool,
    /// Its TMA statements so far (the next tensor-map number).
    pub(crate) tma_maps: u32,
    /// Its mbarriers so far (TMA loads and `tma.any` placeholders).
    pub(crate) tma_barriers: u32,
    /// The group locals of its TMA futures (they hold mbarrier numbers, not copy groups).
    pub(crate) tma_groups: std::collections::BTreeSet<VarId>,
    /// The group locals of its asynchronous TMA stores (`tma.copy.async`, waited with
    /// `cp.async.bulk.wait_group`).
    pub(crate) tma_store_groups: std::collections::BTreeSet<VarId>,
    /// The group locals of its `tma.any` placeholders.
    pub(crate) tma_placeholders: std::collections::BTreeSet<VarId>,
    /// Waits on `tma.any` placeholders that were not (yet) asynchronous stores' futures: a
    /// store bound later (in a loop: `wait f` before `f = tma.copy.async …`) makes them store
    /// waits (sema/tma_async.rs).
    pub(crate) placeholder_waits: Vec<crate::sema::tma_async::PlaceholderWait>,
    /// Whether some TMA load of it multicasts (spec-tier3 §3.6).
    pub(crate) multicast: bool,
    /// The swizzle period (0: none) of the last copy into each shared buffer, and where it
    /// is (`W0409` when a copy out of the buffer uses another one).
    pub(crate) copy_swizzle: std::collections::BTreeMap<hir::BufferRef, (u32, Span)>,
    /// The largest swizzle period of its copies.
    pub(crate) swizzle: u32,
    /// Shared buffers written by a swizzled copy: element accesses see their physical layout
    /// (`W0407` once per buffer; `true` once warned).
    pub(crate) swizzled: std::collections::BTreeMap<hir::BufferRef, bool>,
    /// The unswizzled copies into each shared buffer (spec-tier3 §4.3: they inherit the
    /// swizzle of an `mma.load.swiz<N>` of the buffer).
    pub(crate) plain_fills:
        std::collections::BTreeMap<hir::BufferRef, Vec<swizzle_infer::PlainFill>>,
    /// The swizzle each shared buffer inherited from an `mma.load.swiz<N>`, and where that is.
    pub(crate) inherited_swizzle: std::collections::BTreeMap<hir::BufferRef, (u32, Span)>,
    /// The copy statements (by span) that inherited a swizzle: set in the HIR at the end.
    pub(crate) swizzle_patches: std::collections::BTreeMap<Span, u32>,
    /// The first element access of each buffer.
    pub(crate) element_access: std::collections::BTreeMap<hir::BufferRef, Span>,
    /// What happened last to each asynchronous TMA future (by group local): issued, waited or
    /// bound to an event by `trigger … after` (spec-tier3 §2.5).
    pub(crate) future_uses: std::collections::BTreeMap<VarId, wspipe::FutureUse>,
    /// Futures named by a `trigger … after` that had an error: no "not waited" follows.
    pub(crate) silenced_futures: BTreeSet<VarId>,
}

/// How the function's return type is known.
#[derive(Debug, Clone)]
pub(crate) enum RetState {
    /// Declared `void`.
    Void,
    /// Declared with a type.
    Declared(ReturnTy),
    /// `auto`: resolved by the first `return` (None until then).
    Auto(Option<ReturnTy>),
    /// `T mdspan<N>`: element type and rank declared, extents taken from the first `return`.
    RankOnly {
        /// The element type.
        elem: hir::ElemTy,
        /// The rank.
        rank: usize,
        /// The extents, once a `return` was seen.
        dims: Option<Vec<Dim>>,
    },
}

/// Level inference result for one parallel-by item (keyed by the item's span).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LevelInfo {
    /// The inferred level (None when inference failed: already reported).
    pub(crate) level: Option<hir::Level>,
}

/// The checker of one `__co__` function.
pub(crate) struct Checker<'a> {
    pub(crate) db: &'a SourceDb,
    /// What the program is checked for (limits such as threads per block).
    pub(crate) target: Target,
    pub(crate) diags: &'a mut Diagnostics,
    pub(crate) fn_name: String,
    pub(crate) params: Vec<hir::Param>,
    pub(crate) syms: Vec<hir::SymDim>,
    pub(crate) locals: Vec<Local>,
    pub(crate) scopes: scope::Scopes,
    pub(crate) entry_checks: Vec<Check>,
    pub(crate) region: Region,
    pub(crate) loop_depth: u32,
    pub(crate) kernel: Option<KernelFrame>,
    /// The intra-block levels enclosing the statements being checked, innermost last.
    pub(crate) level_stack: Vec<hir::LevelId>,
    /// The extents of the levels of `level_stack` (same order): how many instances of the
    /// innermost one a block has.
    pub(crate) level_extents: Vec<Vec<Dim>>,
    /// The C++ the function runs that the compiler cannot check, in order.
    pub(crate) foreign: Vec<(Span, String)>,
    /// How many `inthreads` enclose the statements being checked.
    pub(crate) inthreads_depth: u32,
    /// How many `inthreads` predicates and `if`/`while` conditions around the statements
    /// being checked may hold in some instances of an intra-block level and not in others
    /// (they depend on the index of a `group` level, say).
    pub(crate) selecting_conditions: u32,
    /// How many `inthreads` predicates and `if`/`while` conditions around the statements
    /// being checked may split a warpgroup (they depend on a `group` or `thread` index, or on
    /// data): where `setmaxnreg`, which every thread of a warpgroup must execute, warns.
    pub(crate) warpgroup_splits: u32,
    /// The initial values of immutable device scalars (what `inthreads` predicates and DMA
    /// participation look through).
    pub(crate) device_inits: HashMap<VarId, HExpr>,
    pub(crate) levels: HashMap<(u32, u32), LevelInfo>,
    pub(crate) ret: RetState,
    pub(crate) saw_return: bool,
    pub(crate) is_async: bool,
    pub(crate) streams: BTreeSet<ParamId>,
    pub(crate) has_parallel: bool,
    pub(crate) kernel_count: u32,
    /// Element accesses so far (the next [`hir::AccessId`]).
    pub(crate) access_count: u32,
    pub(crate) has_inout: bool,
    /// Names of symbolic dimensions → id (for clash checks).
    pub(crate) sym_names: HashMap<String, SymId>,
    /// Immutable scalars initialised with a literal: uses fold to the literal (spec §8.6).
    pub(crate) consts: HashMap<VarId, HExpr>,
    /// The shared events declared so far (spec-tier3 §2).
    pub(crate) events: Vec<hir::Event>,
    /// Which events some `wait` waits for (an event triggered and never waited is an error).
    pub(crate) waited_events: BTreeSet<hir::EventId>,
    /// Events named by a `trigger` that had an error (no follow-up "never waited").
    pub(crate) events_with_errors: BTreeSet<hir::EventId>,
    /// The predicates of the `inthreads` enclosing the statements being checked, outermost
    /// first (where a `trigger` records which threads execute it).
    pub(crate) inthreads_conditions: Vec<HExpr>,
    /// The plain `mma.store`s to shared memory in warpgroup roles (`E1067` checks who else
    /// accesses their tiles).
    pub(crate) role_stores: Vec<mma_store_role::RoleStore>,
    /// Whether an event order or slot index is being checked (an increment there is
    /// misplaced, `E0471`, rather than unsupported).
    pub(crate) in_event_order: bool,
    /// The updates of incremented event orders (`e.at(o++)`) of the statement being checked:
    /// the local, the update, the order's span.
    pub(crate) order_updates: Vec<(VarId, hir::Stmt, Span)>,
    /// The MMA fragments declared so far (spec-tier3 §5), indexed by [`hir::mma::FragId`].
    pub(crate) frags: Vec<hir::mma::Frag>,
    /// What the MMA checks remember about each fragment (same indices).
    pub(crate) frag_states: Vec<mma::FragState>,
    /// Shaped fragments and the `apply` being checked (spec-tier3 §6).
    pub(crate) frag_sema: frag::FragSema,
    /// Whether some MMA statement of the function had an error.
    pub(crate) mma_failed: bool,
    /// The futures of asynchronous WGMMAs (spec-tier3 §5.4).
    pub(crate) wg_futures: Vec<wgmma::WgFuture>,
    /// The asynchronous WGMMAs issued so far: (scope, issue number).
    pub(crate) wg_asyncs: Vec<(u32, usize)>,
}

impl<'a> Checker<'a> {
    fn new(
        db: &'a SourceDb,
        target: Target,
        diags: &'a mut Diagnostics,
        f: &ast::CoFunction,
    ) -> Checker<'a> {
        Checker {
            db,
            target,
            diags,
            fn_name: f.name.name.clone(),
            params: Vec::new(),
            syms: Vec::new(),
            locals: Vec::new(),
            scopes: scope::Scopes::new(),
            entry_checks: Vec::new(),
            region: Region::Host,
            loop_depth: 0,
            kernel: None,
            level_stack: Vec::new(),
            level_extents: Vec::new(),
            inthreads_depth: 0,
            selecting_conditions: 0,
            warpgroup_splits: 0,
            foreign: Vec::new(),
            device_inits: HashMap::new(),
            levels: HashMap::new(),
            ret: RetState::Void,
            saw_return: false,
            is_async: false,
            streams: BTreeSet::new(),
            has_parallel: false,
            kernel_count: 0,
            access_count: 0,
            has_inout: false,
            sym_names: HashMap::new(),
            consts: HashMap::new(),
            events: Vec::new(),
            waited_events: BTreeSet::new(),
            events_with_errors: BTreeSet::new(),
            inthreads_conditions: Vec::new(),
            role_stores: Vec::new(),
            in_event_order: false,
            order_updates: Vec::new(),
            frags: Vec::new(),
            frag_states: Vec::new(),
            frag_sema: frag::FragSema::default(),
            mma_failed: false,
            wg_futures: Vec::new(),
            wg_asyncs: Vec::new(),
        }
    }

    fn run(mut self, f: &ast::CoFunction) -> hir::Function {
        self.check_params(f);
        self.ret = self.check_return_type(f);
        parallel::infer_levels(&mut self, &f.body.stmts);
        self.has_parallel = stmt::contains_parallel(&f.body.stmts);
        let body = self.check_stmts(&f.body.stmts);
        self.check_events_used();
        self.check_fill_events();
        self.finish_mma();
        self.finish_frags();
        self.check_async_mma_stores(&body);
        self.check_role_mma_stores(&body);
        let ret = match &self.ret {
            RetState::Void => ReturnTy::Void,
            RetState::Declared(t) => t.clone(),
            RetState::Auto(t) => t.clone().unwrap_or(ReturnTy::Void),
            RetState::RankOnly { elem, rank, dims } => ReturnTy::Spanned {
                elem: *elem,
                dims: dims.clone().unwrap_or_else(|| vec![Dim::Const(1); *rank]),
            },
        };
        if matches!(self.ret, RetState::Declared(_) | RetState::RankOnly { .. }) && !self.saw_return
        {
            self.diags.push(
                Diagnostic::error(
                    "E0509",
                    f.name.span,
                    format!(
                        "non-void function '{}` does not contain a return statement.",
                        self.fn_name
                    ),
                )
                .with_label("declared with a return type here"),
            );
        }
        let location = self.db.location(f.span);
        let sig_end = f.body.span.start.max(f.span.start);
        let sig_span = Span { file: f.span.file, start: f.span.start, end: sig_end };
        let co_signature =
            self.db.snippet(sig_span).split_whitespace().collect::<Vec<_>>().join(" ");
        hir::Function {
            name: self.fn_name,
            span: f.span,
            location,
            co_signature,
            ret,
            params: self.params,
            sym_dims: self.syms,
            entry_checks: self.entry_checks,
            locals: self.locals,
            is_async: self.is_async,
            streams: self.streams.into_iter().collect(),
            has_parallel: self.has_parallel,
            kernel_count: self.kernel_count,
            access_count: self.access_count,
            events: self.events,
            frags: self.frags,
            body,
            foreign_code: self.foreign,
        }
    }

    // -- diagnostics helpers --------------------------------------------------------------

    /// Reports a name with no declaration in scope (`E0401`).
    pub(crate) fn undeclared(&mut self, id: &ast::Ident) {
        self.error_label(
            "E0401",
            id.span,
            format!("symbol `{}' is used before declaration.", id.name),
            "not declared",
        );
    }

    pub(crate) fn error_label(
        &mut self,
        code: &'static str,
        span: Span,
        message: impl Into<String>,
        label: impl Into<String>,
    ) {
        self.diags.push(Diagnostic::error(code, span, message).with_label(label));
    }

    pub(crate) fn warn(
        &mut self,
        code: &'static str,
        span: Span,
        message: impl Into<String>,
        label: impl Into<String>,
    ) {
        self.diags.push(Diagnostic::warning(code, span, message).with_label(label));
    }

    /// Reports a construct of tier 2 or 3 (`E0901`).
    pub(crate) fn unsupported(&mut self, span: Span, construct: &str, tier: u8) {
        self.diags.push(
            Diagnostic::error(
                "E0901",
                span,
                // Number-neutral: `construct` may be plural ("fragments", "MMA statements").
                format!("not supported yet (tier {tier}): {construct}"),
            )
            .with_label("not supported by this compiler yet"),
        );
    }

    /// Reports a construct that the CUDA target does not support (`E0902`).
    pub(crate) fn out_of_scope(&mut self, span: Span, construct: &str) {
        self.diags.push(
            Diagnostic::error(
                "E0902",
                span,
                format!("{construct} is not supported on the CUDA target"),
            )
            .with_label("not supported on the CUDA target"),
        );
    }

    // -- locals ---------------------------------------------------------------------------

    /// Adds a local to the function's table (not to a scope).
    pub(crate) fn new_local(
        &mut self,
        name: &str,
        span: Span,
        ty: Ty,
        place: LocalPlace,
        mutable: bool,
        origin: LocalOrigin,
    ) -> VarId {
        let id = VarId(u32::try_from(self.locals.len()).unwrap_or(u32::MAX));
        self.locals.push(Local {
            name: name.to_string(),
            span,
            ty,
            place,
            mutable,
            origin,
            access: Access::default(),
            returned: false,
            array_dims: 0,
        });
        id
    }

    /// The id of a new element access.
    pub(crate) fn next_access(&mut self) -> hir::AccessId {
        self.access_count += 1;
        hir::AccessId(self.access_count - 1)
    }

    /// The place of a scalar declared in the current region.
    pub(crate) fn scalar_place(&self) -> LocalPlace {
        match self.region {
            Region::Host => LocalPlace::HostScalar,
            Region::Device(_) => LocalPlace::DeviceScalar,
        }
    }

    /// Whether statements are device code.
    pub(crate) fn in_device(&self) -> bool {
        matches!(self.region, Region::Device(_))
    }

    /// Whether the kernel being checked is launched cooperatively (`block<cooperative>`).
    pub(crate) fn cooperative(&self) -> bool {
        self.kernel.as_ref().is_some_and(|k| k.cooperative)
    }

    /// An `HExpr` of error type at `span`.
    pub(crate) fn error_expr(span: Span) -> HExpr {
        HExpr { kind: HExprKind::Error, ty: Ty::Error, span }
    }

    /// Text of a span, for messages.
    pub(crate) fn text(&self, span: Span) -> String {
        self.db.snippet(span).to_string()
    }
}

/// English ordinal (`1st`, `2nd`, `3rd`, `4th`, `11th`, …) for messages.
pub(crate) fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, r) if r != 11 => "st",
        (2, r) if r != 12 => "nd",
        (3, r) if r != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}
