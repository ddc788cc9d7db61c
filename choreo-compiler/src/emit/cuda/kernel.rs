//! Kernels (`__global__` functions), their intra-block levels, and launches.

use super::types::cpp_elem;
use super::writer::comment_text;
use super::{Dialect, FnEmitter, Region};
use crate::hir::{self, Capture, KernelId, ParamKind, Ty};
use crate::lower::{AfterLaunch, Grid, KernelPlan, StreamRef};
use crate::source::Span;
use std::fmt::Write as _;

/// What a kernel comes from, for comments.
fn origin_text(origin: hir::KernelOrigin) -> &'static str {
    match origin {
        hir::KernelOrigin::ParallelBy => "parallel-by",
        hir::KernelOrigin::HostDma => "host-level DMA",
    }
}

impl FnEmitter<'_, '_> {
    pub(super) fn capture_decl(&mut self, span: Span, c: Capture) -> String {
        match c {
            Capture::Param(p) => match self.f.param(p) {
                Some(param) => match (param.kind, param.elem) {
                    (ParamKind::Scalar(t), _) => format!("{} {}", cpp_elem(t), self.param_name(p)),
                    (ParamKind::HostIn | ParamKind::HostInOut | ParamKind::Global, Some(t)) => {
                        format!("{}* {}", cpp_elem(t), self.param_name(p))
                    }
                    _ => {
                        self.bug(span, "a kernel capture of a stream");
                        format!("int {}", self.param_name(p))
                    }
                },
                None => {
                    self.bug(span, "a kernel capture of an unknown parameter");
                    "int __choreo_bad".to_string()
                }
            },
            Capture::Var(v) => {
                let name = self.names().local(v).to_string();
                match self.f.local(v).map(|l| l.ty.clone()) {
                    Some(Ty::Spanned(t)) => format!("{}* {name}", cpp_elem(t.elem)),
                    Some(Ty::BoundedInt) => format!("int {name}"),
                    Some(Ty::Scalar(t)) => format!("{} {name}", cpp_elem(t)),
                    _ => {
                        self.bug(span, "a kernel capture of a local that is not a value");
                        format!("int {name}")
                    }
                }
            }
            Capture::Sym(s) => format!("unsigned {}", self.names().sym(s)),
            Capture::Extent(p, d) => format!("unsigned {}", self.names().extent(p, d)),
        }
    }

    pub(super) fn capture_arg(&self, c: Capture) -> String {
        match c {
            Capture::Param(p) => self.param_name(p),
            Capture::Var(v) => self.names().local(v).to_string(),
            Capture::Sym(s) => format!("static_cast<unsigned>({})", self.names().sym(s)),
            Capture::Extent(p, d) => {
                format!("static_cast<unsigned>({})", self.names().extent(p, d))
            }
        }
    }

    /// The plan and symbol of the kernel of `tree`.
    fn kernel_plan(&mut self, tree: &hir::ParallelTree) -> Option<(KernelPlan, String)> {
        let plan = self.plan.kernels.get(tree.id.index()).cloned();
        let symbol = self.plan.symbols.kernels.get(tree.id.index()).cloned();
        if plan.is_none() || symbol.is_none() {
            self.bug(tree.span, "a kernel without a plan");
        }
        plan.zip(symbol)
    }

    /// A stream of the call as a `cudaStream_t` expression.
    pub(super) fn stream_name(&self, s: StreamRef) -> String {
        match s {
            StreamRef::Param(p) => self.param_name(p),
            StreamRef::Default => "nullptr".to_string(),
        }
    }

    pub(super) fn kernel(&mut self, tree: &hir::ParallelTree) {
        let Some((k, symbol)) = self.kernel_plan(tree) else { return };
        let span = tree.span;
        self.fence_triggers = k.fence_triggers;
        self.proxies = k.proxies.clone();
        self.kernel_warps = k.threads_per_block.as_const().map_or(32, |n| n.div_ceil(32).max(1));
        let mut params: Vec<String> = Vec::new();
        if self.options.dialect == Dialect::Cpu {
            // The executing thread, which `threadIdx`, `__syncthreads()`, … read on the CPU.
            params.push("[[maybe_unused]] const ::choreo::cpu::Thread* __choreo_thr".to_string());
        }
        params.extend(k.captures.iter().map(|c| self.capture_decl(span, *c)));
        if k.guards {
            params.push("__choreo_bounds_record* __choreo_bounds".to_string());
        }
        if !k.host_proof.is_empty() {
            // Whether the checks the host may prove are made: false when it has proven them.
            params.push("bool __choreo_checked".to_string());
        }
        params.extend(self.tma_params(tree));
        self.w.resync();
        self.w.line(
            span,
            &format!(
                "// kernel {}: {} at {}",
                tree.id.0,
                origin_text(tree.origin),
                comment_text(&self.db.location(span))
            ),
        );
        let mut qualifiers = String::new();
        if let Some(b) = k.attrs.launch_bounds {
            let mut args = vec![b.max_threads.to_string()];
            match (b.min_blocks, b.max_cluster) {
                (None, None) => {}
                (min, None) => args.push(min.unwrap_or(0).to_string()),
                (min, Some(c)) => args.extend([min.unwrap_or(0).to_string(), c.to_string()]),
            }
            let _ = write!(qualifiers, " __launch_bounds__({})", args.join(", "));
        }
        if let Some(n) = k.attrs.max_registers {
            let _ = write!(qualifiers, " __maxnreg__({n})");
        }
        self.w.line(
            span,
            &format!("static __global__ void{qualifiers} {symbol}({}) {{", params.join(", ")),
        );
        let signature_at = self.w.last_line_start();
        // Versioned only where it pays: a copy in a loop (one test per launch instead of one
        // per step, and loops nvcc can optimise); otherwise one instantiation and its tests.
        self.launch_tests = copies_in_loops(&tree.body).then(Vec::new);
        self.w.indent += 1;
        // The launch uses exactly this many threads: telling nvcc lets it count the trips of
        // the loops that threads share (DMA loops) and drop their remainder code.
        if let Some(n) = k.threads_per_block.as_const().filter(|n| *n > 1) {
            self.w.line(span, &format!("__builtin_assume(threadIdx.x < {n}u);"));
        }
        const AXES: [&str; 3] = ["x", "y", "z"];
        if tree.block.vars.len() > 3 {
            self.bug(span, "a block level with more than three sub-dimensions");
        }
        for (i, v) in tree.block.vars.iter().enumerate().take(3) {
            if let Some(v) = v {
                let name = self.names().local(*v).to_string();
                self.w.line(
                    span,
                    &format!(
                        "[[maybe_unused]] const int {name} = static_cast<int>(blockIdx.{});",
                        AXES[i]
                    ),
                );
            }
        }
        if k.shared.used() {
            // The kernel's shared pool (spec §11.3): its size is passed at launch.
            let pool = match self.options.dialect {
                Dialect::Cuda => format!(
                    "extern __shared__ __align__({}) unsigned char __choreo_smem[];",
                    k.shared.alignment
                ),
                // The block's arena, aligned by the runtime to 128 bytes.
                Dialect::Cpu => {
                    "unsigned char* const __choreo_smem = __choreo_thr->smem;".to_string()
                }
            };
            self.w.line(span, &pool);
        }
        if k.async_copies {
            // The copy groups this thread committed (`dma.copy.async`), for `wait`.
            self.w.line(span, "[[maybe_unused]] int __choreo_groups = 0;");
        }
        if let Some(c) = &k.cluster {
            self.cluster_entry(tree, c);
        }
        if let Some(offset) = &k.shared.barriers {
            self.tma_prologue(span, tree, offset);
        }
        self.depth = 0;
        // A `yield` leaves the kernel body; in a cluster kernel it must still reach the exit
        // barrier below, so the body runs in a lambda whose `return` is the `yield`.
        let body_in_lambda = k.cluster.is_some() && contains_yield(&tree.body);
        if body_in_lambda {
            self.w.line(span, "[&]() {  // `yield` returns here, before the exit barrier");
            self.w.indent += 1;
        }
        self.stmts(&tree.body, Region::Device(tree.id));
        if body_in_lambda {
            self.w.indent -= 1;
            self.w.line(span, "}();");
        }
        if k.cluster.is_some() {
            // No block leaves while another block of its cluster may still use its shared
            // memory. Threads that yielded arrive here from a divergent `return`: the barrier
            // is the non-`.aligned` form when the body may yield.
            self.w.line(span, "// every block of the cluster is done");
            let barrier = if body_in_lambda {
                self.cluster_barrier_unaligned()
            } else {
                self.cluster_barrier()
            };
            self.w.line(span, &barrier);
        }
        self.w.indent -= 1;
        self.w.line(span, "}");
        if let Some(tests) = self.launch_tests.take().filter(|t| !t.is_empty()) {
            self.w.insert_in_line(signature_at, "template <bool __choreo_vec> ");
            self.versioned.insert(tree.id.index(), tests);
        }
    }

    /// The cluster barrier (`barrier.cluster.arrive.release` + `wait.acquire`): every thread
    /// of every block of the cluster.
    pub(super) fn cluster_barrier(&self) -> String {
        match self.options.dialect {
            Dialect::Cuda => "asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;\\n\" ::: \"memory\");".to_string(),
            Dialect::Cpu => "__choreo_thr->cluster_sync();".to_string(),
        }
    }

    /// The cluster barrier without `.aligned`: for threads that may reach it diverged.
    fn cluster_barrier_unaligned(&self) -> String {
        match self.options.dialect {
            Dialect::Cuda => "asm volatile(\"barrier.cluster.arrive.release;\\n\\tbarrier.cluster.wait.acquire;\\n\" ::: \"memory\");".to_string(),
            Dialect::Cpu => "__choreo_thr->cluster_sync();".to_string(),
        }
    }

    /// The start of a kernel launched in clusters: the cluster variables from the block's rank
    /// in its cluster (spec-tier3 §1.2 ⚠: `c0 = rank % C0`, `c1 = rank / C0 % C1`,
    /// `c2 = rank / (C0 * C1)`), then a cluster barrier (every block of the cluster has
    /// started before any block touches another's shared memory).
    fn cluster_entry(&mut self, tree: &hir::ParallelTree, plan: &crate::lower::ClusterPlan) {
        let span = tree.span;
        match self.options.dialect {
            Dialect::Cuda => {
                self.w.line(span, "unsigned __choreo_cta_rank;");
                self.w.line(
                    span,
                    "asm volatile(\"mov.u32 %0, %%cluster_ctarank;\" : \"=r\"(__choreo_cta_rank));",
                );
            }
            Dialect::Cpu => self
                .w
                .line(span, "const unsigned __choreo_cta_rank = __choreo_thr->cluster_rank();"),
        }
        let vars = tree.cluster.as_ref().map(|c| c.vars.clone()).unwrap_or_default();
        let n = plan.extents.len();
        let mut below = 1u64;
        for (i, v) in vars.iter().enumerate() {
            let extent = plan.extents.get(i).copied().unwrap_or(1);
            let value = match (i + 1 == n, below) {
                (true, 1) => "__choreo_cta_rank".to_string(),
                (true, b) => format!("__choreo_cta_rank / {b}u"),
                (false, 1) => format!("__choreo_cta_rank % {extent}u"),
                (false, b) => format!("__choreo_cta_rank / {b}u % {extent}u"),
            };
            below *= extent;
            if let Some(v) = v {
                let name = self.names().local(*v).to_string();
                self.w.line(
                    span,
                    &format!("[[maybe_unused]] const int {name} = static_cast<int>({value});"),
                );
            }
        }
        self.w.line(span, "// every block of the cluster has started");
        let barrier = self.cluster_barrier();
        self.w.line(span, &barrier);
    }

    pub(super) fn inner_parallel(&mut self, inner: &hir::InnerParallel, kernel: KernelId) {
        let span = inner.span;
        let extents = &inner.binder.extents;
        let level = self
            .plan
            .kernels
            .get(kernel.index())
            .and_then(|k| k.levels.get(inner.id.index()))
            .cloned();
        let Some(level) = level else {
            return self.bug(span, "an intra-block level without a plan");
        };
        // Blocks are one-dimensional: the instance number of this level is
        // threadIdx.x / (threads per instance) % (instances).
        let mut linear = match level.threads_per_instance.as_const() {
            Some(1) => "static_cast<int>(threadIdx.x)".to_string(),
            _ => {
                let s = self.dim_raw(&level.threads_per_instance);
                format!("static_cast<int>(threadIdx.x / {s})")
            }
        };
        if !level.fills_block {
            let total: Vec<String> = extents.iter().map(|d| self.dim_int(d)).collect();
            linear = if total.len() == 1 {
                format!("{linear} % {}", total[0])
            } else {
                format!("{linear} % ({})", total.join(" * "))
            };
        }
        self.w.line(
            span,
            &format!(
                "{{  // {} level: parallel-by at {}",
                inner.level.as_str(),
                comment_text(&self.db.location(span))
            ),
        );
        self.w.indent += 1;
        let named: Vec<(usize, hir::VarId)> =
            inner.binder.vars.iter().enumerate().filter_map(|(i, v)| v.map(|v| (i, v))).collect();
        if extents.len() == 1 {
            if let Some((_, v)) = named.first() {
                let name = self.names().local(*v).to_string();
                self.w.line(span, &format!("[[maybe_unused]] const int {name} = {linear};"));
            }
        } else if !named.is_empty() {
            let vid = format!("__choreo_vid{}", self.depth);
            self.w.line(span, &format!("const int {vid} = {linear};"));
            for (i, v) in named {
                let name = self.names().local(v).to_string();
                let below: Vec<String> =
                    extents[i + 1..].iter().map(|d| self.dim_int(&d.clone())).collect();
                let mut value = match below.len() {
                    0 => vid.clone(),
                    1 => format!("{vid} / {}", below[0]),
                    _ => format!("{vid} / ({})", below.join(" * ")),
                };
                if i > 0 {
                    let e = self.dim_int(&extents[i].clone());
                    value = format!("{value} % {e}");
                }
                self.w.line(span, &format!("[[maybe_unused]] const int {name} = {value};"));
            }
        }
        self.depth += 1;
        self.stmts(&inner.body, Region::Device(kernel));
        self.depth -= 1;
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    /// The size of a kernel's shared pool as a host `std::uint64_t` expression. A symbolic
    /// size is computed here in 64 bits from the extents (not from the plan's `int`
    /// expression, which the kernel uses for offsets): the launch checks it against the limit,
    /// so that the kernel's 32-bit offsets cannot overflow.
    fn shared_bytes_u64(&mut self, pool: &crate::lower::SharedPool) -> String {
        if let Some(bytes) = pool.bytes.as_const() {
            return format!("{bytes}ull");
        }
        let a = pool.alignment;
        let mut total: Option<String> = None;
        for slot in &pool.slots {
            let Some(local) = self.f.local(slot.var) else { continue };
            let bytes = match &local.ty {
                Ty::Spanned(t) => {
                    let (dims, size) = (t.dims.clone(), t.elem.size_bytes());
                    format!("{} * {size}ull", self.count_u64(&dims))
                }
                ty => format!("{}ull", ty.scalar().map_or(4, hir::ElemTy::size_bytes)),
            };
            let sum = match total {
                Some(t) => format!("{t} + {bytes}"),
                None => bytes,
            };
            total = Some(format!("::__choreo_alignup<std::uint64_t>({sum}, {a}ull)"));
        }
        total.unwrap_or_else(|| "0ull".to_string())
    }

    /// A cooperative launch: the grid must fit on the device at once (checked against the
    /// occupancy the kernel allows, so that a grid barrier cannot hang), then the launch
    /// carries the cooperative attribute.
    fn cooperative_launch(&mut self, span: Span, symbol: &str, grid: &[String]) {
        let lines = [
            "int __choreo_device = 0, __choreo_sms = 0, __choreo_per_sm = 0;".to_string(),
            "__CHOREO_TRY(cudaGetDevice(&__choreo_device));".to_string(),
            "__CHOREO_TRY(cudaDeviceGetAttribute(&__choreo_sms, cudaDevAttrMultiProcessorCount, __choreo_device));".to_string(),
            format!(
                "__CHOREO_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&__choreo_per_sm, {symbol}, static_cast<int>(__choreo_launch.blockDim.x), __choreo_launch.dynamicSmemBytes));"
            ),
            format!(
                "const unsigned long long __choreo_grid = static_cast<unsigned long long>({}) * {} * {};",
                grid[0], grid[1], grid[2]
            ),
        ];
        for l in &lines {
            self.w.line(span, l);
        }
        let message = super::writer::c_escape(
            &format!(
                "the cooperative parallel-by at {} launches more blocks than fit on the device \
                 at once",
                self.db.location(span)
            ),
            true,
        );
        self.w.line(
            span,
            &format!(
                "__CHOREO_CHECK(__choreo_grid <= static_cast<unsigned long long>(__choreo_per_sm) * static_cast<unsigned long long>(__choreo_sms), \"{message}: %llu blocks, at most %d per multiprocessor x %d multiprocessors\", __choreo_grid, __choreo_per_sm, __choreo_sms);"
            ),
        );
        self.w.line(span, "cudaLaunchAttribute __choreo_attr = {};");
        self.w.line(span, "__choreo_attr.id = cudaLaunchAttributeCooperative;");
        self.w.line(span, "__choreo_attr.val.cooperative = 1;");
        self.w.line(span, "__choreo_launch.attrs = &__choreo_attr;");
        self.w.line(span, "__choreo_launch.numAttrs = 1;");
    }

    pub(super) fn launch(&mut self, tree: &hir::ParallelTree) {
        let Some((k, symbol)) = self.kernel_plan(tree) else { return };
        let span = tree.span;
        self.w.line(
            span,
            &format!(
                "{{  // launch kernel {} ({} at {})",
                tree.id.0,
                origin_text(tree.origin),
                comment_text(&self.db.location(span))
            ),
        );
        self.w.indent += 1;
        if self.options.runtime_checks {
            for c in &tree.launch_checks {
                self.check(c);
            }
        }
        if k.waits_for_async {
            // Ordered after every earlier launch of the call, on whichever stream it ran.
            self.w.line(span, "__CHOREO_TRY(__frame.wait_async());");
        }
        let threads = self.dim_unsigned(&k.threads_per_block);
        let mut grid: Vec<String> = Vec::new();
        match &k.grid {
            Grid::Blocks(extents) => {
                for d in extents.iter().take(3) {
                    grid.push(self.dim_unsigned(d));
                }
            }
            Grid::Elements { extents, max_blocks, max_elements } => {
                // The box as the kernel counts it (`int` extents), multiplied in floating
                // point: exact up to 2^53, and beyond that still above the limit.
                let ints: Vec<String> = extents.iter().map(|d| self.dim_int(d)).collect();
                let product: Vec<String> =
                    ints.iter().map(|e| format!("static_cast<double>({e})")).collect();
                self.w.line(span, &format!("const double __choreo_box = {};", product.join(" * ")));
                let mut conditions: Vec<String> = extents
                    .iter()
                    .zip(&ints)
                    .filter(|(d, _)| d.as_const().is_none())
                    .map(|(_, e)| format!("{e} >= 0"))
                    .collect();
                conditions.push(format!("__choreo_box <= {max_elements}.0"));
                let message = super::writer::c_escape(
                    &format!(
                        "the host-level DMA at {} has a negative extent or more than \
                         {max_elements} elements",
                        self.db.location(span)
                    ),
                    true,
                );
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_CHECK({}, \"{message}: its box has %.0f elements\", __choreo_box);",
                        conditions.join(" && ")
                    ),
                );
                self.w.line(
                    span,
                    "const std::uint64_t __choreo_elements = static_cast<std::uint64_t>(__choreo_box);",
                );
                self.w.line(
                    span,
                    &format!(
                        "const unsigned __choreo_blocks = static_cast<unsigned>(std::min<std::uint64_t>(std::max<std::uint64_t>(__choreo_elements / {threads}u + (__choreo_elements % {threads}u != 0), 1), {max_blocks}));"
                    ),
                );
                grid.push("__choreo_blocks".to_string());
            }
        }
        while grid.len() < 3 {
            grid.push("1".to_string());
        }
        // A kernel with checks the host may find redundant: whether they are, decided once.
        if !k.host_proof.is_empty() {
            let all: Vec<String> = k
                .host_proof
                .iter()
                .map(|alternatives| {
                    let any: Vec<String> =
                        alternatives.iter().map(|b| format!("({})", self.host_bound(b))).collect();
                    if any.len() == 1 { any[0].clone() } else { format!("({})", any.join(" || ")) }
                })
                .collect();
            self.w.line(
                span,
                &format!("const bool __choreo_in_bounds_on_host = {};", all.join(" && ")),
            );
        }
        // A versioned kernel: the instantiation whose wide copies need no run-time test and
        // whose parameters are indexed in 32 bits when the launch's arguments pass all its
        // tests (the same tests, on the same values).
        // `instance` is the template's name (`Some` when versioned), `symbol` what is launched.
        let (instance, symbol) = match self.versioned.get(&tree.id.index()) {
            Some(tests) => {
                let all: Vec<String> = tests.iter().map(|t| format!("({t})")).collect();
                self.w.line(span, &format!("const bool __choreo_vec = {};", all.join(" && ")));
                self.w.line(
                    span,
                    &format!(
                        "auto* const __choreo_kernel = __choreo_vec ? &{symbol}<true> : &{symbol}<false>;"
                    ),
                );
                (Some(symbol), "__choreo_kernel".to_string())
            }
            None => (None, symbol),
        };
        let stream = self.stream_name(k.stream);
        let maps = self.tma_encode(tree);
        let pool = k.shared.used();
        if pool {
            let bytes = self.shared_bytes_u64(&k.shared);
            self.w.line(span, &format!("const std::uint64_t __choreo_smem_bytes = {bytes};"));
            if k.shared.bytes.as_const().is_none() {
                let limit = k.shared.limit;
                let message = super::writer::c_escape(
                    &format!(
                        "the shared buffers of the parallel-by at {} need more shared memory \
                         than the target allows per block ({limit} bytes)",
                        self.db.location(span)
                    ),
                    true,
                );
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_CHECK(__choreo_smem_bytes <= {limit}ull, \"{message}: got %llu bytes\", static_cast<unsigned long long>(__choreo_smem_bytes));"
                    ),
                );
            }
            if k.shared.opt_in {
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_TRY(cudaFuncSetAttribute({symbol}, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(__choreo_smem_bytes)));"
                    ),
                );
            }
        }
        self.w.line(span, "cudaLaunchConfig_t __choreo_launch = {};");
        self.w.line(span, &format!("__choreo_launch.gridDim = dim3({});", grid.join(", ")));
        self.w.line(span, &format!("__choreo_launch.blockDim = dim3({threads}, 1, 1);"));
        self.w.line(span, &format!("__choreo_launch.stream = {stream};"));
        if pool {
            self.w.line(
                span,
                "__choreo_launch.dynamicSmemBytes = static_cast<std::size_t>(__choreo_smem_bytes);",
            );
        }
        if k.attrs.cooperative {
            self.cooperative_launch(span, &symbol, &grid);
        }
        if let Some(c) = &k.cluster {
            if c.non_portable() {
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_TRY(cudaFuncSetAttribute({symbol}, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));"
                    ),
                );
            }
            self.w.line(span, "cudaLaunchAttribute __choreo_cluster = {};");
            self.w.line(span, "__choreo_cluster.id = cudaLaunchAttributeClusterDimension;");
            self.w.line(span, &format!("__choreo_cluster.val.clusterDim.x = {};", c.size()));
            self.w.line(span, "__choreo_cluster.val.clusterDim.y = 1;");
            self.w.line(span, "__choreo_cluster.val.clusterDim.z = 1;");
            self.w.line(span, "__choreo_launch.attrs = &__choreo_cluster;");
            self.w.line(span, "__choreo_launch.numAttrs = 1;");
        }
        if k.guards {
            // The caller reads the bounds record only after a launch with its checks on (all of
            // them, when some check is not decided on the host).
            let used = if k.host_proof.is_empty() || k.always_checked {
                "*__choreo_bounds_used = 1;".to_string()
            } else {
                "if (!__choreo_in_bounds_on_host) *__choreo_bounds_used = 1;".to_string()
            };
            self.w.line(span, &used);
        }
        let mut args: Vec<String> = k.captures.iter().map(|c| self.capture_arg(*c)).collect();
        if k.guards {
            args.push("__choreo_bounds".to_string());
        }
        if !k.host_proof.is_empty() {
            args.push("!__choreo_in_bounds_on_host".to_string());
        }
        args.extend(maps);
        let launch = match self.options.dialect {
            Dialect::Cuda => {
                args.splice(0..0, ["&__choreo_launch".to_string(), symbol]);
                format!("cudaLaunchKernelEx({})", args.join(", "))
            }
            Dialect::Cpu => {
                // Threads that may wait for each other run as fibres; others one after another.
                let mut flags = Vec::new();
                if k.synchronises {
                    flags.push("::choreo::cpu::kFibres");
                }
                if k.attrs.cooperative {
                    flags.push("::choreo::cpu::kCooperative");
                }
                let flags = if flags.is_empty() { "0u".to_string() } else { flags.join(" | ") };
                args.splice(0..0, ["&__choreo_launch".to_string(), flags]);
                let args = args.join(", ");
                match &instance {
                    Some(instance) => format!(
                        "__choreo_vec ? ::choreo::cpu::launch<{instance}<true>>({args}) : ::choreo::cpu::launch<{instance}<false>>({args})"
                    ),
                    None => format!("::choreo::cpu::launch<{symbol}>({args})"),
                }
            }
        };
        self.w.line(span, &format!("__CHOREO_TRY({launch});"));
        let after = match k.after {
            AfterLaunch::DeviceSync => "__CHOREO_TRY(cudaDeviceSynchronize());".to_string(),
            AfterLaunch::StreamSync(s) => {
                format!("__CHOREO_TRY(cudaStreamSynchronize({}));", self.stream_name(s))
            }
            AfterLaunch::Track => format!("__CHOREO_TRY(__frame.track_async({stream}));"),
        };
        self.w.line(span, &after);
        self.w.indent -= 1;
        self.w.line(span, "}");
    }
}

/// Whether some DMA of `body` is inside a loop (`for` / `while`, at any depth).
fn copies_in_loops(body: &[hir::Stmt]) -> bool {
    struct Finder {
        in_loop: bool,
        found: bool,
    }
    impl<'a> crate::hir::visit::Visitor<'a> for Finder {
        fn stmt(&mut self, stmt: &'a hir::Stmt) -> crate::hir::visit::Walk {
            match &stmt.kind {
                hir::StmtKind::For { body, .. } | hir::StmtKind::While { body, .. }
                    if !self.in_loop =>
                {
                    self.in_loop = true;
                    crate::hir::visit::walk_stmts(self, body);
                    self.in_loop = false;
                    crate::hir::visit::Walk::Skip
                }
                hir::StmtKind::Dma(_) if self.in_loop => {
                    self.found = true;
                    crate::hir::visit::Walk::Continue
                }
                _ => crate::hir::visit::Walk::Continue,
            }
        }
    }
    let mut finder = Finder { in_loop: false, found: false };
    crate::hir::visit::walk_stmts(&mut finder, body);
    finder.found
}

/// Whether `body` has a `yield` (in any nested statement).
fn contains_yield(body: &[hir::Stmt]) -> bool {
    struct Finder(bool);
    impl<'a> crate::hir::visit::Visitor<'a> for Finder {
        fn stmt(&mut self, stmt: &'a hir::Stmt) -> crate::hir::visit::Walk {
            if matches!(stmt.kind, hir::StmtKind::Yield) {
                self.0 = true;
            }
            crate::hir::visit::Walk::Continue
        }
    }
    let mut finder = Finder(false);
    crate::hir::visit::walk_stmts(&mut finder, body);
    finder.0
}
