//! Statements of host code (the core function) and device code (kernel bodies).

use super::types::{conv, cpp_elem, scalar_of};
use super::writer::c_escape;
use super::{Dialect, FnEmitter, Region};
use crate::hir::{
    self, AssignOp, BarrierScope, CheckKind, Dim, ElemTy, FenceScope, HExpr, HExprKind,
    LocalOrigin, LocalPlace, Participants, Place, ReturnTy, Stmt, StmtKind, Ty,
};
use crate::lower::InstanceSync;
use crate::source::Span;

/// How an asynchronous DMA global → shared uses `cp.async` (sm_80+). The wide path of a
/// contiguous copy moves 16, 8 or 4 bytes per `cp.async` whatever the element type; the
/// element path (when the run time rules the wide one out) uses `cp.async` only for elements
/// of 4, 8 or 16 bytes and otherwise stores narrower elements synchronously, so the copy's
/// group is committed either way and a later `wait` means the same thing.
#[derive(Clone, Copy)]
pub(super) struct CpAsync {
    /// The bytes of one element's `cp.async`, when the element type has a `cp.async` width.
    pub(super) element: Option<u64>,
}

/// Whether a statement of this kind writes no shared memory itself (its nested statements are
/// looked at when they are emitted): MMA statements but stores (an operand load reads, an
/// execution works in registers), scalar locals that are not shared, loops and blocks.
impl FnEmitter<'_, '_> {
    pub(super) fn may_write_shared(&self, s: &Stmt) -> bool {
        match &s.kind {
            StmtKind::Mma(op) => matches!(**op, hir::mma::MmaOp::Store { .. }),
            StmtKind::Let { var, .. } => {
                self.f.local(*var).is_none_or(|l| l.place == LocalPlace::SharedScalar)
            }
            StmtKind::For { .. } | StmtKind::While { .. } | StmtKind::Block(_) => false,
            _ => true,
        }
    }

    /// Whether some statement of `body` (nested ones included) may write shared memory.
    fn body_may_write_shared(&self, body: &[Stmt]) -> bool {
        body.iter().any(|s| match &s.kind {
            StmtKind::For { body, .. } | StmtKind::While { body, .. } | StmtKind::Block(body) => {
                self.body_may_write_shared(body)
            }
            _ => self.may_write_shared(s),
        })
    }
}

impl FnEmitter<'_, '_> {
    /// At the end of a loop body whose next iteration may write shared memory before it
    /// reads: the pending ldmatrix reads converge before the back edge.
    fn loop_end_converge(&mut self, span: Span, body: &[Stmt]) {
        if self.warp_reads && self.body_may_write_shared(body) {
            self.w.indent += 1;
            self.converge_warp_reads(span);
            self.w.indent -= 1;
        }
    }

    pub(super) fn stmts(&mut self, stmts: &[Stmt], region: Region) {
        let mut at = 0;
        while at < stmts.len() {
            // Consecutive `cp.async` copies issued as one (see `dma_fuse`).
            if let Region::Device(kernel) = region {
                let fused = self.fused_dmas(&stmts[at..], kernel);
                if fused > 0 {
                    at += fused;
                    continue;
                }
            }
            self.stmt(&stmts[at], region);
            at += 1;
        }
    }

    pub(super) fn block(&mut self, span: Span, head: &str, body: &[Stmt], region: Region) {
        self.w.line(span, &format!("{head}{{"));
        self.w.indent += 1;
        self.stmts(body, region);
        self.w.indent -= 1;
    }

    pub(super) fn scalar_decl_type(&mut self, span: Span, ty: &Ty) -> (String, ElemTy) {
        match ty {
            Ty::BoundedInt => ("int".to_string(), ElemTy::S32),
            Ty::Scalar(t) => (cpp_elem(*t).to_string(), *t),
            _ => {
                self.bug(span, "a scalar declaration of a non-scalar type");
                ("int".to_string(), ElemTy::S32)
            }
        }
    }

    pub(super) fn stmt(&mut self, s: &Stmt, region: Region) {
        let span = s.span;
        let host = region == Region::Host;
        match &s.kind {
            // A barrier orders the pending ldmatrix reads itself.
            StmtKind::Barrier(_) | StmtKind::RoleBarrier { .. } => self.warp_reads = false,
            _ if self.warp_reads && self.may_write_shared(s) => self.converge_warp_reads(span),
            _ => {}
        }
        match &s.kind {
            StmtKind::Let { var, init } => {
                let Some(local) = self.f.local(*var) else {
                    return self.bug(span, "an unknown local");
                };
                if let (LocalPlace::SharedScalar, Region::Device(kernel)) = (local.place, region) {
                    return self.decl_shared_scalar(span, *var, kernel);
                }
                if matches!(local.place, LocalPlace::Future | LocalPlace::Selected) {
                    // A future's data pointer (null until a DMA binds it), or the data a
                    // `select` chose.
                    let elem = match (&local.ty, init) {
                        (Ty::Spanned(t), _) => cpp_elem(t.elem),
                        // A placeholder (`dma.any`/`tma.any`) that no DMA ever binds: its
                        // data type stays unknown, and nothing reads it.
                        (Ty::Error, None) => "void",
                        _ => return self.bug(span, "a pointer local without a data type"),
                    };
                    let name = self.names().local(*var).to_string();
                    let value = init.as_ref().map_or("nullptr".to_string(), |e| self.expr(e));
                    self.w.line(span, &format!("[[maybe_unused]] {elem}* {name} = {value};"));
                    return;
                }
                let name = self.names().local(*var).to_string();
                let (ty_text, t) = self.scalar_decl_type(span, &local.ty.clone());
                let text = match init {
                    Some(e) => {
                        let v = self.converted(e, t);
                        format!("[[maybe_unused]] {ty_text} {name} = {v};")
                    }
                    None => format!("[[maybe_unused]] {ty_text} {name}{{}};"),
                };
                self.w.line(span, &text);
            }
            StmtKind::DeclBuffer { var, init } => match region {
                Region::Host => self.decl_buffer(span, *var, init.as_ref()),
                Region::Device(kernel) => {
                    self.decl_kernel_buffer(span, *var, init.as_ref(), kernel)
                }
            },
            StmtKind::Assign { target, op, value } => {
                let (target_text, tt, guard) = match target {
                    Place::Var(v) => {
                        let t = self.f.local(*v).and_then(|l| scalar_of(&l.ty));
                        (self.names().local(*v).to_string(), t, None)
                    }
                    Place::Elem { buffer, index, id } => {
                        let t = self.elem_of_buffer(*buffer);
                        let guard = self.bounds_guard(*id, *buffer, index);
                        (self.element(span, *buffer, index), t, guard)
                    }
                };
                let Some(tt) = tt else {
                    return self.bug(span, "an assignment to something that is not scalar");
                };
                match guard {
                    // A store that fails its check is skipped (and noted: the call fails). The
                    // value is computed first, so its loads do not wait for the check.
                    Some(guard) if *op == AssignOp::Assign => {
                        let v = self.converted(value, tt);
                        let t = cpp_elem(tt);
                        self.w.line(
                            span,
                            &format!(
                                "{{ const {t} __choreo_stored = {v}; if ({guard}) {target_text} = __choreo_stored; }}"
                            ),
                        );
                    }
                    Some(guard) => {
                        let text = self.assignment(&target_text, tt, *op, value);
                        self.w.line(span, &format!("if ({guard}) {text}"));
                    }
                    None => {
                        let text = self.assignment(&target_text, tt, *op, value);
                        self.w.line(span, &text);
                    }
                }
            }
            StmtKind::Block(body) => {
                self.block(span, "", body, region);
                self.w.line(span, "}");
            }
            StmtKind::If { cond, then_body, else_body } => {
                let c = self.condition(cond);
                self.block(span, &format!("if ({c}) "), then_body, region);
                if else_body.is_empty() {
                    self.w.line(span, "}");
                } else {
                    self.block(span, "} else ", else_body, region);
                    self.w.line(span, "}");
                }
            }
            StmtKind::While { cond, body } => {
                let c = self.condition(cond);
                self.block(span, &format!("while ({c}) "), body, region);
                self.loop_end_converge(span, body);
                self.w.line(span, "}");
            }
            StmtKind::For { var, start, end, step, reset, unroll, body } => {
                let name = self.names().local(*var).to_string();
                let declares = matches!(
                    self.f.local(*var).map(|l| &l.origin),
                    Some(LocalOrigin::RangeLocal { .. })
                );
                let start = self.converted(start, ElemTy::S32);
                let end = self.converted(end, ElemTy::S32);
                let init = if declares {
                    format!("int {name} = {start}")
                } else {
                    format!("{name} = {start}")
                };
                let increment =
                    if *step == 1 { format!("++{name}") } else { format!("{name} += {step}") };
                match unroll {
                    Some(hir::Unroll::Full) => self.w.line(span, "#pragma unroll"),
                    Some(hir::Unroll::Factor(n)) => {
                        self.w.line(span, &format!("#pragma unroll {n}"))
                    }
                    None => {}
                }
                self.block(
                    span,
                    &format!("for ({init}; {name} < {end}; {increment}) "),
                    body,
                    region,
                );
                self.loop_end_converge(span, body);
                self.w.line(span, "}");
                if *reset && !declares {
                    self.w.line(span, &format!("{name} = 0;"));
                }
            }
            StmtKind::Break => self.w.line(span, "break;"),
            StmtKind::Continue => self.w.line(span, "continue;"),
            StmtKind::Assert { cond, message } => {
                let c = self.condition(cond);
                let text = super::writer::c_escape(
                    &format!("{}: choreo assertion abort: {message}", self.db.location(span)),
                    true,
                );
                if host {
                    self.w.line(span, &format!("__CHOREO_CHECK({c}, \"{text}\");"));
                } else {
                    let printf = self.printf(true);
                    self.w.line(
                        span,
                        &format!("if (!({c})) {{ {printf}(\"{text}\\n\"); __trap(); }}"),
                    );
                }
            }
            StmtKind::Yield => {
                if host {
                    return self.bug(span, "`yield` in host code");
                }
                self.w.line(span, "return;");
            }
            StmtKind::Print { newline, args } => {
                let text = self.print(span, *newline, args, !host);
                self.w.line(span, &text);
            }
            StmtKind::Return(value) => {
                if !host {
                    return self.bug(span, "a return in device code");
                }
                self.return_stmt(span, value.as_ref());
            }
            StmtKind::Parallel(tree) => {
                if !host {
                    return self.bug(span, "a kernel launch inside a kernel");
                }
                self.launch(tree);
            }
            StmtKind::InnerParallel(inner) => match region {
                Region::Device(kernel) => self.inner_parallel(inner, kernel),
                Region::Host => self.bug(span, "an inner parallel level in host code"),
            },
            StmtKind::Check(check) => {
                if !host {
                    return self.bug(span, "a host check inside a kernel");
                }
                if self.options.runtime_checks {
                    self.check(check);
                }
            }
            StmtKind::SyncGlobal => {
                if !host {
                    return self.bug(span, "sync.global inside a kernel");
                }
                self.w.line(span, "__CHOREO_TRY(cudaDeviceSynchronize());");
            }
            StmtKind::EventInit(id) => self.event_init(span, *id),
            StmtKind::Trigger(slots) => {
                for slot in slots {
                    self.event_trigger(slot);
                }
            }
            StmtKind::EventWait(slots) => {
                for slot in slots {
                    self.event_wait(slot);
                }
            }
            StmtKind::Barrier(scope) => {
                if host {
                    return self.bug(span, "a barrier in host code");
                }
                self.w.line(
                    span,
                    match scope {
                        BarrierScope::Warp => "__syncwarp();",
                        BarrierScope::Block => "__syncthreads();",
                        BarrierScope::Grid => match self.options.dialect {
                            Dialect::Cuda => "cooperative_groups::this_grid().sync();",
                            Dialect::Cpu => "__choreo_thr->grid_sync();",
                        },
                        BarrierScope::Cluster => match self.options.dialect {
                            Dialect::Cuda => {
                                "asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;\\n\" ::: \"memory\");"
                            }
                            Dialect::Cpu => "__choreo_thr->cluster_sync();",
                        },
                    },
                );
            }
            StmtKind::Fence(scope) => {
                if host {
                    return self.bug(span, "a fence in host code");
                }
                self.w.line(
                    span,
                    match scope {
                        FenceScope::Block => "__threadfence_block();",
                        FenceScope::Device => "__threadfence();",
                    },
                );
            }
            StmtKind::Mma(op) => match region {
                Region::Device(_) => self.mma(span, op),
                Region::Host => self.bug(span, "an MMA statement in host code"),
            },
            StmtKind::Dma(dma) => match region {
                Region::Device(kernel) => self.dma(span, dma, kernel),
                Region::Host => self.bug(span, "a kernel DMA in host code"),
            },
            StmtKind::TriggerAfter(t) => match region {
                Region::Device(kernel) => self.trigger_after(span, t, kernel),
                Region::Host => self.bug(span, "a trigger in host code"),
            },
            StmtKind::Wait { groups, tma_groups, participants } => match region {
                Region::Device(kernel) => {
                    for g in tma_groups {
                        let g = self.names().local(*g).to_string();
                        self.tma_wait_barrier(span, &g);
                    }
                    if groups.is_empty() && !tma_groups.is_empty() {
                        // The mbarrier's completion makes the tile visible to every waiter.
                        return;
                    }
                    let names: Vec<String> =
                        groups.iter().map(|g| self.names().local(*g).to_string()).collect();
                    let newest = names.iter().skip(1).fold(names.first().cloned(), |acc, g| {
                        acc.map(|a| format!("::max({a}, {g})"))
                    });
                    if let Some(newest) = newest {
                        self.w.line(
                            span,
                            &format!("::__choreo_cp_async_wait(__choreo_groups - {newest});"),
                        );
                    }
                    self.participants_sync(span, *participants, kernel);
                }
                Region::Host => self.bug(span, "a wait in host code"),
            },
            StmtKind::GlobalFlag { wait, flags, slot, slots, elected } => {
                self.global_flag(span, *wait, *flags, slot, *slots, *elected, host)
            }
            StmtKind::RoleBarrier { role } => match region {
                Region::Device(kernel) => self.role_barrier(span, role, kernel),
                Region::Host => self.bug(span, "a role barrier in host code"),
            },
            StmtKind::TmaStoreWait { groups: _, participants, role } => match region {
                Region::Device(kernel) => {
                    self.tma_store_wait(span, *participants, role.as_deref(), kernel)
                }
                Region::Host => self.bug(span, "a wait in host code"),
            },
            StmtKind::Rotate { futures, groups } => {
                for vars in [futures, groups] {
                    let names: Vec<String> =
                        vars.iter().map(|v| self.names().local(*v).to_string()).collect();
                    if names.len() < 2 {
                        continue;
                    }
                    // a <- b <- c <- … <- a
                    let mut text = format!("{{ auto __choreo_first = {}; ", names[0]);
                    for w in names.windows(2) {
                        text.push_str(&format!("{} = {}; ", w[0], w[1]));
                    }
                    text.push_str(&format!("{} = __choreo_first; }}", names[names.len() - 1]));
                    self.w.line(span, &text);
                }
            }
            StmtKind::Eval(e) => {
                let text = self.expr(e);
                self.w.line(span, &format!("{text};"));
            }
            StmtKind::Cpp(text) => self.w.line(span, text),
            StmtKind::Asm(asm) => self.asm(span, asm),
            StmtKind::NamedBarrier { sync, id, threads } => {
                let (id, n) =
                    (self.converted(id, ElemTy::S32), self.converted(threads, ElemTy::S32));
                let line = self.named_barrier(*sync, &id, &n);
                self.w.line(span, &line);
            }
            StmtKind::SetMaxNReg { inc, regs } => {
                let op = if *inc { "inc" } else { "dec" };
                let line = match self.options.dialect {
                    Dialect::Cuda => {
                        format!("asm volatile(\"setmaxnreg.{op}.sync.aligned.u32 {regs};\\n\");")
                    }
                    // Registers are no resource on the CPU.
                    Dialect::Cpu => format!("/* setmaxnreg.{op} {regs}: nothing on the CPU */"),
                };
                self.w.line(span, &line);
            }
            StmtKind::HostCopy { src, dst, count } => {
                if !host {
                    return self.bug(span, "a host copy in a kernel");
                }
                let (s, d) = (self.buffer_name(*src), self.buffer_name(*dst));
                let elem = self.elem_of_buffer(*src).map_or("char", cpp_elem);
                let n = self.dim_u64(count);
                // Ordered after every launch of the call so far: the asynchronous ones are
                // waited for, the others have finished.
                self.w.line(span, "__CHOREO_TRY(__frame.wait_async());");
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_TRY(cudaMemcpy({d}, {s}, static_cast<std::size_t>({n}) * sizeof({elem}), cudaMemcpyDeviceToDevice));"
                    ),
                );
            }
        }
    }

    /// Inline assembly (spec §17.4): element outputs go through temporaries written back
    /// after the asm (behind their bounds checks).
    fn asm(&mut self, span: Span, asm: &hir::Asm) {
        let mut before = Vec::new();
        let mut after = Vec::new();
        let mut outputs = Vec::new();
        for (k, o) in asm.outputs.iter().enumerate() {
            let constraint = c_escape(&o.constraint, false);
            let target = match &o.place {
                Place::Var(v) => self.names().local(*v).to_string(),
                Place::Elem { buffer, index, id } => {
                    let element = self.element(span, *buffer, index);
                    let guard = self.bounds_guard(*id, *buffer, index);
                    let temp = format!("__choreo_asm_out{k}");
                    let t = cpp_elem(o.ty);
                    let read = o.constraint.starts_with('+');
                    let init = match (&guard, read) {
                        (Some(g), true) => format!("({g} ? {element} : {t}{{}})"),
                        (None, true) => element.clone(),
                        (_, false) => format!("{t}{{}}"),
                    };
                    before.push(format!("{t} {temp} = {init};"));
                    after.push(match &guard {
                        Some(g) => format!("if ({g}) {element} = {temp};"),
                        None => format!("{element} = {temp};"),
                    });
                    temp
                }
            };
            outputs.push(format!("\"{constraint}\"({target})"));
        }
        let inputs: Vec<String> = asm
            .inputs
            .iter()
            .map(|i| {
                let value = self.expr(&i.value);
                format!("\"{}\"({value})", c_escape(&i.constraint, false))
            })
            .collect();
        let clobbers: Vec<String> =
            asm.clobbers.iter().map(|c| format!("\"{}\"", c_escape(c, false))).collect();
        let volatile = if asm.volatile { " volatile" } else { "" };
        // nvcc rejects named operands ("symbolic operand reference not supported"): the
        // template refers to them by position instead.
        let names: Vec<Option<&str>> = asm
            .outputs
            .iter()
            .map(|o| o.name.as_deref())
            .chain(asm.inputs.iter().map(|i| i.name.as_deref()))
            .collect();
        let template = positional_operands(&asm.template, &names);
        let mut text = format!(
            "asm{volatile}(\"{}\" : {} : {}",
            c_escape(&template, false),
            outputs.join(", "),
            inputs.join(", ")
        );
        if !clobbers.is_empty() {
            text.push_str(&format!(" : {}", clobbers.join(", ")));
        }
        text.push_str(");");
        if before.is_empty() {
            self.w.line(span, &text);
        } else {
            self.w.line(span, "{");
            self.w.indent += 1;
            for line in before.iter().chain(std::iter::once(&text)).chain(&after) {
                self.w.line(span, line);
            }
            self.w.indent -= 1;
            self.w.line(span, "}");
        }
    }

    /// The synchronisation of the participants of a DMA or a wait: the block's threads, the
    /// threads of a warp (or of a larger level instance: the whole block, which reaches it
    /// together), one instance of a level inside an `inthreads` that selects instances (as
    /// lowering decided: `lower::instances`), or nobody for one thread.
    pub(super) fn participants_sync(&mut self, span: Span, p: Participants, kernel: hir::KernelId) {
        let level_plan = |this: &Self, level: hir::LevelId| {
            this.plan.kernels.get(kernel.index()).and_then(|k| k.levels.get(level.index())).cloned()
        };
        let line = match p {
            Participants::Block => "__syncthreads();".to_string(),
            Participants::Level(level) => {
                let threads =
                    level_plan(self, level).and_then(|l| l.threads_per_instance.as_const());
                if threads.is_some_and(|t| t <= 32) { "__syncwarp();" } else { "__syncthreads();" }
                    .to_string()
            }
            Participants::SelectedInstance(level) => {
                let plan = level_plan(self, level);
                let what = plan.as_ref().map_or("level", |l| l.level.as_str());
                match plan.as_ref().and_then(|l| l.instance_sync) {
                    Some(InstanceSync::Block) => "__syncthreads();".to_string(),
                    Some(InstanceSync::Warp { threads: 32 }) => "__syncwarp();".to_string(),
                    Some(InstanceSync::Warp { threads }) => {
                        // The lanes of this thread's instance: `threads` of them from the
                        // first lane of the instance (instances tile the warp).
                        let lanes = (1u64 << threads) - 1;
                        format!("__syncwarp(0x{lanes:x}u << (threadIdx.x & {}u));", 32 - threads)
                    }
                    Some(InstanceSync::Named { first, threads }) => format!(
                        "{}  // this {what} instance's barrier",
                        self.named_barrier(
                            true,
                            &format!("{first} + static_cast<int>(threadIdx.x / {threads})"),
                            &threads.to_string()
                        )
                    ),
                    None => {
                        return self
                            .bug(span, "a selected level instance without its synchronisation");
                    }
                }
            }
            // The launch's end: the host synchronises after it.
            Participants::Thread | Participants::Grid => return,
        };
        self.w.line(span, &line);
    }

    /// A DMA of a kernel (spec §14.5, §14.7): the participants share a loop over the copied
    /// box (consecutive threads take consecutive elements of the innermost dimension, so
    /// global accesses coalesce); an asynchronous copy global → shared issues one `cp.async`
    /// per element and commits them as one group; a synchronous one ends with the
    /// participants' barrier.
    /// Points a `=> shared` DMA's future at the buffer it allocated (a placeholder's only the
    /// first time).
    pub(super) fn bind_future(&mut self, span: Span, dma: &hir::Dma) {
        if let Some(b) = dma.bind {
            let (f, buf) = (
                self.names().local(b.future).to_string(),
                self.names().local(b.buffer).to_string(),
            );
            let line = if b.first {
                format!("{f} = {buf};")
            } else {
                format!("if ({f} == nullptr) {f} = {buf};")
            };
            self.w.line(span, &line);
        }
    }

    fn dma(&mut self, span: Span, dma: &hir::Dma, kernel: hir::KernelId) {
        if let Some(t) = &dma.tma {
            return self.tma_statement(span, dma, t, kernel);
        }
        self.bind_future(span, dma);
        let (tid, threads) = self.dma_participants(dma, kernel);
        let (extents, count) = self.int_extents(&dma.extents);
        let cp_async = if dma.is_async { self.cp_async_plan(dma) } else { None };
        // A swizzled copy (tier 3 §4.3) moves element by element to (or from) the swizzled
        // address of the shared side.
        let swizzle = (dma.swizzle != 0).then(|| {
            let into = dma.dst.storage == hir::Storage::Shared;
            let buffer = if into { dma.dst.buffer } else { dma.src.buffer };
            let (base, rows, cols) = self.swizzle_parts(span, buffer);
            (into, base, rows, cols, dma.swizzle)
        });
        let vector = if swizzle.is_some() {
            None
        } else {
            crate::lower::vector::dma_vector(dma, cp_async.is_some()).and_then(|v| {
                let test = self.vector_condition(span, dma, v)?;
                Some((v, self.versioned_condition(test)))
            })
        };
        let element = |this: &mut Self, _| match (&swizzle, cp_async.and_then(|c| c.element)) {
            (Some((into, base, rows, cols, n)), bytes) => {
                this.copy_element(&dma.element, |dst, from| {
                    let at = |e: &str| {
                        format!("::choreo::tma::swizzled<{n}>(&{base}, &{e}, {rows}u, {cols}u)")
                    };
                    match (into, bytes) {
                        (true, Some(b)) => {
                            format!("::__choreo_cp_async<{b}>({}, &{from});", at(dst))
                        }
                        (true, None) => format!("*{} = {from};", at(dst)),
                        (false, _) => format!("{dst} = *{};", at(from)),
                    }
                })
            }
            (None, Some(bytes)) => this.cp_async_element(&dma.element, bytes),
            (None, None) => this.stmt(&dma.element, Region::Device(kernel)),
        };
        match vector {
            Some((v, condition)) => {
                // Whole rows, 8 or 16 bytes at a time, when the run time allows it (always,
                // when the condition is known at compile time).
                let (wide, wide_count) = wide_box(dma, &extents, &count, v);
                self.wide_or_elements(
                    span,
                    &condition,
                    |this| {
                        this.dma_loop(
                            span,
                            &[dma],
                            &tid,
                            &threads,
                            &wide,
                            &wide_count,
                            Some(v.elems),
                            |this, _| this.vector_element(&dma.element, v, cp_async.is_some()),
                        )
                    },
                    |this| {
                        this.dma_loop(span, &[dma], &tid, &threads, &extents, &count, None, element)
                    },
                );
            }
            None => self.dma_loop(span, &[dma], &tid, &threads, &extents, &count, None, element),
        }
        self.dma_epilogue(span, dma, kernel, cp_async.is_some());
    }

    /// The copy loops of a wide DMA: `if (condition) { wide } else { elements }`, or `wide`
    /// alone when `condition` is empty (nothing left to test at run time).
    pub(super) fn wide_or_elements(
        &mut self,
        span: Span,
        condition: &str,
        wide: impl FnOnce(&mut Self),
        elements: impl FnOnce(&mut Self),
    ) {
        if condition.is_empty() {
            return wide(self);
        }
        self.w.line(span, &format!("if ({condition}) {{"));
        self.w.indent += 1;
        wide(self);
        self.w.indent -= 1;
        self.w.line(span, "} else {");
        self.w.indent += 1;
        elements(self);
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    /// The participants' thread index and count of a DMA's loop (`threadIdx.x`-based C++
    /// expressions; the count a constant when the plan knows it).
    pub(super) fn dma_participants(
        &mut self,
        dma: &hir::Dma,
        kernel: hir::KernelId,
    ) -> (String, String) {
        // The block's thread count when it is a constant (else read from `blockDim`).
        let block_threads =
            self.plan.kernels.get(kernel.index()).and_then(|k| k.threads_per_block.as_const());
        match dma.participants {
            Participants::Block => {
                let threads = block_threads
                    .map_or("static_cast<int>(blockDim.x)".to_string(), |t| t.to_string());
                ("static_cast<int>(threadIdx.x)".to_string(), threads)
            }
            Participants::Level(level) | Participants::SelectedInstance(level) => {
                let per = self
                    .plan
                    .kernels
                    .get(kernel.index())
                    .and_then(|k| k.levels.get(level.index()))
                    .map(|l| l.threads_per_instance.clone())
                    .unwrap_or(Dim::Const(1));
                let t = self.dim_int(&per);
                (format!("static_cast<int>(threadIdx.x) % {t}"), t)
            }
            Participants::Thread => ("0".to_string(), "1".to_string()),
            Participants::Grid => {
                // Every thread of the launch, consecutive threads on consecutive elements.
                let block = block_threads.map_or("blockDim.x".to_string(), |t| format!("{t}u"));
                (
                    format!("static_cast<int>(blockIdx.x * {block} + threadIdx.x)"),
                    format!("static_cast<int>(gridDim.x * {block})"),
                )
            }
        }
    }

    /// Extents as C++ `int` expressions, and their product: a constant when every extent is
    /// one, else `(e0 * e1 * …)` (a DMA's box, a local buffer's size).
    pub(super) fn int_extents(&mut self, dims: &[Dim]) -> (Vec<String>, String) {
        let extents: Vec<String> = dims.iter().map(|d| self.dim_int(d)).collect();
        let count = match Dim::const_count(dims) {
            Some(n) => n.to_string(),
            None => format!("({})", extents.join(" * ")),
        };
        (extents, count)
    }

    /// After a DMA's loop: the commit of its copy group (asynchronous) or the participants'
    /// barrier (synchronous), and the future's group number.
    fn dma_epilogue(&mut self, span: Span, dma: &hir::Dma, kernel: hir::KernelId, cp_async: bool) {
        match (dma.is_async, cp_async) {
            (true, true) => self.w.line(span, "::__choreo_cp_async_commit();"),
            (true, false) => {}
            (false, _) => self.participants_sync(span, dma.participants, kernel),
        }
        if let Some(g) = dma.group {
            let g = self.names().local(g).to_string();
            // A copy made at issue is complete: its group is the last one committed.
            let line = if cp_async {
                format!("{g} = ++__choreo_groups;")
            } else {
                format!("{g} = __choreo_groups;")
            };
            self.w.line(span, &line);
        }
    }

    /// The loop of DMAs over their common box (`extents`, the innermost divided by `vector`
    /// elements when they copy wide): for each DMA in turn, declares its box indices, then
    /// `body(k)` writes the element of `dmas[k]`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dma_loop(
        &mut self,
        span: Span,
        dmas: &[&hir::Dma],
        tid: &str,
        threads: &str,
        extents: &[String],
        count: &str,
        vector: Option<u64>,
        mut body: impl FnMut(&mut Self, usize),
    ) {
        self.w.line(
            span,
            &format!(
                "for (int __choreo_e = {tid}; __choreo_e < {count}; __choreo_e += {threads}) {{"
            ),
        );
        self.w.indent += 1;
        for (at, dma) in dmas.iter().enumerate() {
            self.dma_indices(span, dma, extents, vector);
            body(self, at);
        }
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    /// The declarations of a DMA's box indices from the loop counter `__choreo_e`.
    fn dma_indices(&mut self, span: Span, dma: &hir::Dma, extents: &[String], vector: Option<u64>) {
        let last = dma.indices.len().saturating_sub(1);
        let constant = |text: &str| text.parse::<u64>().ok();
        for (k, v) in dma.indices.iter().enumerate() {
            let name = self.names().local(*v).to_string();
            let below = &extents[k + 1..];
            // With constant extents the decomposition is unsigned (the counter is never
            // negative), so divisions by powers of two are shifts and masks.
            let below_product = below
                .iter()
                .try_fold(1u64, |acc, e| constant(e).and_then(|e| acc.checked_mul(e)))
                .filter(|p| *p <= u64::from(u32::MAX));
            let extent = constant(&extents[k]).filter(|e| *e <= u64::from(u32::MAX));
            let mut value = match (below_product, k > 0, extent) {
                (Some(product), false, _) => {
                    format!("static_cast<int>(static_cast<unsigned>(__choreo_e) / {product}u)")
                }
                (Some(1), true, Some(e)) => {
                    format!("static_cast<int>(static_cast<unsigned>(__choreo_e) % {e}u)")
                }
                (Some(product), true, Some(e)) => format!(
                    "static_cast<int>(static_cast<unsigned>(__choreo_e) / {product}u % {e}u)"
                ),
                _ => {
                    let mut value = match below.len() {
                        0 => "__choreo_e".to_string(),
                        1 => format!("__choreo_e / {}", below[0]),
                        _ => format!("__choreo_e / ({})", below.join(" * ")),
                    };
                    if k > 0 {
                        value = format!("{value} % {}", extents[k]);
                    }
                    value
                }
            };
            if value == "static_cast<int>(static_cast<unsigned>(__choreo_e) / 1u)" {
                value = "__choreo_e".to_string();
            }
            if let (Some(n), true) = (vector, k == last) {
                value = format!("({value}) * {n}");
            }
            self.w.line(span, &format!("[[maybe_unused]] const int {name} = {value};"));
        }
    }

    /// What the run time must confirm before a DMA copies `v` elements at a time (see
    /// `lower::vector`): both buffers and the box's first elements aligned to the vector, and
    /// the rows of both buffers (their innermost extents, and the strides of flat views) a
    /// multiple of it. `None` when a row is statically not such a multiple.
    /// The condition to emit for a wide copy's `test`: in a versioned kernel (see
    /// `FnEmitter::launch_tests`), a test of launch arguments only is `__choreo_vec ||
    /// (test)`, constant `true` in the instantiation the host launches when it holds.
    pub(super) fn versioned_condition(&mut self, test: VectorTest) -> String {
        if test.invariant && !test.condition.is_empty() && self.launch_test(test.condition.clone())
        {
            format!("__choreo_vec || ({})", test.condition)
        } else {
            test.condition
        }
    }

    pub(super) fn vector_condition(
        &mut self,
        span: Span,
        dma: &hir::Dma,
        v: crate::lower::vector::VectorCopy,
    ) -> Option<VectorTest> {
        let mut parts = Vec::new();
        // Whether every part reads only launch arguments: extents of parameters and their base
        // addresses, never a thread's coordinates or a loop's variable.
        let mut invariant = true;
        for view in [&dma.src, &dma.dst] {
            let dims = self.dims_of_buffer(view.buffer);
            match dims.last() {
                Some(Dim::Const(c)) if c % v.elems != 0 => return None,
                Some(Dim::Const(_)) => {}
                Some(d) => {
                    invariant &= matches!(d, Dim::Sym(_) | Dim::Dynamic { .. });
                    let d = self.dim_raw(d);
                    parts.push(format!("static_cast<unsigned>({d}) % {}u == 0", v.elems));
                }
                None => return None,
            }
            if let hir::Layout::Flat { strides, .. } = &view.layout {
                for s in &strides[..strides.len().saturating_sub(1)] {
                    match hir::arith::const_int(s) {
                        Some(c) if c % i128::from(v.elems as u32) != 0 => return None,
                        Some(_) => {}
                        None => {
                            invariant = false;
                            let s = self.expr(s);
                            parts.push(format!("({s}) % {} == 0", v.elems));
                        }
                    }
                }
            }
            let origin = vec![hir::arith::int_lit(0, span); view.dims.len()];
            let first_index = view.element(origin, span);
            let elem_bytes = view.elem.size_bytes();
            // Shared buffers start at aligned offsets of the pool (16 bytes or more), so their
            // base needs no test, nor a first element at an offset that is provably a multiple
            // of the vector (a constant, or `slot · 5120 + warp · 1280` elements).
            let shared = view.storage == hir::Storage::Shared;
            if shared {
                match constant_offset(&first_index, &dims) {
                    Some(offset) if (offset * elem_bytes) % v.bytes == 0 => continue,
                    Some(_) => return None,
                    None => {}
                }
                let multiple = crate::lower::align::offset_multiple(&dims, &first_index);
                if crate::lower::align::divides(multiple.saturating_mul(elem_bytes), v.bytes) {
                    continue;
                }
            }
            // The rows are a multiple of the vector (tested above when symbolic), so every
            // coordinate but the innermost adds a multiple of it: the first element is aligned
            // with the base when its innermost coordinate provably is (`32 · (k + 1)`). Then
            // only the base is tested, a test the same at every step of an enclosing loop.
            let aligned_with_base = match &first_index {
                hir::ElemIndex::Coords(coords) => coords.last().is_some_and(|last| {
                    let m = crate::lower::align::known_multiple(last);
                    crate::lower::align::divides(m.saturating_mul(elem_bytes), v.bytes)
                }),
                hir::ElemIndex::Flat(_) => false,
            };
            let first = self.element(span, view.buffer, &first_index);
            invariant &= !shared
                && aligned_with_base
                && matches!(view.buffer, hir::BufferRef::Param(_))
                && dims.iter().all(|d| !matches!(d, Dim::Expr(_)));
            let addresses = if shared {
                format!("reinterpret_cast<std::uintptr_t>(&{first})")
            } else {
                let zeros: Vec<HExpr> = vec![hir::arith::int_lit(0, span); dims.len()];
                let base = self.element(span, view.buffer, &hir::ElemIndex::Coords(zeros));
                if aligned_with_base {
                    format!("reinterpret_cast<std::uintptr_t>(&{base})")
                } else {
                    format!(
                        "(reinterpret_cast<std::uintptr_t>(&{base}) | reinterpret_cast<std::uintptr_t>(&{first}))"
                    )
                }
            };
            parts.push(format!("{addresses} % {} == 0", v.bytes));
        }
        Some(VectorTest { condition: parts.join(" && "), invariant })
    }

    /// One wide copy: `v.elems` elements from the source element's address on, to the
    /// destination element's, behind the bounds checks of the first elements (the vector
    /// starts at a multiple of its width in a row of a multiple of it: all its elements are in
    /// bounds when the first is).
    pub(super) fn vector_element(
        &mut self,
        element: &Stmt,
        v: crate::lower::vector::VectorCopy,
        cp_async: bool,
    ) {
        let word = if v.bytes == 16 { "uint4" } else { "uint2" };
        self.copy_element(element, |dst, from| {
            if cp_async {
                format!("::__choreo_cp_async<{}>(&{dst}, &{from});", v.bytes)
            } else {
                format!(
                    "*reinterpret_cast<{word}*>(&{dst}) = *reinterpret_cast<const {word}*>(&{from});"
                )
            }
        });
    }

    /// The element copy of a DMA (`dst.at(…) = src.at(…)`) as one instruction on the two
    /// elements' addresses (`copy(dst, src)` renders it), behind the bounds checks of both.
    fn copy_element(&mut self, element: &Stmt, copy: impl FnOnce(&str, &str) -> String) {
        let span = element.span;
        let StmtKind::Assign { target: Place::Elem { buffer, index, id }, value, .. } =
            &element.kind
        else {
            return self.bug(span, "a DMA copy that is not an element copy");
        };
        let HExprKind::At { buffer: src, index: src_index, id: src_id } = &value.kind else {
            return self.bug(span, "a DMA copy that is not an element copy");
        };
        let dst = self.element(span, *buffer, index);
        let from = self.element(span, *src, src_index);
        let guards: Vec<String> =
            [self.bounds_guard(*src_id, *src, src_index), self.bounds_guard(*id, *buffer, index)]
                .into_iter()
                .flatten()
                .collect();
        let copy = copy(&dst, &from);
        if guards.is_empty() {
            self.w.line(span, &copy);
        } else {
            self.w.line(span, &format!("if ({}) {copy}", guards.join(" && ")));
        }
    }

    /// How an asynchronous DMA uses `cp.async`, when it can: a plain element copy global →
    /// shared of one element type on sm_80+.
    pub(super) fn cp_async_plan(&self, dma: &hir::Dma) -> Option<CpAsync> {
        if !self.options.arch_has_cp_async() {
            return None;
        }
        let StmtKind::Assign { target: Place::Elem { .. }, op: AssignOp::Assign, value } =
            &dma.element.kind
        else {
            return None;
        };
        let HExprKind::At { .. } = &value.kind else { return None };
        let direct = matches!(dma.src.storage, hir::Storage::Host | hir::Storage::Global)
            && dma.dst.storage == hir::Storage::Shared
            && dma.src.elem == dma.dst.elem;
        let bytes = dma.src.elem.size_bytes();
        direct.then_some(CpAsync { element: matches!(bytes, 4 | 8 | 16).then_some(bytes) })
    }

    /// One element of an asynchronous copy: `cp.async` from the source element's address to
    /// the destination element's, behind the bounds checks of both.
    pub(super) fn cp_async_element(&mut self, element: &Stmt, bytes: u64) {
        self.copy_element(element, |dst, from| {
            format!("::__choreo_cp_async<{bytes}>(&{dst}, &{from});")
        });
    }

    /// The byte offset of a shared buffer or scalar in its kernel's pool, as an `int`
    /// expression.
    fn shared_offset(&mut self, span: Span, var: hir::VarId, kernel: hir::KernelId) -> String {
        let slot = self
            .plan
            .kernels
            .get(kernel.index())
            .and_then(|k| k.shared.slots.iter().find(|s| s.var == var))
            .map(|s| s.offset.clone());
        match slot {
            Some(offset) => self.dim_int(&offset),
            None => {
                self.bug(span, "a shared buffer without a place in the kernel's pool");
                "0".to_string()
            }
        }
    }

    /// `shared T x;`: a reference into the pool.
    fn decl_shared_scalar(&mut self, span: Span, var: hir::VarId, kernel: hir::KernelId) {
        let Some(t) = self.f.local(var).and_then(|l| scalar_of(&l.ty)) else {
            return self.bug(span, "a shared scalar that is not a scalar");
        };
        let name = self.names().local(var).to_string();
        let offset = self.shared_offset(span, var, kernel);
        let elem = cpp_elem(t);
        self.w.line(
            span,
            &format!(
                "[[maybe_unused]] {elem}& {name} = *reinterpret_cast<{elem}*>(__choreo_smem + {offset});"
            ),
        );
    }

    /// A `shared` or `local` buffer declared in a kernel (spec §11.3–§11.4): a pointer into
    /// the kernel's shared pool, or a per-thread array. `{v}` fills it when execution reaches
    /// the declaration: the threads of the block share the fill of a shared buffer and wait
    /// for each other afterwards; each thread fills its own local buffer.
    fn decl_kernel_buffer(
        &mut self,
        span: Span,
        var: hir::VarId,
        init: Option<&HExpr>,
        kernel: hir::KernelId,
    ) {
        let Some(local) = self.f.local(var) else {
            return self.bug(span, "an unknown buffer");
        };
        let (place, ty) = (local.place, local.ty.clone());
        let Ty::Spanned(t) = ty else {
            return self.bug(span, "a buffer declaration of a non-spanned type");
        };
        let name = self.names().local(var).to_string();
        let elem = cpp_elem(t.elem);
        let (_, count) = self.int_extents(&t.dims);
        let value = init.map(|v| self.converted(v, t.elem));
        match place {
            LocalPlace::SharedBuffer => {
                let offset = self.shared_offset(span, var, kernel);
                self.w.line(
                    span,
                    &format!(
                        "[[maybe_unused]] {elem}* const {name} = reinterpret_cast<{elem}*>(__choreo_smem + {offset});"
                    ),
                );
                if let Some(value) = value {
                    self.w.line(
                        span,
                        &format!(
                            "for (int __choreo_e = static_cast<int>(threadIdx.x); __choreo_e < {count}; __choreo_e += static_cast<int>(blockDim.x)) {name}[__choreo_e] = {value};"
                        ),
                    );
                    self.w.line(span, "__syncthreads();");
                }
            }
            LocalPlace::LocalBuffer => {
                self.w.line(span, &format!("{elem} {name}[{count}];"));
                if let Some(value) = value {
                    self.w.line(
                        span,
                        &format!(
                            "for (int __choreo_e = 0; __choreo_e < {count}; ++__choreo_e) {name}[__choreo_e] = {value};"
                        ),
                    );
                }
            }
            _ => self.bug(span, "a global buffer declared in device code"),
        }
    }

    pub(super) fn decl_buffer(&mut self, span: Span, var: hir::VarId, init: Option<&HExpr>) {
        let Some(local) = self.f.local(var) else {
            return self.bug(span, "an unknown buffer");
        };
        let Ty::Spanned(t) = local.ty.clone() else {
            return self.bug(span, "a buffer declaration of a non-spanned type");
        };
        let name = self.names().local(var).to_string();
        let elem = cpp_elem(t.elem);
        let count = self.count_u64(&t.dims);
        self.w.line(span, &format!("__choreo_buffer {name}__mem(__frame);"));
        self.w.line(
            span,
            &format!(
                "__CHOREO_TRY(__frame.alloc(&{name}__mem.ptr, static_cast<std::size_t>({count}) * sizeof({elem})));"
            ),
        );
        self.w.line(
            span,
            &format!(
                "[[maybe_unused]] {elem}* const {name} = static_cast<{elem}*>({name}__mem.ptr);"
            ),
        );
        if let Some(v) = init {
            let value = self.converted(v, t.elem);
            self.w.line(
                span,
                &format!(
                    "__CHOREO_TRY(::__choreo_fill<{elem}>(__frame, {name}, {count}, {value}));"
                ),
            );
        }
    }

    pub(super) fn return_stmt(&mut self, span: Span, value: Option<&HExpr>) {
        let Some(value) = value else {
            self.w.line(span, "goto __choreo_exit;");
            return;
        };
        match self.f.ret.clone() {
            ReturnTy::Void => self.bug(span, "a value returned from a void function"),
            ReturnTy::Scalar(t) => {
                let v = self.converted(value, t);
                self.w.line(span, "{");
                self.w.indent += 1;
                self.w.line(span, &format!("*__choreo_ret = {v};"));
                self.w.line(span, "goto __choreo_exit;");
                self.w.indent -= 1;
                self.w.line(span, "}");
            }
            ReturnTy::Spanned { elem, .. } => {
                let (source, dims, param) = match &value.kind {
                    HExprKind::Param(p) => {
                        let dims = self.f.param(*p).map(|p| p.dims.clone()).unwrap_or_default();
                        // The actual extents, not the declared ones.
                        let actual: Vec<Dim> = (0..dims.len() as u32)
                            .map(|d| Dim::Dynamic { param: *p, dim: d })
                            .collect();
                        (self.param_name(*p), actual, Some(*p))
                    }
                    HExprKind::Var(v) => match self.f.local(*v).map(|l| &l.ty) {
                        Some(Ty::Spanned(t)) => {
                            (self.names().local(*v).to_string(), t.dims.clone(), None)
                        }
                        _ => return self.bug(span, "a returned local that is not a buffer"),
                    },
                    _ => return self.bug(span, "a returned value that is not a buffer"),
                };
                let count = self.count_u64(&dims);
                let elem_text = cpp_elem(elem);
                let wait = if self.plan.leaves_async_work { "false" } else { "true" };
                let stream = self.stream_name(self.plan.streams.result);
                let message = c_escape(
                    &format!(
                        "the value returned by '{}' has %llu elements, but its declared return shape has %llu ({})",
                        self.f.name,
                        self.db.location(span)
                    ),
                    false,
                );
                self.w.line(span, "{");
                self.w.indent += 1;
                self.w.line(span, &format!("const std::uint64_t __choreo_count = {count};"));
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_CHECK(__choreo_count == __choreo_ret_count, \"{message}\", static_cast<unsigned long long>(__choreo_count), static_cast<unsigned long long>(__choreo_ret_count));"
                    ),
                );
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_TRY(__frame.copy_result(__choreo_ret, {source}, static_cast<std::size_t>(__choreo_count) * sizeof({elem_text}), {wait}, {stream}));"
                    ),
                );
                if let Some(p) = param {
                    if self.plan.memory.returned_params.contains(&p) {
                        self.w.line(
                            span,
                            &format!(
                                "if (__choreo_returned_param != nullptr) *__choreo_returned_param = {};",
                                p.0
                            ),
                        );
                    }
                }
                self.w.line(span, "goto __choreo_exit;");
                self.w.indent -= 1;
                self.w.line(span, "}");
            }
        }
    }

    /// `__CHOREO_CHECK(...)` for a runtime check.
    pub(super) fn check(&mut self, check: &hir::Check) {
        let span = check.span;
        let location = self.db.location(span);
        match &check.kind {
            CheckKind::ParamExtent { param, dim, expected } => {
                let e = self.names().extent(*param, *dim);
                let message = c_escape(&check.message, true);
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_CHECK({e} == {expected}u, \"{message} %llu.\", static_cast<unsigned long long>({e}));"
                    ),
                );
            }
            CheckKind::SymbolConsistent { sym, param, dim } => {
                let e = self.names().extent(*param, *dim);
                let s = self.names().sym(*sym).to_string();
                let message = c_escape(&check.message, true);
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_CHECK({e} == {s}, \"{message} (%llu vs. %llu)\", static_cast<unsigned long long>({s}), static_cast<unsigned long long>({e}));"
                    ),
                );
            }
            CheckKind::Positive(value) => {
                let t = scalar_of(&value.ty).unwrap_or(ElemTy::S32);
                let v = self.expr(value);
                let v = if t.is_int() { v } else { conv(&v, t, ElemTy::S64) };
                let message = c_escape(&format!("{} ({location})", check.message), true);
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_CHECK({v} > 0, \"{message}: got %lld\", static_cast<long long>({v}));"
                    ),
                );
            }
            CheckKind::MultipleOf { value, factor } => {
                let v = self.expr(value);
                let message = c_escape(&format!("{} ({location})", check.message), true);
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_CHECK(static_cast<long long>({v}) % {factor}ll == 0, \"{message}: got %lld\", static_cast<long long>({v}));"
                    ),
                );
            }
            CheckKind::MaxThreads { threads, limit } => {
                let v = self.expr(threads);
                let message = c_escape(&format!("{} ({location})", check.message), true);
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_CHECK(static_cast<long long>({v}) <= {limit}ll, \"{message}: got %lld\", static_cast<long long>({v}));"
                    ),
                );
            }
        }
    }
}

/// The offset in elements of an element at constant coordinates of a buffer of constant
/// extents.
fn constant_offset(index: &hir::ElemIndex, dims: &[Dim]) -> Option<u64> {
    match index {
        hir::ElemIndex::Flat(offset) => {
            hir::arith::const_int(offset).and_then(|o| u64::try_from(o).ok())
        }
        hir::ElemIndex::Coords(coords) => {
            let mut offset = 0u64;
            for (c, d) in coords.iter().zip(dims) {
                let c = u64::try_from(hir::arith::const_int(c)?).ok()?;
                offset = offset.checked_mul(d.as_const()?)?.checked_add(c)?;
            }
            Some(offset)
        }
    }
}

impl FnEmitter<'_, '_> {
    /// A PTX named barrier (`bar.sync` / `bar.arrive` of `threads` threads on barrier `id`);
    /// on the CPU a call on the executing thread.
    pub(super) fn named_barrier(&self, sync: bool, id: &str, threads: &str) -> String {
        match (self.options.dialect, sync) {
            (Dialect::Cuda, _) => {
                let op = if sync { "bar.sync" } else { "bar.arrive" };
                format!(
                    "asm volatile(\"{op} %0, %1;\" :: \"r\"({id}), \"r\"({threads}) : \"memory\");"
                )
            }
            (Dialect::Cpu, true) => format!("__choreo_thr->bar_sync({id}, {threads});"),
            (Dialect::Cpu, false) => format!("__choreo_thr->bar_arrive({id}, {threads});"),
        }
    }

    /// The `printf` of host code, or of device code (`device`): on the CPU a kernel prints
    /// through its thread, so that a launch's output comes in block order.
    pub(super) fn printf(&self, device: bool) -> &'static str {
        match self.options.dialect {
            Dialect::Cpu if device => "__choreo_thr->printf",
            _ => "::printf",
        }
    }
}

/// An asm template with every `%[name]` of a named operand replaced by its position `%k`
/// (outputs first, then inputs, as GNU asm numbers them).
fn positional_operands(template: &str, names: &[Option<&str>]) -> String {
    hir::rewrite_named_operands(template, |name| {
        names.iter().position(|n| *n == Some(name)).map(|k| format!("%{k}"))
    })
}

/// The run-time test of a wide copy (empty: none needed) and whether it reads only launch
/// arguments.
pub(super) struct VectorTest {
    pub(super) condition: String,
    pub(super) invariant: bool,
}

/// The box of a DMA that copies `v` elements at a time: `extents` with the innermost (a
/// constant multiple of `v.elems`) divided by `v.elems`, and their product.
pub(super) fn wide_box(
    dma: &hir::Dma,
    extents: &[String],
    count: &str,
    v: crate::lower::vector::VectorCopy,
) -> (Vec<String>, String) {
    let mut wide = extents.to_vec();
    if let Some(last) = wide.last_mut() {
        *last = format!("{}", dma.extents.last().and_then(Dim::as_const).unwrap_or(0) / v.elems);
    }
    let wide_count = match count.parse::<u64>() {
        Ok(n) => (n / v.elems).to_string(),
        Err(_) => format!("({})", wide.join(" * ")),
    };
    (wide, wide_count)
}

#[cfg(test)]
mod tests {
    use super::positional_operands;

    #[test]
    fn named_asm_operands_become_positions() {
        let names = [Some("out"), None, Some("a")];
        assert_eq!(
            positional_operands("add.s32 %[out], %[a], %1; mov %%laneid, %[zz];", &names),
            "add.s32 %0, %2, %1; mov %%laneid, %[zz];"
        );
    }
}
