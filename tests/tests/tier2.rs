//! Tier-2 kernels through the safe wrappers (`choreo_tests::co::tier2`, from `co/tier2.co`):
//! a kernel whose dynamic shared memory is sized on the host from the arguments' shapes (opting
//! in above 48 KiB, refused with `Err` above the device's limit), a host-level DMA between
//! device tensors, and a cooperative launch (refused with `Err` when its grid cannot be
//! resident at once, instead of hanging at the grid barrier).
//!
//! Every test runs on the CPU (`NAME::on_cpu`, in every `cargo test`; the CPU offers 227 KiB of
//! shared memory per block like an H200 and runs a cooperative grid as fibres of one
//! scheduler) and on a GPU (`NAME::on_gpu`, `#[ignore = "needs a CUDA GPU"]`: `--ignored`, also
//! under compute-sanitizer through ci/bundle-gpu-tests); see `choreo_tests::device_tests!`.
//! The GPU variants fail with a message saying why without a GPU or without the CUDA kernels.

use choreo::{Error, HostView, HostViewMut};
use choreo_tests::co::tier2;
use choreo_tests::{Random, TestDevice, device_tests};

fn reversed_rows(a: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..rows).flat_map(|r| (0..cols).map(move |c| a[r * cols + cols - 1 - c])).collect()
}

device_tests!(shared_memory_sized_from_the_shapes_matches_the_cpu);
fn shared_memory_sized_from_the_shapes_matches_the_cpu(_dev: &TestDevice) {
    let mut random = Random::fresh("shared_memory_sized_from_the_shapes");
    // 1000 floats fit the default 48 KiB; 20000 floats (80 000 bytes) need the opt-in.
    for (rows, cols) in [(3, 1), (5, 1000), (4, 20_000), (2, 1 + random.below(5000))] {
        let a = random.f32s(rows * cols);
        let mut out = vec![f32::NAN; rows * cols];
        tier2::reverse_rows(
            HostView::new(&a, [rows, cols]).unwrap(),
            HostViewMut::new(&mut out, [rows, cols]).unwrap(),
        )
        .unwrap();
        assert_eq!(out, reversed_rows(&a, rows, cols), "rows {rows}, cols {cols}");
    }
}

device_tests!(shared_memory_beyond_the_device_is_an_error_before_launch);
fn shared_memory_beyond_the_device_is_an_error_before_launch(_dev: &TestDevice) {
    // 100 000 floats of shared memory per block: more than any GPU offers (H100/H200: 227 KiB).
    let (rows, cols) = (2, 100_000);
    let a = vec![1.0f32; rows * cols];
    let mut out = vec![-7.0f32; rows * cols];
    let result = tier2::reverse_rows(
        HostView::new(&a, [rows, cols]).unwrap(),
        HostViewMut::new(&mut out, [rows, cols]).unwrap(),
    );
    match result {
        Err(Error::RuntimeCheck { function, message }) => {
            assert_eq!(function, "reverse_rows");
            assert!(message.contains("shared memory"), "{message}");
        }
        other => panic!("expected a runtime check error, got {other:?}"),
    }
    assert!(out.iter().all(|&v| v == -7.0), "no result is delivered after a failed check");
}

device_tests!(host_level_dma_copies_after_the_launch);
fn host_level_dma_copies_after_the_launch(dev: &TestDevice) {
    let mut random = Random::fresh("host_level_dma");
    let n = 1 + random.below(4000);
    let a_host = random.f32s(n);
    let mut a = dev.upload(&a_host);
    let mut b = dev.upload(&vec![f32::NAN; n]);
    let copy = tier2::copy_after(&mut a, &mut b).unwrap();
    let want: Vec<f32> = a_host.iter().map(|v| v + 1.0).collect();
    assert_eq!(dev.download(&a), want, "a after the kernel");
    assert_eq!(dev.download(&b), want, "b: copied from a after the kernel");
    assert_eq!(copy.into_vec(), want, "the returned copy of b");
}

device_tests!(cooperative_grid_barrier_orders_the_blocks);
fn cooperative_grid_barrier_orders_the_blocks(_dev: &TestDevice) {
    let mut random = Random::fresh("cooperative_grid_barrier");
    for blocks in [1, 2, 64, 132 + random.below(100)] {
        let x = random.f32s(blocks * 32);
        let mut partial = vec![f32::NAN; blocks];
        let mut total = [f32::NAN];
        tier2::grid_sum(
            HostView::new(&x, [blocks, 32]).unwrap(),
            partial.as_mut_slice().into(),
            total.as_mut_slice().into(),
        )
        .unwrap();
        let sums: Vec<f32> = x.chunks(32).map(|row| row.iter().sum()).collect();
        for (b, (got, want)) in partial.iter().zip(&sums).enumerate() {
            assert!(
                (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                "partial[{b}]: {got} vs {want}"
            );
        }
        let all: f32 = partial.iter().sum();
        assert!((total[0] - all).abs() <= 1e-3 * all.abs().max(1.0), "total {} vs {all}", total[0]);
    }
}

device_tests!(cooperative_grid_too_large_is_an_error_not_a_hang);
fn cooperative_grid_too_large_is_an_error_not_a_hang(dev: &TestDevice) {
    // Ten million blocks of 32 threads cannot all be resident on any GPU. The CPU runs a
    // cooperative grid as fibres and takes up to 65536 blocks per worker thread (its
    // "multiprocessors", see choreo_cpu.h): one block more is too many there, and spares
    // copying 1.28 GB of host data before the check.
    let blocks = if dev.is_cpu() {
        let workers = dev.device().multiprocessor_count().unwrap() as usize;
        workers * 65536 + 1
    } else {
        10_000_000
    };
    let x = vec![0.0f32; blocks * 32];
    let mut partial = vec![0.0f32; blocks];
    let mut total = [0.0f32];
    let result = tier2::grid_sum(
        HostView::new(&x, [blocks, 32]).unwrap(),
        partial.as_mut_slice().into(),
        total.as_mut_slice().into(),
    );
    match result {
        Err(Error::RuntimeCheck { function, message }) => {
            assert_eq!(function, "grid_sum");
            assert!(message.contains("cooperative"), "{message}");
            assert!(message.contains("tier2.co"), "located: {message}");
        }
        other => panic!("expected a runtime check error, got {other:?}"),
    }
}
