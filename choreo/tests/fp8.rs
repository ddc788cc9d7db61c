//! The fp8 element types `F8E4M3` and `F8E5M2` against three references: every bit pattern
//! through f32 and back; a brute-force round-to-nearest-even over all codes, written here
//! independently of the crate's search; and a golden table of CUDA's own host conversions
//! (`tests/data/fp8_cuda_golden.txt`, made by `tests/data/fp8_cuda_golden.cu` with nvcc's
//! `cuda_fp8.hpp`), so the conversions are checked bit for bit against CUDA without a toolkit.

use choreo::{F8E4M3, F8E5M2};

/// One fp8 format, seen through the crate's type for it.
#[derive(Clone, Copy, Debug)]
enum Format {
    E4M3,
    E5M2,
}

impl Format {
    fn decode(self, code: u8) -> f32 {
        match self {
            Format::E4M3 => F8E4M3::from_bits(code).to_f32(),
            Format::E5M2 => F8E5M2::from_bits(code).to_f32(),
        }
    }

    fn encode(self, value: f32, saturate: bool) -> u8 {
        match (self, saturate) {
            (Format::E4M3, true) => F8E4M3::from_f32(value).to_bits(),
            (Format::E4M3, false) => F8E4M3::from_f32_unsaturated(value).to_bits(),
            (Format::E5M2, true) => F8E5M2::from_f32(value).to_bits(),
            (Format::E5M2, false) => F8E5M2::from_f32_unsaturated(value).to_bits(),
        }
    }

    /// The largest finite positive code.
    fn max_code(self) -> u8 {
        match self {
            Format::E4M3 => 0x7E,
            Format::E5M2 => 0x7B,
        }
    }

    /// The code a value beyond the range becomes without saturation.
    fn overflow_code(self) -> u8 {
        match self {
            Format::E4M3 => 0x7F, // NaN: E4M3 has no infinity
            Format::E5M2 => 0x7C, // infinity
        }
    }

    /// The exact value of a positive finite code, from the format's definition.
    fn value_of(self, code: u8) -> f64 {
        let (man_bits, bias) = match self {
            Format::E4M3 => (3, 7),
            Format::E5M2 => (2, 15),
        };
        let exponent = i32::from(code >> man_bits);
        let mantissa = f64::from(code & ((1 << man_bits) - 1));
        let scale = f64::from(1u32 << man_bits);
        if exponent == 0 {
            mantissa / scale * 2f64.powi(1 - bias)
        } else {
            (1.0 + mantissa / scale) * 2f64.powi(exponent - bias)
        }
    }
}

const FORMATS: [Format; 2] = [Format::E4M3, Format::E5M2];

/// Round to nearest, ties to the even code, by trying every positive finite code (and, past the
/// largest one, one more step of the same size standing for "overflow"); the sign is copied.
fn reference_encode(format: Format, value: f32, saturate: bool) -> u8 {
    if value.is_nan() {
        return 0x7F;
    }
    let sign = if value.is_sign_negative() { 0x80 } else { 0x00 };
    let magnitude = f64::from(value).abs();
    let max = format.max_code();
    let step_above_max = format.value_of(max) - format.value_of(max - 1);
    let candidates = (0..=max)
        .map(|code| (code, format.value_of(code)))
        .chain([(max + 1, format.value_of(max) + step_above_max)]);
    let mut best: Option<(u8, f64)> = None;
    for (code, candidate) in candidates {
        let distance = (candidate - magnitude).abs();
        best = match best {
            Some((_, best_distance)) if distance > best_distance => best,
            Some((best_code, best_distance)) if distance == best_distance && best_code % 2 == 0 => {
                Some((best_code, best_distance))
            }
            _ => Some((code, distance)),
        };
    }
    let (code, _) = best.expect("at least one candidate");
    // From the step past the largest value on (infinity included), that step is the nearest;
    // said directly, because the distances there are too large for f64 to tell apart.
    let beyond = format.value_of(max) + step_above_max;
    let code = if magnitude >= beyond { max + 1 } else { code };
    let code = if code <= max {
        code
    } else if saturate {
        max
    } else {
        format.overflow_code()
    };
    sign | code
}

#[test]
fn every_bit_pattern_round_trips_through_f32() {
    for format in FORMATS {
        for code in 0..=255u8 {
            let value = format.decode(code);
            let magnitude = code & 0x7F;
            if value.is_nan() {
                for saturate in [true, false] {
                    assert_eq!(format.encode(value, saturate), 0x7F, "{format:?} NaN {code:#04x}");
                }
            } else if value.is_infinite() {
                // Infinity saturates to the largest finite value of its sign, or stays itself.
                let sign = code & 0x80;
                assert_eq!(format.encode(value, true), sign | format.max_code(), "{format:?}");
                assert_eq!(format.encode(value, false), code, "{format:?} {code:#04x}");
            } else {
                for saturate in [true, false] {
                    assert_eq!(format.encode(value, saturate), code, "{format:?} {code:#04x}");
                }
                // The value is exact: the same as the format's definition.
                let exact = format.value_of(magnitude);
                let signed = if code & 0x80 != 0 { -exact } else { exact };
                assert_eq!(f64::from(value), signed, "{format:?} {code:#04x}");
                assert_eq!(value.is_sign_negative(), code & 0x80 != 0, "{format:?} {code:#04x}");
            }
        }
    }
    // Which codes are special.
    let nan = |format: Format| (0..=255u8).filter(|&c| format.decode(c).is_nan()).count();
    let infinite = |format: Format| (0..=255u8).filter(|&c| format.decode(c).is_infinite()).count();
    assert_eq!((nan(Format::E4M3), infinite(Format::E4M3)), (2, 0));
    assert_eq!((nan(Format::E5M2), infinite(Format::E5M2)), (6, 2));
}

#[test]
fn conversions_round_to_nearest_even_like_the_brute_force_reference() {
    let mut inputs: Vec<f32> = Vec::new();
    for format in FORMATS {
        for code in 0..format.max_code() {
            let (low, high) = (format.value_of(code), format.value_of(code + 1));
            let midpoint = ((low + high) / 2.0) as f32; // exact: few significant bits
            let bits = midpoint.to_bits();
            inputs.extend([midpoint, f32::from_bits(bits + 1), f32::from_bits(bits - 1)]);
            inputs.extend([low as f32, (low * 0.75 + high * 0.25) as f32]);
        }
        let max = format.value_of(format.max_code());
        let step = max - format.value_of(format.max_code() - 1);
        let threshold = (max + step / 2.0) as f32;
        let bits = threshold.to_bits();
        inputs.extend([threshold, f32::from_bits(bits + 1), f32::from_bits(bits - 1)]);
        inputs.extend([(max + step) as f32, (max * 4.0) as f32]);
    }
    // A deterministic sweep through all f32 exponents, and uniform values in range.
    inputs.extend((0..=u32::MAX).step_by(65_537).map(f32::from_bits));
    let mut state = 0x9e37_79b9u32;
    for range in [500.0f32, 65_000.0, 0.03] {
        for _ in 0..2000 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let unit = (state >> 8) as f32 / 16_777_216.0;
            inputs.push((2.0 * unit - 1.0) * range);
        }
    }
    inputs.extend([0.0, f32::INFINITY, f32::MAX, f32::MIN_POSITIVE, f32::from_bits(1), f32::NAN]);
    let negated: Vec<f32> = inputs.iter().map(|x| -x).collect();
    inputs.extend(negated);

    for &value in &inputs {
        for format in FORMATS {
            for saturate in [true, false] {
                assert_eq!(
                    format.encode(value, saturate),
                    reference_encode(format, value, saturate),
                    "{format:?} saturate={saturate} of {value:e} ({:#010x})",
                    value.to_bits()
                );
            }
        }
    }
}

/// Parses a hexadecimal field of the golden table.
fn hex(field: Option<&str>, line: usize) -> u32 {
    let text = field.unwrap_or_else(|| panic!("golden table line {line}: missing field"));
    u32::from_str_radix(text, 16)
        .unwrap_or_else(|e| panic!("golden table line {line}: bad field {text:?}: {e}"))
}

#[test]
fn conversions_match_cuda_bit_for_bit() {
    let table = include_str!("data/fp8_cuda_golden.txt");
    let (mut decoded, mut encoded) = (0, 0);
    for (index, line) in table.lines().enumerate() {
        let number = index + 1;
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("d") => {
                let code = u8::try_from(hex(fields.next(), number)).expect("a byte");
                for format in FORMATS {
                    let cuda = f32::from_bits(hex(fields.next(), number));
                    let ours = format.decode(code);
                    if cuda.is_nan() {
                        assert!(ours.is_nan(), "{format:?} {code:#04x}: {ours} vs NaN");
                    } else {
                        assert_eq!(ours.to_bits(), cuda.to_bits(), "{format:?} {code:#04x}");
                    }
                }
                decoded += 1;
            }
            Some("e") => {
                let value = f32::from_bits(hex(fields.next(), number));
                for (format, saturate) in [
                    (Format::E4M3, true),
                    (Format::E4M3, false),
                    (Format::E5M2, true),
                    (Format::E5M2, false),
                ] {
                    let cuda = hex(fields.next(), number);
                    assert_eq!(
                        u32::from(format.encode(value, saturate)),
                        cuda,
                        "line {number}: {format:?} saturate={saturate} of {value:e} ({:#010x})",
                        value.to_bits()
                    );
                }
                encoded += 1;
            }
            other => panic!("golden table line {number}: unexpected kind {other:?}"),
        }
    }
    assert_eq!(decoded, 256, "every code is decoded");
    assert!(encoded > 2500, "the table has {encoded} conversions");
}

#[test]
fn fp8_values_behave_as_plain_data() {
    // Default is +0, Copy, Debug shows the value and the bits, Display the value.
    assert_eq!(F8E4M3::default().to_bits(), 0);
    assert_eq!(F8E5M2::default().to_bits(), 0);
    let x = F8E4M3::from_f32(-2.5);
    let y = x;
    assert_eq!(x, y);
    assert_eq!(format!("{x}"), "-2.5");
    assert_eq!(format!("{x:?}"), "f8_e4m3(-2.5 = 0xc2)");
    assert_eq!(format!("{}", F8E5M2::from_bits(0x7C)), "inf");
    assert_eq!(size_of::<F8E4M3>(), 1);
    assert_eq!(align_of::<F8E5M2>(), 1);
}
