//! The narrow element types of spec-tier3 §8 against references written here, independently of
//! the crate's conversions: each float format's values are computed from its definition (OCP
//! FP6/FP4, unsigned E4M3, E8M0), every code is decoded and re-encoded, and the rounding of
//! many f32 inputs (every value, every midpoint between neighbours and its two f32 neighbours,
//! values beyond the range, infinities, NaN, signed zeros) is checked against a brute-force
//! round-to-nearest-even over all codes. The sub-byte integers are checked against plain
//! modular arithmetic for every input byte.

use choreo::{Bin1, F4E2M1, F6E2M3, F6E3M2, F8UE4M3, F8UE8M0, S2, S4, S6, U1, U2, U4, U6};

/// One narrow float format, defined here from its parameters, and the crate's type for it.
#[derive(Clone, Copy, Debug)]
struct Format {
    name: &'static str,
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    signed: bool,
    /// The magnitude code that is NaN, if any.
    nan: Option<u8>,
    encode: fn(f32) -> u8,
    decode: fn(u8) -> f32,
}

const FORMATS: [Format; 4] = [
    Format {
        name: "f6_e2m3",
        exp_bits: 2,
        man_bits: 3,
        bias: 1,
        signed: true,
        nan: None,
        encode: |x| F6E2M3::from_f32(x).to_bits(),
        decode: |c| F6E2M3::from_bits(c).to_f32(),
    },
    Format {
        name: "f6_e3m2",
        exp_bits: 3,
        man_bits: 2,
        bias: 3,
        signed: true,
        nan: None,
        encode: |x| F6E3M2::from_f32(x).to_bits(),
        decode: |c| F6E3M2::from_bits(c).to_f32(),
    },
    Format {
        name: "f4_e2m1",
        exp_bits: 2,
        man_bits: 1,
        bias: 1,
        signed: true,
        nan: None,
        encode: |x| F4E2M1::from_f32(x).to_bits(),
        decode: |c| F4E2M1::from_bits(c).to_f32(),
    },
    Format {
        name: "f8_ue4m3",
        exp_bits: 4,
        man_bits: 3,
        bias: 7,
        signed: false,
        nan: Some(0x7F),
        encode: |x| F8UE4M3::from_f32(x).to_bits(),
        decode: |c| F8UE4M3::from_bits(c).to_f32(),
    },
];

impl Format {
    fn magnitude_codes(self) -> u8 {
        (1u16 << (self.exp_bits + self.man_bits)) as u8
    }

    fn sign_bit(self) -> u8 {
        if self.signed { self.magnitude_codes() } else { 0 }
    }

    /// The largest finite magnitude code.
    fn max_code(self) -> u8 {
        let all = self.magnitude_codes() - 1;
        if self.nan == Some(all) { all - 1 } else { all }
    }

    /// The value of a magnitude code, from the definition: subnormal when the exponent field is
    /// zero (`m * 2^(1 - bias - man_bits)`), else `(2^man_bits + m) * 2^(e - bias - man_bits)`.
    fn value(self, code: u8) -> f64 {
        let e = i32::from(code >> self.man_bits);
        let m = f64::from(code & ((1 << self.man_bits) - 1));
        let man = self.man_bits as i32;
        if e == 0 {
            m * 2f64.powi(1 - self.bias - man)
        } else {
            (f64::from(1u32 << self.man_bits) + m) * 2f64.powi(e - self.bias - man)
        }
    }

    /// Brute force: the magnitude code nearest to `magnitude` (ties to the even code), the
    /// largest one for magnitudes at or beyond it.
    fn nearest(self, magnitude: f64) -> u8 {
        let max = self.max_code();
        if magnitude >= self.value(max) {
            return max;
        }
        let mut best = 0u8;
        for code in 0..=max {
            let (d, best_d) =
                ((self.value(code) - magnitude).abs(), (self.value(best) - magnitude).abs());
            if d < best_d || (d == best_d && code % 2 == 0 && best % 2 == 1) {
                best = code;
            }
        }
        best
    }

    /// The reference conversion of the spec (spec-tier3 §8): round to nearest even, saturate;
    /// NaN is the NaN code or, without one, the largest positive value; unsigned formats make
    /// negative values 0.
    fn reference_encode(self, x: f32) -> u8 {
        if x.is_nan() {
            return self.nan.unwrap_or(self.max_code());
        }
        if x.is_sign_negative() && !self.signed {
            return 0;
        }
        let sign = if x.is_sign_negative() { self.sign_bit() } else { 0 };
        sign | self.nearest(f64::from(x).abs())
    }

    /// Interesting inputs: every value, the midpoints between neighbours and the f32 values
    /// just beside them, a step beyond the largest value, infinities, zeros, NaN, and both signs.
    fn inputs(self) -> Vec<f32> {
        let max = self.max_code();
        let mut out =
            vec![0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e30, -1e30, 1e-30];
        for code in 0..=max {
            let v = self.value(code);
            out.push(v as f32);
            let next =
                if code < max { self.value(code + 1) } else { v + (v - self.value(max - 1)) };
            let mid = ((v + next) / 2.0) as f32;
            out.extend([mid, f32::from_bits(mid.to_bits() + 1), f32::from_bits(mid.to_bits() - 1)]);
        }
        let negatives: Vec<f32> = out.iter().map(|x| -x).collect();
        out.extend(negatives);
        out
    }
}

#[test]
fn every_code_decodes_to_its_defined_value() {
    for f in FORMATS {
        for code in 0..=255u8 {
            // Bits above the format are ignored when read.
            let low = code & (f.sign_bit() | (f.magnitude_codes() - 1));
            let magnitude = low & (f.magnitude_codes() - 1);
            let got = (f.decode)(code);
            if f.nan == Some(magnitude) {
                assert!(got.is_nan(), "{} {code:#04x}", f.name);
                continue;
            }
            let want = f.value(magnitude) as f32;
            let want = if low & f.sign_bit() != 0 { -want } else { want };
            assert_eq!(got.to_bits(), want.to_bits(), "{} {code:#04x}", f.name);
        }
    }
}

#[test]
fn every_value_re_encodes_to_its_code() {
    for f in FORMATS {
        let codes = if f.signed { 2 * f.magnitude_codes() } else { f.magnitude_codes() };
        for code in 0..codes {
            let value = (f.decode)(code);
            if value.is_nan() {
                assert_eq!((f.encode)(value), f.nan.unwrap(), "{}", f.name);
            } else {
                assert_eq!((f.encode)(value), code, "{} {code:#04x} = {value}", f.name);
            }
        }
    }
}

#[test]
fn rounding_is_to_nearest_even_and_saturates() {
    for f in FORMATS {
        for x in f.inputs() {
            let got = (f.encode)(x);
            let want = f.reference_encode(x);
            assert_eq!(got, want, "{} from {x:e} ({:#010x}): got {got:#04x}", f.name, x.to_bits());
            // A conversion leaves the bits above the format zero.
            assert_eq!(got & !(f.sign_bit() | (f.magnitude_codes() - 1)), 0, "{}", f.name);
        }
    }
}

#[test]
fn spot_values_of_the_spec() {
    assert_eq!(F6E2M3::MAX.to_f32(), 7.5);
    assert_eq!(F6E3M2::MAX.to_f32(), 28.0);
    assert_eq!(F4E2M1::MAX.to_f32(), 6.0);
    assert_eq!(F8UE4M3::MAX.to_f32(), 448.0);
    assert_eq!(F4E2M1::from_f32(2.5).to_f32(), 2.0); // tie between 2 (code 4) and 3 (code 5)
    assert_eq!(F4E2M1::from_f32(0.25).to_f32(), 0.0); // tie between 0 and 0.5
    assert_eq!(F4E2M1::from_f32(0.75).to_f32(), 1.0); // tie between 0.5 (odd) and 1 (even)
    assert_eq!(F4E2M1::from_f32(5.0).to_f32(), 4.0); // tie between 4 (code 6) and 6 (code 7)
    assert_eq!(F4E2M1::from_f32(-100.0).to_f32(), -6.0);
    assert_eq!(F4E2M1::from_f32(-0.0).to_bits(), 0x8);
    assert_eq!(F4E2M1::from_f32(f32::NAN).to_f32(), 6.0);
    assert_eq!(F6E2M3::from_f32(0.3).to_f32(), 0.25);
    assert_eq!(F6E3M2::from_f32(0.3).to_f32(), 0.3125);
    assert_eq!(F8UE4M3::from_f32(-1.0).to_f32(), 0.0);
    assert!(F8UE4M3::from_f32(f32::NAN).is_nan());
    assert!(F4E2M1::from_f32(1.0) == F4E2M1::from_f32(1.2));
    assert!(F4E2M1::from_bits(0x0) == F4E2M1::from_bits(0x8)); // +0 == -0
}

/// The value of an E8M0 code from its definition.
fn ue8m0_value(code: u8) -> f64 {
    2f64.powi(i32::from(code) - 127)
}

#[test]
fn ue8m0_codes_nan_and_rounding() {
    for code in 0..=254u8 {
        let value = F8UE8M0::from_bits(code).to_f32();
        assert_eq!(f64::from(value), ue8m0_value(code), "{code:#04x}");
        assert_eq!(F8UE8M0::from_f32(value).to_bits(), code, "{code:#04x}");
    }
    assert!(F8UE8M0::from_bits(0xFF).is_nan() && F8UE8M0::from_bits(0xFF).to_f32().is_nan());
    assert_eq!(F8UE8M0::from_f32(f32::NAN).to_bits(), 0xFF);
    // Saturation at both ends; the format has no zero and no sign.
    assert_eq!(F8UE8M0::from_f32(f32::INFINITY).to_bits(), 0xFE);
    assert_eq!(F8UE8M0::from_f32(f32::MAX).to_bits(), 0xFE);
    assert_eq!(F8UE8M0::from_f32(0.0).to_bits(), 0x00);
    assert_eq!(F8UE8M0::from_f32(-4.0).to_bits(), 0x00);
    // Ties at 1.5 * 2^k go to the even code; off-tie values to the nearer power.
    for code in 1..=253u8 {
        let tie = (1.5 * ue8m0_value(code)) as f32;
        let even = if code % 2 == 0 { code } else { code + 1 };
        assert_eq!(F8UE8M0::from_f32(tie).to_bits(), even, "tie above {code:#04x}");
        let below = f32::from_bits(tie.to_bits() - 1);
        let above = f32::from_bits(tie.to_bits() + 1);
        assert_eq!(F8UE8M0::from_f32(below).to_bits(), code, "below the tie of {code:#04x}");
        assert_eq!(F8UE8M0::from_f32(above).to_bits(), code + 1, "above the tie of {code:#04x}");
    }
    assert_eq!(F8UE8M0::from_f32(3.0).to_f32(), 2.0); // 3 = 1.5 * 2: code 128 is even
    assert_eq!(F8UE8M0::from_f32(6.0).to_f32(), 8.0); // 6 = 1.5 * 4: code 130 is even
}

/// `v` modulo 2^bits, as a signed (two's complement) or unsigned value: the reference.
fn wrap(v: i32, bits: u32, signed: bool) -> i32 {
    let low = v.rem_euclid(1 << bits);
    if signed && low >= 1 << (bits - 1) { low - (1 << bits) } else { low }
}

#[test]
fn sub_byte_integers_wrap_and_sign_extend() {
    for byte in 0..=255u8 {
        let v = i32::from(byte as i8);
        // new keeps the low bits; get sign-extends (signed) or not (unsigned).
        assert_eq!(i32::from(S6::new(byte as i8).get()), wrap(v, 6, true), "s6 {v}");
        assert_eq!(i32::from(S4::new(byte as i8).get()), wrap(v, 4, true), "s4 {v}");
        assert_eq!(i32::from(S2::new(byte as i8).get()), wrap(v, 2, true), "s2 {v}");
        let u = i32::from(byte);
        assert_eq!(i32::from(U6::new(byte).get()), wrap(u, 6, false), "u6 {u}");
        assert_eq!(i32::from(U4::new(byte).get()), wrap(u, 4, false), "u4 {u}");
        assert_eq!(i32::from(U2::new(byte).get()), wrap(u, 2, false), "u2 {u}");
        assert_eq!(i32::from(U1::new(byte).get()), wrap(u, 1, false), "u1 {u}");
        assert_eq!(Bin1::new(byte).get(), u8::from(byte != 0), "bin1 {u}");
        // Stored bits: the value's low bits, zero above.
        assert_eq!(S4::new(byte as i8).to_bits(), byte & 0xF);
        assert_eq!(S6::new(byte as i8).to_bits(), byte & 0x3F);
        // Reading ignores the bits above.
        assert_eq!(i32::from(S4::from_bits(byte).get()), wrap(i32::from(byte & 0xF), 4, true));
        assert_eq!(i32::from(U2::from_bits(byte).get()), i32::from(byte & 0x3));
        assert_eq!(S4::from_bits(byte), S4::new((byte & 0xF) as i8));
    }
    assert_eq!((S4::MIN, S4::MAX, S6::MIN, S6::MAX, S2::MIN, S2::MAX), (-8, 7, -32, 31, -2, 1));
    assert_eq!((U4::MAX, U6::MAX, U2::MAX, U1::MAX), (15, 63, 3, 1));
    assert_eq!(S4::new(-1).to_bits(), 0x0F);
    assert_eq!(Bin1::from(true).get(), 1);
}

#[test]
fn every_narrow_type_is_one_byte() {
    assert_eq!(size_of::<F6E2M3>(), 1);
    assert_eq!(size_of::<F6E3M2>(), 1);
    assert_eq!(size_of::<F4E2M1>(), 1);
    assert_eq!(size_of::<F8UE4M3>(), 1);
    assert_eq!(size_of::<F8UE8M0>(), 1);
    assert_eq!(size_of::<S4>(), 1);
    assert_eq!(size_of::<Bin1>(), 1);
    assert_eq!(<S4 as choreo::DeviceRepr>::CHOREO_TYPE, "s4");
    assert_eq!(<F4E2M1 as choreo::DeviceRepr>::CHOREO_TYPE, "f4_e2m1");
}
