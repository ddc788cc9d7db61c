//! Parallel-by (spec §8): level inference and filling (§8.3), binders and bounds (§8.1),
//! thread counts (§8.4), launches and stream binding (§8.5).

use super::shapes::{dim_to_expr, expr_to_dim};
use super::{Checker, KernelFrame, LevelInfo, Region, Val, fold, ordinal, types};
use crate::ast::{self, ExprKind};
use crate::diagnostics::Diagnostic;
use crate::hir::{
    self, Binder, Check, CheckKind, Dim, ElemTy, HExpr, InnerParallel, KernelAttrs, KernelId,
    KernelOrigin, LaunchBounds, Level, LevelId, LocalOrigin, LocalPlace, ParallelTree, ParamKind,
    Stmt, StmtKind, Ty,
};
use crate::source::Span;
use crate::target::Feature;

fn key(span: Span) -> (u32, u32) {
    (span.start, span.end)
}

// -- level inference (pre-pass over the AST) --------------------------------------------------

/// One parallel-by item in the nesting tree of a function.
struct Node {
    span: Span,
    note: Option<u8>,
    children: Vec<Node>,
}

/// Level indices used for inference: block 0, group-4 1, group 2, thread 3.
fn level_index(l: ast::Level) -> Option<u8> {
    match l {
        ast::Level::Block => Some(0),
        ast::Level::Group4 => Some(1),
        ast::Level::Group => Some(2),
        ast::Level::Thread => Some(3),
        ast::Level::Cluster | ast::Level::Device | ast::Level::Term => None,
    }
}

fn from_index(i: u8) -> Level {
    match i {
        0 => Level::Block,
        1 => Level::Group4,
        2 => Level::Group,
        _ => Level::Thread,
    }
}

/// Whether an item is annotated `cluster` (tier 3): such outer items are reported and then
/// treated as transparent wrappers around block-level launches, so nothing cascades.
/// (`device`/`term` items are reported and inferred like unannotated ones.)
fn is_outer_unsupported(item: &ast::ParallelItem) -> bool {
    item.level.as_ref().is_some_and(|n| n.level.level == ast::Level::Cluster)
}

fn collect(stmts: &[ast::Stmt]) -> Vec<Node> {
    let mut out = Vec::new();
    for s in stmts {
        match &s.kind {
            ast::StmtKind::Parallel(p) => {
                // Unsupported outer levels (cluster, device, term) are transparent.
                let heads = p.items.iter().take_while(|i| is_outer_unsupported(i)).count();
                let mut node: Option<Node> = None;
                // A misplaced `cluster` item further in is reported by the level check
                // (E0619) and is transparent here too, so it draws no W0601 of its own.
                let items = p.items.iter().skip(heads).filter(|i| !is_outer_unsupported(i));
                for item in items.rev() {
                    let children = match node.take() {
                        Some(n) => vec![n],
                        None => collect(&p.body.stmts),
                    };
                    node = Some(Node {
                        span: item.span,
                        note: item.level.as_ref().and_then(|n| level_index(n.level.level)),
                        children,
                    });
                }
                match node {
                    Some(n) => out.push(n),
                    None => out.extend(collect(&p.body.stmts)),
                }
            }
            ast::StmtKind::Block(b)
            | ast::StmtKind::While { body: b, .. }
            | ast::StmtKind::Inthreads { body: b, .. }
            | ast::StmtKind::Apply { body: b, .. } => out.extend(collect(&b.stmts)),
            ast::StmtKind::With(w) => out.extend(collect(&w.body.stmts)),
            ast::StmtKind::Foreach(f) => out.extend(collect(&f.body.stmts)),
            ast::StmtKind::If { then_body, else_body, .. } => {
                out.extend(collect(&then_body.stmts));
                if let Some(b) = else_body {
                    out.extend(collect(&b.stmts));
                }
            }
            _ => {}
        }
    }
    out
}

/// Infers the level of every parallel-by item of a function body (spec §8.3) and records it
/// in `levels`; reports `E0606`–`E0608` and `W0601`.
pub(crate) fn infer_levels(ch: &mut Checker<'_>, stmts: &[ast::Stmt]) {
    for root in collect(stmts) {
        assign(ch, &root, None);
    }
}

fn assign(ch: &mut Checker<'_>, node: &Node, parent: Option<u8>) {
    let mut path: Vec<&Node> = vec![node];
    while let Some(first) = path.last().and_then(|n| n.children.first()) {
        path.push(first);
    }
    let mut anns: Vec<Option<u8>> = path.iter().map(|n| n.note).collect();
    let annotated = anns.iter().filter(|a| a.is_some()).count();
    if parent.is_none() && path.len() > 1 && annotated > 0 && annotated < path.len() {
        ch.warn(
            "W0601",
            node.span,
            "For nested parallel-by, it is better to either explicitly specify all parallelism \
             levels, or none",
            "mixes annotated and unannotated levels",
        );
    }
    let len = path.len();
    let has_group4 = anns.contains(&Some(1));
    if parent.is_none() && (len > 4 || (len > 3 && !has_group4)) {
        let at = path.get(3).map_or(node.span, |n| n.span);
        ch.error_label(
            "E0608",
            at,
            format!("too many parallel-by levels: {len} > 3."),
            "one level too many",
        );
        for n in &path {
            ch.levels.insert(key(n.span), LevelInfo { level: None });
        }
        return;
    }
    if let Some(last) = anns.last_mut() {
        if last.is_none() {
            *last = Some(3); // rule 1: an unannotated leaf is a thread level
        }
    }
    let mut i = 0;
    while i < len {
        if anns[i].is_some() {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < len && anns[j].is_none() {
            j += 1;
        }
        let above: i16 =
            if i == 0 { parent.map_or(-1, i16::from) } else { anns[i - 1].map_or(-1, i16::from) };
        let below: i16 = anns.get(j).copied().flatten().map_or(4, i16::from);
        // Inference never picks group-4 (sm_90a only): block, group, thread.
        let candidates: Vec<u8> = [0u8, 2, 3]
            .into_iter()
            .filter(|x| i16::from(*x) > above && i16::from(*x) < below)
            .collect();
        if candidates.len() < j - i {
            let msg = if above >= 0 && below <= 3 {
                format!(
                    "unable to infer the parallel-by level(s) between {} and {}.",
                    from_index(above as u8).as_str(),
                    from_index(below as u8).as_str()
                )
            } else {
                "the parallel level can not be inferred.".to_string()
            };
            ch.error_label("E0606", path[i].span, msg, "level cannot be inferred");
            i = j;
            continue;
        }
        for (k, c) in (i..j).zip(candidates) {
            anns[k] = Some(c);
        }
        i = j;
    }
    // Levels must strictly descend.
    let mut prev = parent;
    let mut prev_span: Option<Span> = None;
    for (k, n) in path.iter().enumerate() {
        if let (Some(p), Some(c)) = (prev, anns[k]) {
            if c <= p {
                let mut d = crate::diagnostics::Diagnostic::error(
                    "E0607",
                    n.span,
                    format!(
                        "the parallel level '{}' can not be nested inside '{}'.",
                        from_index(c).as_str(),
                        from_index(p).as_str()
                    ),
                )
                .with_label("levels must strictly descend (block > group-4 > group > thread)");
                if let Some(ps) = prev_span {
                    d = d.with_secondary(ps, "enclosing level");
                }
                ch.diags.push(d);
                anns[k] = None;
            }
        }
        if anns[k].is_some() {
            prev = anns[k];
        }
        prev_span = Some(n.span);
    }
    for (k, n) in path.iter().enumerate() {
        ch.levels.insert(key(n.span), LevelInfo { level: anns[k].map(from_index) });
    }
    for (k, n) in path.iter().enumerate() {
        for child in n.children.iter().skip(1) {
            assign(ch, child, anns[k]);
        }
    }
}

// -- checking --------------------------------------------------------------------------------

impl Checker<'_> {
    /// Checks a parallel-by statement: a kernel launch in host code, an inner level in a kernel.
    pub(crate) fn check_parallel(&mut self, p: &ast::Parallel, span: Span) -> Option<Stmt> {
        let first = p.items.first()?;
        if self.in_device() {
            for attr in &p.attrs {
                self.error_label(
                    "E0617",
                    attr.span,
                    "kernel attributes are only allowed on a block-level parallel-by",
                    "an inner level",
                );
            }
            if let Some(a) = p.is_async {
                self.error_label(
                    "E0605",
                    a,
                    "inner parallel-by level can not be asynchronous.",
                    "inner level",
                );
            }
            if let Some(s) = &p.stream {
                let level = self.item_level(first, false);
                self.error_label(
                    "E0612",
                    s.span,
                    format!(
                        "stream binding is only allowed on block-level parallel; '{}' level \
                         cannot have its own stream.",
                        level.as_str()
                    ),
                    "not the outermost block level",
                );
            }
            return self.inner_item(p, 0);
        }
        // A `cluster` item after the first level is reported by `inner_item`.
        let heads = p.items.iter().take_while(|i| is_outer_unsupported(i)).count();
        if heads == 0 {
            return self.check_kernel(p, 0, span, None);
        }
        // A `cluster` level (spec-tier3 §1.2): outermost, one per kernel, directly around the
        // block level, whether written as items of one statement or as nested statements.
        let depth = self.scopes.depth();
        self.item_level(&p.items[0], true);
        for extra in &p.items[1..heads] {
            self.error_label(
                "E0619",
                extra.span,
                "a kernel has at most one 'cluster' level",
                "a second cluster level",
            );
        }
        self.scopes.push();
        let cluster = self.cluster_binder(&p.items[0]);
        for extra in &p.items[1..heads] {
            let _ = self.binder(extra, Level::Block);
        }
        let out = if heads < p.items.len() {
            self.check_kernel(p, heads, span, Some((cluster, p.items[0].span)))
        } else {
            for (what, at) in [
                ("an attribute", p.attrs.first().map(|a| a.span)),
                ("'.async'", p.is_async),
                ("a stream binding", p.stream.as_ref().map(|s| s.span)),
            ] {
                if let Some(at) = at {
                    self.error_label(
                        "E0619",
                        at,
                        format!(
                            "{what} on a 'cluster' parallel-by is not supported: write it on the \
                             block-level parallel-by inside"
                        ),
                        "on the cluster level",
                    );
                }
            }
            match p.body.stmts.as_slice() {
                [ast::Stmt { kind: ast::StmtKind::Parallel(inner), span: inner_span }]
                    if inner.items.first().is_some_and(|i| !is_outer_unsupported(i)) =>
                {
                    self.check_kernel(inner, 0, *inner_span, Some((cluster, p.items[0].span)))
                }
                _ => {
                    self.error_label(
                        "E0619",
                        p.items[0].span,
                        "a 'cluster' parallel-by must contain exactly one statement: the \
                         block-level parallel-by its blocks run",
                        "not directly around a block level",
                    );
                    let body = self.check_stmts(&p.body.stmts);
                    Some(Stmt { kind: StmtKind::Block(body), span })
                }
            }
        };
        self.scopes.truncate(depth);
        out
    }

    /// The binder of a `cluster` item: constant extents of at most 16 blocks in all; its
    /// variables are block-uniform (they come from the block's rank in its cluster).
    fn cluster_binder(&mut self, item: &ast::ParallelItem) -> Binder {
        let mut binder = self.binder(item, Level::Block);
        let mut total: u64 = 1;
        for d in &mut binder.extents {
            match d.as_const() {
                Some(n) => total = total.saturating_mul(n),
                None => {
                    self.error_label(
                        "E0619",
                        item.bound.span,
                        "the extents of a 'cluster' level must be compile-time constants",
                        "not a constant",
                    );
                    *d = Dim::Const(1);
                }
            }
        }
        if total > 16 {
            self.error_label(
                "E0619",
                item.bound.span,
                format!("a cluster has at most 16 blocks, but this one has {total}"),
                "too many blocks per cluster",
            );
        }
        binder
    }

    /// Reports `feature` on a target that lacks it (E0805); whether the target has it.
    pub(crate) fn require(&mut self, span: Span, feature: Feature) -> bool {
        if self.target.supports(feature) {
            return true;
        }
        let arch = self.target.arch().map_or("cpu".to_string(), |a| a.to_string());
        self.diags.push(
            Diagnostic::error(
                "E0805",
                span,
                format!("{} is not supported by the target architecture: {arch}", feature.name()),
            )
            .with_label(format!("needs {}", feature.min_arch()))
            .with_help(format!(
                "compile for {} (`--arch {}`)",
                feature.min_arch(),
                feature.min_arch()
            )),
        );
        false
    }

    fn check_kernel(
        &mut self,
        p: &ast::Parallel,
        start: usize,
        span: Span,
        cluster: Option<(Binder, Span)>,
    ) -> Option<Stmt> {
        let first = p.items.get(start)?;
        let id = KernelId(self.kernel_count);
        self.kernel_count += 1;
        self.has_parallel = true;
        let is_async = p.is_async.is_some();
        if is_async {
            self.is_async = true;
        }
        let first_level = self.item_level(first, false);
        if first_level == Level::Block {
            self.item_level(first, true); // report unsupported notes once
        }
        let stream = p.stream.as_ref().and_then(|s| self.resolve_stream(s, first_level));
        let saved_loop = self.loop_depth;
        self.loop_depth = 0;
        let cooperative = first_level == Level::Block
            && first.level.as_ref().is_some_and(|n| n.cooperative.is_some());
        let mut cluster_ok = true;
        if let Some((_, at)) = &cluster {
            let explicit_block =
                first.level.as_ref().is_some_and(|n| n.level.level == ast::Level::Block);
            cluster_ok = explicit_block && !cooperative;
            if !explicit_block {
                self.error_label(
                    "E0619",
                    first.span,
                    "a 'cluster' level must directly enclose an explicit block level \
                     (`parallel … : block`)",
                    "not a block level",
                );
            } else if cooperative {
                self.diags.push(
                    Diagnostic::error(
                        "E0619",
                        first.span,
                        "a cooperative launch cannot have a 'cluster' level",
                    )
                    .with_label("cooperative")
                    .with_secondary(*at, "cluster level"),
                );
            }
        }
        self.kernel =
            Some(KernelFrame { cooperative, cluster: cluster.is_some(), ..KernelFrame::default() });
        let depth = self.scopes.depth();
        let (block, mut body, threads) = if first_level == Level::Block {
            self.scopes.push();
            let block = self.binder(first, Level::Block);
            self.region = Region::Device(Level::Block);
            let body = if p.items.len() > start + 1 {
                self.inner_item(p, start + 1).into_iter().collect()
            } else {
                self.check_stmts(&p.body.stmts)
            };
            let threads = self.agree(&body).unwrap_or(Dim::Const(1));
            (block, body, threads)
        } else {
            let block = Binder {
                vars: vec![None],
                tuple: None,
                extents: vec![Dim::Const(1)],
                implicit: true,
            };
            self.region = Region::Device(Level::Block);
            let body: Vec<Stmt> = self.inner_item(p, start).into_iter().collect();
            let threads = self.agree(&body).unwrap_or(Dim::Const(1));
            (block, body, threads)
        };
        self.scopes.truncate(depth);
        self.region = Region::Host;
        self.loop_depth = saved_loop;
        self.resolve_placeholder_store_waits(&mut body);
        self.check_waits(&body, span);
        self.check_tma_stores(&body);
        match threads.as_const() {
            Some(n) if n > self.target.max_threads_per_block() => {
                self.error_label(
                    "E0609",
                    span,
                    format!(
                        "Total physical threads per block (thread x group x group-4 dims) must \
                         not exceed {}, but got {n}.",
                        self.target.max_threads_per_block()
                    ),
                    "too many threads per block",
                );
            }
            Some(_) => {}
            None => {
                let e = dim_to_expr(&threads, span);
                let check = Check {
                    kind: CheckKind::MaxThreads {
                        threads: e.clone(),
                        limit: self.target.max_threads_per_block(),
                    },
                    message: format!(
                        "Total physical threads per block (thread x group x group-4 dims) must \
                         not exceed {}",
                        self.target.max_threads_per_block()
                    ),
                    span,
                };
                if Self::entry_evaluable(&e) {
                    self.entry_checks.push(check);
                } else if let Some(k) = self.kernel.as_mut() {
                    k.launch_checks.push(check);
                }
            }
        }
        let mut frame = self.kernel.take().unwrap_or_default();
        super::swizzle_infer::patch(&mut body, &frame.swizzle_patches);
        let mut attrs = self.kernel_attrs(&p.attrs, &threads, span, &mut frame.launch_checks);
        attrs.cooperative = cooperative;
        // Warp-specialised kernels and `setmaxnreg`: registers are shared out under an entry
        // cap (spec-tier3 §7.2, §10.6; without one ptxas ignores setmaxnreg). Written
        // attributes win.
        if frame.register_roles && attrs.launch_bounds.is_none() && attrs.max_registers.is_none() {
            if let Some(n) = threads.as_const().and_then(|n| u32::try_from(n).ok()) {
                attrs.launch_bounds =
                    Some(LaunchBounds { max_threads: n, min_blocks: Some(1), max_cluster: None });
            }
        }
        let cluster = cluster.map(|(binder, at)| {
            if cluster_ok {
                self.cluster_divides_grid(&binder, &block, at, &mut frame.launch_checks);
            }
            binder
        });
        attrs.tma_barriers = frame.tma_barriers;
        attrs.tma_maps = frame.tma_maps;
        attrs.swizzle = frame.swizzle;
        let tree = ParallelTree {
            id,
            origin: KernelOrigin::ParallelBy,
            span,
            is_async,
            stream,
            block,
            body,
            launch_checks: frame.launch_checks,
            attrs,
            cluster,
        };
        Some(Stmt { kind: StmtKind::Parallel(Box::new(tree)), span })
    }

    /// The blocks of a cluster are consecutive along x (spec-tier3 §1.2): the block level's
    /// first extent must be a multiple of the cluster's size. A constant extent is checked
    /// here (E0619), another one before the launch.
    fn cluster_divides_grid(
        &mut self,
        cluster: &Binder,
        block: &Binder,
        at: Span,
        launch_checks: &mut Vec<Check>,
    ) {
        let size: u64 = cluster.extents.iter().filter_map(Dim::as_const).product();
        let Some(x) = block.extents.first() else { return };
        if size <= 1 {
            return;
        }
        match x.as_const() {
            Some(n) if n % size != 0 => {
                self.diags.push(
                    Diagnostic::error(
                        "E0619",
                        at,
                        format!(
                            "the block level's first extent ({n}) must be a multiple of the \
                             cluster's {size} blocks"
                        ),
                    )
                    .with_label(format!("{size} blocks per cluster")),
                );
            }
            Some(_) => {}
            None => {
                let e = dim_to_expr(x, at);
                let check = Check {
                    kind: CheckKind::MultipleOf { value: e.clone(), factor: size },
                    message: format!(
                        "the block level's first extent must be a multiple of the cluster's \
                         {size} blocks"
                    ),
                    span: at,
                };
                if Self::entry_evaluable(&e) {
                    self.entry_checks.push(check);
                } else {
                    launch_checks.push(check);
                }
            }
        }
    }

    /// `[[launch_bounds(…)]]` and `[[maxnreg(n)]]` of a kernel with `threads` threads per
    /// block (spec §8.8). A written thread bound below a run-time thread count is checked
    /// before the launch (`launch_checks`).
    fn kernel_attrs(
        &mut self,
        attrs: &[ast::Attribute],
        threads: &Dim,
        span: Span,
        launch_checks: &mut Vec<Check>,
    ) -> KernelAttrs {
        let mut out = KernelAttrs::default();
        let mut maxnreg_span = None;
        for attr in attrs {
            match &attr.kind {
                ast::AttributeKind::LaunchBounds(args) => {
                    if args.is_empty() || args.len() > 3 {
                        self.error_label(
                            "E0617",
                            attr.span,
                            format!(
                                "launch_bounds takes 1 to 3 arguments (max threads, min blocks, \
                                 max cluster), but got {}",
                                args.len()
                            ),
                            "wrong number of arguments",
                        );
                        continue;
                    }
                    let mut values = Vec::with_capacity(3);
                    for (i, a) in args.iter().enumerate() {
                        if i == 0 && matches!(a.kind, ExprKind::Wildcard) {
                            values.push(Some(0));
                            continue;
                        }
                        values.push(self.attribute_int(a, "launch_bounds", 0));
                    }
                    if values.iter().any(Option::is_none) {
                        continue;
                    }
                    let nonzero = |v: Option<&Option<u32>>| v.copied().flatten().filter(|v| *v > 0);
                    let max_threads = match (values[0], threads.as_const()) {
                        (Some(0), Some(n)) => n as u32,
                        (Some(0), None) => {
                            self.error_label(
                                "E0617",
                                args[0].span,
                                "the kernel's thread count is only known at run time: write \
                                 the largest count it is launched with",
                                "no compile-time thread count",
                            );
                            continue;
                        }
                        (Some(m), Some(n)) if u64::from(m) < n => {
                            self.error_label(
                                "E0617",
                                args[0].span,
                                format!(
                                    "launch_bounds allows at most {m} threads per block, but \
                                     the parallel-by runs {n}"
                                ),
                                "below the thread count",
                            );
                            continue;
                        }
                        (Some(m), None) => {
                            let e = dim_to_expr(threads, span);
                            let check = Check {
                                kind: CheckKind::MaxThreads { threads: e, limit: u64::from(m) },
                                message: format!(
                                    "the parallel-by runs more threads per block than its \
                                     launch_bounds allows ({m})"
                                ),
                                span: args[0].span,
                            };
                            launch_checks.push(check);
                            m
                        }
                        (Some(m), Some(_)) => m,
                        (None, _) => continue,
                    };
                    out.launch_bounds = Some(LaunchBounds {
                        max_threads,
                        min_blocks: nonzero(values.get(1)),
                        max_cluster: nonzero(values.get(2)),
                    });
                }
                ast::AttributeKind::MaxNReg(e) => {
                    if let Some(n) = self.attribute_int(e, "maxnreg", 1) {
                        if n > 255 {
                            self.error_label(
                                "E0617",
                                e.span,
                                format!("maxnreg({n}): a thread has at most 255 registers"),
                                "too many registers",
                            );
                        } else {
                            out.max_registers = Some(n);
                            maxnreg_span = Some(attr.span);
                        }
                    }
                }
                ast::AttributeKind::Schedule(_) => {
                    self.unsupported(attr.span, "`[[schedule(…)]]`", 3);
                }
            }
        }
        // Both are hints; nvcc refuses them together on one kernel, so the launch bounds
        // (which also tell it the thread count) win.
        if let (Some(n), Some(_), Some(m)) = (out.max_registers, out.launch_bounds, maxnreg_span) {
            self.diags.push(
                Diagnostic::warning(
                    "W0604",
                    m,
                    format!(
                        "maxnreg({n}) is not applied: nvcc takes one register constraint per \
                         kernel, and launch_bounds is kept"
                    ),
                )
                .with_label("ignored")
                .with_help(
                    "launch_bounds(threads, min_blocks) bounds registers through occupancy; \
                     drop it to limit registers with maxnreg",
                ),
            );
            out.max_registers = None;
        }
        out
    }

    /// A compile-time integer argument of a kernel attribute, at least `min`.
    fn attribute_int(&mut self, e: &ast::Expr, attr: &str, min: i128) -> Option<u32> {
        let v = self.check_int(e, "an attribute argument");
        if matches!(v.ty, Ty::Error) {
            return None;
        }
        match fold::const_int(&v) {
            Some(n) if n >= min && n <= i128::from(u32::MAX) => Some(n as u32),
            Some(n) => {
                self.error_label(
                    "E0617",
                    e.span,
                    format!("{attr} needs an integer of at least {min}, but got {n}"),
                    "out of range",
                );
                None
            }
            None => {
                self.error_label(
                    "E0617",
                    e.span,
                    format!("the arguments of {attr} must be known at compile time"),
                    "not a constant",
                );
                None
            }
        }
    }

    fn resolve_stream(&mut self, s: &ast::Ident, level: Level) -> Option<crate::hir::ParamId> {
        if level != Level::Block {
            self.error_label(
                "E0612",
                s.span,
                format!(
                    "stream binding is only allowed on block-level parallel; '{}' level cannot \
                     have its own stream.",
                    level.as_str()
                ),
                "bound to a non-block level",
            );
        }
        let found = self.scopes.lookup(&s.name).cloned();
        match found {
            Some(super::scope::Symbol::Param(p))
                if self.params.get(p.index()).is_some_and(|x| x.kind == ParamKind::Stream) =>
            {
                self.streams.insert(p);
                (level == Level::Block).then_some(p)
            }
            None => {
                self.undeclared(s);
                None
            }
            Some(_) => {
                self.error_label(
                    "E0613",
                    s.span,
                    format!(
                        "'{}' is not a stream type; parallel<...> requires a stream variable.",
                        s.name
                    ),
                    "not a stream parameter",
                );
                None
            }
        }
    }

    /// The inferred level of an item; reports unsupported level notes once (`report`).
    fn item_level(&mut self, item: &ast::ParallelItem, report: bool) -> Level {
        if report {
            if let Some(note) = &item.level {
                match note.level.level {
                    ast::Level::Cluster => {
                        self.require(note.level.span, Feature::Clusters);
                    }
                    ast::Level::Group4 => {
                        self.require(note.level.span, Feature::Warpgroups);
                    }
                    ast::Level::Device | ast::Level::Term => {
                        if note.target.is_some() {
                            self.out_of_scope(note.span, "the heterogeneous `device(…)` level");
                        } else {
                            self.error_label(
                                "E0615",
                                note.level.span,
                                format!(
                                    "the parallel level '{}' is not meaningful for the CUDA \
                                     target",
                                    note.level.level.as_str()
                                ),
                                "use block, group or thread",
                            );
                        }
                    }
                    _ => {
                        if note.target.is_some() {
                            self.out_of_scope(note.span, "a parameterized level annotation");
                        }
                    }
                }
                if let (Some(c), false) = (note.cooperative, note.level.level == ast::Level::Block)
                {
                    self.warn(
                        "W0603",
                        c,
                        format!(
                            "'<cooperative>' on a '{}' level is ignored: only a block level \
                             launches cooperatively",
                            note.level.level.as_str()
                        ),
                        "ignored here",
                    );
                }
            }
        }
        self.levels.get(&key(item.span)).and_then(|i| i.level).unwrap_or(Level::Thread)
    }

    /// The thread total of the intra-block levels directly in `body`, which must agree
    /// (`E0611` when two constant totals differ); `None` when there is none.
    fn agree(&mut self, body: &[Stmt]) -> Option<Dim> {
        let totals: Vec<(Dim, Span)> =
            hir::nested_levels(body).into_iter().map(|l| (l.thread_total(), l.span)).collect();
        let mut it = totals.into_iter();
        let (first, _) = it.next()?;
        for (other, span) in it {
            if let (Some(a), Some(b)) = (first.as_const(), other.as_const()) {
                if a != b {
                    self.error_label(
                        "E0611",
                        span,
                        format!(
                            "mulitple inner parallel-bys must have compatible block dimension \
                             {a} != {b}."
                        ),
                        format!(
                            "{b} thread{} here, {a} in an earlier sibling",
                            if b == 1 { "" } else { "s" }
                        ),
                    );
                }
            }
        }
        Some(first)
    }

    /// A `cluster` item that is not the outermost level of a kernel (E0619).
    fn misplaced_cluster(&mut self, item: &ast::ParallelItem) {
        self.error_label(
            "E0619",
            item.span,
            "the 'cluster' level must be the outermost level, directly around the block level",
            "not outermost",
        );
    }

    /// Checks item `i` of `p` as an intra-block level (group-4, group or thread).
    fn inner_item(&mut self, p: &ast::Parallel, i: usize) -> Option<Stmt> {
        let item = p.items.get(i)?;
        if is_outer_unsupported(item) {
            self.misplaced_cluster(item);
        }
        let mut level = self.item_level(item, true);
        if level == Level::Block {
            level = Level::Thread; // already reported (E0607)
        }
        if level == Level::Group && self.region == Region::Device(Level::Group4) {
            self.error_label(
                "E0618",
                item.span,
                "explicit 'group' inside the 'group-4' parallel-by is not supported: a \
                 warpgroup's 128 threads are its thread level",
                "a group level inside group-4",
            );
        }
        let id = self.kernel.as_mut().map_or(LevelId(0), |k| {
            k.levels += 1;
            LevelId(k.levels - 1)
        });
        self.scopes.push();
        let binder = self.binder(item, level);
        let saved = self.region;
        self.region = Region::Device(level);
        // A parallel-by body is not inside the enclosing loop (`break` cannot leave it).
        let saved_loop = std::mem::replace(&mut self.loop_depth, 0);
        self.level_stack.push(id);
        self.level_extents.push(binder.extents.clone());
        let group4 = u32::from(level == Level::Group4);
        if let Some(k) = self.kernel.as_mut() {
            k.group4_depth += group4;
        }
        let body = if i + 1 < p.items.len() {
            self.inner_item(p, i + 1).into_iter().collect()
        } else {
            self.setreg_outside_block(&p.body.stmts, level);
            self.check_stmts(&p.body.stmts)
        };
        if let Some(k) = self.kernel.as_mut() {
            k.group4_depth -= group4;
        }
        self.level_extents.pop();
        self.level_stack.pop();
        self.loop_depth = saved_loop;
        let per_instance = self.agree(&body).unwrap_or(Dim::Const(level.unit_threads()));
        let unit = level.unit_threads();
        if level == Level::Group4 && per_instance.as_const().is_none() {
            self.error_label(
                "E0618",
                item.span,
                "the thread level under a 'group-4' level must have 128 threads, known at compile \
                 time",
                "thread count only known at run time",
            );
        }
        if let Some(s) = per_instance.as_const() {
            if level == Level::Group4 && s != unit {
                self.error_label(
                    "E0618",
                    item.span,
                    format!(
                        "The total thread dimension must be a multiple of 128 when 'group-4' \
                         exists, but got {s}: the thread level under a 'group-4' level has \
                         exactly 128 threads."
                    ),
                    "not 128 threads per warpgroup",
                );
            } else if unit > 1 && s % unit != 0 {
                self.error_label(
                    "E0610",
                    item.span,
                    format!(
                        "The total thread dimension must be a multiple of {unit} when '{}' \
                         exists, but got {s}.",
                        level.as_str()
                    ),
                    "thread extent not a whole number of units",
                );
            }
        }
        self.region = saved;
        self.scopes.pop();
        Some(Stmt {
            kind: StmtKind::InnerParallel(Box::new(InnerParallel {
                id,
                span: item.span,
                level,
                binder,
                body,
            })),
            span: item.span,
        })
    }

    /// Checks the bound of an item and declares its binder variables in the current scope.
    fn binder(&mut self, item: &ast::ParallelItem, level: Level) -> Binder {
        let mut extents = self.parallel_bound(item);
        let names: Vec<Option<&ast::Ident>> = match &item.binder {
            ast::ParallelBinder::Anonymous => vec![None; extents.len().max(1)],
            ast::ParallelBinder::Name(id) => vec![Some(id)],
            ast::ParallelBinder::Tuple { components, .. } => components.iter().map(Some).collect(),
        };
        if !matches!(item.binder, ast::ParallelBinder::Anonymous) && names.len() != extents.len() {
            let more = if names.len() > extents.len() { "more" } else { "less" };
            self.error_label(
                "E0603",
                item.span,
                format!(
                    "parallel variables are {more} than their bounds ({} vs. {}).",
                    names.len(),
                    extents.len()
                ),
                "names and bounds differ",
            );
        }
        extents.resize(names.len(), Dim::Const(1));
        if names.len() > 3 {
            self.error_label(
                "E0604",
                item.span,
                "The number of parallel dimensions is limited to 3",
                format!("{} dimensions", names.len()),
            );
        }
        for (i, d) in extents.clone().iter().enumerate() {
            if d.as_const().is_none() {
                let e = dim_to_expr(d, item.bound.span);
                self.positive_check(
                    e,
                    format!("The {} bound item of parallelby is invalid", ordinal(i + 1)),
                    item.bound.span,
                );
            }
        }
        let mut vars = Vec::new();
        for (sub, (name, upper)) in names.iter().zip(extents.iter()).enumerate() {
            match name {
                None => vars.push(None),
                Some(id) => {
                    let v = self.new_local(
                        &id.name,
                        id.span,
                        Ty::BoundedInt,
                        LocalPlace::ParallelIndex,
                        false,
                        LocalOrigin::ParallelIndex { level, sub: sub as u32, upper: upper.clone() },
                    );
                    self.declare_symbol(id, super::scope::Symbol::Local(v));
                    vars.push(Some(v));
                }
            }
        }
        let tuple = match &item.binder {
            ast::ParallelBinder::Tuple { name: Some(n), .. } => {
                let components: Vec<_> = vars.iter().flatten().copied().collect();
                let t = self.new_local(
                    &n.name,
                    n.span,
                    Ty::BoundedItuple(components.len() as u32),
                    LocalPlace::Expanded,
                    false,
                    LocalOrigin::Tuple { components },
                );
                self.declare_symbol(n, super::scope::Symbol::Local(t));
                Some(t)
            }
            _ => None,
        };
        Binder { vars, tuple, extents, implicit: false }
    }

    /// The extents of a parallel bound: an integer, an mdspan, or a bracketed list.
    fn parallel_bound(&mut self, item: &ast::ParallelItem) -> Vec<Dim> {
        let bracketed = matches!(item.bound.kind, ExprKind::Mdspan(_));
        let parts: Vec<(Val, Span)> = match &item.bound.kind {
            ExprKind::Mdspan(list) => list.iter().map(|e| (self.check_expr(e), e.span)).collect(),
            _ => vec![(self.check_expr(&item.bound), item.bound.span)],
        };
        let mut out = Vec::new();
        for (v, span) in parts {
            match v {
                Val::Scalar(e) => out.push(self.bound_extent(e, span)),
                Val::Shape(d) => out.extend(d),
                Val::Tuple { items, .. } if bracketed => {
                    for e in items {
                        out.push(self.bound_extent(e, span));
                    }
                }
                Val::Tuple { .. } => {
                    self.error_label(
                        "E0614",
                        span,
                        "must use mdspan instead of ituple to define the parallel bound.",
                        "an ituple",
                    );
                    out.push(Dim::Const(1));
                }
                Val::Error => out.push(Dim::Const(1)),
                other => {
                    self.error_label(
                        "E0601",
                        span,
                        format!(
                            "the parallel bound requires integers but got '{}'",
                            other.describe()
                        ),
                        "not an integer",
                    );
                    out.push(Dim::Const(1));
                }
            }
        }
        out
    }

    fn bound_extent(&mut self, e: HExpr, span: Span) -> Dim {
        if matches!(e.ty, Ty::Error) {
            return Dim::Const(1);
        }
        if !e.ty.is_integer() {
            self.error_label(
                "E0601",
                span,
                format!("the parallel bound requires integers but got '{}'", types::ty_name(&e.ty)),
                "not an integer",
            );
            return Dim::Const(1);
        }
        if let Some(v) = fold::const_int(&e) {
            if v <= 0 {
                self.error_label(
                    "E0602",
                    span,
                    format!("bound {v} in parallelby is invalid: should be greater than 0."),
                    "not positive",
                );
                return Dim::Const(1);
            }
        }
        if !self.host_computable(&e) {
            self.error_label(
                "E0616",
                span,
                "the parallel bound must be computable on the host before the launch (it depends \
                 on a per-thread value)",
                "per-thread value",
            );
            return Dim::Const(1);
        }
        let mut e = e;
        if e.ty.is_bounded() {
            e.ty = Ty::Scalar(ElemTy::S32);
        }
        expr_to_dim(e)
    }
}
