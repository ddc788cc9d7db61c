//! Element types that can live in device memory, and the newtypes of the one-byte element types
//! Rust has no type for: fp8 (`F8E4M3`, `F8E5M2`), the narrow floats of spec-tier3 §8
//! (`F8UE4M3`, `F8UE8M0`, `F6E2M3`, `F6E3M2`, `F4E2M1`) and the sub-byte integers (`S6`, `U6`,
//! `S4`, `U4`, `S2`, `U2`, `U1`, `Bin1`).
//!
//! Every one of them is one byte per element in memory, never packed: element `i` of a tensor
//! is byte `i`. The narrow floats and sub-byte integers keep their value in the low bits of the
//! byte (the bits above are zero when written by a conversion, and ignored when read), which is
//! the layout of the C++ types of `choreo.h` (`choreo::f4_e2m1`, `choreo::s4`, …).

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
    F8UE4M3 => "f8_ue4m3", F8UE8M0 => "f8_ue8m0",
    F6E2M3 => "f6_e2m3", F6E3M2 => "f6_e3m2", F4E2M1 => "f4_e2m1",
    S6 => "s6", U6 => "u6", S4 => "s4", U4 => "u4", S2 => "s2", U2 => "u2", U1 => "u1",
    Bin1 => "bin1",
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

/// `From<T> for f32`, IEEE comparison and ordering, `Debug` and `Display` of a one-byte float
/// newtype with a `to_f32` method (the fp8 types and the narrow floats).
macro_rules! narrow_float_traits {
    ($name:ident, $choreo:literal) => {
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

        narrow_float_traits!($name, $choreo);
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

/// A small float format without infinities, stored in the low bits of a byte: an optional sign
/// bit above `exp_bits` exponent bits (bias `bias`) and `man_bits` mantissa bits, subnormals.
struct MiniFormat {
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    /// Whether a sign bit sits above the exponent.
    signed: bool,
    /// The largest finite magnitude code.
    max_code: u8,
    /// The NaN magnitude code, if the format has one.
    nan_code: Option<u8>,
}

/// OCP FP6 E2M3: bias 1, largest value 7.5.
const FP6_E2M3: MiniFormat =
    MiniFormat { exp_bits: 2, man_bits: 3, bias: 1, signed: true, max_code: 0x1F, nan_code: None };
/// OCP FP6 E3M2: bias 3, largest value 28.
const FP6_E3M2: MiniFormat =
    MiniFormat { exp_bits: 3, man_bits: 2, bias: 3, signed: true, max_code: 0x1F, nan_code: None };
/// OCP FP4 E2M1: bias 1, largest value 6.
const FP4_E2M1: MiniFormat =
    MiniFormat { exp_bits: 2, man_bits: 1, bias: 1, signed: true, max_code: 0x7, nan_code: None };
/// Unsigned E4M3: bias 7, largest value 448, NaN 0x7F.
const UE4M3: MiniFormat = MiniFormat {
    exp_bits: 4,
    man_bits: 3,
    bias: 7,
    signed: false,
    max_code: 0x7E,
    nan_code: Some(0x7F),
};

impl MiniFormat {
    /// The bits that hold a value (sign included); the bits above are ignored when read.
    const fn value_mask(&self) -> u8 {
        let bits = self.exp_bits + self.man_bits + if self.signed { 1 } else { 0 };
        ((1u32 << bits) - 1) as u8
    }

    const fn sign_bit(&self) -> u8 {
        if self.signed { 1 << (self.exp_bits + self.man_bits) } else { 0 }
    }

    /// The exact value of a code (as f64; every value of these formats is exact in f32 too).
    fn decode(&self, code: u8) -> f64 {
        let code = code & self.value_mask();
        let magnitude_code = code & !self.sign_bit();
        if Some(magnitude_code) == self.nan_code {
            return f64::NAN;
        }
        let exponent = i32::from(magnitude_code >> self.man_bits);
        let mantissa = f64::from(magnitude_code & ((1 << self.man_bits) - 1));
        let scale = f64::from(1u32 << self.man_bits);
        let magnitude = if exponent == 0 {
            mantissa / scale * 2f64.powi(1 - self.bias)
        } else {
            (1.0 + mantissa / scale) * 2f64.powi(exponent - self.bias)
        };
        if code & self.sign_bit() != 0 { -magnitude } else { magnitude }
    }

    /// Rounds `x` to the nearest value (ties to the even code), saturating to the largest
    /// finite value (infinities too). NaN becomes the NaN code, or the largest positive value
    /// where there is none (as CUDA's fp6/fp4 conversions do). Unsigned formats make negative
    /// values (and -0) zero. Zero keeps its sign in signed formats.
    fn encode(&self, x: f32) -> u8 {
        if x.is_nan() {
            return self.nan_code.unwrap_or(self.max_code);
        }
        let sign = if x.is_sign_negative() { self.sign_bit() } else { 0 };
        if x.is_sign_negative() && !self.signed {
            return 0;
        }
        let magnitude = f64::from(x).abs();
        if magnitude >= self.decode(self.max_code) {
            return sign | self.max_code;
        }
        // Magnitude codes 0..=max_code are ordered by value: find the last one <= magnitude.
        let (mut low, mut high) = (0u8, self.max_code);
        while low < high {
            let middle = low + (high - low).div_ceil(2);
            if self.decode(middle) <= magnitude {
                low = middle;
            } else {
                high = middle - 1;
            }
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

macro_rules! narrow_float_type {
    ($(#[$doc:meta])* $name:ident, $format:expr, $choreo:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default)]
        #[repr(transparent)]
        pub struct $name(u8);

        impl $name {
            /// Positive zero.
            pub const ZERO: Self = Self(0);
            /// The largest finite value.
            pub const MAX: Self = Self($format.max_code);

            /// The value with this bit pattern (bits above the format are kept, and ignored
            /// when read).
            pub const fn from_bits(bits: u8) -> Self {
                Self(bits)
            }

            /// The bit pattern.
            pub const fn to_bits(self) -> u8 {
                self.0
            }

            /// Converts from `f32` as the C++ type of the same name does: round to nearest,
            /// ties to the even code; values beyond the largest finite value (infinities
            /// included) saturate to it. See the type's documentation for NaN and signs.
            pub fn from_f32(value: f32) -> Self {
                Self($format.encode(value))
            }

            /// The exact value as `f32`.
            pub fn to_f32(self) -> f32 {
                $format.decode(self.0) as f32
            }

            /// `true` for the NaN code (never, for the formats without one).
            pub fn is_nan(self) -> bool {
                self.to_f32().is_nan()
            }
        }

        narrow_float_traits!($name, $choreo);
    };
}

narrow_float_type!(
    /// Choreo `f6_e2m3`: OCP MX FP6 E2M3 in the low 6 bits of a byte (bit 5 sign, bits 4..3
    /// exponent with bias 1, bits 2..0 mantissa; bits 7..6 zero). Subnormals, no infinities or
    /// NaNs; values up to 7.5. NaN converts to 7.5 (as CUDA's `__nv_cvt_float_to_fp6` does).
    F6E2M3,
    FP6_E2M3,
    "f6_e2m3"
);

narrow_float_type!(
    /// Choreo `f6_e3m2`: OCP MX FP6 E3M2 in the low 6 bits of a byte (bit 5 sign, bits 4..2
    /// exponent with bias 3, bits 1..0 mantissa; bits 7..6 zero). Subnormals, no infinities or
    /// NaNs; values up to 28. NaN converts to 28.
    F6E3M2,
    FP6_E3M2,
    "f6_e3m2"
);

narrow_float_type!(
    /// Choreo `f4_e2m1`: OCP MX FP4 E2M1 in the low 4 bits of a byte (bit 3 sign, bits 2..1
    /// exponent with bias 1, bit 0 mantissa; bits 7..4 zero): the values 0, 0.5, 1, 1.5, 2, 3,
    /// 4, 6 and their negatives. No infinities or NaNs; NaN converts to 6.
    F4E2M1,
    FP4_E2M1,
    "f4_e2m1"
);

narrow_float_type!(
    /// Choreo `f8_ue4m3`: unsigned E4M3 (a scale factor) in the low 7 bits of a byte (bits
    /// 6..3 exponent with bias 7, bits 2..0 mantissa; bit 7 zero). Values up to 448; `0x7F` is
    /// NaN. Negative values (and -0) convert to 0.
    F8UE4M3,
    UE4M3,
    "f8_ue4m3"
);

impl F8UE4M3 {
    /// The NaN code.
    pub const NAN: Self = Self(0x7F);
}

/// Choreo `f8_ue8m0`: an unsigned power of two (an MX scale factor), `2^(code - 127)` for codes
/// 0 to 254 (2^-127 to 2^127), and NaN for `0xFF`; it has no zero and no sign. Conversion from
/// `f32` rounds to the nearest power of two (a tie, `1.5 * 2^k`, goes to the even code) and
/// saturates: to 2^127 above (infinity too) and to 2^-127 below (zero and negative values too).
/// NaN becomes `0xFF`.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct F8UE8M0(u8);

impl Default for F8UE8M0 {
    /// 1.0 (the format has no zero).
    fn default() -> Self {
        Self::ONE
    }
}

impl F8UE8M0 {
    /// The all-zero bit pattern: 2^-127, the smallest value (the format has no zero).
    pub const ZERO: Self = Self(0);
    /// 1.0.
    pub const ONE: Self = Self(127);
    /// The largest value, 2^127.
    pub const MAX: Self = Self(0xFE);
    /// The NaN code.
    pub const NAN: Self = Self(0xFF);

    /// The value with this bit pattern.
    pub const fn from_bits(bits: u8) -> Self {
        Self(bits)
    }

    /// The bit pattern.
    pub const fn to_bits(self) -> u8 {
        self.0
    }

    /// Converts from `f32`: the nearest power of two, ties to the even code, saturating (see
    /// the type's documentation).
    pub fn from_f32(value: f32) -> Self {
        if value.is_nan() {
            return Self::NAN;
        }
        if value <= 0.0 {
            return Self(0);
        }
        let magnitude = f64::from(value);
        // The last code whose value is <= magnitude, then the nearer of it and the next one.
        let mut low = 0u8;
        while low < 0xFE && Self(low + 1).value() <= magnitude {
            low += 1;
        }
        if low == 0xFE {
            return Self::MAX;
        }
        let midpoint = (Self(low).value() + Self(low + 1).value()) / 2.0;
        Self(match magnitude.partial_cmp(&midpoint) {
            Some(Ordering::Less) => low,
            Some(Ordering::Greater) => low + 1,
            _ if low % 2 == 0 => low,
            _ => low + 1,
        })
    }

    fn value(self) -> f64 {
        if self.0 == 0xFF { f64::NAN } else { 2f64.powi(i32::from(self.0) - 127) }
    }

    /// The exact value as `f32` (2^-127 is an f32 subnormal).
    pub fn to_f32(self) -> f32 {
        self.value() as f32
    }

    /// `true` for the NaN code.
    pub fn is_nan(self) -> bool {
        self.0 == 0xFF
    }
}

narrow_float_traits!(F8UE8M0, "f8_ue8m0");

macro_rules! subbyte_int_type {
    ($(#[$doc:meta])* $name:ident, $bits:literal, signed, $choreo:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default)]
        #[repr(transparent)]
        pub struct $name(u8);

        impl $name {
            /// The number of value bits.
            pub const BITS: u32 = $bits;
            /// Zero.
            pub const ZERO: Self = Self(0);
            /// The smallest value, `-2^(BITS-1)`.
            pub const MIN: i8 = -(1 << ($bits - 1));
            /// The largest value, `2^(BITS-1) - 1`.
            pub const MAX: i8 = (1 << ($bits - 1)) - 1;

            /// `value` modulo 2^BITS (its low `BITS` bits, two's complement), as C++ stores it.
            pub const fn new(value: i8) -> Self {
                Self((value as u8) & ((1 << $bits) - 1))
            }

            /// The value: the low `BITS` bits of the byte, sign-extended.
            pub const fn get(self) -> i8 {
                let shift = 8 - $bits;
                ((self.0 << shift) as i8) >> shift
            }

            /// The value with this bit pattern (bits above `BITS` are kept, and ignored when
            /// read).
            pub const fn from_bits(bits: u8) -> Self {
                Self(bits)
            }

            /// The bit pattern.
            pub const fn to_bits(self) -> u8 {
                self.0
            }
        }

        subbyte_int_traits!($name, i8, $choreo);
    };
    ($(#[$doc:meta])* $name:ident, $bits:literal, unsigned, $choreo:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default)]
        #[repr(transparent)]
        pub struct $name(u8);

        impl $name {
            /// The number of value bits.
            pub const BITS: u32 = $bits;
            /// Zero.
            pub const ZERO: Self = Self(0);
            /// The smallest value, 0.
            pub const MIN: u8 = 0;
            /// The largest value, `2^BITS - 1`.
            pub const MAX: u8 = ((1u16 << $bits) - 1) as u8;

            /// `value` modulo 2^BITS (its low `BITS` bits), as C++ stores it.
            pub const fn new(value: u8) -> Self {
                Self(value & Self::MAX)
            }

            /// The value: the low `BITS` bits of the byte.
            pub const fn get(self) -> u8 {
                self.0 & Self::MAX
            }

            /// The value with this bit pattern (bits above `BITS` are kept, and ignored when
            /// read).
            pub const fn from_bits(bits: u8) -> Self {
                Self(bits)
            }

            /// The bit pattern.
            pub const fn to_bits(self) -> u8 {
                self.0
            }
        }

        subbyte_int_traits!($name, u8, $choreo);
    };
}

macro_rules! subbyte_int_traits {
    ($name:ident, $int:ty, $choreo:literal) => {
        impl From<$name> for $int {
            fn from(value: $name) -> $int {
                value.get()
            }
        }

        impl From<$name> for i32 {
            fn from(value: $name) -> i32 {
                i32::from(value.get())
            }
        }

        /// Equality of the values (the bits above the value bits do not count).
        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.get() == other.get()
            }
        }

        impl Eq for $name {}

        impl std::hash::Hash for $name {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.get().hash(state);
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", $choreo, self.get())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.get(), f)
            }
        }
    };
}

subbyte_int_type!(
    /// Choreo `s6`: a 6-bit two's-complement integer (-32..=31) in the low 6 bits of a byte.
    S6, 6, signed, "s6"
);
subbyte_int_type!(
    /// Choreo `s4`: a 4-bit two's-complement integer (-8..=7) in the low 4 bits of a byte.
    S4, 4, signed, "s4"
);
subbyte_int_type!(
    /// Choreo `s2`: a 2-bit two's-complement integer (-2..=1) in the low 2 bits of a byte.
    S2, 2, signed, "s2"
);
subbyte_int_type!(
    /// Choreo `u6`: a 6-bit unsigned integer (0..=63) in the low 6 bits of a byte.
    U6, 6, unsigned, "u6"
);
subbyte_int_type!(
    /// Choreo `u4`: a 4-bit unsigned integer (0..=15) in the low 4 bits of a byte.
    U4, 4, unsigned, "u4"
);
subbyte_int_type!(
    /// Choreo `u2`: a 2-bit unsigned integer (0..=3) in the low 2 bits of a byte.
    U2, 2, unsigned, "u2"
);
subbyte_int_type!(
    /// Choreo `u1`: a 1-bit unsigned integer (0 or 1) in bit 0 of a byte; `new` keeps bit 0.
    U1, 1, unsigned, "u1"
);

/// Choreo `bin1`: a binary value (0 or 1, the b1 MMA operand) in bit 0 of a byte. It converts
/// like `bool`: [`Bin1::new`] makes any nonzero value 1.
#[derive(Clone, Copy, Default)]
#[repr(transparent)]
pub struct Bin1(u8);

impl Bin1 {
    /// The number of value bits.
    pub const BITS: u32 = 1;
    /// Zero.
    pub const ZERO: Self = Self(0);
    /// One.
    pub const ONE: Self = Self(1);

    /// 1 for any nonzero `value`, else 0 (as C++ `choreo::bin1` converts).
    pub const fn new(value: u8) -> Self {
        Self((value != 0) as u8)
    }

    /// The value, 0 or 1 (bit 0 of the byte).
    pub const fn get(self) -> u8 {
        self.0 & 1
    }

    /// The value with this bit pattern (bits above bit 0 are kept, and ignored when read).
    pub const fn from_bits(bits: u8) -> Self {
        Self(bits)
    }

    /// The bit pattern.
    pub const fn to_bits(self) -> u8 {
        self.0
    }
}

impl From<bool> for Bin1 {
    fn from(value: bool) -> Bin1 {
        Bin1(u8::from(value))
    }
}

subbyte_int_traits!(Bin1, u8, "bin1");

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
