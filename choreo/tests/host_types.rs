//! Host-only types: tensors, views, shapes, and the fp8 element types.

use choreo::{DeviceRepr, Error, F8E4M3, F8E5M2, HostTensor, HostView, HostViewMut, element_count};

#[test]
fn element_counts_and_overflow() {
    assert_eq!(element_count(&[]).unwrap(), 1);
    assert_eq!(element_count(&[2, 3, 4]).unwrap(), 24);
    assert_eq!(element_count(&[0, 5]).unwrap(), 0);
    match element_count(&[usize::MAX, 2]) {
        Err(Error::InvalidArgument(message)) => assert!(message.contains("fit in usize")),
        other => panic!("expected an overflow error, got {other:?}"),
    }
    // A zero extent makes the count 0 even when the other extents would overflow.
    assert_eq!(element_count(&[usize::MAX, 0]).unwrap_or(1), 0);
}

#[test]
fn host_view_checks_its_shape() {
    let data: Vec<i32> = (0..6).collect();
    let view = HostView::new(&data, [2, 3]).unwrap();
    assert_eq!(view.shape(), [2, 3]);
    assert_eq!(view.len(), 6);
    assert_eq!(view.get([1, 2]), Some(&5));
    assert_eq!(view.get([0, 1]), Some(&1));
    assert_eq!(view.get([2, 0]), None);
    assert_eq!(view.get([0, 3]), None);

    assert_eq!(HostView::new(&data, [2, 2]).unwrap_err(), Error::Length { expected: 4, got: 6 });
    assert_eq!(
        HostView::new(&data[..5], [2, 3]).unwrap_err(),
        Error::Length { expected: 6, got: 5 }
    );
    assert!(matches!(
        HostView::new(&data, [usize::MAX, usize::MAX]),
        Err(Error::InvalidArgument(_))
    ));

    let rank1: HostView<'_, i32, 1> = data.as_slice().into();
    assert_eq!(rank1.shape(), [6]);
    let from_vec: HostView<'_, i32, 1> = (&data).into();
    assert_eq!(from_vec.as_slice(), data.as_slice());
    let array = [1.5f32, 2.5];
    let from_array: HostView<'_, f32, 1> = (&array).into();
    assert_eq!(from_array.shape(), [2]);

    let empty: [u8; 0] = [];
    let empty_view = HostView::new(&empty, [0, 7]).unwrap();
    assert!(empty_view.is_empty());
    assert_eq!(empty_view.get([0, 0]), None);
}

#[test]
fn host_tensor_indexes_row_major() {
    let mut tensor = HostTensor::new((0..24).collect::<Vec<u32>>(), [2, 3, 4]).unwrap();
    assert_eq!(tensor.shape(), [2, 3, 4]);
    assert_eq!(tensor[[0, 0, 0]], 0);
    assert_eq!(tensor[[0, 0, 3]], 3);
    assert_eq!(tensor[[0, 1, 0]], 4);
    assert_eq!(tensor[[1, 0, 0]], 12);
    assert_eq!(tensor[[1, 2, 3]], 23);
    assert_eq!(tensor.get([1, 3, 0]), None);
    tensor[[1, 1, 1]] = 100;
    assert_eq!(tensor.as_slice()[12 + 4 + 1], 100);
    *tensor.get_mut([0, 2, 1]).unwrap() = 7;
    assert_eq!(tensor.as_slice()[9], 7);

    assert_eq!(
        HostTensor::new(vec![1u8; 5], [2, 3]).unwrap_err(),
        Error::Length { expected: 6, got: 5 }
    );
    let reshaped = tensor.clone().reshape([6, 4]).unwrap();
    assert_eq!(reshaped[[2, 1]], tensor[[0, 2, 1]]);
    assert!(tensor.clone().reshape([5, 5]).is_err());

    let zeros = HostTensor::<f32, 2>::zeros([3, 2]).unwrap();
    assert_eq!(zeros.as_slice(), [0.0; 6]);
    let filled = HostTensor::filled([2, 2], 9i64).unwrap();
    assert_eq!(filled.into_vec(), vec![9; 4]);
    assert!(HostTensor::<u8, 2>::zeros([usize::MAX, 2]).is_err());

    let scalar = HostTensor::new(vec![5.0f64], []).unwrap();
    assert_eq!(scalar[[]], 5.0);
    assert_eq!(HostTensor::from_vec(vec![1, 2, 3]).shape(), [3]);
}

#[test]
#[should_panic(expected = "out of bounds")]
fn host_tensor_index_out_of_bounds_panics_like_a_slice() {
    let tensor = HostTensor::new(vec![0u8; 6], [2, 3]).unwrap();
    let _ = tensor[[0, 3]];
}

#[test]
fn host_view_mut_writes_through() {
    let mut data = vec![0i16; 6];
    {
        let mut view = HostViewMut::new(&mut data, [3, 2]).unwrap();
        *view.get_mut([2, 1]).unwrap() = 5;
        view.as_mut_slice()[0] = 1;
        let mut shorter = view.reborrow();
        shorter.as_mut_slice()[1] = 2;
        assert_eq!(view.as_view().get([2, 1]), Some(&5));
    }
    assert_eq!(data, [1, 2, 0, 0, 0, 5]);
    assert_eq!(
        HostViewMut::new(&mut data, [4, 2]).unwrap_err(),
        Error::Length { expected: 8, got: 6 }
    );

    let mut tensor = HostTensor::<u8, 2>::zeros([2, 2]).unwrap();
    let mut view: HostViewMut<'_, u8, 2> = (&mut tensor).into();
    view.as_mut_slice().copy_from_slice(&[1, 2, 3, 4]);
    assert_eq!(tensor[[1, 0]], 3);

    let mut vector = vec![0u64; 2];
    let view: HostViewMut<'_, u64, 1> = (&mut vector).into();
    view.into_slice()[1] = 8;
    assert_eq!(vector, [0, 8]);
    let view = HostView::from(&tensor);
    assert_eq!(view.to_tensor(), tensor);
}

#[test]
fn choreo_type_names() {
    assert_eq!(<i8 as DeviceRepr>::CHOREO_TYPE, "s8");
    assert_eq!(<u64 as DeviceRepr>::CHOREO_TYPE, "u64");
    assert_eq!(<f32 as DeviceRepr>::CHOREO_TYPE, "f32");
    assert_eq!(<choreo::f16 as DeviceRepr>::CHOREO_TYPE, "f16");
    assert_eq!(<choreo::bf16 as DeviceRepr>::CHOREO_TYPE, "bf16");
    assert_eq!(<F8E4M3 as DeviceRepr>::CHOREO_TYPE, "f8_e4m3");
    assert_eq!(<F8E5M2 as DeviceRepr>::CHOREO_TYPE, "f8_e5m2");
}

/// (input, saturating code, non-saturating code), worked out by hand from the E4M3 format:
/// bias 7, 3 mantissa bits, subnormal step 2^-9, max 448, NaN 0x7F, no infinity.
const E4M3_ENCODE: &[(f32, u8, u8)] = &[
    (0.0, 0x00, 0x00),
    (-0.0, 0x80, 0x80),
    (1.0, 0x38, 0x38),
    (-1.0, 0xB8, 0xB8),
    (0.5, 0x30, 0x30),
    (3.0, 0x44, 0x44),
    (240.0, 0x77, 0x77),
    (448.0, 0x7E, 0x7E),
    (-448.0, 0xFE, 0xFE),
    (0.015625, 0x08, 0x08),      // 2^-6, smallest normal
    (0.0078125, 0x04, 0x04),     // 2^-7, subnormal
    (0.001953125, 0x01, 0x01),   // 2^-9, smallest subnormal
    (0.0009765625, 0x00, 0x00),  // 2^-10: tie between 0 and 2^-9, to even (0)
    (-0.0009765625, 0x80, 0x80), // keeps the sign
    (0.0029296875, 0x02, 0x02),  // 3 * 2^-10: tie between codes 1 and 2, to even (2)
    (1.0625, 0x38, 0x38),        // tie between 1.0 (0x38) and 1.125 (0x39): even 0x38
    (1.1875, 0x3A, 0x3A),        // tie between 1.125 (0x39) and 1.25 (0x3A): even 0x3A
    (1.05, 0x38, 0x38),
    (1.07, 0x39, 0x39),
    (0.1, 0x1D, 0x1D), // 1.6 * 2^-4 -> mantissa 4.8 -> 5: 0.1015625
    (460.0, 0x7E, 0x7E),
    (463.9, 0x7E, 0x7E),
    (464.0, 0x7E, 0x7E), // max + half a step: a tie, to the even code 0x7E (448)
    (464.5, 0x7E, 0x7F), // beyond: saturates, or NaN without saturation
    (1.0e9, 0x7E, 0x7F),
    (-1.0e9, 0xFE, 0xFF),
    (f32::INFINITY, 0x7E, 0x7F),
    (f32::NEG_INFINITY, 0xFE, 0xFF),
];

/// Same for E5M2: bias 15, 2 mantissa bits, subnormal step 2^-16, max 57344, inf 0x7C.
const E5M2_ENCODE: &[(f32, u8, u8)] = &[
    (0.0, 0x00, 0x00),
    (1.0, 0x3C, 0x3C),
    (-2.0, 0xC0, 0xC0),
    (57344.0, 0x7B, 0x7B),
    (61439.0, 0x7B, 0x7B),
    (61440.0, 0x7B, 0x7C), // max + half a step: a tie, to the even side (infinity, 0x7C)
    (f32::INFINITY, 0x7B, 0x7C),
    (f32::NEG_INFINITY, 0xFB, 0xFC),
    (1.0 / 65536.0, 0x01, 0x01),  // 2^-16, smallest subnormal
    (1.0 / 131072.0, 0x00, 0x00), // 2^-17: tie, to even (0)
    (1.0 / 16384.0, 0x04, 0x04),  // 2^-14, smallest normal
    (0.1, 0x2E, 0x2E),            // 1.6 * 2^-4 -> mantissa 2.4 -> 2: 0.09375
    (1.125, 0x3C, 0x3C),          // tie between 1.0 and 1.25: even 0x3C
    (1.375, 0x3E, 0x3E),          // tie between 1.25 and 1.5: even 0x3E
];

#[test]
fn f8_e4m3_conversions_match_the_table() {
    for &(input, saturated, unsaturated) in E4M3_ENCODE {
        assert_eq!(F8E4M3::from_f32(input).to_bits(), saturated, "from_f32({input})");
        assert_eq!(
            F8E4M3::from_f32_unsaturated(input).to_bits(),
            unsaturated,
            "from_f32_unsaturated({input})"
        );
    }
    assert_eq!(F8E4M3::from_f32(f32::NAN).to_bits(), 0x7F);
    assert_eq!(F8E4M3::from_f32(-f32::NAN).to_bits(), 0x7F);
    assert!(F8E4M3::from_bits(0x7F).is_nan());
    assert!(F8E4M3::from_bits(0xFF).is_nan());
    assert!(!F8E4M3::from_bits(0x7E).is_nan());
    assert_eq!(F8E4M3::from_bits(0x7E).to_f32(), 448.0);
    assert_eq!(F8E4M3::MAX.to_f32(), 448.0);
    assert_eq!(F8E4M3::from_bits(0x77).to_f32(), 240.0);
    assert_eq!(F8E4M3::from_bits(0x01).to_f32(), 2f32.powi(-9));
    assert_eq!(F8E4M3::from_bits(0x08).to_f32(), 2f32.powi(-6));
    assert_eq!(F8E4M3::from_bits(0x1D).to_f32(), 0.1015625);
    let negative_zero = F8E4M3::from_bits(0x80).to_f32();
    assert!(negative_zero == 0.0 && negative_zero.is_sign_negative());
    assert_eq!(f32::from(F8E4M3::from_bits(0xB8)), -1.0);
}

#[test]
fn f8_e5m2_conversions_match_the_table() {
    for &(input, saturated, unsaturated) in E5M2_ENCODE {
        assert_eq!(F8E5M2::from_f32(input).to_bits(), saturated, "from_f32({input})");
        assert_eq!(
            F8E5M2::from_f32_unsaturated(input).to_bits(),
            unsaturated,
            "from_f32_unsaturated({input})"
        );
    }
    assert_eq!(F8E5M2::from_f32(f32::NAN).to_bits(), 0x7F);
    assert_eq!(F8E5M2::from_bits(0x7C).to_f32(), f32::INFINITY);
    assert_eq!(F8E5M2::from_bits(0xFC).to_f32(), f32::NEG_INFINITY);
    for nan in [0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF] {
        assert!(F8E5M2::from_bits(nan).is_nan(), "{nan:#x}");
    }
    assert_eq!(F8E5M2::MAX.to_f32(), 57344.0);
    assert_eq!(F8E5M2::from_bits(0x01).to_f32(), 2f32.powi(-16));
    assert_eq!(F8E5M2::from_bits(0x04).to_f32(), 2f32.powi(-14));
    assert_eq!(F8E5M2::from_bits(0x2E).to_f32(), 0.09375);
}

#[test]
fn f8_comparisons_follow_ieee() {
    assert_eq!(F8E4M3::from_bits(0x00), F8E4M3::from_bits(0x80)); // +0 == -0
    assert_ne!(F8E4M3::NAN, F8E4M3::NAN);
    assert!(F8E4M3::from_f32(1.0) < F8E4M3::from_f32(2.0));
    assert!(F8E5M2::from_f32(-1.0) < F8E5M2::ZERO);
    assert_eq!(format!("{}", F8E4M3::from_f32(1.5)), "1.5");
    assert!(format!("{:?}", F8E5M2::from_f32(1.0)).contains("0x3c"));
}

#[test]
fn f8_rounding_is_to_nearest_over_a_sweep() {
    // Every f32 in a dense sweep converts to a code no farther from it than any other finite
    // code (the nearest one); this checks the search and tie logic away from the table.
    let finite_e4m3: Vec<F8E4M3> =
        (0..=255u8).map(F8E4M3::from_bits).filter(|value| !value.is_nan()).collect();
    let mut x = -500.0f32;
    while x < 500.0 {
        let code = F8E4M3::from_f32(x);
        let error = (code.to_f32() - x).abs();
        for other in &finite_e4m3 {
            assert!(error <= (other.to_f32() - x).abs(), "{x}: {code:?} vs {other:?}");
        }
        x += 0.37;
    }
}
