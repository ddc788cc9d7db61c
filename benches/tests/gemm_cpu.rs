//! The Choreo GEMMs of the `gemm-fp8` and `gemm-sync` sections (`kernels/gemm.co`'s fp8
//! `gemm_e4m3`, `kernels/gemm_sync.co`'s mma.sync `gemm_sync_f16`) through their generated
//! wrappers on the CPU backend (no GPU needed): every element against the float64 host
//! reference of `choreo_bench`, and the shape refusals. The CPU backend runs the same
//! translation (WGMMA, TMA, events and mma.sync emulated with the GPU's data layouts), so
//! this checks the kernels' indexing, ring slots and tiling; only timing needs the GPU.

use choreo::{DeviceTensor, F8E4M3, HostView, Stream, bf16, f16};
use choreo_bench::{gemm, gemm_fp8};

// The 16-bit WGMMA GEMMs of the library are not run here.
#[allow(dead_code)]
mod kernels {
    choreo::include_kernels!("gemm");
}
use kernels::gemm::gemm_e4m3;
use kernels::gemm_sync::gemm_sync_f16;

fn cpu_stream() -> Stream {
    Stream::new_on_device(choreo::Device::cpu()).expect("a CPU stream")
}

fn e4m3_on_cpu((m, n, k): (usize, usize, usize), exact: bool) {
    let (ha, hb) = if exact {
        (gemm_fp8::exact_matrix(m, k, 47), gemm_fp8::exact_matrix(n, k, 48))
    } else {
        (gemm_fp8::random_matrix(m, k, 49), gemm_fp8::random_matrix(n, k, 50))
    };
    let s = cpu_stream();
    let a = DeviceTensor::from_host(&s, HostView::new(&ha, [m, k]).unwrap()).unwrap();
    let b = DeviceTensor::from_host(&s, HostView::new(&hb, [n, k]).unwrap()).unwrap();
    let nan = vec![bf16::from_bits(0xFFFF); m * n];
    let mut c = DeviceTensor::from_host(&s, HostView::new(&nan, [m, n]).unwrap()).unwrap();
    gemm_e4m3(&s, &a, &b, &mut c).unwrap().wait().unwrap();
    let hc: Vec<u16> = c.to_host(&s).unwrap().as_slice().iter().map(|x| x.to_bits()).collect();
    let all = (0..m).flat_map(|i| (0..n).map(move |j| (i, j)));
    let what = format!("gemm_e4m3 on the CPU, {m}x{n}x{k}, exact {exact}");
    if let Err(message) = gemm_fp8::check_points(&what, (&ha, &hb, &hc), (n, k), all, exact) {
        panic!("{message}");
    }
}

#[test]
fn gemm_e4m3_on_the_cpu() {
    // One tile and k-step; 4 tiles with 5 k-steps (the 4-slot ring wraps mid-tile); 18 M
    // tiles (a group of 16 and a partial group of 2 in the tile order).
    e4m3_on_cpu((128, 256, 128), true);
    e4m3_on_cpu((256, 512, 640), true);
    e4m3_on_cpu((2304, 256, 128), true);
    e4m3_on_cpu((128, 256, 384), false);
}

fn sync_on_cpu((m, n, k): (usize, usize, usize), exact: bool) {
    let dtype = gemm::Dtype::F16;
    let (ha, hb) = if exact {
        (gemm::exact_matrix(dtype, m, k, 57), gemm::exact_matrix(dtype, n, k, 58))
    } else {
        (gemm::random_matrix(dtype, m, k, 59), gemm::random_matrix(dtype, n, k, 60))
    };
    let s = cpu_stream();
    let t = |bits: &[u16], shape: [usize; 2]| {
        let v: Vec<f16> = bits.iter().map(|&x| f16::from_bits(x)).collect();
        DeviceTensor::from_host(&s, HostView::new(&v, shape).unwrap()).unwrap()
    };
    let (a, b, mut c) = (t(&ha, [m, k]), t(&hb, [n, k]), t(&vec![0xFFFF; m * n], [m, n]));
    gemm_sync_f16(&s, &a, &b, &mut c).unwrap().wait().unwrap();
    let hc: Vec<u16> = c.to_host(&s).unwrap().as_slice().iter().map(|x| x.to_bits()).collect();
    let all = (0..m).flat_map(|i| (0..n).map(move |j| (i, j)));
    let what = format!("gemm_sync_f16 on the CPU, {m}x{n}x{k}, exact {exact}");
    if let Err(message) = gemm::check_points(&what, dtype, (&ha, &hb, &hc), (n, k), all, exact) {
        panic!("{message}");
    }
}

#[test]
fn gemm_sync_on_the_cpu() {
    // One tile and K step (no loop); 3 steps (the slots alternate, odd count); a 3 x 2 grid of
    // tiles on random inputs.
    sync_on_cpu((128, 128, 32), true);
    sync_on_cpu((128, 128, 96), true);
    sync_on_cpu((384, 256, 128), false);
}

#[test]
fn shapes_that_are_not_tile_multiples_are_refused_on_the_cpu() {
    let s = cpu_stream();
    let a = DeviceTensor::<F8E4M3, 2>::zeros_on(&s, [128, 64]).unwrap();
    let b = DeviceTensor::<F8E4M3, 2>::zeros_on(&s, [256, 64]).unwrap();
    let mut c = DeviceTensor::<bf16, 2>::zeros_on(&s, [128, 256]).unwrap();
    match gemm_e4m3(&s, &a, &b, &mut c).and_then(|p| p.wait()) {
        Err(choreo::Error::RuntimeCheck { message, .. }) => {
            assert!(message.contains("K must be a multiple of 128"), "{message}");
        }
        other => panic!("gemm_e4m3: expected a failed run-time check, got {other:?}"),
    }
    let a = DeviceTensor::<f16, 2>::zeros_on(&s, [128, 48]).unwrap();
    let b = DeviceTensor::<f16, 2>::zeros_on(&s, [128, 48]).unwrap();
    let mut c = DeviceTensor::<f16, 2>::zeros_on(&s, [128, 128]).unwrap();
    match gemm_sync_f16(&s, &a, &b, &mut c).and_then(|p| p.wait()) {
        Err(choreo::Error::RuntimeCheck { message, .. }) => {
            assert!(message.contains("K must be a multiple of 32"), "{message}");
        }
        other => panic!("gemm_sync_f16: expected a failed run-time check, got {other:?}"),
    }
}
