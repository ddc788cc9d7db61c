//! Element types that can live in device memory, and the fp8 newtypes.

use std::cmp::Ordering;
use std::fmt;

/// An element type that may be stored in device memory and copied between host and device.
///
/// Device code can leave any bit pattern in memory, and copies move raw bytes, so only types for
/// which *every* bit pattern is a valid value may implement this trait. That is why `bool` does
/// not (a kernel could store `2`), and why enums, references and pointers never can.
///
/// The constant [`DeviceRepr::CHOREO_TYPE`] is the Choreo spelling of the type, used in
/// diagnostics and by the code generator.
///
/// # Safety
///
/// An implementing type must
/// - accept every bit pattern of `size_of::<Self>()` bytes as a valid value (in particular the
///   all-zero pattern),
/// - have no padding bytes, no interior mutability, and no pointers or references,
/// - have an alignment of at most 256 bytes (what `cudaMalloc` guarantees), and
/// - have the same size and layout as the device type of the same Choreo name.
pub unsafe trait DeviceRepr: Copy + Send + Sync + 'static {
    /// The Choreo element type name, e.g. `"f32"`, `"s8"`, `"f8_e4m3"`.
    const CHOREO_TYPE: &'static str;
}

macro_rules! device_repr {
    ($($ty:ty => $name:literal),* $(,)?) => {
        $(
            // SAFETY: a primitive integer/float or a `half` 16-bit float (repr(transparent) over
            // u16): every bit pattern is a valid value, no padding, alignment <= 8, and the
            // layout equals the device type of the same name.
            unsafe impl DeviceRepr for $ty {
                const CHOREO_TYPE: &'static str = $name;
            }
        )*
    };
}

device_repr! {
    i8 => "s8", i16 => "s16", i32 => "s32", i64 => "s64",
    u8 => "u8", u16 => "u16", u32 => "u32", u64 => "u64",
    f32 => "f32", f64 => "f64",
    half::f16 => "f16", half::bf16 => "bf16",
    F8E4M3 => "f8_e4m3", F8E5M2 => "f8_e5m2",
}

/// A `Vec` of `len` zero values, or [`crate::Error::OutOfHostMemory`] when it cannot be
/// allocated.
pub(crate) fn zeroed_vec<T: DeviceRepr>(len: usize) -> crate::Result<Vec<T>> {
    let mut data = Vec::new();
    let bytes = len.saturating_mul(size_of::<T>());
    data.try_reserve_exact(len).map_err(|_| crate::Error::OutOfHostMemory { bytes })?;
    // SAFETY: `DeviceRepr` guarantees that the all-zero bit pattern is a valid `T`.
    let zero: T = unsafe { std::mem::zeroed() };
    data.resize(len, zero);
    Ok(data)
}

/// Description of an 8-bit float format with a sign bit, `EXP` exponent bits and `MAN`
/// mantissa bits.
struct Fp8Format {
    man_bits: u32,
    exp_bits: u32,
    bias: i32,
    /// `true` when the top exponent is reserved for infinities and NaNs (IEEE style, E5M2);
    /// `false` when only the all-ones pattern is NaN (E4M3 "FN": no infinities).
    ieee_specials: bool,
    /// Largest finite positive code.
    max_code: u8,
}

const E4M3: Fp8Format =
    Fp8Format { man_bits: 3, exp_bits: 4, bias: 7, ieee_specials: false, max_code: 0x7E };
const E5M2: Fp8Format =
    Fp8Format { man_bits: 2, exp_bits: 5, bias: 15, ieee_specials: true, max_code: 0x7B };

/// The NaN code produced by conversions (same as CUDA's `__nv_cvt_float_to_fp8`: positive).
const NAN_CODE: u8 = 0x7F;

impl Fp8Format {
    /// The exact value of a code, as f64 (every fp8 value is exactly representable).
    fn decode(&self, code: u8) -> f64 {
        let negative = code & 0x80 != 0;
        let exp_mask = (1u8 << self.exp_bits) - 1;
        let man_mask = (1u8 << self.man_bits) - 1;
        let exponent = (code >> self.man_bits) & exp_mask;
        let mantissa = code & man_mask;
        let magnitude = if exponent == exp_mask && self.ieee_specials {
            if mantissa == 0 { f64::INFINITY } else { f64::NAN }
        } else if exponent == exp_mask && mantissa == man_mask {
            f64::NAN
        } else if exponent == 0 {
            // Subnormal: m * 2^(1 - bias - man_bits).
            f64::from(mantissa) * 2f64.powi(1 - self.bias - self.man_bits as i32)
        } else {
            let scale = f64::from(1u32 << self.man_bits);
            (1.0 + f64::from(mantissa) / scale) * 2f64.powi(i32::from(exponent) - self.bias)
        };
        if negative { -magnitude } else { magnitude }
    }

    /// Rounds `x` to the nearest code (ties to the even code). Values that round beyond the
    /// largest finite value become it when `saturate`, else NaN (E4M3) or infinity (E5M2); NaN
    /// becomes [`NAN_CODE`]. As in IEEE rounding, the format is treated as continuing past its
    /// largest finite value with the same step, so a value exactly halfway rounds to even:
    /// E4M3 464 becomes 448 (even code 0x7E), E5M2 61440 overflows (0x7B is odd).
    fn encode(&self, x: f32, saturate: bool) -> u8 {
        if x.is_nan() {
            return NAN_CODE;
        }
        let sign = if x.is_sign_negative() { 0x80 } else { 0x00 };
        let magnitude = f64::from(x).abs();
        let max = self.decode(self.max_code);
        if magnitude > max {
            // Round to nearest even as if the format continued past its largest finite value
            // with the same step; rounding up means overflow.
            let step_above_max = max - self.decode(self.max_code - 1);
            let midpoint = max + step_above_max / 2.0;
            let rounds_up =
                magnitude > midpoint || (magnitude == midpoint && self.max_code % 2 == 1);
            if !rounds_up || saturate {
                return sign | self.max_code;
            }
            let overflow_code = if self.ieee_specials { self.max_code + 1 } else { NAN_CODE };
            return sign | overflow_code;
        }
        // Positive codes 0..=max_code are ordered by value: find the last one <= magnitude.
        let (mut low, mut high) = (0u8, self.max_code);
        while low < high {
            let middle = low + (high - low).div_ceil(2);
            if self.decode(middle) <= magnitude {
                low = middle;
            } else {
                high = middle - 1;
            }
        }
        if low == self.max_code {
            return sign | low;
        }
        let (below, above) = (self.decode(low), self.decode(low + 1));
        // Both neighbours have few significant bits, so their midpoint is exact in f64.
        let midpoint = (below + above) / 2.0;
        let code = match magnitude.partial_cmp(&midpoint) {
            Some(Ordering::Less) => low,
            Some(Ordering::Greater) => low + 1,
            _ if low % 2 == 0 => low,
            _ => low + 1,
        };
        sign | code
    }
}

macro_rules! fp8_type {
    ($(#[$doc:meta])* $name:ident, $format:expr, $choreo:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default)]
        #[repr(transparent)]
        pub struct $name(pub u8);

        impl $name {
            /// Positive zero.
            pub const ZERO: Self = Self(0);
            /// The largest finite value.
            pub const MAX: Self = Self($format.max_code);
            /// The canonical NaN produced by conversions.
            pub const NAN: Self = Self(NAN_CODE);

            /// The value with this bit pattern.
            pub const fn from_bits(bits: u8) -> Self {
                Self(bits)
            }

            /// The bit pattern.
            pub const fn to_bits(self) -> u8 {
                self.0
            }

            /// Converts from `f32` like CUDA's constructor of the same type does: round to
            /// nearest, ties to even; values beyond the largest finite value (infinities
            /// included) saturate to it (`__NV_SATFINITE`); NaN becomes [`Self::NAN`].
            pub fn from_f32(value: f32) -> Self {
                Self($format.encode(value, true))
            }

            /// Converts from `f32` without saturation (CUDA's `__NV_NOSAT`): round to nearest,
            /// ties to even; values that round beyond the largest finite value become NaN
            /// (E4M3, which has no infinity) or infinity (E5M2).
            pub fn from_f32_unsaturated(value: f32) -> Self {
                Self($format.encode(value, false))
            }

            /// The exact value as `f32`.
            pub fn to_f32(self) -> f32 {
                // Every fp8 value (and infinity/NaN) is exactly representable in f32.
                $format.decode(self.0) as f32
            }

            /// `true` for the NaN codes.
            pub fn is_nan(self) -> bool {
                self.to_f32().is_nan()
            }
        }

        impl From<$name> for f32 {
            fn from(value: $name) -> f32 {
                value.to_f32()
            }
        }

        /// IEEE comparison of the values (NaN is unequal to everything, `-0 == +0`).
        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.to_f32() == other.to_f32()
            }
        }

        /// IEEE ordering of the values.
        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                self.to_f32().partial_cmp(&other.to_f32())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?} = {:#04x})", $choreo, self.to_f32(), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.to_f32(), f)
            }
        }
    };
}

fp8_type!(
    /// Choreo `f8_e4m3` (`f8`): 8-bit float with 4 exponent bits (bias 7) and 3 mantissa bits,
    /// no infinities, NaN = `S.1111.111`, largest finite value 448 (the OCP "E4M3FN" format of
    /// CUDA's `__nv_fp8_e4m3`).
    F8E4M3,
    E4M3,
    "f8_e4m3"
);

fp8_type!(
    /// Choreo `f8_e5m2`: 8-bit IEEE-style float with 5 exponent bits (bias 15) and 2 mantissa
    /// bits, with infinities and NaNs, largest finite value 57344 (CUDA's `__nv_fp8_e5m2`).
    F8E5M2,
    E5M2,
    "f8_e5m2"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_is_monotonic_over_positive_finite_codes() {
        for format in [&E4M3, &E5M2] {
            for code in 1..=format.max_code {
                assert!(format.decode(code) > format.decode(code - 1), "code {code:#x}");
            }
        }
    }

    #[test]
    fn every_finite_code_round_trips() {
        for code in 0..=255u8 {
            let e4 = F8E4M3(code);
            if !e4.is_nan() {
                assert_eq!(F8E4M3::from_f32(e4.to_f32()).0, code, "e4m3 {code:#x}");
            }
            let e5 = F8E5M2(code);
            if e5.to_f32().is_finite() {
                assert_eq!(F8E5M2::from_f32(e5.to_f32()).0, code, "e5m2 {code:#x}");
            }
        }
    }
}
