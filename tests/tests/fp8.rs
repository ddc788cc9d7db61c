//! fp8 kernels through the generated wrappers (`choreo_tests::co::fp8`, from `co/fp8.co`):
//! `choreo::F8E4M3` / `choreo::F8E5M2` as host data (in, `&`, returned), as global data, and as
//! scalars across the C ABI. The device converts with CUDA's constructors (on a GPU,
//! `cvt.rn.satfinite` on sm_89 and later; on the CPU, the CPU runtime's versions of them); every
//! result must equal, bit for bit, the Rust conversions `from_f32` (which the `choreo` crate
//! checks against CUDA's host code).
//!
//! The test runs on the CPU (`..::on_cpu`, in every `cargo test`) and on a GPU (`..::on_gpu`,
//! `#[ignore = "needs a CUDA GPU"]`: `--ignored`); see `choreo_tests::device_tests!`. Without a
//! GPU, or without the CUDA kernels, the GPU variant fails with a message saying so.

use choreo::{F8E4M3, F8E5M2};
use choreo_tests::co::fp8;
use choreo_tests::{Random, TestDevice, assert_no_deferred_error, device_tests};

/// Inputs where rounding decides: every finite value of both formats, the midpoints between
/// neighbouring e4m3 values and the floats next to them, values past the largest finite ones,
/// ±0, ±inf, and random values of several ranges. No NaN: the device's NaN code is not
/// specified beyond being a NaN.
fn inputs(random: &mut Random) -> Vec<f32> {
    let mut values: Vec<f32> = Vec::new();
    for code in 0..=255u8 {
        values.push(F8E4M3::from_bits(code).to_f32());
        values.push(F8E5M2::from_bits(code).to_f32());
    }
    for code in 0..0x7Eu8 {
        let low = F8E4M3::from_bits(code).to_f32();
        let high = F8E4M3::from_bits(code + 1).to_f32();
        let midpoint = (low + high) / 2.0; // exact: few significant bits
        let bits = midpoint.to_bits();
        for value in [midpoint, f32::from_bits(bits - 1), f32::from_bits(bits + 1)] {
            values.extend([value, -value]);
        }
    }
    values.extend([0.0, -0.0, 464.0, 465.0, 61440.0, 61439.0, 1e30, f32::NEG_INFINITY]);
    for scale in [1.0, 500.0, 70_000.0] {
        values.extend(random.f32s(2000).into_iter().map(|v| v * scale));
    }
    values.retain(|v| !v.is_nan());
    values
}

device_tests!(fp8_data_and_scalars_cross_the_wrappers_bit_exactly);
fn fp8_data_and_scalars_cross_the_wrappers_bit_exactly(dev: &TestDevice) {
    let mut random = Random::fresh("fp8 wrappers");
    let x = inputs(&mut random);
    let n = x.len();
    let before: Vec<F8E4M3> = (0..n).map(|_| F8E4M3::from_f32(random.next_f32() * 40.0)).collect();
    let s = F8E5M2::from_f32(1.75);

    let mut scaled = before.clone();
    let out = fp8::quantise(x.as_slice().into(), scaled.as_mut_slice().into(), s).unwrap();
    assert_eq!(out.shape(), [n]);
    for i in 0..n {
        let want = F8E5M2::from_f32(x[i]);
        assert_eq!(out.as_slice()[i].to_bits(), want.to_bits(), "out[{i}] of {:e}", x[i]);
        let want = F8E4M3::from_f32(before[i].to_f32() * s.to_f32());
        assert_eq!(scaled[i].to_bits(), want.to_bits(), "scaled[{i}] = {:?} * {s:?}", before[i]);
    }

    // Global data: every e4m3 code (NaNs included) widens to its exact f32 value.
    let codes: Vec<F8E4M3> = (0..=255u8).map(F8E4M3::from_bits).collect();
    let a = dev.upload(&codes);
    let mut wide = dev.zeros::<f32, 1>([codes.len()]);
    fp8::widen(&a, &mut wide).unwrap();
    for (code, got) in codes.iter().zip(dev.download(&wide)) {
        let want = code.to_f32();
        assert!(
            got.to_bits() == want.to_bits() || (want.is_nan() && got.is_nan()),
            "widen({code:?}) = {got}"
        );
    }
    assert_eq!(
        dev.download(&a).iter().map(|c| c.to_bits()).collect::<Vec<_>>(),
        (0..=255).collect::<Vec<u8>>()
    );

    // Scalars across the C ABI, both ways.
    let (p, q) = (F8E4M3::from_bits(0xB3), F8E5M2::from_bits(0x47));
    assert_eq!(fp8::pick_f8(p, q, true).unwrap().to_bits(), 0xB3);
    let want = F8E4M3::from_f32(q.to_f32());
    assert_eq!(fp8::pick_f8(p, q, false).unwrap().to_bits(), want.to_bits());
    assert_no_deferred_error();
}
