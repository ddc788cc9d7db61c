//! The hand-written WGMMA GEMM (`kernels/gemm_wgmma.cu`) on small shapes against a float64 CPU
//! reference, every element: needs an sm_90 GPU (`cargo test -p choreo-bench --release --test
//! gemm_gpu -- --ignored`).

use choreo_bench::gemm::{self, DeviceMatrix, Dtype, Variant};

/// Runs ours (both versions) on `(m, n, k)` and checks all of C: bit for bit on exact inputs,
/// within a few units in the last place on random ones.
fn check(dtype: Dtype, shape: (usize, usize, usize), exact: bool) {
    check_variant(Variant::Single, dtype, shape, exact);
    check_variant(Variant::Cluster2, dtype, shape, exact);
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
    let all = (0..m).flat_map(|i| (0..n).map(move |j| (i, j)));
    let what = format!(
        "{}: {} {m}x{n}x{k}{}",
        variant.name(),
        dtype.name(),
        if exact { " exact" } else { "" }
    );
    match gemm::check_points(&what, dtype, (&ha, &hb, &hc), (n, k), all, exact) {
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
