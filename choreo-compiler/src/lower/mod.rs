//! Lowering: checked program ([`hir::Program`]) + [`Target`] → [`Plan`].
//!
//! The plan holds every decision a backend needs that is not in the checked program, so that
//! the emitters only render: the symbols and C identifiers of each function ([`Symbols`],
//! [`Names`]); per kernel the host values it receives ([`KernelPlan::captures`]), the stream it
//! is launched on and what the host does after the launch ([`AfterLaunch`]: the seed's
//! synchronisation rules), and its nest of parallel levels as structured levels (threads per
//! block, threads per instance of every intra-block level — the mapping of levels to hardware
//! indices is the backend's); the stream roles of the call ([`Streams`]); where data lives and
//! moves ([`Memory`]); and the `extern "C"` entry ([`abi::Entry`]) that the device code defines
//! and the Rust wrapper calls. The emitters walk the checked program and this plan side by
//! side; the plan's tables are indexed by the program's ids ([`hir::KernelId`],
//! [`hir::LevelId`], [`ParamId`], …).
//!
//! Lowering also rejects what the target cannot run or the code generator cannot express,
//! with `E08xx` errors:
//!
//! | code  | meaning |
//! |-------|---------|
//! | E0801 | internal: the checked program has a shape lowering does not expect (a sema bug) |
//! | E0802 | a `__co__` function name that cannot be a C++ function name (keyword, reserved) |
//! | E0803 | two `__co__` functions with the same name in one file |
//! | E0804 | an element type the code generator does not support yet |
//! | E0805 | a parallel level the target does not have (`group-4` needs sm_90a) |
//! | E0806 | a target without a code generator (the CPU target, for now; reported by `compile`) |
//! | E0712 | an element index out of bounds for some of the values it takes in every launch |
//! | E0807 | a returned shape that depends on values the function body computes (defensive: sema's `E0416` rejects mutable and per-thread values in shapes first) |
//! | E0808 | a kernel whose shared buffers need more shared memory than the target has per block |
//! | E0809 | a kernel whose local buffers need more memory per thread than the target allows |
//! | E0810 | a DMA or `wait` inside an `inthreads` (or `if`/`while`) that selects instances of a level, whose participants (one instance) cannot be synchronised apart from the other instances ([`instances`]) |
//! | E0475 | a TMA statement in a warpgroup role whose `inthreads` predicates do not select whole warpgroups (or one thread), cannot be evaluated (block shape or predicates not constant), or a second role of the kernel whose TMA statements need the role barrier (named barrier 15) ([`roles`]) |
//! | E1068 | the barrier after a plain `mma.store` to shared memory in a warpgroup role cannot be planned: the role's predicates cannot be evaluated or do not select whole warps, or a second role of the kernel needs the role barrier (named barrier 15) ([`roles`]) |
//! | E0811 | a host-level DMA whose box has more elements than its kernel's loop counts (`HOST_DMA_MAX_ELEMENTS`) |

pub mod abi;
pub mod align;
pub mod bounds;
mod events;
pub mod instances;
pub mod names;
pub mod proxy;
pub mod roles;
pub mod vector;

pub use abi::{AbiParam, Entry};
pub use bounds::{AccessPlan, DimCheck};
pub use instances::InstanceSync;
pub use names::{Names, SymbolScope, Symbols};

use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::hir::visit::{self, Visitor, Walk};
use crate::hir::{
    self, Capture, Dim, ElemTy, HExpr, HExprKind, Level, LevelId, LocalOrigin, LocalPlace, ParamId,
    ParamKind, ReturnTy, Stmt, StmtKind, Ty, VarId,
};
use crate::source::Span;
use crate::target::Target;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The plan of a file: one [`FunctionPlan`] per [`hir::Item::Function`], in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// What the plan is for.
    pub target: Target,
    /// Where the file's external symbols live.
    pub scope: SymbolScope,
    /// The functions, in the order of `program.functions()`.
    pub functions: Vec<FunctionPlan>,
}

/// Everything the backends need for one `__co__` function besides the checked function.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionPlan {
    /// The functions the backends define for it.
    pub symbols: Symbols,
    /// The C++ identifiers of the function's entities.
    pub names: Names,
    /// The kernels, indexed by [`hir::KernelId`].
    pub kernels: Vec<KernelPlan>,
    /// The stream roles of a call.
    pub streams: Streams,
    /// Where the function's data lives and how it moves.
    pub memory: Memory,
    /// Whether some launch may still run when the function returns (an `.async` launch that is
    /// not followed by a synchronisation, spec §8.5).
    pub leaves_async_work: bool,
    /// The `extern "C"` entry.
    pub entry: Entry,
    /// The arrival count per generation of each slot of each shared event, indexed by
    /// [`hir::EventId`] and slot.
    pub event_arrivals: Vec<Vec<u32>>,
    /// Every element access, indexed by [`hir::AccessId`]: which of its index bounds are
    /// proven and which are checked at run time.
    pub accesses: Vec<AccessPlan>,
    /// The event operands ([`hir::EventSlot::span`]) whose slot index the bounds analysis
    /// proved valid (a ring order `>= 0`, a fixed index below the slot count): selected
    /// without the run-time check.
    pub proven_slots: std::collections::BTreeSet<crate::source::Span>,
    /// Whether the function checks some access at run time: its kernels record the first
    /// violation in the call's bounds record (`AbiParam::BoundsRecord`), and the call fails
    /// with it.
    pub guards: bool,
    /// Whether some access is neither proven nor checked (bounds checks turned off): calling
    /// the function is only sound when the caller guarantees the indices.
    pub unchecked: bool,
    /// Whether the function runs C++ the compiler cannot check (`call`, intrinsics,
    /// `__cpp__`, inline assembly; `hir::Function::foreign_code` lists them): calling it is
    /// only sound when that code is.
    pub foreign: bool,
}

/// A stream of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StreamRef {
    /// A `stream` parameter.
    Param(ParamId),
    /// The legacy default stream (unbound launches).
    Default,
}

/// The stream roles of a call of the function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Streams {
    /// The stream host data is staged on and a spanned return value is copied on: the first
    /// `stream` parameter in parameter order, else the default stream.
    pub result: StreamRef,
    /// The streams launches are bound to (the default stream for unbound launches), parameters
    /// in parameter order first, without duplicates.
    pub launches: Vec<StreamRef>,
    /// The streams the call's device work runs on: [`Streams::launches`], then the result
    /// stream when the function returns spanned data or launches nothing. Waiting for these
    /// waits for everything the call enqueued.
    pub work: Vec<StreamRef>,
}

/// Where the function's data lives and how it moves (spec §7.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memory {
    /// Whether the C++ wrapper keeps spanned data in device memory: the function launches
    /// kernels or returns a `global` parameter. Otherwise that wrapper is plain host code that
    /// never touches CUDA. (The `extern "C"` entry always works on device memory.)
    pub device_data: bool,
    /// The host parameters (`T [..] x`, `T [..] &x`) whose data the caller copies to the device
    /// before the call: those the function uses (reads, writes or returns), in order.
    pub uploads: Vec<ParamId>,
    /// The `&` parameters whose device data is copied back after the call's device work:
    /// those uploaded and written, in order.
    pub copy_back: Vec<ParamId>,
    /// The non-`global` spanned parameters that some `return` returns (their device data is
    /// copied back into the caller's buffer when one is returned, spec §7.3).
    pub returned_params: Vec<ParamId>,
    /// The global buffers declared in host code, in order: device memory allocated at the
    /// declaration and freed on every exit, after the launches that may use it.
    pub buffers: Vec<VarId>,
}

/// One kernel: a device-entry parallel-by, or a host-level DMA made a kernel
/// ([`hir::KernelOrigin::HostDma`]).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelPlan {
    /// The host values the kernel receives, deduplicated, in kernel-parameter order:
    /// parameters (buffers as device pointers, scalars by value) by id, locals (global buffers
    /// as pointers, host scalars by value) by id, symbolic dimensions by id, anonymous extents.
    /// Exactly what its body uses.
    pub captures: Vec<Capture>,
    /// The stream the kernel is launched on.
    pub stream: StreamRef,
    /// Whether the host first waits for the call's asynchronous launches: a host-level DMA
    /// is ordered after every earlier launch of the call, whichever stream it ran on.
    pub waits_for_async: bool,
    /// What the host does right after the launch.
    pub after: AfterLaunch,
    /// How many blocks the kernel is launched with.
    pub grid: Grid,
    /// Threads per block: the product of the extents of the intra-block levels on a path
    /// through the nest (all paths agree), filled levels included; 1 without inner levels.
    /// A host-level DMA's kernel: [`HOST_DMA_THREADS`], fewer for a small constant box.
    pub threads_per_block: Dim,
    /// The intra-block levels, indexed by [`hir::LevelId`].
    pub levels: Vec<LevelPlan>,
    /// Whether the kernel checks some access at run time (it receives the bounds record).
    pub guards: bool,
    /// The conditions on host values under which the checks of some of its accesses are
    /// redundant (their [`AccessPlan::host_proof`]s, all sides of all of them, without
    /// repeats): when every one holds (some alternative of each), the host launches the
    /// kernel's instance without those checks. Empty: one instance, checks as planned.
    pub host_proof: Vec<Vec<bounds::HostBound>>,
    /// Whether some access the kernel checks has no host proof: it is checked in every launch
    /// (whatever the host finds of the others), so every launch may write the bounds record and
    /// the entry sets the used flag (`AbiParam::BoundsUsed`) for every launch.
    pub always_checked: bool,
    /// The kernel's shared memory (spec §11.3).
    pub shared: SharedPool,
    /// Whether the kernel has asynchronous DMAs (each thread then counts the copy groups it
    /// commits, for `wait`).
    pub async_copies: bool,
    /// Whether threads of one block may wait for each other: the body has a barrier, a DMA or
    /// `wait`, shared memory, inline asm or `__cpp__`, foreign C++ (which may synchronise), or
    /// the launch is cooperative. A backend that runs the threads of a block one after another
    /// (the CPU) switches between them only in such kernels.
    pub synchronises: bool,
    /// Compiler hints and the launch mode (`[[launch_bounds]]`, `[[maxnreg]]`,
    /// `<cooperative>`: launched with every block resident at once, which the launch checks
    /// against the device's occupancy).
    pub attrs: hir::KernelAttrs,
    /// The thread-block clusters the kernel is launched with (spec-tier3 §1.2), if any.
    pub cluster: Option<ClusterPlan>,
    /// The warpgroup roles that issue TMA statements (spec-tier3 §3.3, [`roles`]).
    pub roles: Vec<roles::RolePlan>,
    /// Whether every event trigger first fences the async proxy (`fence.proxy.async`): the
    /// kernel issues TMA loads on the GPU into a buffer its threads also touch, and a trigger
    /// may hand such a buffer this thread read back to a load's issuer (the `empty` slot of a
    /// ring). The copy engine writes through the async proxy, which the arrive's release does
    /// not order with the thread's generic reads (PTX memory model; spec-tier3 §10.2). The
    /// CPU's copies are ordinary memory operations.
    pub fence_triggers: bool,
    /// Which shared buffers the threads touch through the generic proxy (a WGMMA fences the
    /// async proxy only when one of its shared operands is such a buffer).
    pub proxies: proxy::SharedProxies,
}

/// A launch in thread-block clusters: consecutive blocks along x form a cluster, its shape is
/// `(size, 1, 1)`; the kernel waits for its whole cluster at entry and at exit (a block must not
/// exit while another may still use its shared memory), and computes the cluster variables from
/// its rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterPlan {
    /// The extents of the cluster level's sub-dimensions (constants).
    pub extents: Vec<u64>,
}

impl ClusterPlan {
    /// Blocks per cluster.
    pub fn size(&self) -> u64 {
        self.extents.iter().product()
    }

    /// Whether the size exceeds the portable 8 blocks (the kernel must opt in).
    pub fn non_portable(&self) -> bool {
        self.size() > 8
    }
}

/// The blocks of a launch.
#[derive(Debug, Clone, PartialEq)]
pub enum Grid {
    /// One block per instance of the parallel-by's block level: its extents (one to three
    /// axes).
    Blocks(Vec<Dim>),
    /// Enough blocks of [`KernelPlan::threads_per_block`] threads to give each element of a
    /// box its own thread, at least one and at most `max_blocks` (the threads stride over the
    /// elements beyond): the kernel of a host-level DMA whose box is only known at run time.
    /// Before the launch the host checks that no extent is negative and that the box has at
    /// most `max_elements` elements (so the kernel's `int` element counter, stepping by the
    /// grid's thread count, never overflows); the kernel's loop tests each element against
    /// the count, so any grid covers the box correctly.
    Elements {
        /// The extents of the box.
        extents: Vec<Dim>,
        /// The most blocks launched.
        max_blocks: u64,
        /// The most elements a box may have.
        max_elements: u64,
    },
}

/// Threads per block of a host-level DMA's kernel.
pub const HOST_DMA_THREADS: u64 = 256;

/// The most blocks a host-level DMA's kernel is launched with (more elements are strided
/// over).
pub const HOST_DMA_MAX_BLOCKS: u64 = 65535;

/// The most elements a host-level DMA may copy: its kernel counts elements in an `int` that
/// steps by the grid's thread count.
pub const HOST_DMA_MAX_ELEMENTS: u64 = i32::MAX as u64 - HOST_DMA_MAX_BLOCKS * HOST_DMA_THREADS;

/// The shared memory of a kernel: one pool per block (dynamic shared memory, its size passed
/// at launch) in which every `shared` buffer and scalar of the kernel has its own aligned
/// range. (No reuse yet: ranges do not overlap even when lifetimes do not.)
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SharedPool {
    /// The shared buffers and scalars with their byte offsets, in declaration order.
    pub slots: Vec<SharedSlot>,
    /// The pool's size in bytes: a constant, or an expression over host values (symbolic
    /// shapes), evaluated before the launch.
    pub bytes: Dim,
    /// The alignment of every slot (and of the pool) in bytes.
    pub alignment: u64,
    /// The most the target allows per block; a launch whose pool may be larger than the
    /// target's static limit opts in with `cudaFuncSetAttribute` first.
    pub limit: u64,
    /// Whether the size may exceed the static limit (48 KiB), so the launch opts in.
    pub opt_in: bool,
    /// The byte offset of the kernel's TMA mbarriers (8 bytes each, after the buffers), when
    /// it has any.
    pub barriers: Option<Dim>,
}

impl SharedPool {
    /// Whether the kernel has a shared pool at all.
    pub fn used(&self) -> bool {
        !self.slots.is_empty() || self.barriers.is_some()
    }
}

/// One `shared` buffer or scalar in its kernel's pool.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedSlot {
    /// The local (a [`LocalPlace::SharedBuffer`] or [`LocalPlace::SharedScalar`]).
    pub var: VarId,
    /// Its offset in the pool in bytes (a multiple of the pool's alignment).
    pub offset: Dim,
}

/// An intra-block level of a kernel's nest.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelPlan {
    /// The level.
    pub level: Level,
    /// Threads of one instance of the level (the nest below it, or the level's unit).
    pub threads_per_instance: Dim,
    /// Whether its instances, together, are statically known to be all the threads of the
    /// block (so a thread's instance number needs no reduction modulo the instance count).
    pub fills_block: bool,
    /// How the threads of one instance synchronise without the other instances, when a DMA
    /// or `wait` inside an `inthreads` that selects instances of this level needs it
    /// ([`hir::Participants::SelectedInstance`]); `None` when nothing needs it.
    pub instance_sync: Option<InstanceSync>,
}

/// What follows a launch on the host (spec §8.5 and the seed rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterLaunch {
    /// Wait for the whole device: a launch without `.async` and without a stream.
    DeviceSync,
    /// Wait for the stream: a launch bound to a stream without `.async`, or an asynchronous
    /// launch in a function with `&` parameters (which must finish before the copy-back).
    StreamSync(StreamRef),
    /// Nothing: an `.async` launch. The call records it so that device memory it may use is
    /// freed after it (stream-ordered).
    Track,
}

/// What lowering is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LowerOptions {
    /// The target.
    pub target: Target,
    /// Where the file's external symbols live.
    pub scope: SymbolScope,
    /// Whether element accesses that are not proven in bounds are checked at run time (default
    /// true). Without the checks such a function is unsafe to call.
    pub bounds_checks: bool,
    /// Whether the entry checks of spec §19.2 are generated (default true); the bounds analysis
    /// may then rely on what they check (positive bounds).
    pub runtime_checks: bool,
}

impl LowerOptions {
    /// Checked lowering for `target`, symbols in `scope`.
    pub fn new(target: Target, scope: SymbolScope) -> LowerOptions {
        LowerOptions { target, scope, bounds_checks: true, runtime_checks: true }
    }
}

/// Lowers every function of `program` as `options` say. Errors go to `diags`; the plan is
/// only meaningful when none was reported.
pub fn lower(program: &hir::Program, options: &LowerOptions, diags: &mut Diagnostics) -> Plan {
    let (target, scope) = (options.target, &options.scope);
    let mut seen: HashMap<&str, Span> = HashMap::new();
    let mut functions = Vec::new();
    for f in program.functions() {
        if let Some(first) = seen.get(f.name.as_str()) {
            // Their entries would be the same symbol (the scope is the file's).
            diags.push(
                Diagnostic::error(
                    "E0803",
                    f.span,
                    format!("a __co__ function named '{}' is already defined in this file", f.name),
                )
                .with_label("second definition")
                .with_secondary(*first, "first definition")
                .with_help("give each __co__ function of a file its own name"),
            );
        } else {
            seen.insert(f.name.as_str(), f.span);
        }
        functions.push(lower_function(f, options, diags));
    }
    Plan { target, scope: scope.clone(), functions }
}

fn lower_function(
    f: &hir::Function,
    options: &LowerOptions,
    diags: &mut Diagnostics,
) -> FunctionPlan {
    let (target, scope) = (options.target, &options.scope);
    if !names::is_valid_function_name(&f.name) {
        diags.push(
            Diagnostic::error(
                "E0802",
                f.span,
                format!("'{}' cannot be the name of the generated C++ function", f.name),
            )
            .with_label("C++ keyword or reserved name")
            .with_help("rename the __co__ function"),
        );
    }
    check_types(f, diags);
    let mut host = HostWalk {
        f,
        target,
        diags,
        has_inout: f.params.iter().any(|p| p.kind == ParamKind::HostInOut),
        first_stream: f
            .params
            .iter()
            .position(|p| p.kind == ParamKind::Stream)
            .map(|i| ParamId(i as u32)),
        kernels: vec![None; f.kernel_count as usize],
        returned_params: BTreeSet::new(),
        returns_global_param: false,
        buffers: Vec::new(),
        inits: BTreeMap::new(),
    };
    visit::walk_stmts(&mut host, &f.body);
    let HostWalk { kernels, returned_params, returns_global_param, buffers, inits, .. } = host;
    let kernels: Vec<KernelPlan> = kernels
        .into_iter()
        .enumerate()
        .map(|(i, k)| {
            k.unwrap_or_else(|| {
                // A kernel id without a parallel-by: keep the plan well-formed; sema reported
                // nothing, so report it here.
                diags.push(internal(
                    f.span,
                    &format!("kernel {i} of '{}' has no parallel-by", f.name),
                ));
                KernelPlan {
                    captures: Vec::new(),
                    stream: StreamRef::Default,
                    waits_for_async: false,
                    after: AfterLaunch::DeviceSync,
                    grid: Grid::Blocks(vec![Dim::Const(1)]),
                    threads_per_block: Dim::Const(1),
                    levels: Vec::new(),
                    guards: false,
                    host_proof: Vec::new(),
                    always_checked: false,
                    shared: SharedPool::default(),
                    async_copies: false,
                    synchronises: false,
                    attrs: hir::KernelAttrs::default(),
                    cluster: None,
                    roles: Vec::new(),
                    fence_triggers: false,
                    proxies: proxy::SharedProxies::default(),
                }
            })
        })
        .collect();

    let first_stream = f.params.iter().position(|p| p.kind == ParamKind::Stream);
    let result = first_stream.map_or(StreamRef::Default, |i| StreamRef::Param(ParamId(i as u32)));
    let mut launches: BTreeSet<StreamRef> = kernels.iter().map(|k| k.stream).collect();
    launches.extend(f.streams.iter().map(|&s| StreamRef::Param(s)));
    let launches: Vec<StreamRef> = launches.into_iter().collect();
    let mut work = launches.clone();
    let spanned_return = matches!(f.ret, ReturnTy::Spanned { .. });
    if (spanned_return || work.is_empty()) && !work.contains(&result) {
        work.push(result);
    }
    let streams = Streams { result, launches, work };

    let uploads: Vec<ParamId> = (0..f.params.len() as u32)
        .map(ParamId)
        .filter(|&id| {
            f.param(id).is_some_and(|p| {
                matches!(p.kind, ParamKind::HostIn | ParamKind::HostInOut)
                    && (p.access.read || p.access.write)
            })
        })
        .collect();
    let copy_back = uploads
        .iter()
        .copied()
        .filter(|&id| f.param(id).is_some_and(|p| p.kind == ParamKind::HostInOut && p.access.write))
        .collect();
    let memory = Memory {
        device_data: f.has_parallel || returns_global_param,
        uploads,
        copy_back,
        returned_params: returned_params.into_iter().collect(),
        buffers,
    };

    let result_shape = match &f.ret {
        ReturnTy::Spanned { dims, .. } => Some(resolve_shape(f, dims, &inits, diags)),
        ReturnTy::Void | ReturnTy::Scalar(_) => None,
    };
    let (accesses, proven_slots) = bounds::analyse(f, options.runtime_checks, diags);
    let any_guarded = accesses.iter().any(AccessPlan::guarded);
    let guards = options.bounds_checks && any_guarded;
    let mut kernels = kernels;
    if guards {
        for tree in hir::kernels(&f.body) {
            let planned: Vec<&AccessPlan> = access_ids(&tree.body)
                .iter()
                .filter_map(|id| accesses.get(id.index()))
                .filter(|a| a.guarded())
                .collect();
            let mut host_proof: Vec<Vec<bounds::HostBound>> = Vec::new();
            for side in planned.iter().filter_map(|a| a.host_proof.as_ref()).flatten() {
                if !host_proof.contains(side) {
                    host_proof.push(side.clone());
                }
            }
            if let Some(k) = kernels.get_mut(tree.id.index()) {
                k.guards = !planned.is_empty();
                k.host_proof = host_proof;
                k.always_checked = planned.iter().any(|a| a.host_proof.is_none());
            }
        }
    }
    let symbols = Symbols::of(f, scope, options.target);
    let entry = abi::entry(f, symbols.entry.clone(), result_shape, guards);
    let event_arrivals = events::arrival_counts(f, &kernels, diags);
    FunctionPlan {
        symbols,
        names: names::assign_names(f),
        leaves_async_work: kernels.iter().any(|k| k.after == AfterLaunch::Track),
        kernels,
        streams,
        memory,
        entry,
        event_arrivals,
        accesses,
        proven_slots,
        guards,
        unchecked: any_guarded && !options.bounds_checks,
        foreign: !f.foreign_code.is_empty(),
    }
}

/// The element accesses in `body`.
fn access_ids(body: &[Stmt]) -> Vec<hir::AccessId> {
    struct Accesses(Vec<hir::AccessId>);
    impl<'a> Visitor<'a> for Accesses {
        fn stmt(&mut self, s: &'a Stmt) -> Walk {
            if let StmtKind::Assign { target: hir::Place::Elem { id, .. }, .. } = &s.kind {
                self.0.push(*id);
            }
            Walk::Continue
        }

        fn expr(&mut self, e: &'a HExpr) -> Walk {
            if let HExprKind::At { id, .. } = &e.kind {
                self.0.push(*id);
            }
            Walk::Continue
        }
    }
    let mut accesses = Accesses(Vec::new());
    visit::walk_stmts(&mut accesses, body);
    accesses.0
}

fn internal(span: Span, what: &str) -> Diagnostic {
    Diagnostic::error("E0801", span, format!("internal error in code generation: {what}"))
        .with_label("the checked program is not what the code generator expects here")
        .with_note("this is a bug of the Choreo translator; please report it with this file")
}

/// `E0804` for every element type of the function the code generator does not support.
fn check_types(f: &hir::Function, diags: &mut Diagnostics) {
    let report = |diags: &mut Diagnostics, t: ElemTy, span: Span| {
        if !t.is_implemented() {
            diags.push(
                Diagnostic::error(
                    "E0804",
                    span,
                    format!(
                        "element type '{}' is not supported by the code generator yet",
                        t.as_str()
                    ),
                )
                .with_label("not supported yet"),
            );
        }
    };
    for p in &f.params {
        if let Some(t) = p.elem {
            report(diags, t, p.span);
        }
        if let ParamKind::Scalar(t) = p.kind {
            report(diags, t, p.span);
        }
    }
    for l in &f.locals {
        match &l.ty {
            Ty::Scalar(t) => report(diags, *t, l.span),
            Ty::Spanned(s) => report(diags, s.elem, l.span),
            Ty::BoundedInt
            | Ty::BoundedItuple(_)
            | Ty::Ituple(_)
            | Ty::Mdspan(_)
            | Ty::Stream
            | Ty::Pointer(_)
            | Ty::String
            | Ty::Void
            | Ty::Error => {}
        }
    }
    match &f.ret {
        ReturnTy::Scalar(t) | ReturnTy::Spanned { elem: t, .. } => report(diags, *t, f.span),
        ReturnTy::Void => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Host code
// ---------------------------------------------------------------------------------------------

/// The walk over a function's host code: launches, returns, buffer declarations, initial
/// values of host locals.
struct HostWalk<'a, 'd> {
    f: &'a hir::Function,
    target: Target,
    diags: &'d mut Diagnostics,
    has_inout: bool,
    /// The first `stream` parameter (the stream of host-level DMAs).
    first_stream: Option<ParamId>,
    kernels: Vec<Option<KernelPlan>>,
    returned_params: BTreeSet<ParamId>,
    returns_global_param: bool,
    buffers: Vec<VarId>,
    /// The initial values of the locals declared in host code.
    inits: BTreeMap<VarId, &'a HExpr>,
}

impl<'a> Visitor<'a> for HostWalk<'a, '_> {
    fn stmt(&mut self, s: &'a Stmt) -> Walk {
        match &s.kind {
            StmtKind::Parallel(tree) => {
                self.kernel(tree);
                return Walk::Skip;
            }
            StmtKind::Let { var, init: Some(init) } => {
                self.inits.insert(*var, init);
            }
            StmtKind::DeclBuffer { var, .. } => self.buffers.push(*var),
            StmtKind::Return(Some(value)) => {
                if let HExprKind::Param(p) = &value.kind {
                    if value.ty.scalar().is_none() {
                        match self.f.param(*p).map(|p| p.kind) {
                            Some(ParamKind::Global) => self.returns_global_param = true,
                            Some(ParamKind::HostIn | ParamKind::HostInOut) => {
                                self.returned_params.insert(*p);
                            }
                            Some(ParamKind::Scalar(_) | ParamKind::Stream) | None => {}
                        }
                    }
                }
            }
            StmtKind::InnerParallel(p) => {
                self.diags.push(internal(p.span, "an inner parallel level in host code"));
                return Walk::Skip;
            }
            StmtKind::Barrier(_) | StmtKind::Fence(_) => {
                self.diags.push(internal(s.span, "a barrier or fence in host code"))
            }
            _ => {}
        }
        Walk::Continue
    }

    fn expr(&mut self, _: &'a HExpr) -> Walk {
        Walk::Skip
    }
}

impl HostWalk<'_, '_> {
    fn kernel(&mut self, tree: &hir::ParallelTree) {
        let f = self.f;
        // A host-level DMA runs on the function's stream (its first `stream` parameter, the
        // default stream without one), after every earlier launch of the call, and is
        // synchronous like a parallel-by without `.async`.
        let host_dma = tree.origin == hir::KernelOrigin::HostDma;
        let bound = match tree.origin {
            hir::KernelOrigin::ParallelBy => tree.stream,
            hir::KernelOrigin::HostDma => tree.stream.or(self.first_stream),
        };
        let stream = bound.map_or(StreamRef::Default, StreamRef::Param);
        // The seed rules (spec §8.5 ⚠): a synchronous launch waits for its stream, or for the
        // device when it has none; an asynchronous one is waited for only when the function
        // has `&` parameters, whose copy-back must see the result.
        let after = match (tree.is_async, bound) {
            (false, None) => AfterLaunch::DeviceSync,
            (false, Some(_)) => AfterLaunch::StreamSync(stream),
            (true, _) if self.has_inout => AfterLaunch::StreamSync(stream),
            (true, _) => AfterLaunch::Track,
        };
        if let Some(s) = tree.stream {
            if !matches!(f.param(s).map(|p| p.kind), Some(ParamKind::Stream)) {
                self.diags.push(internal(
                    tree.span,
                    "a launch bound to something that is not a stream parameter",
                ));
            }
        }
        // Grid extents are evaluated on the host: only the body is device code.
        let mut kernel = KernelWalk {
            f,
            target: self.target,
            captures: BTreeSet::new(),
            levels: BTreeMap::new(),
            problems: Vec::new(),
            shared: Vec::new(),
            local: Vec::new(),
            async_copies: false,
            sync_uses: instances::Uses::default(),
            synchronises: tree.attrs.cooperative,
        };
        visit::walk_stmts(&mut kernel, &tree.body);
        // C++ the compiler cannot see into may synchronise too.
        kernel.synchronises |= f.foreign_code.iter().any(|(s, _)| {
            s.file == tree.span.file && s.start >= tree.span.start && s.end <= tree.span.end
        });
        let shared = shared_pool(f, self.target, tree, &kernel.shared, self.diags);
        check_local_bytes(f, self.target, tree, &kernel.local, self.diags);
        for problem in std::mem::take(&mut kernel.problems) {
            self.diags.push(problem);
        }
        let (grid, threads_per_block) = if host_dma {
            host_dma_grid(tree, self.diags)
        } else {
            (Grid::Blocks(tree.block.extents.clone()), tree.threads_per_block())
        };
        let block = threads_per_block.as_const();
        let levels: Vec<(LevelPlan, Span)> = kernel
            .levels
            .into_iter()
            .enumerate()
            .map(|(i, (id, inner))| {
                if id != LevelId(i as u32) {
                    self.diags
                        .push(internal(inner.span, "intra-block levels are not numbered in order"));
                }
                let threads_per_instance = inner.threads_per_instance();
                let instances = inner
                    .binder
                    .extents
                    .iter()
                    .try_fold(1u64, |acc, d| d.as_const().and_then(|d| acc.checked_mul(d)));
                let fills_block = match (threads_per_instance.as_const(), instances, block) {
                    (Some(each), Some(n), Some(b)) => each.checked_mul(n) == Some(b),
                    _ => false,
                };
                let plan = LevelPlan {
                    level: inner.level,
                    threads_per_instance,
                    fills_block,
                    instance_sync: None,
                };
                (plan, inner.span)
            })
            .collect();
        let mut syncs = instances::plan(&kernel.sync_uses, &levels, block, self.diags);
        let levels: Vec<LevelPlan> = levels
            .into_iter()
            .enumerate()
            .map(|(i, (plan, _))| LevelPlan {
                instance_sync: syncs.remove(&LevelId(i as u32)),
                ..plan
            })
            .collect();
        let cluster = tree.cluster.as_ref().map(|c| ClusterPlan {
            extents: c.extents.iter().map(|d| d.as_const().unwrap_or(1)).collect(),
        });
        let proxies = proxy::shared_proxies(&tree.body);
        let mut plan = KernelPlan {
            captures: kernel.captures.into_iter().collect(),
            stream,
            waits_for_async: host_dma && f.is_async,
            after,
            grid,
            threads_per_block,
            levels,
            guards: false,
            host_proof: Vec::new(),
            always_checked: false,
            shared,
            async_copies: kernel.async_copies,
            // The cluster barriers at entry and exit make the blocks of a cluster wait for
            // each other.
            synchronises: kernel.synchronises || cluster.is_some(),
            fence_triggers: tree.attrs.tma_barriers > 0
                && self.target != Target::Cpu
                && proxies.generic_before_tma(),
            proxies,
            attrs: tree.attrs,
            cluster,
            roles: Vec::new(),
        };
        plan.roles = roles::plan(tree, &plan, self.diags);
        match self.kernels.get_mut(tree.id.index()) {
            Some(slot @ None) => *slot = Some(plan),
            Some(Some(_)) => {
                self.diags.push(internal(tree.span, "two kernels with the same number"))
            }
            None => self.diags.push(internal(tree.span, "kernel number out of range")),
        }
    }
}

/// The launch shape of a host-level DMA's kernel: threads per block, and enough blocks for
/// one thread per element of the box (its DMA's extents); `E0811` for a constant box larger
/// than [`HOST_DMA_MAX_ELEMENTS`].
fn host_dma_grid(tree: &hir::ParallelTree, diags: &mut Diagnostics) -> (Grid, Dim) {
    let extents: &[Dim] = match tree.body.as_slice() {
        [Stmt { kind: StmtKind::Dma(dma), .. }] => &dma.extents,
        _ => {
            diags.push(internal(tree.span, "a host-level DMA's kernel that is not one DMA"));
            &[]
        }
    };
    let count =
        extents.iter().map(Dim::as_const).try_fold(1u64, |acc, d| d.map(|d| acc.saturating_mul(d)));
    let Some(n) = count else {
        let grid = Grid::Elements {
            extents: extents.to_vec(),
            max_blocks: HOST_DMA_MAX_BLOCKS,
            max_elements: HOST_DMA_MAX_ELEMENTS,
        };
        return (grid, Dim::Const(HOST_DMA_THREADS));
    };
    if n > HOST_DMA_MAX_ELEMENTS {
        diags.push(
            Diagnostic::error(
                "E0811",
                tree.span,
                format!(
                    "this host-level DMA copies {n} elements, but one copies at most \
                     {HOST_DMA_MAX_ELEMENTS}"
                ),
            )
            .with_label(format!("{n} elements"))
            .with_help(
                "split the copy: DMA views of the buffers (e.g. `chunkat`) one after another",
            ),
        );
    }
    // A small box: one block of whole warps.
    let threads = if n < HOST_DMA_THREADS { n.div_ceil(32).max(1) * 32 } else { HOST_DMA_THREADS };
    let blocks = n.div_ceil(threads).clamp(1, HOST_DMA_MAX_BLOCKS);
    (Grid::Blocks(vec![Dim::Const(blocks)]), Dim::Const(threads))
}

// ---------------------------------------------------------------------------------------------
// Kernel bodies
// ---------------------------------------------------------------------------------------------

/// The walk over a kernel body: the host values it uses, its intra-block levels, and what the
/// target cannot run.
struct KernelWalk<'a> {
    f: &'a hir::Function,
    target: Target,
    captures: BTreeSet<Capture>,
    levels: BTreeMap<LevelId, &'a hir::InnerParallel>,
    problems: Vec<Diagnostic>,
    /// The shared buffers and scalars declared in the kernel, in order.
    shared: Vec<VarId>,
    /// The local buffers declared in the kernel, in order.
    local: Vec<VarId>,
    /// Whether the kernel has an asynchronous DMA.
    async_copies: bool,
    /// What decides how selected level instances synchronise.
    sync_uses: instances::Uses,
    /// Whether threads of a block may wait for each other ([`KernelPlan::synchronises`]).
    synchronises: bool,
}

impl<'a> Visitor<'a> for KernelWalk<'a> {
    fn stmt(&mut self, s: &'a Stmt) -> Walk {
        self.sync_uses.note(s);
        self.synchronises |= match &s.kind {
            StmtKind::Barrier(_)
            | StmtKind::NamedBarrier { .. }
            | StmtKind::Wait { .. }
            | StmtKind::TmaStoreWait { .. }
            | StmtKind::RoleBarrier { .. }
            | StmtKind::GlobalFlag { .. }
            | StmtKind::Dma(_)
            | StmtKind::TriggerAfter(_)
            | StmtKind::Asm(_)
            | StmtKind::Cpp(_) => true,
            // A warp's lanes read an MMA tile together: the CPU emulates the instruction's
            // convergence with a warp barrier after the load (`mma.cuh`).
            // Fragment reductions exchange registers between lanes (`frag_ops.cuh`).
            StmtKind::Mma(op) => matches!(
                **op,
                crate::hir::mma::MmaOp::Load { .. } | crate::hir::mma::MmaOp::Frag(_)
            ),
            StmtKind::DeclBuffer { var, .. } | StmtKind::Let { var, .. } => {
                self.f.local(*var).is_some_and(|l| {
                    matches!(l.place, LocalPlace::SharedBuffer | LocalPlace::SharedScalar)
                })
            }
            _ => false,
        };
        if let (StmtKind::Asm(_), Target::Cpu) = (&s.kind, self.target) {
            self.problems.push(
                Diagnostic::error(
                    "E0806",
                    s.span,
                    "inline assembly is not supported on the CPU target",
                )
                .with_label("PTX runs only on a CUDA GPU")
                .with_help(
                    "write the operation in Choreo or C++ (`__cpp__`, a `__device__` function), \
                     or compile this file for a CUDA architecture only",
                ),
            );
        }
        let problem = match &s.kind {
            StmtKind::InnerParallel(inner) => {
                // Sema reports this (E0805); a safety net for plans made for another target.
                let feature = crate::target::Feature::Warpgroups;
                if inner.level == Level::Group4 && !self.target.supports(feature) {
                    self.problems.push(
                        Diagnostic::error(
                            "E0805",
                            inner.span,
                            format!(
                                "{} is not supported by the target architecture: {}",
                                feature.name(),
                                self.target.arch().map_or("cpu".to_string(), |a| a.to_string())
                            ),
                        )
                        .with_label(format!("needs {}", feature.min_arch())),
                    );
                }
                self.levels.insert(inner.id, inner);
                None
            }
            StmtKind::DeclBuffer { var, .. } => {
                let local = self.f.local(*var);
                match local.map(|l| l.place) {
                    Some(LocalPlace::SharedBuffer) => self.shared.push(*var),
                    Some(LocalPlace::LocalBuffer) => self.local.push(*var),
                    _ => {}
                }
                // The extents of a shared buffer are the kernel's to compute.
                if let Some(Ty::Spanned(t)) = local.map(|l| &l.ty) {
                    for d in &t.dims {
                        visit::walk_dim(self, d);
                    }
                }
                match local.map(|l| l.place) {
                    Some(LocalPlace::SharedBuffer | LocalPlace::LocalBuffer) => None,
                    _ => Some("a global buffer declared in device code"),
                }
            }
            StmtKind::Let { var, .. }
                if self.f.local(*var).is_some_and(|l| l.place == LocalPlace::SharedScalar) =>
            {
                self.shared.push(*var);
                None
            }
            StmtKind::Dma(dma) => {
                self.async_copies |= dma.is_async;
                None
            }
            StmtKind::HostCopy { .. } => Some("a host copy inside a kernel"),
            StmtKind::Return(_) => Some("a return in device code"),
            StmtKind::Parallel(_) => Some("a kernel launch inside a kernel"),
            StmtKind::Check(_) => Some("a host check inside a kernel"),
            StmtKind::SyncGlobal => Some("sync.global inside a kernel"),
            _ => None,
        };
        match problem {
            Some(what) => {
                self.problems.push(internal(s.span, what));
                Walk::Skip
            }
            None => Walk::Continue,
        }
    }

    fn expr(&mut self, e: &'a HExpr) -> Walk {
        match &e.kind {
            HExprKind::Var(v) => self.var(*v, e.span),
            HExprKind::Param(p) => match self.f.param(*p).map(|p| p.kind) {
                Some(ParamKind::Stream) => {
                    self.problems.push(internal(e.span, "a stream used inside a kernel"))
                }
                Some(_) => {
                    self.captures.insert(Capture::Param(*p));
                }
                None => self.problems.push(internal(e.span, "an unknown parameter")),
            },
            HExprKind::SymDim(s) => {
                self.captures.insert(Capture::Sym(*s));
            }
            HExprKind::ParamExtent { param, dim } => {
                self.captures.insert(Capture::Extent(*param, *dim));
            }
            _ => {}
        }
        Walk::Continue
    }

    fn dim(&mut self, d: &'a Dim) {
        match d {
            Dim::Sym(s) => {
                self.captures.insert(Capture::Sym(*s));
            }
            Dim::Dynamic { param, dim } => {
                self.captures.insert(Capture::Extent(*param, *dim));
            }
            Dim::Const(_) | Dim::Expr(_) => {}
        }
    }

    fn buffer(&mut self, b: hir::BufferRef) {
        let f = self.f;
        // The element offset uses the buffer's extents.
        let dims: &'a [Dim] = match b {
            hir::BufferRef::Param(p) => {
                self.captures.insert(Capture::Param(p));
                f.param(p).map_or(&[], |p| p.dims.as_slice())
            }
            hir::BufferRef::Local(v) => {
                // Shared and local buffers are the kernel's own.
                if f.local(v).is_some_and(|l| l.place == LocalPlace::GlobalBuffer) {
                    self.captures.insert(Capture::Var(v));
                }
                match f.local(v).map(|l| &l.ty) {
                    Some(Ty::Spanned(t)) => t.dims.as_slice(),
                    _ => &[],
                }
            }
        };
        for d in dims {
            visit::walk_dim(self, d);
        }
    }
}

impl KernelWalk<'_> {
    fn var(&mut self, v: VarId, span: Span) {
        match self.f.local(v) {
            Some(l) => match (&l.place, &l.origin) {
                (LocalPlace::HostScalar | LocalPlace::GlobalBuffer, _) => {
                    self.captures.insert(Capture::Var(v));
                }
                (LocalPlace::Expanded, LocalOrigin::Tuple { components }) => {
                    for c in components {
                        self.var(*c, span);
                    }
                }
                _ => {}
            },
            None => self.problems.push(internal(span, "an unknown local")),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Shared and local memory
// ---------------------------------------------------------------------------------------------

/// The bytes a shared buffer or scalar takes.
fn shared_slot_bytes(f: &hir::Function, var: VarId, span: Span) -> Dim {
    match f.local(var).map(|l| &l.ty) {
        Some(Ty::Spanned(t)) => {
            let mut dims = t.dims.clone();
            dims.push(Dim::Const(t.elem.size_bytes()));
            hir::arith::dim_product(&dims, span)
        }
        Some(ty) => Dim::Const(ty.scalar().map_or(4, ElemTy::size_bytes)),
        None => Dim::Const(0),
    }
}

/// Lays out the shared buffers and scalars of a kernel (in declaration order, each aligned),
/// and checks a constant total against the target (`E0808`).
fn shared_pool(
    f: &hir::Function,
    target: Target,
    tree: &hir::ParallelTree,
    vars: &[VarId],
    diags: &mut Diagnostics,
) -> SharedPool {
    let span = tree.span;
    // Swizzled tiles start at a multiple of the pattern's period (tier 3 §4.2).
    let alignment = target.shared_alignment().max(8 * u64::from(tree.attrs.swizzle));
    let align = |d: Dim| -> Dim {
        match d.as_const() {
            Some(c) => Dim::Const(c.div_ceil(alignment) * alignment),
            None => {
                let a = hir::arith::int_lit(alignment as i128, span);
                Dim::Expr(Box::new(HExpr {
                    kind: HExprKind::Math {
                        func: hir::MathFn::Alignup,
                        args: vec![d.to_expr(span), a],
                    },
                    ty: Ty::Scalar(ElemTy::S32),
                    span,
                }))
            }
        }
    };
    let mut offset = Dim::Const(0);
    let mut slots = Vec::with_capacity(vars.len());
    let mut sizes = Vec::with_capacity(vars.len());
    for &var in vars {
        let bytes = shared_slot_bytes(f, var, span);
        slots.push(SharedSlot { var, offset: offset.clone() });
        sizes.push((var, bytes.clone()));
        offset = align(match (offset.as_const(), bytes.as_const()) {
            (Some(a), Some(b)) => Dim::Const(a.saturating_add(b)),
            _ => Dim::from_expr(hir::arith::add(offset.to_expr(span), bytes.to_expr(span), span)),
        });
    }
    let barriers = (tree.attrs.tma_barriers > 0).then(|| offset.clone());
    if barriers.is_some() {
        let bytes = 8 * u64::from(tree.attrs.tma_barriers);
        offset = align(match offset.as_const() {
            Some(a) => Dim::Const(a.saturating_add(bytes)),
            None => Dim::from_expr(hir::arith::add(
                offset.to_expr(span),
                hir::arith::int_lit(i128::from(bytes), span),
                span,
            )),
        });
    }
    let limit = target.max_shared_bytes();
    if let Some(total) = offset.as_const() {
        if total > limit {
            let mut d = Diagnostic::error(
                "E0808",
                span,
                format!(
                    "this kernel needs {total} bytes of shared memory, but the target ({}) \
                     allows at most {limit} bytes per block",
                    target
                ),
            )
            .with_label(format!("{total} bytes of shared memory needed, {limit} available"));
            for (var, bytes) in &sizes {
                if let (Some(l), Some(b)) = (f.local(*var), bytes.as_const()) {
                    d = d.with_secondary(l.span, format!("'{}': {b} bytes", l.name));
                }
            }
            diags.push(
                d.with_help("use smaller tiles, fewer pipeline stages, or a narrower element type"),
            );
        }
    }
    let opt_in = offset.as_const().is_none_or(|b| b > target.static_shared_bytes());
    SharedPool { slots, bytes: offset, alignment, limit, opt_in, barriers }
}

/// Checks the local buffers of a kernel against the target's per-thread limit (`E0809`).
fn check_local_bytes(
    f: &hir::Function,
    target: Target,
    tree: &hir::ParallelTree,
    vars: &[VarId],
    diags: &mut Diagnostics,
) {
    let limit = target.local_bytes_per_thread();
    let mut total: u64 = 0;
    let mut parts = Vec::new();
    for &var in vars {
        let Some(l) = f.local(var) else { continue };
        let Some(bytes) = shared_slot_bytes(f, var, tree.span).as_const() else { continue };
        total = total.saturating_add(bytes);
        parts.push((l.span, l.name.clone(), bytes));
    }
    if total > limit {
        let mut d = Diagnostic::error(
            "E0809",
            tree.span,
            format!(
                "compile-time local memory: Used: {total} bytes, Limit: {limit} bytes (local \
                 buffers of one thread of this kernel, target {target})"
            ),
        )
        .with_label(format!("{total} bytes of local buffers per thread, {limit} available"));
        for (span, name, bytes) in parts {
            d = d.with_secondary(span, format!("'{name}': {bytes} bytes"));
        }
        diags.push(d.with_help("use shared memory for large per-block data"));
    }
}

// ---------------------------------------------------------------------------------------------
// Returned shapes
// ---------------------------------------------------------------------------------------------

/// The returned shape with every host local replaced by its initial value (see
/// [`Entry::result_shape`]); `E0807` and `Err` when an extent depends on a local without one.
fn resolve_shape(
    f: &hir::Function,
    dims: &[Dim],
    inits: &BTreeMap<VarId, &HExpr>,
    diags: &mut Diagnostics,
) -> Result<Vec<Dim>, String> {
    let mut out = Vec::with_capacity(dims.len());
    for (d, dim) in dims.iter().enumerate() {
        match dim {
            Dim::Expr(e) => match resolve_locals(f, e, inits, 0) {
                Ok(e) => out.push(Dim::Expr(Box::new(e))),
                Err(span) => {
                    diags.push(
                        Diagnostic::error(
                            "E0807",
                            span,
                            format!(
                                "extent {d} of the shape returned by '{}' depends on a value \
                                 that its body computes",
                                f.name
                            ),
                        )
                        .with_label("not known before the function runs")
                        .with_help(
                            "the returned shape must be computable from the parameters when \
                             the function is called: derive it from parameters, symbolic \
                             dimensions and immutable locals initialised from them",
                        ),
                    );
                    return Err(format!("extent {d} depends on a value that the body computes"));
                }
            },
            Dim::Const(_) | Dim::Sym(_) | Dim::Dynamic { .. } => out.push(dim.clone()),
        }
    }
    Ok(out)
}

/// `e` with every use of an immutable host local replaced by its initial value (recursively);
/// `Err(span)` of a use that has none (a mutable local, a buffer, a loop index).
fn resolve_locals(
    f: &hir::Function,
    e: &HExpr,
    inits: &BTreeMap<VarId, &HExpr>,
    depth: u32,
) -> Result<HExpr, Span> {
    // Initial values refer only to earlier locals, so the chain ends; the bound guards against
    // a malformed program.
    if depth > 64 {
        return Err(e.span);
    }
    let mut failed = None;
    let mut out = e.clone();
    visit::for_each_expr_mut(&mut out, &mut |x| {
        if let HExprKind::Var(v) = &x.kind {
            let init = f.local(*v).filter(|l| !l.mutable).and_then(|_| inits.get(v));
            match init.map(|init| resolve_locals(f, init, inits, depth + 1)) {
                Some(Ok(value)) => *x = value,
                Some(Err(span)) => failed = failed.or(Some(span)),
                None => failed = failed.or(Some(x.span)),
            }
        }
    });
    match failed {
        Some(span) => Err(span),
        None => Ok(out),
    }
}
