//! Code generation: the checked program plus its launch plan → output text.
//!
//! [`cuda`] writes the `.cu` file (design §3). This module holds what several emitters and the
//! compile API share: the target architecture ([`Arch`]) and the output mode ([`OutputMode`]).

pub mod cuda;
pub mod rust;

use std::fmt;
use std::str::FromStr;

/// A CUDA target architecture (spec §1.4): `sm_70`, `sm_75`, `sm_80`, `sm_86`, `sm_89`,
/// `sm_90`, `sm_90a`, `sm_100`, `sm_120`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arch {
    /// The SM number (`90` for `sm_90a`).
    sm: u32,
    /// The `a` (architecture-specific features) suffix.
    specific: bool,
}

/// The architectures spec §1.4 accepts, in order.
const KNOWN_ARCHS: &[(u32, bool)] = &[
    (70, false),
    (75, false),
    (80, false),
    (86, false),
    (89, false),
    (90, false),
    (90, true),
    (100, false),
    (120, false),
];

impl Arch {
    /// `sm_90a`, the default of this project (Hopper, with WGMMA and the `group-4` level).
    pub const SM_90A: Arch = Arch { sm: 90, specific: true };

    /// The SM number: `90` for `sm_90a` (what `__CHOREO_REQUIRED_GPU_DEVICE_SM__` is set to).
    pub fn sm(self) -> u32 {
        self.sm
    }

    /// Whether WGMMA (and so the `group-4` and `cluster` levels) is available: `sm_90a` only.
    pub fn has_wgmma(self) -> bool {
        self.sm == 90 && self.specific
    }

    /// The nvcc `-gencode` value: `arch=compute_90a,code=sm_90a`.
    pub fn gencode(self) -> String {
        let suffix = if self.specific { "a" } else { "" };
        format!("arch=compute_{0}{1},code=sm_{0}{1}", self.sm, suffix)
    }

    /// All accepted architectures, in order.
    pub fn all() -> impl Iterator<Item = Arch> {
        KNOWN_ARCHS.iter().map(|&(sm, specific)| Arch { sm, specific })
    }
}

impl Default for Arch {
    fn default() -> Arch {
        Arch::SM_90A
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}{}", self.sm, if self.specific { "a" } else { "" })
    }
}

/// The error of parsing an [`Arch`]: the text that is not a supported architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownArch(pub String);

impl fmt::Display for UnknownArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all: Vec<String> = Arch::all().map(|a| a.to_string()).collect();
        write!(f, "unknown CUDA architecture '{}' (supported: {})", self.0, all.join(", "))
    }
}

impl std::error::Error for UnknownArch {}

impl FromStr for Arch {
    type Err = UnknownArch;

    /// Parses `sm_90a` (also `SM_90A`, `compute_90a`, `90a`).
    fn from_str(text: &str) -> Result<Arch, UnknownArch> {
        let lower = text.trim().to_ascii_lowercase();
        let digits =
            lower.strip_prefix("sm_").or_else(|| lower.strip_prefix("compute_")).unwrap_or(&lower);
        let (number, specific) = match digits.strip_suffix('a') {
            Some(n) => (n, true),
            None => (digits, false),
        };
        number
            .parse::<u32>()
            .ok()
            .map(|sm| Arch { sm, specific })
            .filter(|a| Arch::all().any(|k| k == *a))
            .ok_or_else(|| UnknownArch(text.to_string()))
    }
}

/// Whether the generated `.cu` is a library or a whole program (design §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OutputMode {
    /// For linking into another program (the `build.rs` path): a host `main` function defined
    /// in the `.co` file is renamed to `__choreo_unused_main` (see [`cuda`]).
    #[default]
    Library,
    /// A complete program (`choreoc build`): the host text is kept as written, `main` included.
    Standalone,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_round_trips_and_rejects_unknown() {
        for a in Arch::all() {
            assert_eq!(a.to_string().parse::<Arch>(), Ok(a));
        }
        assert_eq!(
            "sm_90a".parse::<Arch>().map(|a| a.gencode()).as_deref(),
            Ok("arch=compute_90a,code=sm_90a")
        );
        assert_eq!("SM_86".parse::<Arch>().map(Arch::sm), Ok(86));
        assert!("sm_91".parse::<Arch>().is_err());
        assert!("sm_86a".parse::<Arch>().is_err());
        assert!("".parse::<Arch>().is_err());
        assert!(Arch::SM_90A.has_wgmma());
        assert!(!"sm_90".parse::<Arch>().is_ok_and(Arch::has_wgmma));
    }
}
