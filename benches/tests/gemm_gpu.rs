//! The hand-written WGMMA GEMM (`kernels/gemm_wgmma.cu`), the Choreo GEMMs (`kernels/gemm.co`:
//! f16, bf16 and fp8 e4m3; `kernels/gemm_sync.co`: mma.sync), the hand-written mma.sync twin
//! (`kernels/gemm_sync_hand.cu`) and cuBLASLt's fp8 GEMM on small shapes against a float64 CPU
//! reference, every element: needs an sm_90 GPU (`cargo test -p choreo-bench --release --test
//! gemm_gpu -- --ignored`).

use choreo_bench::gemm::{self, DeviceMatrix, Dtype, Variant};

/// Runs ours (every version) on `(m, n, k)` and checks all of C: bit for bit on exact inputs,
/// within a few units in the last place on random ones.
fn check(dtype: Dtype, shape: (usize, usize, usize), exact: bool) {
    for variant in Variant::ALL {
        check_variant(variant, dtype, shape, exact);
    }
}

fn check_variant(variant: Variant, dtype: Dtype, (m, n, k): (usize, usize, usize), exact: bool) {
    assert!(gemm::built(), "the GEMM kernels were not compiled (no nvcc at build time)");
    let (ha, hb) = if exact {
        (gemm::exact_matrix(dtype, m, k, 7), gemm::exact_matrix(dtype, n, k, 8))
    } else {
        (gemm::random_matrix(dtype, m, k, 9), gemm::random_matrix(dtype, n, k, 10))
    };
    let a = DeviceMatrix::from_host(&ha).unwrap();
    let b = DeviceMatrix::from_host(&hb).unwrap();
    let mut c = DeviceMatrix::new(m * n).unwrap();
    c.poison().unwrap();
    let stream = choreo::Stream::new().unwrap();
    // SAFETY: the matrices have the product's sizes and outlive the download below (which
    // synchronises the device).
    unsafe { gemm::launch_ours(stream.as_raw(), dtype, variant, (&a, &b, &c), (m, n, k)) }.unwrap();
    let hc = c.download().unwrap();
    check_all(variant.name(), dtype, (&ha, &hb, &hc), (m, n, k), exact);
}

/// Checks every element of `hc` = `ha` · `hb`ᵀ against the float64 host reference.
fn check_all(
    name: &str,
    dtype: Dtype,
    (ha, hb, hc): (&[u16], &[u16], &[u16]),
    (m, n, k): (usize, usize, usize),
    exact: bool,
) {
    let all = (0..m).flat_map(|i| (0..n).map(move |j| (i, j)));
    let what = format!("{name}: {} {m}x{n}x{k}{}", dtype.name(), if exact { " exact" } else { "" });
    match gemm::check_points(&what, dtype, (ha, hb, hc), (n, k), all, exact) {
        Ok(worst) => eprintln!("{what}: all {} elements right (max rel. err {worst:.2e})", m * n),
        Err(message) => panic!("{message}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn small_shapes_f16() {
    check_variant(Variant::Single, Dtype::F16, (128, 256, 64), true);
    for shape in [(256, 256, 64), (256, 512, 128), (512, 768, 320)] {
        check(Dtype::F16, shape, true);
        check(Dtype::F16, shape, false);
    }
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn small_shapes_bf16() {
    check_variant(Variant::Single, Dtype::Bf16, (384, 256, 64), true);
    for shape in [(256, 256, 64), (256, 512, 128), (512, 768, 320)] {
        check(Dtype::Bf16, shape, true);
        check(Dtype::Bf16, shape, false);
    }
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn cube_1024() {
    for dtype in Dtype::ALL {
        check(dtype, (1024, 1024, 1024), true);
        check(dtype, (1024, 1024, 1024), false);
    }
}

/// More tiles than SMs: every block walks several tiles of the persistent schedule, with
/// partial M groups (2304 / 128 = 18 row tiles and 9 cluster units, groups of 16).
#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn persistent_schedule() {
    check(Dtype::Bf16, (2304, 2048, 512), true);
    check(Dtype::F16, (2304, 2048, 512), false);
}

/// Shapes the kernel does not take are refused with a message, not computed wrongly.
#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn unsupported_shape_is_refused() {
    let stream = choreo::Stream::new().unwrap();
    let b = DeviceMatrix::new(256 * 64).unwrap();
    // M = 100 is not a multiple of 128; with clusters, M = 128 is not a pair of tiles.
    for (variant, rows) in [(Variant::Single, 100), (Variant::Cluster2, 128)] {
        let a = DeviceMatrix::new(rows * 64).unwrap();
        let c = DeviceMatrix::new(rows * 256).unwrap();
        // SAFETY: the sizes fit; the call is refused before any launch.
        let err = unsafe {
            gemm::launch_ours(stream.as_raw(), Dtype::F16, variant, (&a, &b, &c), (rows, 256, 64))
        }
        .unwrap_err();
        assert!(err.contains("unsupported shape"), "{}: {err}", variant.name());
    }
}

/// The WGMMA library on the GPU, one instruction family at a time (`kernels/wgmma_unit.cu`):
/// SS and RS, K- and MN-major, swizzle 128/64/32, f16/bf16/tf32/fp8/int8 with f32, f16 and s32
/// accumulators, against exact integer sums.
#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn wgmma_library_cases() {
    let cases = gemm::unit_cases();
    assert!(cases.len() >= 18, "only {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let value = |i: usize, unsigned: bool| {
            let v = ((i as u64 * 2654435761) >> 13) % 7;
            let v = v as i32 - 3;
            if unsigned { v.abs() } else { v }
        };
        let a: Vec<i32> = (0..64 * case.k).map(|i| value(i + 1, case.a == 6)).collect();
        let b: Vec<i32> = (0..case.n * case.k).map(|i| value(i + 7777, case.b == 6)).collect();
        match gemm::unit_run(case, &a, &b) {
            Err(e) => failures.push(format!("{}: {e}", case.describe())),
            Ok(d) => {
                let k = case.k;
                let wrong = (0..64 * case.n).find(|&x| {
                    let (i, j) = (x / case.n, x % case.n);
                    let want: i32 = (0..k).map(|kk| a[i * k + kk] * b[j * k + kk]).sum();
                    d[x] != want as f32
                });
                if let Some(x) = wrong {
                    let (i, j) = (x / case.n, x % case.n);
                    let want: i32 = (0..k).map(|kk| a[i * k + kk] * b[j * k + kk]).sum();
                    failures.push(format!(
                        "{}: D[{i}][{j}] = {}, want {want}",
                        case.describe(),
                        d[x]
                    ));
                } else {
                    eprintln!("{}: ok", case.describe());
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// The case table of `kernels/wgmma_unit.cu` is host code: listed without a GPU.
#[test]
fn wgmma_library_cases_are_listed() {
    assert!(gemm::built(), "the GEMM kernels were not compiled (no nvcc at build time)");
    let cases = gemm::unit_cases();
    assert!(cases.len() >= 18, "only {} cases", cases.len());
    for case in &cases {
        assert!(case.k % case.atom_k == 0 && case.n % 8 == 0, "{}", case.describe());
        assert!(!case.rs || case.a <= 1, "RS reads 16-bit fragments: {}", case.describe());
    }
    let all: Vec<String> = cases.iter().map(|c| c.describe()).collect();
    for family in ["f32.e4m3.e4m3", "s32.u8.s8", "f32.tf32.tf32", "f16.f16.f16", "RS MN-major"] {
        assert!(all.iter().any(|d| d.contains(family)), "no {family} case: {all:?}");
    }
}

/// Each tuning variant alone on shapes that exercise its knob: ring wrap-around with 3 stages
/// (k-tiles not a multiple of the stages), groups of 8 M tiles with a partial last group (11
/// row tiles = 8 + 3; for clusters 6 units = one partial group, 9 units = 8 + 1), wait_group 0
/// on one and on many k-tiles.
#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn tuning_variants() {
    for dtype in Dtype::ALL {
        check_variant(Variant::Wait0, dtype, (128, 256, 64), true);
        check_variant(Variant::Wait0, dtype, (384, 512, 448), false);
        check_variant(Variant::Stages3, dtype, (256, 256, 64 * 7), true);
        check_variant(Variant::Stages3, dtype, (384, 512, 64 * 5), false);
        check_variant(Variant::Group8, dtype, (128 * 11, 512, 128), true);
        check_variant(Variant::Group8, dtype, (128 * 11, 768, 192), false);
        check_variant(Variant::Cluster2Group8, dtype, (128 * 12, 512, 128), true);
        check_variant(Variant::Cluster2Group8, dtype, (256 * 9, 768, 192), false);
    }
}

mod kernels {
    choreo::include_kernels!("gemm");
}

/// A Choreo GEMM (`kernels/gemm.co`, through its generated wrapper: `gemm_f16`/`gemm_bf16`, or
/// with `tma` the TMA-store epilogue `gemm_f16_tma_store`/`gemm_bf16_tma_store`) on
/// `(m, n, k)` against the float64 host reference, every element.
fn check_choreo(dtype: Dtype, (m, n, k): (usize, usize, usize), exact: bool, tma: bool) {
    use choreo::{DeviceTensor, HostView};
    let (ha, hb) = if exact {
        (gemm::exact_matrix(dtype, m, k, 17), gemm::exact_matrix(dtype, n, k, 18))
    } else {
        (gemm::random_matrix(dtype, m, k, 19), gemm::random_matrix(dtype, n, k, 20))
    };
    let s = choreo::Stream::new().unwrap();
    let nan = vec![0x7e00u16; m * n];
    let hc: Vec<u16> = match dtype {
        Dtype::F16 => {
            let t = |bits: &[u16], shape: [usize; 2]| {
                let v: Vec<choreo::f16> = bits.iter().map(|&x| choreo::f16::from_bits(x)).collect();
                DeviceTensor::from_host(&s, HostView::new(&v, shape).unwrap()).unwrap()
            };
            let (a, b, mut c) = (t(&ha, [m, k]), t(&hb, [n, k]), t(&nan, [m, n]));
            let run = if tma { kernels::gemm::gemm_f16_tma_store } else { kernels::gemm::gemm_f16 };
            run(&s, &a, &b, &mut c).unwrap().wait().unwrap();
            c.to_host(&s).unwrap().as_slice().iter().map(|x| x.to_bits()).collect()
        }
        Dtype::Bf16 => {
            let t = |bits: &[u16], shape: [usize; 2]| {
                let v: Vec<choreo::bf16> =
                    bits.iter().map(|&x| choreo::bf16::from_bits(x)).collect();
                DeviceTensor::from_host(&s, HostView::new(&v, shape).unwrap()).unwrap()
            };
            let (a, b, mut c) = (t(&ha, [m, k]), t(&hb, [n, k]), t(&nan, [m, n]));
            let run =
                if tma { kernels::gemm::gemm_bf16_tma_store } else { kernels::gemm::gemm_bf16 };
            run(&s, &a, &b, &mut c).unwrap().wait().unwrap();
            c.to_host(&s).unwrap().as_slice().iter().map(|x| x.to_bits()).collect()
        }
    };
    let what = if tma { "Choreo gemm.co TMA-store epilogue" } else { "Choreo gemm.co" };
    check_all(what, dtype, (&ha, &hb, &hc), (m, n, k), exact);
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn choreo_gemm_small_shapes() {
    // One tile; a few tiles (most of the 132 blocks idle); 144 tiles (a second round of the
    // persistent loop for 12 blocks), a K with 7 k-steps (ring slots wrap mid-tile).
    for dtype in [Dtype::F16, Dtype::Bf16] {
        check_choreo(dtype, (128, 256, 64), true, false);
        check_choreo(dtype, (256, 512, 448), true, false);
        check_choreo(dtype, (256, 512, 448), false, false);
        check_choreo(dtype, (1536, 3072, 128), true, false);
    }
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn choreo_gemm_tma_store_small_shapes() {
    // As above for the TMA-store epilogue (3-slot ring: 7 k-steps wrap it twice and a half);
    // 144 tiles: 12 blocks store a second tile from the shared C tile the first one used.
    for dtype in [Dtype::F16, Dtype::Bf16] {
        check_choreo(dtype, (128, 256, 64), true, true);
        check_choreo(dtype, (256, 512, 448), true, true);
        check_choreo(dtype, (256, 512, 448), false, true);
        check_choreo(dtype, (1536, 3072, 128), true, true);
        check_choreo(dtype, (1536, 3072, 192), false, true);
    }
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn choreo_gemm_refuses_shapes_that_are_not_tile_multiples() {
    let s = choreo::Stream::new().unwrap();
    let a = choreo::DeviceTensor::<choreo::f16, 2>::zeros_on(&s, [100, 64]).unwrap();
    let b = choreo::DeviceTensor::<choreo::f16, 2>::zeros_on(&s, [256, 64]).unwrap();
    let mut c = choreo::DeviceTensor::<choreo::f16, 2>::zeros_on(&s, [100, 256]).unwrap();
    for run in [kernels::gemm::gemm_f16, kernels::gemm::gemm_f16_tma_store] {
        match run(&s, &a, &b, &mut c).and_then(|p| p.wait()) {
            Err(choreo::Error::RuntimeCheck { message, .. }) => {
                assert!(message.contains("M must be a multiple of 128"), "{message}");
            }
            other => panic!("expected a failed run-time check, got {other:?}"),
        }
    }
}

/// The fp8 GEMM `gemm_e4m3` (`kernels/gemm.co`) on `(m, n, k)` against the float64 host
/// reference, every element (bit for bit on exact inputs); returns A, B and C's bits.
fn check_e4m3(
    (m, n, k): (usize, usize, usize),
    exact: bool,
) -> (Vec<choreo::F8E4M3>, Vec<choreo::F8E4M3>, Vec<u16>) {
    use choreo::{DeviceTensor, HostView};
    use choreo_bench::gemm_fp8;
    let (ha, hb) = if exact {
        (gemm_fp8::exact_matrix(m, k, 27), gemm_fp8::exact_matrix(n, k, 28))
    } else {
        (gemm_fp8::random_matrix(m, k, 29), gemm_fp8::random_matrix(n, k, 30))
    };
    let s = choreo::Stream::new().unwrap();
    let a = DeviceTensor::from_host(&s, HostView::new(&ha, [m, k]).unwrap()).unwrap();
    let b = DeviceTensor::from_host(&s, HostView::new(&hb, [n, k]).unwrap()).unwrap();
    let nan = vec![choreo::bf16::from_bits(0xFFFF); m * n];
    let mut c = DeviceTensor::from_host(&s, HostView::new(&nan, [m, n]).unwrap()).unwrap();
    kernels::gemm::gemm_e4m3(&s, &a, &b, &mut c).unwrap().wait().unwrap();
    let hc: Vec<u16> = c.to_host(&s).unwrap().as_slice().iter().map(|x| x.to_bits()).collect();
    let all = (0..m).flat_map(|i| (0..n).map(move |j| (i, j)));
    let what = format!("gemm_e4m3 {m}x{n}x{k}{}", if exact { " exact" } else { "" });
    match gemm_fp8::check_points(&what, (&ha, &hb, &hc), (n, k), all, exact) {
        Ok(worst) => eprintln!("{what}: all {} elements right (max rel. err {worst:.2e})", m * n),
        Err(message) => panic!("{message}"),
    }
    (ha, hb, hc)
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn choreo_gemm_e4m3_small_shapes() {
    // One tile (one k-step); a few tiles with 3 k-steps; 5 k-steps (ring slots wrap mid-tile)
    // on random inputs; 144 tiles (a second round of the persistent loop for 12 blocks, one
    // partial group of 12 M tiles); 18 M tiles (a group of 16 and a partial one of 2) x 12 N
    // tiles = 216 tiles.
    check_e4m3((128, 256, 128), true);
    check_e4m3((256, 512, 384), true);
    check_e4m3((384, 512, 640), false);
    check_e4m3((1536, 3072, 256), true);
    check_e4m3((2304, 3072, 256), false);
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn choreo_gemm_e4m3_refuses_shapes_that_are_not_tile_multiples() {
    use choreo::{DeviceTensor, F8E4M3, bf16};
    let s = choreo::Stream::new().unwrap();
    // K = 64 is a multiple of the 16-bit GEMMs' K tile, not of the fp8 one (128).
    for ((m, n, k), want) in [
        ((128, 256, 64), "K must be a multiple of 128"),
        ((128, 128, 128), "N must be a multiple of 256"),
        ((64, 256, 128), "M must be a multiple of 128"),
    ] {
        let a = DeviceTensor::<F8E4M3, 2>::zeros_on(&s, [m, k]).unwrap();
        let b = DeviceTensor::<F8E4M3, 2>::zeros_on(&s, [n, k]).unwrap();
        let mut c = DeviceTensor::<bf16, 2>::zeros_on(&s, [m, n]).unwrap();
        match kernels::gemm::gemm_e4m3(&s, &a, &b, &mut c).and_then(|p| p.wait()) {
            Err(choreo::Error::RuntimeCheck { message, .. }) => {
                assert!(message.contains(want), "{m}x{n}x{k}: {message}");
            }
            other => panic!("{m}x{n}x{k}: expected a failed run-time check, got {other:?}"),
        }
    }
}

/// cuBLASLt's fp8 GEMM, with the descriptors of the `gemm-fp8` section, against the host
/// reference and `gemm_e4m3`, bit for bit on exact inputs (skipped, with a message, when
/// cuBLASLt is not found).
#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn cublaslt_fp8_matches_the_reference_and_gemm_e4m3() {
    use choreo::{DeviceTensor, HostView};
    use choreo_bench::gemm_fp8;
    if let Err(why) = gemm_fp8::load_cublaslt() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    for ((m, n, k), exact) in [((256, 512, 384), true), ((384, 512, 640), false)] {
        let (ha, hb, ours) = check_e4m3((m, n, k), exact);
        let s = choreo::Stream::new().unwrap();
        let a = DeviceTensor::from_host(&s, HostView::new(&ha, [m, k]).unwrap()).unwrap();
        let b = DeviceTensor::from_host(&s, HostView::new(&hb, [n, k]).unwrap()).unwrap();
        for fast in [true, false] {
            let nan = vec![choreo::bf16::from_bits(0xFFFF); m * n];
            let mut c = DeviceTensor::from_host(&s, HostView::new(&nan, [m, n]).unwrap()).unwrap();
            gemm_fp8::cublaslt(&s, (&a, &b, &mut c), fast).unwrap();
            let theirs: Vec<u16> =
                c.to_host(&s).unwrap().as_slice().iter().map(|x| x.to_bits()).collect();
            let all = (0..m).flat_map(|i| (0..n).map(move |j| (i, j)));
            let what = format!("cuBLASLt fast_accum={fast} {m}x{n}x{k} exact={exact}");
            if let Err(message) =
                gemm_fp8::check_points(&what, (&ha, &hb, &theirs), (n, k), all, exact)
            {
                panic!("{message} (cuBLASLt's own output: descriptors or layout mapping wrong)");
            }
            let cmp = gemm::compare(gemm_fp8::OUTPUT, &ours, &theirs);
            let differing = ours.iter().zip(&theirs).filter(|(x, y)| x != y).count();
            assert!(
                cmp.wrong == 0 && (!exact || differing == 0),
                "{what}: gemm_e4m3 and cuBLASLt differ in {differing} elements ({} beyond \
                 tolerance)",
                cmp.wrong
            );
        }
    }
}

/// The Choreo mma.sync GEMM (`kernels/gemm_sync.co`) and both versions of its hand-written twin
/// (`kernels/gemm_sync_hand.cu`) on `(m, n, k)` against the float64 host reference, every
/// element; the Choreo output must equal the twin's bit for bit (the same MMAs in the same
/// order).
fn check_sync((m, n, k): (usize, usize, usize), exact: bool) {
    use choreo::{DeviceTensor, HostView, f16};
    use choreo_bench::gemm_sync::{self, Hand};
    let dtype = Dtype::F16;
    let (ha, hb) = if exact {
        (gemm::exact_matrix(dtype, m, k, 37), gemm::exact_matrix(dtype, n, k, 38))
    } else {
        (gemm::random_matrix(dtype, m, k, 39), gemm::random_matrix(dtype, n, k, 40))
    };
    let s = choreo::Stream::new().unwrap();
    let t = |bits: &[u16], shape: [usize; 2]| {
        let v: Vec<f16> = bits.iter().map(|&x| f16::from_bits(x)).collect();
        DeviceTensor::from_host(&s, HostView::new(&v, shape).unwrap()).unwrap()
    };
    let nan = vec![0xFFFFu16; m * n];
    let (a, b, mut c) = (t(&ha, [m, k]), t(&hb, [n, k]), t(&nan, [m, n]));
    kernels::gemm_sync::gemm_sync_f16(&s, &a, &b, &mut c).unwrap().wait().unwrap();
    let ours: Vec<u16> = c.to_host(&s).unwrap().as_slice().iter().map(|x| x.to_bits()).collect();
    check_all("Choreo gemm_sync_f16", dtype, (&ha, &hb, &ours), (m, n, k), exact);
    let (ra, rb) = (DeviceMatrix::from_host(&ha).unwrap(), DeviceMatrix::from_host(&hb).unwrap());
    for hand in Hand::ALL {
        let mut rc = DeviceMatrix::new(m * n).unwrap();
        rc.poison().unwrap();
        // SAFETY: the matrices have the product's sizes and outlive the download (which
        // synchronises the device).
        unsafe { gemm_sync::launch_hand(s.as_raw(), hand, (&ra, &rb, &rc), (m, n, k)) }.unwrap();
        let hc = rc.download().unwrap();
        check_all(hand.name(), dtype, (&ha, &hb, &hc), (m, n, k), exact);
        let differing = ours.iter().zip(&hc).filter(|(x, y)| x != y).count();
        assert_eq!(
            differing,
            0,
            "{m}x{n}x{k}: Choreo and {} differ in {differing} elements",
            hand.name()
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn choreo_gemm_sync_small_shapes() {
    // One tile, one K step (no loop); one tile, 3 steps (slots alternate, odd count); several
    // tiles with non-square grids; random inputs with 9 steps.
    check_sync((128, 128, 32), true);
    check_sync((128, 128, 96), true);
    check_sync((384, 256, 128), true);
    check_sync((256, 384, 288), false);
    check_sync((1024, 1024, 1024), false);
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn gemm_sync_refuses_shapes_that_are_not_tile_multiples() {
    use choreo::{DeviceTensor, f16};
    use choreo_bench::gemm_sync::{self, Hand};
    let s = choreo::Stream::new().unwrap();
    for ((m, n, k), want) in [
        ((128, 128, 48), "K must be a multiple of 32"),
        ((128, 192, 32), "N must be a multiple of 128"),
        ((192, 128, 32), "M must be a multiple of 128"),
    ] {
        let a = DeviceTensor::<f16, 2>::zeros_on(&s, [m, k]).unwrap();
        let b = DeviceTensor::<f16, 2>::zeros_on(&s, [n, k]).unwrap();
        let mut c = DeviceTensor::<f16, 2>::zeros_on(&s, [m, n]).unwrap();
        match kernels::gemm_sync::gemm_sync_f16(&s, &a, &b, &mut c).and_then(|p| p.wait()) {
            Err(choreo::Error::RuntimeCheck { message, .. }) => {
                assert!(message.contains(want), "{m}x{n}x{k}: {message}");
            }
            other => panic!("{m}x{n}x{k}: expected a failed run-time check, got {other:?}"),
        }
        let (ra, rb, rc) = (
            DeviceMatrix::new(m * k).unwrap(),
            DeviceMatrix::new(n * k).unwrap(),
            DeviceMatrix::new(m * n).unwrap(),
        );
        // SAFETY: the sizes fit; the call is refused before any launch.
        let err =
            unsafe { gemm_sync::launch_hand(s.as_raw(), Hand::Twin, (&ra, &rb, &rc), (m, n, k)) }
                .unwrap_err();
        assert!(err.contains("unsupported shape"), "{m}x{n}x{k}: {err}");
    }
}
