//! The Choreo GEMMs (`kernels/gemm.co`'s 16-bit WGMMA `gemm_f16`, `gemm_bf16` and their
//! TMA-store epilogue versions `gemm_f16_tma_store`, `gemm_bf16_tma_store` of the `gemm`
//! section, its fp8 `gemm_e4m3` of the `gemm-fp8` section, `kernels/gemm_sync.co`'s mma.sync
//! `gemm_sync_f16`) through their generated wrappers on the CPU backend (no GPU needed): every
//! element against the float64 host reference of `choreo_bench`, and the shape refusals. The CPU backend runs the same
//! translation (WGMMA, TMA, events and mma.sync emulated with the GPU's data layouts), so
//! this checks the kernels' indexing, ring slots and tiling; only timing needs the GPU.

use choreo::{DeviceTensor, F8E4M3, HostView, Stream, bf16, f16};
use choreo_bench::{gemm, gemm_fp8};

#[allow(dead_code)]
mod kernels {
    choreo::include_kernels!("gemm");
}
use kernels::gemm::{gemm_bf16, gemm_bf16_tma_store, gemm_e4m3, gemm_f16, gemm_f16_tma_store};
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

/// `gemm_f16`/`gemm_bf16` (or, with `tma`, their TMA-store epilogue versions) on the CPU, on
/// a NaN-poisoned C, every element against the host reference.
fn wgmma16_on_cpu(dtype: gemm::Dtype, tma: bool, (m, n, k): (usize, usize, usize), exact: bool) {
    let (ha, hb) = if exact {
        (gemm::exact_matrix(dtype, m, k, 67), gemm::exact_matrix(dtype, n, k, 68))
    } else {
        (gemm::random_matrix(dtype, m, k, 69), gemm::random_matrix(dtype, n, k, 70))
    };
    let s = cpu_stream();
    let nan = vec![0x7e00u16; m * n];
    let hc: Vec<u16> = match dtype {
        gemm::Dtype::F16 => {
            let t = |bits: &[u16], shape: [usize; 2]| {
                let v: Vec<f16> = bits.iter().map(|&x| f16::from_bits(x)).collect();
                DeviceTensor::from_host(&s, HostView::new(&v, shape).unwrap()).unwrap()
            };
            let (a, b, mut c) = (t(&ha, [m, k]), t(&hb, [n, k]), t(&nan, [m, n]));
            if tma {
                gemm_f16_tma_store(&s, &a, &b, &mut c).unwrap().wait().unwrap();
            } else {
                gemm_f16(&s, &a, &b, &mut c).unwrap().wait().unwrap();
            }
            c.to_host(&s).unwrap().as_slice().iter().map(|x| x.to_bits()).collect()
        }
        gemm::Dtype::Bf16 => {
            let t = |bits: &[u16], shape: [usize; 2]| {
                let v: Vec<bf16> = bits.iter().map(|&x| bf16::from_bits(x)).collect();
                DeviceTensor::from_host(&s, HostView::new(&v, shape).unwrap()).unwrap()
            };
            let (a, b, mut c) = (t(&ha, [m, k]), t(&hb, [n, k]), t(&nan, [m, n]));
            if tma {
                gemm_bf16_tma_store(&s, &a, &b, &mut c).unwrap().wait().unwrap();
            } else {
                gemm_bf16(&s, &a, &b, &mut c).unwrap().wait().unwrap();
            }
            c.to_host(&s).unwrap().as_slice().iter().map(|x| x.to_bits()).collect()
        }
    };
    let all = (0..m).flat_map(|i| (0..n).map(move |j| (i, j)));
    let name = if tma { "_tma_store" } else { "" };
    let what = format!("gemm_{}{name} on the CPU, {m}x{n}x{k}, exact {exact}", dtype.name());
    if let Err(message) = gemm::check_points(&what, dtype, (&ha, &hb, &hc), (n, k), all, exact) {
        panic!("{message}");
    }
}

#[test]
fn gemm_tma_store_on_the_cpu() {
    // The TMA-store epilogue: one tile and k-step; 4 tiles with 7 k-steps (the 3-slot ring
    // wraps mid-tile, the shared C tile is reused by the next tile of no block); random inputs.
    for dtype in gemm::Dtype::ALL {
        wgmma16_on_cpu(dtype, true, (128, 256, 64), true);
        wgmma16_on_cpu(dtype, true, (256, 512, 448), true);
        wgmma16_on_cpu(dtype, true, (256, 512, 192), false);
    }
}

#[test]
fn gemm_tma_store_more_tiles_than_blocks_on_the_cpu() {
    // 144 tiles on 132 blocks: blocks 0..11 store a second tile from the shared C tile their
    // first one went out of (its copy must have read it first), with 2 k-steps per tile (the
    // ring's orders go on across tiles); 18 M tiles: a group of 16 and a partial group of 2.
    wgmma16_on_cpu(gemm::Dtype::F16, true, (128 * 18, 256 * 8, 128), true);
}

#[test]
fn gemm_16bit_on_the_cpu() {
    // The register-store epilogue the TMA-store versions are measured against.
    for dtype in gemm::Dtype::ALL {
        wgmma16_on_cpu(dtype, false, (256, 512, 448), true);
    }
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
    let a = DeviceTensor::<bf16, 2>::zeros_on(&s, [128, 64]).unwrap();
    let b = DeviceTensor::<bf16, 2>::zeros_on(&s, [384, 64]).unwrap();
    let mut c = DeviceTensor::<bf16, 2>::zeros_on(&s, [128, 384]).unwrap();
    match gemm_bf16_tma_store(&s, &a, &b, &mut c).and_then(|p| p.wait()) {
        Err(choreo::Error::RuntimeCheck { message, .. }) => {
            assert!(message.contains("N must be a multiple of 256"), "{message}");
        }
        other => panic!("gemm_bf16_tma_store: expected a failed run-time check, got {other:?}"),
    }
}
