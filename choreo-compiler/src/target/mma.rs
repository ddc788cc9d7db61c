//! MMA instruction selection (spec-tier3 §5.3): a configuration (operand and accumulator
//! types, M×N×K, dense or sparse) is looked up in table W (WMMA), then G (WGMMA), then S
//! (`mma.sync`); the first table that has the configuration fixes the family, and the
//! architecture must then be new enough for it. A pure function of its inputs, so that sema
//! (which reports) and the tests (which pin the tables) agree.

use super::Arch;
use std::fmt;

/// The element types an MMA configuration talks about (`f32` operands mean tf32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MmaType {
    /// `f16`
    F16,
    /// `bf16`
    Bf16,
    /// `tf32` (or `f32` operands)
    Tf32,
    /// `f32` (accumulators)
    F32,
    /// `f64`
    F64,
    /// `s8`
    S8,
    /// `u8`
    U8,
    /// `s32` (accumulators)
    S32,
    /// `f8_e4m3`
    E4m3,
    /// `f8_e5m2`
    E5m2,
    /// Anything else (sub-byte, fp6/fp4, `ue*`, 16/64-bit integers, …): no configuration.
    Other,
}

impl MmaType {
    /// The spelling in diagnostics.
    pub fn name(self) -> &'static str {
        match self {
            MmaType::F16 => "f16",
            MmaType::Bf16 => "bf16",
            MmaType::Tf32 => "tf32",
            MmaType::F32 => "f32",
            MmaType::F64 => "f64",
            MmaType::S8 => "s8",
            MmaType::U8 => "u8",
            MmaType::S32 => "s32",
            MmaType::E4m3 => "f8_e4m3",
            MmaType::E5m2 => "f8_e5m2",
            MmaType::Other => "?",
        }
    }

    fn is_fp8(self) -> bool {
        matches!(self, MmaType::E4m3 | MmaType::E5m2)
    }

    fn is_int8(self) -> bool {
        matches!(self, MmaType::S8 | MmaType::U8)
    }
}

/// The instruction families of §5.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MmaFamily {
    /// The WMMA API (`<mma.h>`), one warp.
    Wmma,
    /// `wgmma.mma_async`, one warpgroup (M = 64).
    Wgmma,
    /// `mma.sync`, one warp.
    MmaSync,
}

impl MmaFamily {
    /// The family's name in diagnostics.
    pub fn name(self) -> &'static str {
        match self {
            MmaFamily::Wmma => "WMMA",
            MmaFamily::Wgmma => "WGMMA",
            MmaFamily::MmaSync => "mma.sync",
        }
    }
}

/// One MMA configuration: `C += A·B` with A `M×K`, B `K×N`, C `M×N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MmaConfig {
    /// A's element type.
    pub a: MmaType,
    /// B's element type.
    pub b: MmaType,
    /// The accumulator's element type.
    pub c: MmaType,
    /// Rows of A and C.
    pub m: u64,
    /// Columns of B and C.
    pub n: u64,
    /// The reduction extent.
    pub k: u64,
    /// `.sp` (2:4 sparse A).
    pub sparse: bool,
}

impl fmt::Display for MmaConfig {
    /// The reference's spelling: `f16(a)f16(b)f32(c)f32(d): m16n8k16`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}(a){}(b){}(c){}(d): m{}n{}k{}{}",
            self.a.name(),
            self.b.name(),
            self.c.name(),
            self.c.name(),
            self.m,
            self.n,
            self.k,
            if self.sparse { " sparse" } else { "" }
        )
    }
}

/// What selection found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// The family, available on the architecture.
    Selected(MmaFamily),
    /// The family the configuration belongs to, which needs a newer architecture:
    /// `min_sm` (with `specific`: exactly `sm_<min_sm>a`).
    TooOld {
        /// The family.
        family: MmaFamily,
        /// The oldest SM number that has it.
        min_sm: u32,
        /// Whether only the architecture-specific `sm_<min_sm>a` has it.
        specific: bool,
    },
    /// No table has the configuration.
    NoConfig,
}

/// The oldest SM number of a configuration in table W (WMMA), if it is there.
fn table_w(c: &MmaConfig) -> Option<u32> {
    use MmaType::*;
    if c.sparse {
        return None;
    }
    let shape = (c.m, c.n, c.k);
    let big = matches!(shape, (16, 16, 16) | (32, 8, 16) | (8, 32, 16));
    match (c.a, c.b, c.c) {
        (F16, F16, F16 | F32) if big => Some(70),
        (S8, S8, S32) | (U8, U8, S32) if big => Some(72),
        (Bf16, Bf16, F32) if big => Some(80),
        (Tf32, Tf32, F32) if shape == (16, 16, 8) => Some(80),
        (F64, F64, F64) if shape == (8, 8, 4) => Some(80),
        _ => None,
    }
}

/// Table G (WGMMA): always `sm_90a`.
fn table_g(c: &MmaConfig) -> bool {
    use MmaType::*;
    if c.m != 64 {
        return false;
    }
    let n = c.n;
    let step8 = |lo: u64| (lo..=256).contains(&n) && n % 8 == 0;
    let int_n = n == 8 || n == 16 || n == 24 || ((32..=224).contains(&n) && n % 16 == 0);
    if c.sparse {
        let sp_n = matches!(n, 8 | 16 | 32 | 64 | 96 | 128 | 192 | 256);
        return sp_n
            && match (c.a, c.b, c.c) {
                (F16, F16, F16 | F32) | (Bf16, Bf16, F32) => c.k == 32,
                (E4m3, E4m3, F16 | F32) => c.k == 64,
                _ => false,
            };
    }
    match (c.a, c.b, c.c) {
        (F16, F16, F16 | F32) | (Bf16, Bf16, F32) => c.k == 16 && step8(8),
        (Tf32, Tf32, F32) => c.k == 8 && step8(16),
        (a, b, F16 | F32) if a.is_fp8() && b.is_fp8() => c.k == 32 && step8(8),
        (S8, S8, S32) | (U8, U8, S32) => c.k == 32 && int_n,
        _ => false,
    }
}

/// The oldest SM number of a configuration in table S (`mma.sync`), if it is there.
fn table_s(c: &MmaConfig) -> Option<u32> {
    use MmaType::*;
    let shape = (c.m, c.n, c.k);
    if c.sparse {
        return match (c.a, c.b, c.c) {
            (F16, F16, F16 | F32) | (Bf16, Bf16, F32)
                if matches!(shape, (16, 8, 16) | (16, 8, 32)) =>
            {
                Some(80)
            }
            // f32 only: ptxas (CUDA 12.4 and 13) rejects the f16 accumulator of an fp8
            // mma.sp on sm_90a ("mma with F16 accumulator and F8 floating point type").
            (a, b, F32) if a.is_fp8() && b.is_fp8() && shape == (16, 8, 64) => Some(90),
            _ => None,
        };
    }
    match (c.a, c.b, c.c) {
        (F16, F16, F16 | F32) if shape == (8, 8, 4) => Some(70),
        (F16, F16, F16 | F32) if matches!(shape, (16, 8, 8) | (16, 8, 16)) => Some(80),
        (Bf16, Bf16, F32) if matches!(shape, (16, 8, 8) | (16, 8, 16)) => Some(80),
        (Tf32, Tf32, F32) if matches!(shape, (16, 8, 4) | (16, 8, 8)) => Some(80),
        (F64, F64, F64) if shape == (8, 8, 4) => Some(80),
        (F64, F64, F64) if matches!(shape, (16, 8, 4) | (16, 8, 8) | (16, 8, 16)) => Some(90),
        (a, b, S32)
            if a.is_int8()
                && b.is_int8()
                && matches!(shape, (8, 8, 16) | (16, 8, 16) | (16, 8, 32)) =>
        {
            Some(80)
        }
        (a, b, F16 | F32) if a.is_fp8() && b.is_fp8() && shape == (16, 8, 32) => Some(89),
        _ => None,
    }
}

/// Selects the family of `c` for `arch` (`None`: the CPU, which emulates every family the
/// newest architecture has, so that it picks what a GPU picks). Tables W, G, S in that order;
/// the first hit decides.
pub fn select(c: &MmaConfig, arch: Option<Arch>) -> Selection {
    let gate = |family: MmaFamily, min_sm: u32, specific: bool| {
        let ok = match arch {
            None => true,
            Some(a) if specific => a.is_hopper_specific(),
            Some(a) => a.sm() >= min_sm,
        };
        if ok {
            Selection::Selected(family)
        } else {
            Selection::TooOld { family, min_sm, specific }
        }
    };
    if let Some(sm) = table_w(c) {
        return gate(MmaFamily::Wmma, sm, false);
    }
    if table_g(c) {
        return gate(MmaFamily::Wgmma, 90, true);
    }
    if let Some(sm) = table_s(c) {
        return gate(MmaFamily::MmaSync, sm, false);
    }
    Selection::NoConfig
}

#[cfg(test)]
mod tests {
    use super::MmaType::*;
    use super::*;

    fn cfg(a: MmaType, c: MmaType, m: u64, n: u64, k: u64) -> MmaConfig {
        MmaConfig { a, b: a, c, m, n, k, sparse: false }
    }

    fn arch(name: &str) -> Option<Arch> {
        Some(name.parse().expect("known arch"))
    }

    #[test]
    fn wmma_comes_first() {
        let c = cfg(F16, F32, 16, 16, 16);
        assert_eq!(select(&c, arch("sm_70")), Selection::Selected(MmaFamily::Wmma));
        assert_eq!(select(&c, arch("sm_90a")), Selection::Selected(MmaFamily::Wmma));
        // f64 8x8x4 is in W and in S: W wins.
        let d = cfg(F64, F64, 8, 8, 4);
        assert_eq!(select(&d, arch("sm_80")), Selection::Selected(MmaFamily::Wmma));
    }

    #[test]
    fn mma_sync_shapes_and_gates() {
        let c = cfg(F16, F32, 16, 8, 16);
        assert_eq!(select(&c, arch("sm_80")), Selection::Selected(MmaFamily::MmaSync));
        assert_eq!(
            select(&c, arch("sm_75")),
            Selection::TooOld { family: MmaFamily::MmaSync, min_sm: 80, specific: false }
        );
        let f8 = MmaConfig { a: E4m3, b: E5m2, c: F32, m: 16, n: 8, k: 32, sparse: false };
        assert_eq!(select(&f8, arch("sm_89")), Selection::Selected(MmaFamily::MmaSync));
        assert!(matches!(select(&f8, arch("sm_86")), Selection::TooOld { min_sm: 89, .. }));
        let mixed = MmaConfig { a: S8, b: U8, c: S32, m: 16, n: 8, k: 32, sparse: false };
        assert_eq!(select(&mixed, arch("sm_80")), Selection::Selected(MmaFamily::MmaSync));
        // Mixed signedness is not in W, even in a W shape.
        let w_mixed = MmaConfig { m: 16, n: 16, k: 16, ..mixed };
        assert_eq!(select(&w_mixed, arch("sm_90a")), Selection::NoConfig);
        assert_eq!(
            select(&cfg(F64, F64, 16, 8, 8), arch("sm_89")),
            Selection::TooOld { family: MmaFamily::MmaSync, min_sm: 90, specific: false }
        );
        assert_eq!(
            select(&cfg(Tf32, F32, 16, 8, 4), None),
            Selection::Selected(MmaFamily::MmaSync)
        );
    }

    #[test]
    fn wgmma_needs_sm90a() {
        let c = cfg(F16, F32, 64, 64, 16);
        assert_eq!(select(&c, arch("sm_90a")), Selection::Selected(MmaFamily::Wgmma));
        assert_eq!(
            select(&c, arch("sm_90")),
            Selection::TooOld { family: MmaFamily::Wgmma, min_sm: 90, specific: true }
        );
        assert_eq!(select(&cfg(S8, S32, 64, 40, 32), arch("sm_90a")), Selection::NoConfig);
        assert_eq!(
            select(&cfg(S8, S32, 64, 48, 32), arch("sm_90a")),
            Selection::Selected(MmaFamily::Wgmma)
        );
        // No fp8 K 16 (⚠ upstream lists it).
        assert_eq!(select(&cfg(E4m3, F32, 64, 64, 16), arch("sm_90a")), Selection::NoConfig);
    }

    #[test]
    fn no_config() {
        assert_eq!(select(&cfg(F16, F16, 16, 16, 8), None), Selection::NoConfig);
        assert_eq!(select(&cfg(S8, S8, 16, 8, 32), None), Selection::NoConfig);
        assert_eq!(select(&cfg(Other, F32, 16, 8, 16), None), Selection::NoConfig);
        assert_eq!(select(&cfg(Bf16, F16, 16, 8, 16), None), Selection::NoConfig);
    }

    #[test]
    fn display_like_the_reference() {
        let c = cfg(F16, F32, 16, 8, 16);
        assert_eq!(c.to_string(), "f16(a)f16(b)f32(c)f32(d): m16n8k16");
    }
}
