//! The narrow element types of spec-tier3 §8 through the generated wrappers
//! (`choreo_tests::co::narrow`, from `co/narrow.co`): `choreo::F4E2M1`, `S4`, `F8UE8M0`,
//! `F6E2M3`, `U6`, `F6E3M2` and `Bin1` as host data (in, `&`, returned), as global data, and as
//! scalars across the C ABI. The device converts with choreo.h's types; every result must
//! equal, bit for bit, the Rust conversions of the `choreo` crate (which `choreo/tests/narrow.rs`
//! checks against references computed from each format's definition).
//!
//! The test runs on the CPU (`..::on_cpu`, in every `cargo test`) and on a GPU (`..::on_gpu`,
//! `#[ignore = "needs a CUDA GPU"]`: `--ignored`); see `choreo_tests::device_tests!`.

use choreo::{Bin1, F4E2M1, F6E2M3, F6E3M2, F8UE8M0, S4, U6};
use choreo_tests::co::narrow;
use choreo_tests::{Random, TestDevice, assert_no_deferred_error, device_tests};

/// Inputs where rounding decides: every fp4 value and the midpoints between neighbours (and the
/// floats next to them), values past the largest one, ±0, ±inf, NaN, and random values.
fn inputs(random: &mut Random) -> Vec<f32> {
    let mut values: Vec<f32> = Vec::new();
    for code in 0..8u8 {
        let low = F4E2M1::from_bits(code).to_f32();
        let high = if code < 7 { F4E2M1::from_bits(code + 1).to_f32() } else { 8.0 };
        let midpoint = (low + high) / 2.0;
        let bits = midpoint.to_bits();
        for value in [low, midpoint, f32::from_bits(bits - 1), f32::from_bits(bits + 1)] {
            values.extend([value, -value]);
        }
    }
    values.extend([0.0, -0.0, 1e30, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
    for scale in [1.0, 8.0, 1e20] {
        values.extend(random.f32s(500).into_iter().map(|v| v * scale));
    }
    values
}

device_tests!(narrow_data_and_scalars_cross_the_wrappers_bit_exactly);
fn narrow_data_and_scalars_cross_the_wrappers_bit_exactly(dev: &TestDevice) {
    let mut random = Random::fresh("narrow wrappers");
    let x = inputs(&mut random);
    let n = x.len();
    // Every byte pattern, garbage above the four value bits included.
    let before: Vec<S4> = (0..n).map(|i| S4::from_bits(i as u8)).collect();
    let mut q = before.clone();
    let mut m = vec![F8UE8M0::from_bits(0x55); n];
    let s = F6E2M3::from_f32(1.75);

    let out =
        narrow::quantise4(x.as_slice().into(), q.as_mut_slice().into(), m.as_mut_slice().into(), s)
            .unwrap();
    assert_eq!(out.shape(), [n]);
    for i in 0..n {
        assert_eq!(
            out.as_slice()[i].to_bits(),
            F4E2M1::from_f32(x[i]).to_bits(),
            "out[{i}] of {:e}",
            x[i]
        );
        let want = S4::new((i32::from(before[i].get()) * 3 - 1) as i8);
        assert_eq!(q[i].to_bits(), want.to_bits(), "q[{i}] from {:?}", before[i]);
        let want = F8UE8M0::from_f32(x[i] * s.to_f32());
        assert_eq!(m[i].to_bits(), want.to_bits(), "m[{i}] of {:e} * {s:?}", x[i]);
    }

    // Global data: every byte widens to its value (bits above the format ignored).
    let bytes: Vec<u8> = (0..=255u8).collect();
    let a = dev.upload(&bytes.iter().map(|&b| U6::from_bits(b)).collect::<Vec<_>>());
    let b = dev.upload(&bytes.iter().map(|&b| F6E3M2::from_bits(b)).collect::<Vec<_>>());
    let mut ia = dev.zeros::<i32, 1>([bytes.len()]);
    let mut fb = dev.zeros::<f32, 1>([bytes.len()]);
    narrow::widen_narrow(&a, &b, &mut ia, &mut fb).unwrap();
    let (ia, fb) = (dev.download(&ia), dev.download(&fb));
    for &byte in &bytes {
        let i = usize::from(byte);
        assert_eq!(ia[i], i32::from(U6::from_bits(byte).get()), "u6 {byte:#04x}");
        assert_eq!(
            fb[i].to_bits(),
            F6E3M2::from_bits(byte).to_f32().to_bits(),
            "f6_e3m2 {byte:#04x}"
        );
    }
    // The data stays one byte per element, unchanged.
    assert_eq!(dev.download(&a).iter().map(|c| c.to_bits()).collect::<Vec<_>>(), bytes);

    // Scalars across the C ABI, both ways; an s4 converts to f4_e2m1 in the host part.
    let (p, r) = (F4E2M1::from_bits(0xB), S4::new(-3));
    assert_eq!(narrow::pick_narrow(p, r, Bin1::ONE).unwrap().to_bits(), 0xB);
    assert_eq!(narrow::pick_narrow(p, r, Bin1::ZERO).unwrap().to_f32(), -3.0);
    assert_no_deferred_error();
}
