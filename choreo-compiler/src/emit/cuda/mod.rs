//! CUDA emission: checked program + lowered plan → one `.cu` file (design §3, spec Appendix B,
//! runtime-abi §1–§5). The emitter renders; every decision (symbols, captures, launch streams,
//! synchronisation after launches, thread nest, data movement, the `extern "C"` ABI) comes from
//! [`crate::lower`].
//!
//! Modules: [`writer`] (output text with `#line` bookkeeping), [`support`] (the prelude and the
//! support library `support.cuh`), [`types`] (C++ spellings of types, conversions, literals),
//! `expr` (expressions and `print`), `body` (statements of host and device code), `kernel`
//! (kernels, intra-block levels, launches), `host` (the check and core functions, the C++
//! wrapper and the `extern "C"` entry).
//!
//! # Layout of the generated file
//!
//! 1. Prelude (no `#line` yet, so errors in it point at the `.cu` file): the SM define
//!    `__CHOREO_REQUIRED_GPU_DEVICE_SM__`, `__CHOREO_ENABLE_CUDA_RUNTIME_ENV_CHECK__` (unless the
//!    C++ compiler gets `-DCHOREO_DISABLE_CUDA_RUNTIME_ENV_CHECK`), `#include "choreo.h"`,
//!    `using namespace choreo;` and the support library (call frames, device-memory guards,
//!    math helpers; all names start with `__choreo`) in a namespace named after a hash of its
//!    text, so generated files link together.
//! 2. The `.co` file in source order. Host C++ text, `__device__` declarations and `__cok__`
//!    blocks are copied verbatim, each preceded by a `#line` directive naming the `.co` file,
//!    so nvcc reports errors in them at their `.co` lines. In [`OutputMode::Library`] the
//!    definition of the global `main` function is renamed to
//!    [`crate::lower::SymbolScope::renamed_main`]: only the `main` identifiers the preprocessor
//!    recorded
//!    ([`crate::preprocess::Preprocessed::main_definitions`]), which keeps the line structure
//!    and lets the file link into another program; a `main` without a `return` then draws a
//!    "missing return" warning from the host compiler.
//! 3. Each `__co__` function is replaced, at its position, by (all lines carry `#line`
//!    directives pointing at the `.co` construct they come from):
//!    - its kernels `static __global__ void <kernel symbol>(…)`: one per device-entry
//!      parallel-by, receiving its captures in plan order (spanned data as `T*`, scalars by
//!      value, extents as `unsigned`); the block level's indices are `blockIdx.{x,y,z}`, the
//!      intra-block levels share `threadIdx.x` (one-dimensional blocks): a level's instance
//!      number is `threadIdx.x / <threads per instance> % <instances>` (spec §8.4); element
//!      access is row-major `ptr[offset]`;
//!    - `static int <check symbol>(frame, extents…, scalars…)`: the entry checks (spec §19.2)
//!      with the spec's messages;
//!    - `static int <core symbol>(frame, …)`: the function body on device pointers — host
//!      control flow, host printing, launches followed by what the plan says
//!      ([`crate::lower::AfterLaunch`]), function-local device buffers (freed on every exit
//!      path by guards; after asynchronous launches the frees are stream-ordered after them),
//!      the return value;
//!    - the C++ wrapper `<ret> <fn>(<params>)` with the upstream signature (runtime-abi §2): it
//!      checks the CUDA environment, runs the entry checks, copies the host parameters the
//!      function uses to the device (only when it launches kernels), calls the core, copies
//!      written `&` parameters back (after every launch finished; once, after the core, which is
//!      equivalent because host code cannot read elements), writes a returned parameter's
//!      device data back into the caller's buffer (spec §7.3 ⚠), builds the returned
//!      `spanned_data` with the declared return shape, frees everything and aborts with the
//!      spec's messages on any failure;
//!    - the `extern "C"` entry of [`crate::lower::abi`], which the Rust wrapper calls.
//!
//! Failures inside check and core functions are recorded in the call's frame (the first one
//! wins) and every exit path runs through the frame's cleanup; they never abort or exit.
//!
//! Device work and synchronisation (the plan's decisions, spec §8.5 and the seed rules):
//! function-local device buffers are allocated with `cudaMallocAsync` on a private stream that
//! is waited for at once, and freed with `cudaFreeAsync` on a private release stream that waits
//! (through events) for every asynchronous launch of the call, so kernels still running never
//! see freed memory. A returned value is copied on the result stream after every asynchronous
//! launch of the call (through events). Apart from that, no user stream is made to wait for
//! another.

mod body;
mod dma_fuse;
mod events;
mod expr;
mod flags;
mod frag;
mod host;
mod kernel;
mod mma;
pub mod support;
mod tma;
mod tma_async;
pub mod types;
mod wgmma_n;
mod wgmma_sp;
pub mod writer;

use super::OutputMode;
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::hir::{self, BufferRef, Dim, ElemIndex, ElemTy, HExpr, ParamId, Ty};
use crate::lower::{FunctionPlan, Names, Plan};
use crate::source::{FileId, SourceDb, Span};
use crate::target::Arch;
use types::{conv, scalar_of};
use writer::{Writer, comment_text};

impl CudaOptions {
    /// Whether the architecture has `cp.async` (sm_80 and later; never on the CPU).
    pub fn arch_has_cp_async(&self) -> bool {
        self.dialect == Dialect::Cuda && self.arch.sm() >= 80
    }
}

/// Which compiler the emitted C++ is for.
///
/// The CPU backend ([`crate::emit::cpu`]) renders the same text as the CUDA one, for the
/// host's C++ compiler and the CPU runtime header `choreo_cpu.h`, which supplies what the CUDA
/// headers supply (types, qualifiers, intrinsics, the runtime API). Only what that header
/// cannot provide is spelled differently, always through [`Dialect`] checks in this module:
/// kernels take the executing thread as a first parameter (`__choreo_thr`, which the
/// header's `threadIdx`, `__syncthreads()`, … read), shared memory is the block's arena,
/// launches go through `::choreo::cpu::launch<kernel>`, grid and named barriers and device
/// `print` are calls on the thread, and inline PTX is rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Dialect {
    /// CUDA C++ for nvcc.
    #[default]
    Cuda,
    /// C++17 for the host compiler with `choreo_cpu.h`.
    Cpu,
}

/// What the CUDA emitter needs to know besides the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CudaOptions {
    /// The target architecture (sets `__CHOREO_REQUIRED_GPU_DEVICE_SM__`).
    pub arch: Arch,
    /// Library (rename `main`) or standalone program.
    pub mode: OutputMode,
    /// Whether to emit the runtime checks of spec §19.2 (entry checks and checks before
    /// launches). The check that a returned value fits the declared return shape is always
    /// emitted, because the copy into the caller's buffer depends on it.
    pub runtime_checks: bool,
    /// CUDA C++ or C++ for the CPU runtime.
    pub dialect: Dialect,
}

/// The WGMMA instruction `Mma<tag, n>` (an explicit specialisation for the WGMMA library's
/// namespace, `tag` in the library's spelling such as `F32F16F16`) that generated code gets for
/// an N outside the library's list; `None` for an unknown tag or an N that is not a multiple
/// of 8 in 8..=256. Public for the library tests, which compile every legal N with nvcc.
pub fn wgmma_instruction(tag: &str, n: u64) -> Option<String> {
    wgmma_n::specialisation(tag, n)
}

/// The sparse WGMMA instruction `SpMma<tag, n>` (`ss`, and `rs` for the 16-bit tags) that
/// generated code gets for a sparse execution of that operation and N; `None` as for
/// [`wgmma_instruction`] and for the tags without a sparse form. Public for the library tests,
/// which compile every N with nvcc.
pub fn wgmma_sparse_instruction(tag: &str, n: u64) -> Option<String> {
    wgmma_n::sparse_specialisation(tag, n)
}

/// The (operation tag, N) pairs of the WGMMA fragments of `program` that `keep`, each with the
/// first fragment's span, sorted.
fn wgmma_pairs(
    program: &hir::Program,
    keep: impl Fn(&hir::mma::Frag, &hir::mma::MmaSelected) -> bool,
) -> Vec<(String, u64, Span)> {
    let mut pairs: Vec<(String, u64, Span)> = Vec::new();
    for item in &program.items {
        let hir::Item::Function(f) = item else { continue };
        for g in &f.frags {
            let Some(s) = g.selected else { continue };
            if s.family != crate::target::mma::MmaFamily::Wgmma || !keep(g, &s) {
                continue;
            }
            let (tag, n) = (wgmma_n::tag_of(&s.config), s.config.n);
            if !pairs.iter().any(|(t, m, _)| *t == tag && *m == n) {
                pairs.push((tag, n, g.span));
            }
        }
    }
    pairs.sort_by(|x, y| (&x.0, x.1).cmp(&(&y.0, y.1)));
    pairs
}

/// The instructions `make` writes for `pairs`, in the WGMMA namespace (nothing for none); a
/// pair it has none for is an internal error naming `what<tag, n>`.
fn write_instructions(
    w: &mut Writer<'_>,
    diags: &mut Diagnostics,
    pairs: &[(String, u64, Span)],
    make: fn(&str, u64) -> Option<String>,
    what: &str,
) {
    if pairs.is_empty() {
        return;
    }
    w.raw("namespace CHOREO_WGMMA_NS {\n");
    for (tag, n, span) in pairs {
        match make(tag, *n) {
            Some(text) => w.raw(&text),
            None => diags.push(internal(*span, &format!("no {what}<{tag}, {n}>"))),
        }
    }
    w.raw("}  // namespace CHOREO_WGMMA_NS\n");
}

/// Writes the `.cu` text of a checked, lowered file. Internal inconsistencies (which a correct
/// `sema` and `lower` never produce) are reported as `E0801` errors; the text is then not
/// usable.
pub fn emit_cuda(
    db: &SourceDb,
    file: FileId,
    program: &hir::Program,
    plan: &Plan,
    options: &CudaOptions,
    diags: &mut Diagnostics,
) -> String {
    let mut w = Writer::new(db, file);
    let cooperative = plan.functions.iter().flat_map(|f| &f.kernels).any(|k| k.attrs.cooperative);
    w.raw(&support::prelude(
        db.file(file).name(),
        &plan.scope.renamed_main(plan.target),
        options,
        cooperative,
    ));
    // The MMA library costs nvcc time (and includes <mma.h>): only files with fragments get it.
    let uses_mma =
        program.items.iter().any(|i| matches!(i, hir::Item::Function(f) if !f.frags.is_empty()));
    // The WGMMA library (and the statements on top of it) only where a warpgroup executes MMA
    // (below).
    let uses_wgmma = program.items.iter().any(|i| {
        matches!(i, hir::Item::Function(f) if f.frags.iter().any(|g| {
            g.selected.is_some_and(|s| s.family == crate::target::mma::MmaFamily::Wgmma)
        }))
    });
    if uses_mma {
        w.raw(&format!(
            "#define CHOREO_MMA_NS {}\n",
            mma::mma_namespace(options.dialect == Dialect::Cpu, uses_wgmma)
        ));
        w.raw(mma::MMA_SUPPORT);
    }
    if uses_wgmma {
        w.raw(&format!(
            "#define CHOREO_WGMMA_NS {}\n",
            mma::wgmma_namespace(options.dialect == Dialect::Cpu)
        ));
        if options.dialect == Dialect::Cpu {
            // The CPU runtime's hooks: the block's shared memory, the thread in its warpgroup.
            w.raw(
                "#define CHOREO_WGMMA_CPU_SMEM_BASE() (__choreo_thr->smem)\n\
                 #define CHOREO_WGMMA_CPU_THREAD() (static_cast<int>(threadIdx.x + blockDim.x * \
                 (threadIdx.y + blockDim.y * threadIdx.z)) % 128)\n",
            );
        }
        w.raw(&mma::WGMMA_LIBRARY.replacen("#pragma once\n", "", 1));
        w.raw(mma::WGMMA_OPS);
        // The instructions of an N outside the library's list, for the pairs used here only.
        let extra = wgmma_pairs(program, |_, s| !wgmma_n::LIBRARY_N.contains(&s.config.n));
        write_instructions(&mut w, diags, &extra, wgmma_n::specialisation, "WGMMA instruction Mma");
        // Sparse WGMMA: its library and the instructions of the (operation, N) pairs used.
        let sparse =
            wgmma_pairs(program, |g, s| s.config.sparse && g.role == Some(hir::mma::MmaRole::C));
        if !sparse.is_empty() {
            w.raw(mma::WGMMA_SPARSE);
        }
        write_instructions(
            &mut w,
            diags,
            &sparse,
            wgmma_n::sparse_specialisation,
            "sparse WGMMA instruction SpMma",
        );
    }
    // The fragment operations (spec-tier3 §6) only where shaped fragments or `apply` are used.
    let uses_frag = program
        .items
        .iter()
        .any(|i| matches!(i, hir::Item::Function(f) if frag::uses_frag_ops(&f.body)));
    if uses_frag {
        w.raw(&format!(
            "#define CHOREO_FRAG_NS {}\n",
            frag::frag_namespace(options.dialect == Dialect::Cpu)
        ));
        w.raw(frag::FRAG_OPS);
    }
    let mut plans = plan.functions.iter();
    for item in &program.items {
        match item {
            hir::Item::Host(span) => {
                let text = match options.mode {
                    OutputMode::Library => renamed_main(
                        db.snippet(*span),
                        *span,
                        &program.main_definitions,
                        &plan.scope.renamed_main(plan.target),
                    ),
                    OutputMode::Standalone => db.snippet(*span).to_string(),
                };
                w.verbatim(*span, &text);
            }
            hir::Item::Device(span) | hir::Item::Cok { span, .. } => {
                w.verbatim(*span, db.snippet(*span));
            }
            hir::Item::Function(f) => match plans.next() {
                Some(p) => {
                    let mut e = FnEmitter {
                        db,
                        f,
                        plan: p,
                        options,
                        w: &mut w,
                        diags,
                        depth: 0,
                        fence_triggers: false,
                        proxies: Default::default(),
                        kernel_warps: 32,
                        warp_reads: false,
                        launch_tests: None,
                        versioned: std::collections::HashMap::new(),
                    };
                    e.emit();
                }
                None => diags.push(internal(f.span, "no plan for this function")),
            },
        }
    }
    w.finish()
}

/// `text` (the host region `span`) with the `main` identifiers among `mains` replaced by
/// `renamed`.
fn renamed_main(text: &str, span: Span, mains: &[Span], renamed: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for m in mains.iter().filter(|m| m.start >= span.start && m.end <= span.end) {
        let (start, end) = ((m.start - span.start) as usize, (m.end - span.start) as usize);
        if let (Some(before), Some("main")) = (text.get(last..start), text.get(start..end)) {
            out.push_str(before);
            out.push_str(renamed);
            last = end;
        }
    }
    out.push_str(text.get(last..).unwrap_or(""));
    out
}

fn internal(span: Span, what: &str) -> Diagnostic {
    Diagnostic::error("E0801", span, format!("internal error in code generation: {what}"))
        .with_label("the checked program is not what the code generator expects here")
        .with_note("this is a bug of the Choreo translator; please report it with this file")
}

/// Where code is being emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Region {
    /// The core function (host).
    Host,
    /// The body of the kernel with this id.
    Device(hir::KernelId),
}

/// Writes the code of one `__co__` function.
struct FnEmitter<'a, 'w> {
    db: &'a SourceDb,
    f: &'a hir::Function,
    plan: &'a FunctionPlan,
    options: &'a CudaOptions,
    w: &'w mut Writer<'a>,
    diags: &'w mut Diagnostics,
    /// Nesting depth of inner parallel levels (unique names for their linear indices).
    depth: usize,
    /// [`KernelPlan::fence_triggers`](crate::lower::KernelPlan::fence_triggers) of the kernel
    /// being emitted.
    fence_triggers: bool,
    /// [`KernelPlan::proxies`](crate::lower::KernelPlan::proxies) of the kernel being emitted.
    proxies: crate::lower::proxy::SharedProxies,
    /// The warps of a block of the kernel being emitted (32 when not a constant): the
    /// staging slots of masked WMMA stores.
    kernel_warps: u64,
    /// Whether mma.sync operand loads through ldmatrix were emitted since the warp last
    /// converged: before anything that may write shared memory (and at the end of a loop body
    /// that may), a warp barrier orders those reads before the writes of the other lanes.
    warp_reads: bool,
    /// While a CUDA kernel's body is emitted: the tests that read only launch arguments (a
    /// parameter's base address, its extents): alignment tests of its wide copies, and that
    /// each parameter's elements fit 32-bit indices. The kernel becomes a
    /// template on `bool __choreo_vec`, the host evaluates these tests once per launch and
    /// launches `<true>` when all hold: that instantiation has no element-by-element fallback
    /// inside its loops, which otherwise keeps nvcc from strength-reducing their addresses.
    launch_tests: Option<Vec<String>>,
    /// The tests of each versioned kernel (by [`hir::KernelId`] index), for its launch.
    versioned: std::collections::HashMap<usize, Vec<String>>,
}

impl FnEmitter<'_, '_> {
    fn names(&self) -> &Names {
        &self.plan.names
    }

    fn bug(&mut self, span: Span, what: &str) {
        self.diags.push(internal(span, what));
    }

    fn emit(&mut self) {
        let f = self.f;
        self.w.ensure_line_start();
        self.w.line(
            f.span,
            &format!("// ---- __co__ function '{}' ({}) ----", f.name, comment_text(&f.location)),
        );
        for tree in hir::kernels(&f.body) {
            self.kernel(tree);
        }
        self.check_function();
        self.core_function();
        self.cpp_wrapper();
        self.rs_entry();
    }

    // -- names and small pieces ------------------------------------------------------------

    fn param_name(&self, p: ParamId) -> String {
        self.names().param(p).to_string()
    }

    fn dims_of_buffer(&self, b: BufferRef) -> Vec<Dim> {
        match b {
            BufferRef::Param(p) => self.f.param(p).map(|p| p.dims.clone()).unwrap_or_default(),
            BufferRef::Local(v) => match self.f.local(v).map(|l| &l.ty) {
                Some(Ty::Spanned(t)) => t.dims.clone(),
                _ => Vec::new(),
            },
        }
    }

    fn elem_of_buffer(&self, b: BufferRef) -> Option<ElemTy> {
        match b {
            BufferRef::Param(p) => self.f.param(p).and_then(|p| p.elem),
            BufferRef::Local(v) => match self.f.local(v).map(|l| &l.ty) {
                Some(Ty::Spanned(t)) => Some(t.elem),
                _ => None,
            },
        }
    }

    fn buffer_name(&self, b: BufferRef) -> String {
        match b {
            BufferRef::Param(p) => self.param_name(p),
            BufferRef::Local(v) => self.names().local(v).to_string(),
        }
    }

    /// A dimension as an `int` expression.
    fn dim_int(&mut self, d: &Dim) -> String {
        match d {
            Dim::Const(c) => c.to_string(),
            Dim::Sym(s) => format!("static_cast<int>({})", self.names().sym(*s)),
            Dim::Dynamic { param, dim } => {
                format!("static_cast<int>({})", self.names().extent(*param, *dim))
            }
            Dim::Expr(e) => {
                let t = scalar_of(&e.ty).unwrap_or(ElemTy::S32);
                let text = self.expr(e);
                conv(&text, t, ElemTy::S32)
            }
        }
    }

    /// A dimension as a `std::uint64_t` expression (host sizes).
    fn dim_u64(&mut self, d: &Dim) -> String {
        match d {
            Dim::Const(c) => format!("{c}ull"),
            Dim::Sym(s) => self.names().sym(*s).to_string(),
            Dim::Dynamic { param, dim } => self.names().extent(*param, *dim),
            Dim::Expr(_) => format!("static_cast<std::uint64_t>({})", self.dim_int(d)),
        }
    }

    /// A dimension as an `unsigned` expression (launch geometry).
    fn dim_unsigned(&mut self, d: &Dim) -> String {
        match d {
            Dim::Const(c) => c.to_string(),
            _ => {
                let v = self.dim_u64(d);
                format!("static_cast<unsigned>({v})")
            }
        }
    }

    /// The element count of a shape as a `std::uint64_t` expression.
    fn count_u64(&mut self, dims: &[Dim]) -> String {
        if let Some(n) = Dim::const_count(dims) {
            return format!("{n}ull");
        }
        // Symbols and extents are std::uint64_t in host code: the product is 64-bit.
        let parts: Vec<String> = dims.iter().map(|d| self.dim_u64(d)).collect();
        if parts.len() == 1 { parts[0].clone() } else { format!("({})", parts.join(" * ")) }
    }

    /// A dimension as used in an offset computation (its natural type).
    fn dim_raw(&mut self, d: &Dim) -> String {
        match d {
            Dim::Const(c) => c.to_string(),
            Dim::Sym(s) => self.names().sym(*s).to_string(),
            Dim::Dynamic { param, dim } => self.names().extent(*param, *dim),
            Dim::Expr(_) => self.dim_int(d),
        }
    }

    /// The run-time bounds check of access `id` (its dimensions that are not proven), as a
    /// condition that notes a failure in the call's bounds record; `None` when the access is
    /// proven in bounds or checks are off.
    fn bounds_guard(
        &mut self,
        id: hir::AccessId,
        buffer: BufferRef,
        index: &ElemIndex,
    ) -> Option<String> {
        if !self.plan.guards {
            return None;
        }
        let checks = self.plan.accesses.get(id.index())?.checks.clone();
        let (dims, flat) = match index {
            ElemIndex::Coords(_) => (self.dims_of_buffer(buffer), false),
            ElemIndex::Flat(_) => {
                let count = hir::arith::dim_product(&self.dims_of_buffer(buffer), self.f.span);
                (vec![count], true)
            }
        };
        let flat_count = flat.then(|| self.flat_count(buffer));
        let mut parts = Vec::new();
        for (d, ((check, index), extent)) in checks.iter().zip(index.exprs()).zip(&dims).enumerate()
        {
            if !(check.below || check.above) {
                continue;
            }
            // A flat offset is noted as dimension 0xffffffff (`lower::abi::BOUNDS_RECORD`).
            let d = if flat { u32::MAX } else { d as u32 };
            let t = scalar_of(&index.ty).unwrap_or(ElemTy::S32);
            let i = self.expr(index);
            let x = match &flat_count {
                Some(count) => count.clone(),
                None => self.dim_raw(extent),
            };
            // An `int` index against an extent that fits 32 bits (the kernels receive extents
            // as `unsigned`; an element count only when it is a constant) is checked with one
            // 32-bit comparison, anything else in 64 bits.
            let fits = |c: u64| u32::try_from(c).is_ok();
            let narrow = t == ElemTy::S32
                && if flat {
                    extent.as_const().is_some_and(fits)
                } else {
                    extent.as_const().is_none_or(fits)
                };
            parts.push(if narrow {
                format!(
                    "::__choreo_in_bounds32(__choreo_bounds, {}u, {d}u, {i}, \
                     static_cast<unsigned>({x}))",
                    id.0
                )
            } else {
                let i = if t.is_int() { i } else { conv(&i, t, ElemTy::S64) };
                format!(
                    "::__choreo_in_bounds(__choreo_bounds, {}u, {d}u, static_cast<long long>({i}), \
                     static_cast<long long>({x}))",
                    id.0
                )
            });
        }
        if parts.is_empty() {
            return None;
        }
        let all = parts.join(" && ");
        // The kernel skips the check when the host has found this access in bounds before
        // the launch (`lower::KernelPlan::host_proof`; a uniform flag, so the branch is cheap
        // and nvcc compiles the kernel once).
        Some(match self.plan.accesses.get(id.index()).and_then(|a| a.host_proof.as_ref()) {
            Some(_) if parts.len() == 1 => format!("(!__choreo_checked || {all})"),
            Some(_) => format!("(!__choreo_checked || ({all}))"),
            None => all,
        })
    }

    /// `bound` as a host condition (`long long` arithmetic; [`lower::bounds::HostBound`] keeps
    /// its numbers small enough not to overflow).
    fn host_bound(&mut self, bound: &crate::lower::bounds::HostBound) -> String {
        use crate::lower::bounds::HostAtom;
        // Positive terms first, then the negative ones and the constant: `a - b + 3 >= 0`.
        let mut terms: Vec<&(HostAtom, i64)> = bound.terms.iter().collect();
        terms.sort_by_key(|(_, k)| *k < 0);
        let mut text = String::new();
        for (atom, k) in terms {
            let value = match *atom {
                HostAtom::Sym(s) => self.names().sym(s).to_string(),
                HostAtom::Extent(p, d) => self.names().extent(p, d),
                HostAtom::Param(p) => self.param_name(p),
                HostAtom::Local(v) => self.names().local(v).to_string(),
            };
            let value = format!("static_cast<long long>({value})");
            let magnitude = k.unsigned_abs();
            let term = if magnitude == 1 { value } else { format!("{magnitude}ll * {value}") };
            text = match (text.is_empty(), *k < 0) {
                (true, false) => term,
                (true, true) => format!("-{term}"),
                (false, false) => format!("{text} + {term}"),
                (false, true) => format!("{text} - {term}"),
            };
        }
        match bound.constant {
            0 => {}
            c if c < 0 => text = format!("{text} - {}ll", c.unsigned_abs()),
            c => text = format!("{text} + {c}ll"),
        }
        format!("{text} >= 0")
    }

    /// The element count of a buffer as a `long long` expression (device code).
    fn flat_count(&mut self, buffer: BufferRef) -> String {
        let dims = self.dims_of_buffer(buffer);
        if let Some(n) = Dim::const_count(&dims) {
            return format!("{n}ll");
        }
        let parts: Vec<String> =
            dims.iter().map(|d| format!("static_cast<long long>({})", self.dim_raw(d))).collect();
        format!("({})", parts.join(" * "))
    }

    /// `ptr[offset]` for a row-major element access.
    fn element(&mut self, span: Span, buffer: BufferRef, index: &ElemIndex) -> String {
        let dims = self.dims_of_buffer(buffer);
        let name = self.buffer_name(buffer);
        let indices = match index {
            ElemIndex::Coords(indices) => indices,
            ElemIndex::Flat(offset) => {
                let t = scalar_of(&offset.ty).unwrap_or(ElemTy::S32);
                let text = self.expr(offset);
                let text = if t.is_int() { text } else { conv(&text, t, ElemTy::S64) };
                return format!("{name}[{text}]");
            }
        };
        if dims.len() != indices.len() {
            self.bug(span, "element access with a wrong number of indices");
            return format!("{name}[0]");
        }
        if indices.is_empty() {
            return format!("{name}[0]");
        }
        let narrow =
            dims.len() == 1 || Dim::const_count(&dims).is_some_and(|n| n <= i32::MAX as u64);
        let index = |e: &mut Self, i: &HExpr| {
            let t = scalar_of(&i.ty).unwrap_or(ElemTy::S32);
            let text = e.expr(i);
            if t.is_int() { text } else { conv(&text, t, ElemTy::S32) }
        };
        // Constant extents: a sum of coordinate × constant stride. nvcc then keeps the terms of
        // coordinates a loop does not change out of the loop (a shared tile's row and column
        // of a copy or fragment load, with only the slot's term left inside); the nested
        // form `(slot · 128 + row) · 40 + col` hides them in one product.
        let strides: Option<Vec<u64>> = dims
            .iter()
            .rev()
            .map(Dim::as_const)
            .scan(1u64, |stride, d| {
                let here = *stride;
                *stride = d.map_or(0, |d| here.saturating_mul(d));
                Some(d.map(|_| here))
            })
            .collect::<Option<Vec<u64>>>()
            .map(|mut v| {
                v.reverse();
                v
            });
        if let (true, Some(strides)) = (narrow, strides) {
            let mut terms = Vec::new();
            for (i, stride) in indices.iter().zip(strides) {
                let i = index(self, i);
                match (i.as_str(), stride) {
                    ("0", _) => {}
                    (_, 1) => terms.push(i),
                    (_, s) => terms.push(format!("{i} * {s}")),
                }
            }
            if terms.is_empty() {
                terms.push("0".to_string());
            }
            return format!("{name}[{}]", terms.join(" + "));
        }
        let coords: Vec<String> = indices.iter().map(|i| index(self, i)).collect();
        if coords.iter().all(|c| c == "0") {
            return format!("{name}[0]");
        }
        let extents: Vec<String> = dims.iter().map(|d| self.dim_raw(d)).collect();
        // In a versioned kernel (`FnEmitter::launch_tests`), a parameter's index is computed
        // in 32 bits by the `<true>` instantiation, which the host launches only when the
        // parameter has at most INT32_MAX elements: every in-bounds index fits an `int` then
        // (accesses are proven in bounds or made only after their check). nvcc folds 32-bit
        // address arithmetic better in loops (one wide multiply-add per address).
        let versioned = matches!(buffer, BufferRef::Param(_))
            && dims.iter().all(|d| !matches!(d, Dim::Expr(_)))
            && self.launch_test(format!("::__choreo_indices_fit_int({})", extents.join(", ")));
        let wide = || horner(&coords, &extents, |first| format!("static_cast<long long>({first})"));
        if !versioned {
            let offset =
                if narrow { horner(&coords, &extents, |first| first.to_string()) } else { wide() };
            return format!("{name}[{offset}]");
        }
        let wide = wide();
        let ints: Vec<String> = extents.iter().map(|d| format!("static_cast<int>({d})")).collect();
        let narrow = horner(&coords, &ints, |first| first.to_string());
        format!("{name}[__choreo_vec ? {narrow} : {wide}]")
    }

    /// In a versioned kernel (see `FnEmitter::launch_tests`), records `test` (once) for the
    /// launch to evaluate and returns true; outside one, returns false and records nothing.
    pub(super) fn launch_test(&mut self, test: String) -> bool {
        let Some(tests) = &mut self.launch_tests else { return false };
        if !tests.contains(&test) {
            tests.push(test);
        }
        true
    }
}

/// The row-major offset of `coords` in a buffer of `extents`, nested:
/// `(first · d1 + c1) · d2 + c2 …`, the first coordinate written by `first`.
fn horner(coords: &[String], extents: &[String], first: impl Fn(&str) -> String) -> String {
    let mut offset = first(&coords[0]);
    for (k, (d, i)) in extents.iter().zip(coords).enumerate().skip(1) {
        offset = if k == 1 {
            format!("{offset} * {d} + {i}")
        } else {
            format!("({offset}) * {d} + {i}")
        };
    }
    offset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_only_the_recorded_main() {
        let file = crate::source::FileId(0);
        let text = "// int main() {}\nint main(int argc) {\n  return main2();\n}\n";
        let span = Span { file, start: 100, end: 100 + text.len() as u32 };
        let main = Span { file, start: 100 + 21, end: 100 + 25 };
        assert_eq!(
            renamed_main(text, span, &[main], "m_"),
            "// int main() {}\nint m_(int argc) {\n  return main2();\n}\n"
        );
        // A span of another region, or one that is not `main`, changes nothing.
        let elsewhere = Span { file, start: 0, end: 4 };
        assert_eq!(renamed_main(text, span, &[elsewhere], "m_"), text);
        let wrong = Span { file, start: 100, end: 104 };
        assert_eq!(renamed_main(text, span, &[wrong], "m_"), text);
    }
}
