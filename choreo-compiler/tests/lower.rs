//! Lowering decisions, read from the plan that every backend renders: what follows a launch,
//! the stream roles of a call, where data lives and moves, the thread nest of a kernel, the
//! symbols and the `extern "C"` entry. (The generated text is pinned by the codegen snapshots;
//! these tests pin the decisions themselves.)

use choreo_compiler::compile::{Arch, CompileOptions, Target, compile};
use choreo_compiler::diagnostics::render_human;
use choreo_compiler::hir::{Dim, ElemTy, Level, ParamId, VarId};
use choreo_compiler::lower::{
    self, AbiParam, AfterLaunch, FunctionPlan, InstanceSync, Plan, StreamRef,
};
use choreo_compiler::source::SourceDb;

/// The plan of an accepted program (panics with the diagnostics otherwise).
fn plan_for(src: &str, target: Target) -> Plan {
    let mut db = SourceDb::new();
    let file = db.add("t.co", src.to_string());
    let out = compile(&db, file, &CompileOptions { target, ..CompileOptions::default() });
    assert!(!out.has_errors(), "rejected:\n{}", render_human(&db, &out.diagnostics));
    out.plan.expect("a plan")
}

/// The plan of the only function of an accepted program, for the default target.
fn function(src: &str) -> FunctionPlan {
    let mut plan = plan_for(src, Target::default());
    assert_eq!(plan.functions.len(), 1);
    plan.functions.remove(0)
}

const P: fn(u32) -> ParamId = ParamId;

#[test]
fn synchronous_launches_wait_for_their_stream_or_the_device() {
    let f = function(
        "__co__ void f(global f32 [8] a, stream s) {\n  parallel p by 8 : block { a.at(p) = 1.0f; }\n  parallel<s> q by 8 : block { a.at(q) = 2.0f; }\n}\n",
    );
    assert_eq!(f.kernels[0].after, AfterLaunch::DeviceSync);
    assert_eq!(f.kernels[1].after, AfterLaunch::StreamSync(StreamRef::Param(P(1))));
    assert!(!f.leaves_async_work);
}

#[test]
fn asynchronous_launches_are_tracked_unless_a_ref_parameter_must_be_copied_back() {
    let f = function(
        "__co__ void f(global f32 [8] a, stream s) {\n  parallel.async<s> p by 8 : block { a.at(p) = 1.0f; }\n  parallel.async q by 8 : block { a.at(q) = 2.0f; }\n}\n",
    );
    assert_eq!(f.kernels[0].after, AfterLaunch::Track);
    assert_eq!(f.kernels[0].stream, StreamRef::Param(P(1)));
    assert_eq!(f.kernels[1].after, AfterLaunch::Track);
    assert_eq!(f.kernels[1].stream, StreamRef::Default);
    assert!(f.leaves_async_work);

    let f =
        function("__co__ void f(f32 [8] &a) {\n  parallel.async p by 8 { a.at(p) = 1.0f; }\n}\n");
    assert_eq!(f.kernels[0].after, AfterLaunch::StreamSync(StreamRef::Default));
    assert!(!f.leaves_async_work);
}

#[test]
fn stream_roles_of_a_call() {
    // The first stream parameter is the result stream even when no launch uses it; the work
    // streams are the launch streams plus the result stream for a spanned return.
    let f = function(
        "__co__ f32 [8] f(stream s0, stream s1, f32 [8] x) {\n  f32 [8] o;\n  parallel.async<s1> p by 8 : block { o.at(p) = x.at(p); }\n  parallel.async q by 1 : block { o.at(0) = 0.0f; }\n  return o;\n}\n",
    );
    assert_eq!(f.streams.result, StreamRef::Param(P(0)));
    assert_eq!(f.streams.launches, [StreamRef::Param(P(1)), StreamRef::Default]);
    assert_eq!(
        f.streams.work,
        [StreamRef::Param(P(1)), StreamRef::Default, StreamRef::Param(P(0))]
    );
    // Without launches, the call's work (the copies) runs on the result stream.
    let f = function("__co__ int count(f32 [M, N] a, int extra) {\n  return M * N + extra;\n}\n");
    assert_eq!(f.streams.launches, []);
    assert_eq!(f.streams.work, [StreamRef::Default]);
}

#[test]
fn only_used_host_data_moves_and_only_written_ref_data_comes_back() {
    let f = function(
        "__co__ void f(f32 [8] &unused, f32 [8] &read, f32 [8] &written, f32 [8] src) {\n  parallel p by 8 { written.at(p) = read.at(p) + src.at(p); }\n}\n",
    );
    assert_eq!(f.memory.uploads, [P(1), P(2), P(3)]);
    assert_eq!(f.memory.copy_back, [P(2)]);
    assert!(f.memory.device_data);
    let data: Vec<(ParamId, bool, bool)> = f
        .entry
        .params
        .iter()
        .filter_map(|p| match *p {
            AbiParam::Data { param, writable, used, .. } => Some((param, writable, used)),
            _ => None,
        })
        .collect();
    assert_eq!(
        data,
        [(P(0), false, false), (P(1), false, true), (P(2), true, true), (P(3), false, true)]
    );
}

#[test]
fn buffers_and_returned_parameters() {
    let f = function(
        "__co__ auto f(s32 [32] a, int mode) {\n  s32 [32] even;\n  parallel p by 32 { even.at(p) = a.at(p) * 2; }\n  if (mode == 0) { return a; }\n  return even;\n}\n",
    );
    assert_eq!(f.memory.returned_params, [P(0)]);
    assert_eq!(f.memory.buffers.len(), 1);
    // A function without kernels that returns nothing from the device keeps host data on the
    // host in its C++ wrapper.
    let f = function("__co__ int count(f32 [M, N] a, int extra) {\n  return M * N + extra;\n}\n");
    assert!(!f.memory.device_data);
}

#[test]
fn the_entry_lists_c_parameters_in_abi_order() {
    let f = function(
        "__co__ f16 g(f32 [N, 4] x, f16 k, stream s) {\n  parallel p by N : block { x.at(p, 0) = 0.0f; }\n  return k;\n}\n",
    );
    // The entry is mangled with the file (`t.co`) and the function.
    assert_eq!(f.entry.symbol, "__choreo_rs_1t1g");
    assert_eq!(
        f.entry.params,
        [
            AbiParam::Data { param: P(0), elem: ElemTy::F32, writable: true, used: true },
            AbiParam::Extent { param: P(0), dim: 0 },
            AbiParam::Extent { param: P(0), dim: 1 },
            AbiParam::Scalar { param: P(1), ty: ElemTy::F16 },
            AbiParam::Stream { param: P(2) },
            AbiParam::ResultScalar { ty: ElemTy::F16 },
            AbiParam::Message,
            AbiParam::MessageCapacity,
        ]
    );
    assert!(AbiParam::as_bits(ElemTy::F16) && !AbiParam::as_bits(ElemTy::F32));
    assert_eq!(f.entry.result_shape, None);
}

#[test]
fn returned_shapes_are_resolved_to_values_known_at_the_call() {
    // `n` is an immutable local: the caller evaluates its initial value instead.
    let f = function(
        "__co__ auto f(f32 [N] x, int extra) {\n  n = N + extra;\n  f32 [n] o;\n  parallel p by N : block { o.at(p) = x.at(p); }\n  return o;\n}\n",
    );
    let shape = f.entry.result_shape.expect("a spanned return").expect("resolvable");
    let [Dim::Expr(e)] = shape.as_slice() else { panic!("one derived extent: {shape:?}") };
    let text = format!("{e:?}");
    assert!(!text.contains("Var("), "a host local is left in {text}");
    assert!(text.contains("SymDim") && text.contains("Param("), "{text}");
}

#[test]
fn symbols_number_the_kernels_of_a_function_with_several() {
    let f = function(
        "__co__ void f(global f32 [8] a) {\n  parallel p by 8 { a.at(p) = 1.0f; }\n  parallel q by 8 { a.at(q) = 2.0f; }\n}\n",
    );
    assert_eq!(f.symbols.kernels, ["__choreo_device_f0", "__choreo_device_f1"]);
    assert_eq!(
        (f.symbols.wrapper.as_str(), f.symbols.check.as_str(), f.symbols.core.as_str()),
        ("f", "__choreo_check_f", "__choreo_core_f")
    );
    let f =
        function("__co__ void g(global f32 [8] a) {\n  parallel p by 8 { a.at(p) = 1.0f; }\n}\n");
    assert_eq!(f.symbols.kernels, ["__choreo_device_g"]);
}

#[test]
fn the_thread_nest_is_structured_levels() {
    // block 2 > group 4 > thread 32: a group instance is a warp, a thread instance one thread.
    let f = function(
        "__co__ void f(f32 [2, 4, 32] a) {\n  parallel x by 2, y by 4, z by 32 { a.at(x, y, z) = 1.0f; }\n}\n",
    );
    let k = &f.kernels[0];
    assert_eq!(k.threads_per_block, Dim::Const(128));
    let levels: Vec<(Level, Option<u64>, bool)> = k
        .levels
        .iter()
        .map(|l| (l.level, l.threads_per_instance.as_const(), l.fills_block))
        .collect();
    // A thread of a warp: 32 instances of one thread do not make the block (`% 32` needed).
    assert_eq!(levels, [(Level::Group, Some(32), true), (Level::Thread, Some(1), false)]);

    // Siblings of fewer threads than the block do not fill it.
    let f = function(
        "__co__ void f(f32 [2, 32] a) {\n  parallel p by 2 : block {\n    parallel {x, y} by [4, 8] : thread { a.at(p, x * 8 + y) = 1.0f; }\n    parallel t by 32 : thread { a.at(p, t) = 2.0f; }\n  }\n}\n",
    );
    assert_eq!(f.kernels[0].levels.len(), 2);
    assert!(f.kernels[0].levels.iter().all(|l| l.fills_block));
}

#[test]
fn captures_are_what_the_kernel_body_uses() {
    let f = function(
        "__co__ void f(global f32 [N] a, f32 k, int unused) {\n  m = 2;\n  parallel p by N { a.at(p) = k * m; }\n}\n",
    );
    use choreo_compiler::hir::Capture;
    let captures = &f.kernels[0].captures;
    assert!(captures.contains(&Capture::Param(P(0))) && captures.contains(&Capture::Param(P(1))));
    assert!(!captures.contains(&Capture::Param(P(2))));
    // `m` folds to its literal (spec §8.6), so it is not captured; the extent of `a` is.
    assert!(!captures.iter().any(|c| matches!(c, Capture::Var(VarId(_)))), "{captures:?}");
    assert!(captures.iter().any(|c| matches!(c, Capture::Sym(_))));
}

#[test]
fn the_plan_records_its_target() {
    let arch: Arch = "sm_80".parse().expect("known arch");
    let plan = plan_for(
        "__co__ void f(global f32 [8] a) {\n  parallel p by 8 { a.at(p) = 1.0f; }\n}\n",
        Target::Cuda(arch),
    );
    assert_eq!(plan.target, Target::Cuda(arch));
}

#[test]
fn the_cpu_target_gives_cpp_with_distinct_symbols() {
    let mut db = SourceDb::new();
    let file = db.add(
        "t.co",
        "__co__ void f(global f32 [8] a) {\n  parallel p by 8 { a.at(p) = 1.0f; }\n}\n".to_string(),
    );
    let out =
        compile(&db, file, &CompileOptions { target: Target::Cpu, ..CompileOptions::default() });
    assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics);
    let cpp = out.cpp.expect("the CPU target emits C++");
    assert!(out.cu.is_none());
    assert!(cpp.starts_with("// Generated by choreoc"), "{cpp}");
    assert!(cpp.contains("#define __CHOREO_CPU__ 1"), "{cpp}");
    // The CPU and CUDA builds of one file link into one program: their entries differ.
    let plan = out.plan.expect("a plan");
    assert_eq!(plan.functions[0].symbols.entry, "__choreo_cpu_rs_1t1f");
    // The one symbol the CPU object exports (choreo-build compiles it `-fvisibility=hidden`).
    assert!(
        cpp.contains(
            "extern \"C\" __attribute__((visibility(\"default\"))) int __choreo_cpu_rs_1t1f("
        ),
        "{cpp}"
    );
}

#[test]
fn inline_assembly_is_rejected_on_the_cpu_target() {
    let mut db = SourceDb::new();
    let file = db.add(
        "t.co",
        "__co__ void f(global s32 [8] a) {\n  parallel p by 8 {\n    asm volatile(\"add.s32 %0, %0, 1;\" : \"+r\"(a.at(p)));\n  }\n}\n"
            .to_string(),
    );
    let out =
        compile(&db, file, &CompileOptions { target: Target::Cpu, ..CompileOptions::default() });
    assert!(out.cpp.is_none());
    let d = out.diagnostics.iter().find(|d| d.code == "E0806").expect("E0806");
    assert_eq!(d.message, "inline assembly is not supported on the CPU target");
    // The CUDA target accepts it.
    let cuda = compile(&db, file, &CompileOptions::default());
    assert!(cuda.cu.is_some(), "{:?}", cuda.diagnostics);
}

// -- bounds of element accesses -------------------------------------------------------------

/// Per access (in source order), per dimension: `(below, above)` — which sides of
/// `0 <= index < extent` are checked at run time.
fn checks(src: &str) -> Vec<Vec<(bool, bool)>> {
    function(src)
        .accesses
        .iter()
        .map(|a| a.checks.iter().map(|c| (c.below, c.above)).collect())
        .collect()
}

#[test]
fn parallel_indices_within_their_extent_are_proven() {
    let src = "__co__ void f(global f32 [N] x, global f32 [N, 64] y) {\n  parallel p by N : block, t by 64 : thread { y.at(p, t) = x.at(p); }\n}\n";
    assert_eq!(checks(src), [vec![(false, false)], vec![(false, false), (false, false)]]);
    assert!(!function(src).guards);
}

#[test]
fn a_guard_in_the_kernel_proves_the_access_it_encloses() {
    // The tiling idiom: more threads than elements, each one guarded by `i < N`.
    let src = "__co__ void f(global f32 [N] x) {\n  parallel p by cdiv(N, 256) : block, t by 256 : thread {\n    i = p * 256 + t;\n    if (i < N) x.at(i) = 0.0f;\n  }\n}\n";
    assert_eq!(checks(src), [vec![(false, false)]]);
    // Without the guard, the last block overshoots: checked at run time (above only).
    let src = "__co__ void f(global f32 [N] x) {\n  parallel p by cdiv(N, 256) : block, t by 256 : thread {\n    x.at(p * 256 + t) = 0.0f;\n  }\n}\n";
    assert_eq!(checks(src), [vec![(false, true)]]);
}

#[test]
fn divisions_and_remainders_of_indices_have_ranges() {
    let src = "__co__ void f(global f32 [16, 4] x) {\n  parallel t by 64 : thread { x.at(t % 16, t / 16) = 1.0f; }\n}\n";
    assert_eq!(checks(src), [vec![(false, false), (false, false)]]);
}

#[test]
fn a_remainder_by_a_positive_extent_is_below_it() {
    // `N > 0` is checked at entry (a parallel bound): `k % N` is in `[0, N)` for `k >= 0`; a
    // signed value that may be negative proves nothing.
    let src = "__co__ void f(global f32 [N] x, int s) {\n  parallel p by N : block, t by 64 : thread {\n    x.at((p * 64 + t) % N) = 1.0f;\n    x.at((t - s) % N) = 2.0f;\n  }\n}\n";
    assert_eq!(checks(src), [vec![(false, false)], vec![(true, true)]]);
}

#[test]
fn a_remainder_of_a_non_negative_product_is_below_its_divisor() {
    // A ring slot `(it * (K / 64) + k) % 4`: not linear, but a sum of products of values that
    // are never negative (loop indices from 0, a symbolic dimension divided by a positive
    // constant). A difference that may be negative proves nothing.
    let src = "__co__ void f(global f32 [4, 64] x, global f32 [K] y) {\n  parallel p by 1 : block, t by 64 : thread {\n    foreach {it} in [cdiv(K, 8)] {\n      foreach {k} in [K / 64] {\n        x.at((it * (K / 64) + k) % 4, t) = 1.0f;\n        x.at((it * (K / 64) - k) % 4, t) = 2.0f;\n      }\n    }\n  }\n}\n";
    assert_eq!(
        checks(src),
        [vec![(false, false), (false, false)], vec![(true, true), (false, false)]]
    );
    // Through named locals: a host local `KT = K / 64` and a device local `stage`.
    let src = "__co__ void f(global f32 [4, 64] x, global f32 [K] y) {\n  KT = K / 64;\n  parallel p by 1 : block, t by 64 : thread {\n    foreach {it} in [3] {\n      foreach {k} in [KT] {\n        stage = it * KT + k;\n        x.at(stage % 4, t) = 1.0f;\n      }\n    }\n  }\n}\n";
    assert_eq!(checks(src), [vec![(false, false), (false, false)]]);
}

#[test]
fn a_grid_of_whole_tiles_ends_inside_the_extent() {
    // `p` in `[0, M / 128)`: `128 * p + 127 <= 128 * (M / 128) - 1 <= M - 1` (floor division
    // of a non-negative M), so the tile's rows are in bounds without knowing M, and the k-loop
    // to `K / 32 - 1` keeps `(k + 1) * 32 + 31` below K. Rows shifted by 64 on the same grid may
    // overshoot (checked above), as may column 0 of an empty K (checked above).
    let src = "__co__ void f(global f32 [M, K] x) {\n  parallel p by M / 128 : block, t by 128 : thread {\n    foreach {k} in [K / 32 - 1] {\n      x.at(p * 128 + t, (k + 1) * 32 + t % 32) = 1.0f;\n      x.at(p * 128 + t + 64, 0) = 2.0f;\n    }\n  }\n}\n";
    assert_eq!(
        checks(src),
        [vec![(false, false), (false, false)], vec![(false, true), (false, true)]]
    );
}

#[test]
fn a_host_remainder_of_a_non_negative_value_is_in_range() {
    // `(K / 32 + 1) % 2` is in `[0, 2)` (an extent is never negative), the slot of the last
    // step of a two-slot pipeline; `(K / 32 - 1) % 2` is -1 when K < 32, an opaque host
    // value whose both ends stay checked.
    let src = "__co__ void f(global f32 [K] x) {\n  parallel p by 1 : block {\n    shared f32 [2, 32] s;\n    parallel t by 32 : thread {\n      s.at((K / 32 + 1) % 2, t) = 1.0f;\n      s.at((K / 32 - 1) % 2, t) = 2.0f;\n    }\n  }\n}\n";
    assert_eq!(
        checks(src),
        [vec![(false, false), (false, false)], vec![(true, true), (false, false)]]
    );
}

#[test]
fn a_fact_proves_a_multiple_of_itself() {
    // `w > 0` gives `w - 1 >= 0`, so `128 * (w - 1) >= 0`: the warpgroups of a consumer role
    // (`w < 2` likewise bounds `(w + 1) * 128` from above); `w >= 0` does not help.
    let src = "__co__ void f(global f32 [B, 256] y) {\n  parallel p by B : block {\n    parallel w by 3 : group-4, t by 128 : thread {\n      inthreads.async (w > 0) { y.at(p, (w - 1) * 128 + t) = 1.0f; }\n      inthreads.async (w < 2) { y.at(p, (w + 1) * 128 - t - 1) = 2.0f; }\n      inthreads.async (w >= 0) { y.at(p, (w - 1) * 128 + t) = 3.0f; }\n    }\n  }\n}\n";
    assert_eq!(
        checks(src),
        [
            vec![(false, false), (false, false)],
            vec![(false, false), (false, false)],
            vec![(false, false), (true, false)],
        ]
    );
}

#[test]
fn event_orders_proven_non_negative_are_recorded() {
    // A ring order from loop indices is never negative; one that subtracts may be, and a fixed
    // slot index is recorded only when it is inside the event's slots.
    let src = "__co__ void f(global f32 [8] x, int s) {\n  parallel p by 1 : block {\n    shared event e[4];\n    shared event g[2];\n    parallel t by 64 : thread {\n      foreach {k} in [8] {\n        trigger e.at(k * 3 + 1);\n        wait e.at(k * 3 + 1);\n        trigger e.at(k - s);\n        wait e.at(k - s);\n        trigger g[t / 32];\n        wait g[t / 32];\n        trigger g[t / 16];\n        wait g[t / 16];\n      }\n    }\n  }\n}\n";
    let f = function(src);
    let text = src;
    let proven: Vec<&str> =
        f.proven_slots.iter().map(|s| &text[s.start as usize..s.end as usize]).collect();
    assert_eq!(proven, ["e.at(k * 3 + 1)", "e.at(k * 3 + 1)", "g[t / 32]", "g[t / 32]"]);
}

#[test]
fn a_chosen_index_is_proven_arm_by_arm() {
    let src = "__co__ void f(global f32 [4] x) {\n  parallel t by 64 : thread { x.at(t < 4 ? t : 3) = 1.0f; x.at(t < 8 ? t : 0) = 2.0f; }\n}\n";
    assert_eq!(checks(src), [vec![(false, false)], vec![(false, true)]]);
}

#[test]
fn an_extent_of_another_buffer_proves_nothing() {
    // `i < |x|` says nothing about `y`, which may be shorter.
    let src = "__co__ void f(global f32 [?] x, global f32 [?] y) {\n  parallel p by cdiv(x.span(0), 64) : block, t by 64 : thread {\n    i = p * 64 + t;\n    if (i < x.span(0)) y.at(i) = x.at(i);\n  }\n}\n";
    assert_eq!(checks(src), [vec![(false, false)], vec![(false, true)]]);
    let f = function(src);
    assert!(f.guards && !f.unchecked);
    assert!(f.kernels[0].guards);
    assert_eq!(f.entry.params.iter().filter(|p| **p == AbiParam::BoundsRecord).count(), 1);
}

#[test]
fn checks_the_host_can_prove_before_the_launch_are_skipped_there() {
    // `y.at(i)` under `i < |x|` is in bounds exactly when `|y| >= |x|`: the host decides that
    // before the launch and launches the kernel's instance without the check when it holds.
    // `y.at(i + 1)` needs `|y| - |x| - 1 >= 0`; a gather through data (`y.at(x.at(i))`) has no
    // such condition and is always checked.
    let src = "__co__ void f(global s32 [?] x, global s32 [?] y) {\n  parallel p by cdiv(x.span(0), 64) : block, t by 64 : thread {\n    i = p * 64 + t;\n    if (i < x.span(0)) { y.at(i) = 1; y.at(i + 1) = 2; y.at(x.at(i)) = 3; }\n  }\n}\n";
    let f = function(src);
    let text = |b: &lower::bounds::HostBound| {
        let terms: Vec<String> = b.terms.iter().map(|(a, k)| format!("{k}*{a:?}")).collect();
        format!("{} + {} >= 0", terms.join(" + "), b.constant)
    };
    let proofs: Vec<Option<Vec<Vec<String>>>> = f
        .accesses
        .iter()
        .map(|a| {
            a.host_proof.as_ref().map(|p| p.iter().map(|s| s.iter().map(text).collect()).collect())
        })
        .collect();
    let (x, y) = ("Extent(ParamId(0), 0)", "Extent(ParamId(1), 0)");
    assert_eq!(
        proofs,
        [
            Some(vec![vec![format!("-1*{x} + 1*{y} + 0 >= 0")]]), // y.at(i)
            Some(vec![vec![format!("-1*{x} + 1*{y} + -1 >= 0")]]), // y.at(i + 1)
            None, // x.at(i) inside the gather: proven, nothing to check
            None, // y.at(x.at(i)): an index from data, checked in the kernel
        ]
    );
    assert_eq!(f.kernels[0].host_proof.len(), 2);
    // The gather's check is made in every launch, so every launch may write the record.
    assert!(f.kernels[0].always_checked);
}

#[test]
fn a_kernel_whose_checks_the_host_may_all_decide_is_not_always_checked() {
    let src = "__co__ void f(global s32 [?] x, global s32 [?] y) {\n  parallel p by cdiv(x.span(0), 64) : block, t by 64 : thread {\n    i = p * 64 + t;\n    if (i < x.span(0)) y.at(i) = 1;\n  }\n}\n";
    let f = function(src);
    assert!(f.kernels[0].guards);
    assert_eq!(f.kernels[0].host_proof.len(), 1);
    assert!(!f.kernels[0].always_checked);
}

#[test]
fn checked_positive_bounds_are_facts() {
    // `N > 0` is checked at entry (a parallel bound), so `N - 1 >= 0` holds in the kernel.
    let src = "__co__ void f(global f32 [N] x, global f32 [M] y) {\n  parallel p by N : block { x.at(N - 1) = 0.0f; y.at(M - 1) = 0.0f; }\n}\n";
    assert_eq!(checks(src), [vec![(false, false)], vec![(true, false)]]);
}

#[test]
fn host_loop_indices_bound_the_kernels_they_launch() {
    let src = "__co__ void f(global f32 [4, 32] a) {\n  foreach {r} in [4] {\n    parallel t by 32 { a.at(r, t) = 0.0f; }\n  }\n}\n";
    assert_eq!(checks(src), [vec![(false, false), (false, false)]]);
}

#[test]
fn an_index_out_of_bounds_in_every_launch_is_an_error() {
    let mut db = SourceDb::new();
    let src =
        "__co__ void zero8(global f32 [8] x) { parallel p by 16 : block { x.at(p) = 0.0f; } }\n";
    let file = db.add("zero8.co", src.to_string());
    let out = compile(&db, file, &CompileOptions::default());
    let text = render_human(&db, &out.diagnostics);
    assert!(out.cu.is_none(), "{text}");
    assert!(text.contains("error[E0712]: index out of bounds: the index of dimension 0 of 'x' takes the values 0 to 15, but the extent is 8"), "{text}");
    assert!(text.contains("zero8.co:1:71"), "{text}");
    // Guarded, or with a run-time extent, it is not an error.
    for ok in [
        "__co__ void zero8(global f32 [8] x) { parallel p by 16 : block { if (p < 8) x.at(p) = 0.0f; } }\n",
        "__co__ void zeron(global f32 [N] x) { parallel p by 16 : block { x.at(p) = 0.0f; } }\n",
    ] {
        let file = db.add("ok.co", ok.to_string());
        let out = compile(&db, file, &CompileOptions::default());
        assert!(!out.has_errors(), "{}", render_human(&db, &out.diagnostics));
    }
}

#[test]
fn without_bounds_checks_an_unproven_access_makes_the_wrapper_unsafe() {
    let src =
        "__co__ void zeron(global f32 [N] x) { parallel p by 16 : block { x.at(p) = 0.0f; } }\n";
    let mut db = SourceDb::new();
    let file = db.add("zeron.co", src.to_string());
    let checked = compile(&db, file, &CompileOptions::default());
    let unchecked =
        compile(&db, file, &CompileOptions { bounds_checks: false, ..CompileOptions::default() });
    let (checked_rs, unchecked_rs) = (checked.rs.expect("rs"), unchecked.rs.expect("rs"));
    assert!(checked_rs.contains("pub fn zeron("), "{checked_rs}");
    assert!(checked_rs.contains("Error::OutOfBounds"), "{checked_rs}");
    assert!(unchecked_rs.contains("pub unsafe fn zeron("), "{unchecked_rs}");
    assert!(unchecked_rs.contains("# Safety"), "{unchecked_rs}");
    let (checked_cu, unchecked_cu) = (checked.cu.expect("cu"), unchecked.cu.expect("cu"));
    assert!(checked_cu.contains("::__choreo_in_bounds32(__choreo_bounds, 0u, 0u"), "guarded write");
    assert!(!unchecked_cu.contains("(__choreo_bounds, "), "no guard");
}

// -- shared and local memory ----------------------------------------------------------------

/// The codes of the errors of a program compiled for `target`.
fn error_codes(src: &str, target: Target) -> (Vec<&'static str>, String) {
    let mut db = SourceDb::new();
    let file = db.add("t.co", src.to_string());
    let out = compile(&db, file, &CompileOptions { target, ..CompileOptions::default() });
    let codes = out.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.code).collect();
    (codes, render_human(&db, &out.diagnostics))
}

#[test]
fn shared_buffers_are_laid_out_in_one_aligned_pool() {
    let f = function(
        "__co__ void f(f32 [4, 32] a) {\n  parallel p by 4 : block {\n    shared f32 [32] s;\n    shared s32 n;\n    shared f16 [3] h;\n    parallel t by 32 : thread { s.at(t) = a.at(p, t); }\n  }\n}\n",
    );
    let pool = &f.kernels[0].shared;
    let offsets: Vec<Option<u64>> = pool.slots.iter().map(|s| s.offset.as_const()).collect();
    // 128-byte alignment on sm_90a: 32 floats (128 bytes), then 4 bytes rounded up, then 6.
    assert_eq!(offsets, [Some(0), Some(128), Some(256)]);
    assert_eq!(pool.bytes, Dim::Const(384));
    assert!(!pool.opt_in, "under the 48 KiB static limit");
    let sm80 = plan_for(
        "__co__ void f(f32 [4] a) {\n  parallel p by 4 : block {\n    shared s32 n;\n    shared f32 [4] s;\n    parallel t by 4 : thread { s.at(t) = a.at(t); }\n  }\n}\n",
        Target::Cuda("sm_80".parse::<Arch>().expect("arch")),
    );
    let pool = &sm80.functions[0].kernels[0].shared;
    assert_eq!(pool.slots[1].offset, Dim::Const(16), "16-byte alignment below sm_90");
}

#[test]
fn shared_memory_beyond_the_static_limit_opts_in_and_beyond_the_target_is_an_error() {
    let big = "__co__ void f(f32 [64] a) {\n  parallel p by 1 : block {\n    shared f32 [16384] s;\n    parallel t by 64 : thread { s.at(t) = a.at(t); }\n  }\n}\n";
    assert!(function(big).kernels[0].shared.opt_in, "64 KiB needs the opt-in");
    let too_big = big.replace("16384", "65536");
    let (codes, text) = error_codes(&too_big, Target::default());
    assert_eq!(codes, ["E0808"], "{text}");
    assert!(text.contains("262144 bytes of shared memory"), "{text}");
    assert!(text.contains("at most 232448 bytes"), "{text}");
    // What fits an H200 does not fit an sm_86 GPU.
    let (codes, text) =
        error_codes(&big.replace("16384", "32768"), Target::Cuda("sm_86".parse().expect("arch")));
    assert_eq!(codes, ["E0808"], "{text}");
}

#[test]
fn local_buffers_are_checked_against_the_per_thread_limit() {
    let src = "__co__ void f(f32 [64] a) {\n  parallel p by 1 : block, t by 64 : thread {\n    local f32 [256] x;\n    local f32 [512] y;\n    x.at(0) = a.at(t);\n    y.at(0) = x.at(0);\n    a.at(t) = y.at(0);\n  }\n}\n";
    let (codes, text) = error_codes(src, Target::default());
    assert_eq!(codes, ["E0809"], "{text}");
    assert!(text.contains("Used: 3072 bytes, Limit: 2048 bytes"), "{text}");
    let (codes, text) = error_codes(&src.replace("512", "128"), Target::default());
    assert!(codes.is_empty(), "{text}");
}

#[test]
fn accesses_through_views_are_proven_against_the_buffer_underneath() {
    // Tiles of a [64, 48] buffer: every coordinate is in range for every block and thread.
    let tiles = "__co__ void f(f32 [64, 48] a, f32 [64, 48] &o) {\n  parallel p by 4 : block {\n    t0 = a.chunkat(p, _);\n    t1 = a.subspan(16, 8).step(16, 4).at(p, 2);\n    parallel t by 48 : thread { o.at(p, t) = t0.at(15, t) + t1.at(0, t % 8); }\n  }\n}\n";
    assert!(checks(tiles).iter().flatten().all(|c| *c == (false, false)), "{:?}", checks(tiles));
    // A flat view (explicit strides) is checked against the element count: against a
    // run-time count at run time, and reaching past a constant one in every launch is an
    // error (offset 3p + 3t of 24 elements, p < 2, t < 8: up to 24).
    let flat = "__co__ void f(s32 [N] a, s32 [N] &o) {\n  parallel p by 2 : block {\n    every = a.view(8 : 3).from(p);\n    parallel t by 8 : thread { o.at(0) = every.at(t); }\n  }\n}\n";
    let f = function(flat);
    let every = f.accesses.iter().find(|a| a.flat).expect("a flat access");
    assert_eq!(every.checks, [lower::DimCheck { below: false, above: true }]);
    let (codes, text) = error_codes(&flat.replace("[N]", "[24]"), Target::default());
    assert_eq!(codes, ["E0712"], "{text}");
    assert!(text.contains("the element offset in 'a' (through a reshaping view) takes the values 0 to 24, but 'a' has 24 elements"), "{text}");
}

// -- asynchronous copies ----------------------------------------------------------------------

#[test]
fn every_asynchronous_copy_is_waited_on_every_path() {
    let pipeline = "__co__ void f(f32 [8, 1024] a, f32 [8, 1024] &o) {\n  parallel p by 8 : block {\n    f0 = dma.copy.async a.subspan(1, 128).at(p, 0) => shared;\n    f1 = dma.any;\n    foreach {k} in [7] {\n      f1 = dma.copy.async a.subspan(1, 128).at(p, k + 1) => shared;\n      wait f0;\n      parallel t by 128 : thread { o.at(p, k * 128 + t) = f0.data.at(0, t); }\n      sync.barrier : block;\n      swap(f0, f1);\n    }\n    wait f0;\n    parallel t by 128 : thread { o.at(p, 896 + t) = f0.data.at(0, t); }\n  }\n}\n";
    let f = function(pipeline);
    assert!(f.kernels[0].async_copies);
    // Without the last wait, the copy swapped into f0 in the last iteration is never waited.
    let (codes, text) = error_codes(
        &pipeline.replace("    wait f0;\n    parallel", "    parallel"),
        Target::default(),
    );
    assert_eq!(codes, ["E0453"], "{text}");
    assert!(text.contains("some asyncs are not explicitly waited: 'f0'"), "{text}");
    // Without the wait in the loop, f1 is issued again while its copy may be in flight.
    let (codes, text) = error_codes(&pipeline.replace("      wait f0;\n", ""), Target::default());
    assert!(codes.contains(&"E0453"), "{text}");
    assert!(text.contains("the asynchronous DMA of 'f1' is issued again"), "{text}");
    // A wait in one branch only leaves the copy pending on the other path.
    let branch = "__co__ void f(f32 [64] a, f32 [64] &o, int n) {\n  parallel p by 1 : block {\n    f = dma.copy.async a => shared;\n    if (n > 0) { wait f; }\n    parallel t by 64 : thread { o.at(t) = 1.0f; }\n  }\n}\n";
    let (codes, text) = error_codes(branch, Target::default());
    assert_eq!(codes, ["E0453"], "{text}");
}

/// The wide-copy decision of every DMA of the program, in source order.
fn dma_vectors(src: &str) -> Vec<Option<(u64, u64)>> {
    use choreo_compiler::hir::{self, Stmt, StmtKind, visit};
    struct Dmas<'a>(Vec<&'a hir::Dma>);
    impl<'a> visit::Visitor<'a> for Dmas<'a> {
        fn stmt(&mut self, s: &'a Stmt) -> visit::Walk {
            if let StmtKind::Dma(d) = &s.kind {
                self.0.push(d);
            }
            visit::Walk::Continue
        }
    }
    let mut db = SourceDb::new();
    let file = db.add("t.co", src.to_string());
    let out = compile(&db, file, &CompileOptions::default());
    assert!(!out.has_errors(), "rejected:\n{}", render_human(&db, &out.diagnostics));
    let program = out.program.expect("a program");
    let mut dmas = Dmas(Vec::new());
    for item in &program.items {
        if let hir::Item::Function(f) = item {
            visit::walk_stmts(&mut dmas, &f.body);
        }
    }
    dmas.0
        .iter()
        .map(|d| lower::vector::dma_vector(d, d.is_async).map(|v| (v.elems, v.bytes)))
        .collect()
}

#[test]
fn dmas_of_contiguous_rows_copy_16_bytes_at_a_time_and_others_element_by_element() {
    let v = dma_vectors(
        "__co__ void f(f32 [64, 64] a, f16 [64, 64] h, f32 [64, 6] odd, f32 [64, 4] sm, f32 [64, 64] &o) {\n  parallel p by 2 : block {\n    x = dma.copy a.chunkat(p, _) => shared;\n    y = dma.copy.async a.chunkat(p, _) => shared;\n    wait y;\n    z = dma.copy h.chunkat(p, _) => shared;\n    t = dma.transp<1, 0> a.chunkat(p, _) => shared;\n    w = dma.copy odd.chunkat(p, _) => shared;\n    c = dma.copy sm.chunkat(p, _) => local;\n    parallel q by 32 : thread { o.at(q, 0) = x.data.at(q, 0) + y.data.at(q, 0) + t.data.at(0, q) + w.data.at(q, 0); }\n  }\n}\n",
    );
    assert_eq!(
        v,
        [
            Some((4, 16)), // f32 rows of 64: four floats per copy
            Some((4, 16)), // the same as one 16-byte cp.async
            Some((8, 16)), // f16: eight halves
            None,          // a transposition reads columns
            Some((2, 8)),  // rows of 6 floats: two at a time (8 bytes)
            None,          // into per-thread registers
        ]
    );
}

// -- DMAs inside `inthreads` ------------------------------------------------------------------

/// A kernel whose `groups` groups of `threads` threads each copy their row of `a` into their
/// slice of a shared tile inside `inthreads (pred)`; `extra` follows in the group's body.
fn selected_groups(groups: u64, threads: u64, pred: &str, extra: &str) -> String {
    format!(
        "__co__ void f(f32 [2 * {groups}, {threads}] a, f32 [2 * {groups}, {threads}] &o, int k) {{\n\
         \x20 parallel p by 2 : block {{\n\
         \x20   shared f32 [{groups}, {threads}] tiles;\n\
         \x20   parallel w by {groups} : group {{\n\
         \x20     inthreads ({pred}) {{\n\
         \x20       dma.copy a.chunkat(p # w, _) => tiles.chunkat(w, _);\n\
         \x20       parallel l by {threads} : thread {{ o.at(p # w, l) = tiles.at(w, l); }}\n\
         \x20     }}\n\
         \x20     {extra}\n\
         \x20   }}\n\
         \x20 }}\n\
         }}\n"
    )
}

/// How kernel 0 synchronises the selected instances of each of its levels.
fn instance_syncs(src: &str) -> Vec<Option<InstanceSync>> {
    function(src).kernels[0].levels.iter().map(|l| l.instance_sync).collect()
}

#[test]
fn selected_level_instances_synchronise_without_the_rest_of_the_block() {
    // A predicate on the group index selects some groups: one-warp instances take a warp
    // barrier, larger ones a named barrier each (four instances of 64 threads: 11 to 14).
    let warp = instance_syncs(&selected_groups(4, 32, "w != 2", ""));
    assert_eq!(warp[0], Some(InstanceSync::Warp { threads: 32 }));
    let pairs = instance_syncs(&selected_groups(4, 64, "w != 2", ""));
    assert_eq!(pairs[0], Some(InstanceSync::Named { first: 11, threads: 64 }));
    // One instance is the whole block: the block barrier is right.
    let one = instance_syncs(&selected_groups(1, 128, "w == 0", ""));
    assert_eq!(one[0], Some(InstanceSync::Block));
    // A predicate on the block index selects whole blocks: the level's usual barrier stays.
    let blocks = instance_syncs(&selected_groups(4, 64, "p == 1", ""));
    assert_eq!(blocks[0], None);
    // An `if` or a `while` on the group index selects instances like an `inthreads`.
    let src = selected_groups(4, 64, "w != 2", "").replace("inthreads", "if");
    assert_eq!(instance_syncs(&src)[0], Some(InstanceSync::Named { first: 11, threads: 64 }));
    let src = selected_groups(4, 64, "w != 2", "").replace(
        "inthreads (w != 2) {",
        "mutable int i = 0;\n      while (i < w) {\n        i += 1;",
    );
    assert_eq!(instance_syncs(&src)[0], Some(InstanceSync::Named { first: 11, threads: 64 }));
}

#[test]
fn instance_barriers_avoid_the_users_and_each_other() {
    // The user's constant barrier numbers are never taken.
    let used = instance_syncs(&selected_groups(
        4,
        64,
        "w < 2",
        "parallel l by 64 : thread { __bar_sync(14, 64); __bar_arrive(12, 64); }",
    ));
    assert_eq!(used[0], Some(InstanceSync::Named { first: 8, threads: 64 }));
    // Levels with instances of one size share barriers (they split the block the same way);
    // other sizes get their own.
    let src = "__co__ void f(f32 [8, 64] a, f32 [4, 128] b, f32 [8, 64] &o) {\n  parallel p by 1 : block {\n    shared f32 [4, 64] ta;\n    shared f32 [2, 128] tb;\n    parallel w by 4 : group {\n      inthreads (w > 0) { dma.copy a.chunkat(w, _) => ta.chunkat(w, _); }\n      parallel l by 64 : thread { o.at(w, l) = ta.at(w, l); }\n    }\n    parallel v by 2 : group {\n      inthreads (v == 1) { dma.copy b.chunkat(v, _) => tb.chunkat(v, _); }\n      parallel l by 128 : thread { o.at(v, l % 64) = tb.at(v, l); }\n    }\n    parallel u by 4 : group {\n      inthreads (u < 3) { dma.copy a.chunkat(u + 4, _) => ta.chunkat(u, _); }\n      parallel l by 64 : thread { o.at(u + 4, l) = ta.at(u, l); }\n    }\n  }\n}\n";
    assert_eq!(
        instance_syncs(src),
        [
            Some(InstanceSync::Named { first: 11, threads: 64 }),
            None, // its thread level
            Some(InstanceSync::Named { first: 9, threads: 128 }),
            None,
            Some(InstanceSync::Named { first: 11, threads: 64 }),
            None,
        ]
    );
}

#[test]
fn selected_instances_that_cannot_be_synchronised_are_rejected() {
    // Sixteen instances of 64 threads would need sixteen named barriers.
    let (codes, text) = error_codes(&selected_groups(16, 64, "w != 3", ""), Target::default());
    assert_eq!(codes, ["E0810"], "{text}");
    insta::assert_snapshot!("e0810_too_many_instances", text);
    // A barrier number known only at run time may be any of them.
    let (codes, text) = error_codes(
        &selected_groups(4, 64, "w != 3", "parallel l by 64 : thread { __bar_sync(k, 64); }"),
        Target::default(),
    );
    assert_eq!(codes, ["E0810"], "{text}");
    insta::assert_snapshot!("e0810_run_time_barrier_number", text);
    // So may PTX barriers written in inline assembly or `__cpp__`.
    let (codes, text) = error_codes(
        &selected_groups(4, 64, "w != 3", "__cpp__(\"asm volatile(\\\"bar.sync 3, 64;\\\");\");"),
        Target::default(),
    );
    assert_eq!(codes, ["E0810"], "{text}");
    insta::assert_snapshot!("e0810_barriers_in_cpp", text);
    // Instances whose size is only known at run time.
    let src =
        selected_groups(4, 64, "w != 3", "").replace(", 64]", ", N]").replace("by 64", "by N");
    let (codes, text) = error_codes(&src, Target::default());
    assert_eq!(codes, ["E0810"], "{text}");
    insta::assert_snapshot!("e0810_run_time_instance_size", text);
    // Without DMA in the selected instances nothing needs numbering: the same kernel with a
    // block-level predicate is accepted.
    let (codes, text) = error_codes(&selected_groups(16, 64, "p != 3", ""), Target::default());
    assert!(codes.is_empty(), "{text}");
}

// -- host-level DMA -------------------------------------------------------------------------

#[test]
fn a_host_level_dma_of_whole_buffers_is_a_device_copy_and_any_other_a_kernel() {
    use choreo_compiler::lower::{Grid, HOST_DMA_MAX_BLOCKS, HOST_DMA_THREADS};
    // A whole-buffer copy launches nothing; a view, a padding or a transposition is a kernel.
    let f = function(
        "__co__ void f(global f32 [64, 32] a, global f32 [64, 32] b) {\n  dma.copy a => b;\n}\n",
    );
    assert!(f.kernels.is_empty());
    let f = function(
        "__co__ void f(global f32 [64, 32] a, global f32 [64, 32] b, global f32 [2, 2] c) {\n  dma.copy a.subspan(64, 16).at(0, 1) => b.subspan(64, 16).at(0, 0);\n  dma.copy a.view(2, 2).from(0, 0) => c;\n}\n",
    );
    assert_eq!(f.kernels.len(), 2);
    // One thread per element: 64 x 16 elements are four blocks of 256 threads; a box of four
    // elements is one warp.
    assert_eq!(f.kernels[0].threads_per_block, Dim::Const(HOST_DMA_THREADS));
    assert_eq!(f.kernels[0].grid, Grid::Blocks(vec![Dim::Const(4)]));
    assert_eq!(f.kernels[1].threads_per_block, Dim::Const(32));
    assert_eq!(f.kernels[1].grid, Grid::Blocks(vec![Dim::Const(1)]));
    // Synchronous, on the default stream without a stream parameter.
    assert_eq!(f.kernels[0].stream, StreamRef::Default);
    assert_eq!(f.kernels[0].after, AfterLaunch::DeviceSync);
    assert!(!f.kernels[0].waits_for_async);
    // A symbolic box is counted on the host; the function's stream carries the launch, which
    // first waits for the asynchronous launches before it.
    let f = function(
        "__co__ auto f(global f32 [M, N] a, stream s) {\n  parallel.async<s> p by M : block { a.at(p, 0) = 1.0f; }\n  q = dma.pad<{1, 0}, {1, 0}, {0, 0}, 0.0f> a => global;\n  return q.data;\n}\n",
    );
    let k = &f.kernels[1];
    assert!(
        matches!(&k.grid, Grid::Elements { max_blocks, .. } if *max_blocks == HOST_DMA_MAX_BLOCKS)
    );
    assert_eq!(k.stream, StreamRef::Param(P(1)));
    assert_eq!(k.after, AfterLaunch::StreamSync(StreamRef::Param(P(1))));
    assert!(k.waits_for_async);
    assert_eq!(f.memory.buffers.len(), 1, "the padded buffer");
}

#[test]
fn host_level_views_are_proven_checked_or_rejected_like_every_access() {
    // Constant tiles are proven; a run-time row offset is checked; a window past the buffer in
    // every launch is an error.
    let src = "__co__ void f(global f32 [64, 32] a, global f32 [64, 32] b, int r) {\n  foreach {t} in [4] { dma.copy a.chunkat(t, _) => b.chunkat(3 - t, _); }\n  dma.copy a.view(8, 32).from(r, 0) => b.view(8, 32).from(0, 0);\n}\n";
    assert_eq!(
        checks(src),
        [
            vec![(false, false), (false, false)],
            vec![(false, false), (false, false)],
            vec![(true, true), (false, false)],
            vec![(false, false), (false, false)],
        ]
    );
    assert!(function(src).guards);
    let (codes, text) =
        error_codes(&src.replace("from(r, 0) =>", "from(60, 0) =>"), Target::default());
    assert_eq!(codes, ["E0712"], "{text}");
    assert!(text.contains("the index of dimension 0 of 'a' takes the values 60 to 67"), "{text}");
}

#[test]
fn a_host_level_dma_box_too_large_to_count_is_an_error_or_checked_before_the_launch() {
    use choreo_compiler::lower::{Grid, HOST_DMA_MAX_ELEMENTS};
    // The kernel counts elements in an `int` that steps by the grid's thread count.
    let big = "__co__ void f(global f32 [50000, 50000] a, global f32 [50000, 50000] b) {\n  dma.copy a.subspan(46000, 46500).at(0, 0) => b.subspan(46000, 46500).at(0, 0);\n}\n";
    let (codes, text) = error_codes(big, Target::default());
    assert_eq!(codes, ["E0811"], "{text}");
    assert!(
        text.contains(&format!(
            "copies 2139000000 elements, but one copies at most {HOST_DMA_MAX_ELEMENTS}"
        )),
        "{text}"
    );
    assert!(function(&big.replace("46500", "46000")).kernels.len() == 1);
    // A run-time box is checked on the host (no negative extent, not too many elements).
    let f = function(
        "__co__ void f(global f32 [M, N] a, global f32 [M, N] b, int rows) {\n  dma.copy a.view(rows, N).from(0, 0) => b.view(rows, N).from(0, 0);\n}\n",
    );
    assert!(matches!(
        &f.kernels[0].grid,
        Grid::Elements { extents, max_elements, .. }
            if extents.len() == 2 && *max_elements == HOST_DMA_MAX_ELEMENTS
    ));
}

#[test]
fn tma_needs_sm_90_and_gets_mbarriers_after_the_buffers() {
    let src = "__co__ void f(f32 [32, 32] a, f32 [32, 32] &o) {\n  parallel p by 2 : block {\n    shared f32 [16, 32] t;\n    tma.load.swiz<64> a.subspan(16, 32).at(p, 0) => t;\n    g = tma.load.async a.subspan(16, 32).at(p, 0) => shared;\n    wait g;\n    tma.copy.swiz<64> t => o.subspan(16, 32).at(p, 0);\n  }\n}\n";
    for arch in ["sm_80", "sm_86", "sm_89"] {
        let (codes, text) = error_codes(src, Target::Cuda(arch.parse().expect("arch")));
        assert!(codes.iter().all(|c| *c == "E0805") && codes.len() == 3, "{arch}: {text}");
        assert!(
            text.contains(&format!("TMA is not supported by current architecture: {arch}.")),
            "{text}"
        );
    }
    let (codes, text) = error_codes(src, Target::Cuda("sm_90".parse().expect("arch")));
    assert!(codes.is_empty(), "{text}");
    let f = function(src);
    let pool = &f.kernels[0].shared;
    // `.swiz<64>`: every slot at a multiple of 512 bytes; two 2 KiB tiles, then the two
    // mbarriers of the loads (the store has none), 16 bytes rounded up to the alignment.
    assert_eq!(pool.alignment, 512);
    let offsets: Vec<Option<u64>> = pool.slots.iter().map(|s| s.offset.as_const()).collect();
    assert_eq!(offsets, [Some(0), Some(2048)]);
    assert_eq!(pool.barriers, Some(Dim::Const(4096)));
    assert_eq!(pool.bytes, Dim::Const(4608));
}

/// A kernel with two warpgroup roles, `role0` and `role1` the bodies of their `inthreads`.
fn tma_roles(pred0: &str, role0: &str, pred1: &str, role1: &str) -> String {
    format!(
        "__co__ void f(f32 [64, 64] x, f32 [64, 64] &y) {{\n  parallel p by 2 : block {{\n    \
         shared f32 [32, 64] a;\n    shared f32 [32, 64] b;\n    \
         parallel w by 3 : group-4, t by 128 : thread {{\n      \
         inthreads.async ({pred0}) {{ {role0} }}\n      \
         inthreads.async ({pred1}) {{ {role1} }}\n    }}\n  }}\n}}\n"
    )
}

#[test]
fn tma_roles_have_an_issuer_and_a_size() {
    let load = "tma.load x.subspan(32, 64).at(p, 0) => a; y.at(p * 32 + t / 4, t % 4) = a.at(t / 4, t % 4);";
    let f = function(&tma_roles("w > 0", load, "w == 0 && t == 0", ""));
    let roles: Vec<(u64, u64)> = f.kernels[0].roles.iter().map(|r| (r.first, r.threads)).collect();
    assert_eq!(roles, [(128, 256)]);
    let one =
        "f = tma.load.async x.subspan(32, 64).at(p, 0) => b; wait f; y.at(p, 0) = b.at(0, 0);";
    let f = function(&tma_roles("w > 0", load, "w == 0 && t == 0", one));
    let roles: Vec<(u64, u64)> = f.kernels[0].roles.iter().map(|r| (r.first, r.threads)).collect();
    assert_eq!(roles, [(128, 256), (0, 1)]);
}

#[test]
fn tma_roles_that_are_not_whole_warpgroups_are_rejected() {
    let load = "tma.load x.subspan(32, 64).at(p, 0) => a; y.at(p * 32 + t / 4, t % 4) = a.at(t / 4, t % 4);";
    // Half a warpgroup.
    let (codes, text) =
        error_codes(&tma_roles("w == 1 && t < 64", load, "w == 0", ""), Target::default());
    assert_eq!(codes, ["E0475"], "{text}");
    insta::assert_snapshot!("e0475_half_a_warpgroup", text);
    // Two roles whose TMA statements need the role barrier (named barrier 15).
    let other = "tma.load x.subspan(32, 64).at(p, 0) => b; y.at(p * 32 + t / 4, 4 + t % 4) = b.at(t / 4, t % 4);";
    let (codes, text) = error_codes(&tma_roles("w == 1", load, "w == 2", other), Target::default());
    assert_eq!(codes, ["E0475"], "{text}");
    insta::assert_snapshot!("e0475_two_roles_with_barriers", text);
}

/// A kernel of 4 warps whose roles (`inthreads.async (pred)`) run an mma.sync, `store` its
/// accumulator, and read row 0 of the shared buffer `read`.
fn mma_store_roles(roles: &[(&str, &str, &str)]) -> String {
    let mut body = String::new();
    for (pred, store, read) in roles {
        body.push_str(&format!(
            "      inthreads.async ({pred}) {{\n        acc = mma.fill.f32 0.0f;\n        \
             fa = mma.load a;\n        fb = mma.load b;\n        mma.row.col acc, fa, fb;\n        \
             {store}\n        \
             parallel l by 32 : thread {{ if (l < 16) {{ s.at(l) = {read}.at(l, 0); }} }}\n      }}\n"
        ));
    }
    format!(
        "__co__ void f(f16 [16, 16] a, f16 [16, 8] b, f32 [16] &s, int n) {{\n  \
         parallel p by 1 : block {{\n    shared f32 [16, 8] t;\n    shared f32 [16, 8] u;\n    \
         parallel w by 4 : group {{\n{body}    }}\n  }}\n}}\n"
    )
}

#[test]
fn a_plain_mma_store_to_shared_in_a_role_plans_the_role_and_its_barrier() {
    // Warps 1 and 2: a role of 64 threads from thread 32.
    let f = function(&mma_store_roles(&[("w >= 1 && w < 3", "mma.store acc, t;", "t")]));
    let roles: Vec<(u64, u64)> = f.kernels[0].roles.iter().map(|r| (r.first, r.threads)).collect();
    assert_eq!(roles, [(32, 64)]);
    // Two `inthreads` with the same predicate are one role: they share the barrier (the same
    // warps, the same count), and the second may read what the first stored.
    let f = function(&mma_store_roles(&[
        ("w == 3", "mma.store acc, t;", "t"),
        ("w == 3", "mma.store acc, u;", "t"),
    ]));
    let roles: Vec<(u64, u64)> = f.kernels[0].roles.iter().map(|r| (r.first, r.threads)).collect();
    assert_eq!(roles, [(96, 32), (96, 32)]);
    // `.async` has no barrier, so no role.
    let f = function(&mma_store_roles(&[(
        "w == 3",
        "mma.store.async acc, t; __bar_sync(1, 32);",
        "t",
    )]));
    assert!(f.kernels[0].roles.is_empty());
}

#[test]
fn a_role_barrier_for_mma_store_that_cannot_be_planned_is_e1068() {
    // Two roles of different threads on barrier 15.
    let src = mma_store_roles(&[
        ("w == 1", "mma.store acc, t;", "t"),
        ("w == 2", "mma.store acc, u;", "u"),
    ]);
    let (codes, text) = error_codes(&src, Target::default());
    assert_eq!(codes, ["E1068"], "{text}");
    insta::assert_snapshot!("e1068_two_roles_store_to_shared", text);
    // A predicate on a parameter: the role's threads are unknown at compile time.
    let src = mma_store_roles(&[("w == n", "mma.store acc, t;", "t")]);
    let (codes, text) = error_codes(&src, Target::default());
    assert_eq!(codes, ["E1068"], "{text}");
    assert!(text.contains("cannot tell which threads run this `mma.store`"), "{text}");
}
