//! The machine a compilation is for: [`Target`] and its capability queries.
//!
//! Semantic analysis and lowering ask the target what it can do (thread limits, warpgroups,
//! TMA, clusters, tensor-core kinds, shared-memory capacity) instead of testing architecture
//! numbers themselves; emitters only render what lowering decided. No stage imports a later
//! one: this module depends on nothing but `std`.

pub mod mma;

use std::fmt;
use std::str::FromStr;

/// What a compilation is for: a CUDA architecture, or the host CPU (the C++ backend).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// NVIDIA GPUs of the given architecture (nvcc, `.cu`).
    Cuda(Arch),
    /// The host CPU: kernels run as C++ on a thread pool (`.cpp`; no code generator yet).
    Cpu,
}

impl Default for Target {
    fn default() -> Target {
        Target::Cuda(Arch::default())
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Cuda(arch) => write!(f, "cuda {arch}"),
            Target::Cpu => f.write_str("cpu"),
        }
    }
}

/// The kinds of tensor-core instructions (spec-tier3 "MMA"), oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TensorCoreKind {
    /// The WMMA API (sm_70+).
    Wmma,
    /// `mma.sync` warp-level MMA (sm_80+ for the shapes we generate).
    MmaSync,
    /// `wgmma.mma_async` warpgroup MMA (sm_90a only).
    Wgmma,
}

/// A construct that only some architectures have: what [`Target::supports`] answers and what
/// the "needs a newer architecture" diagnostic (E0805) names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Feature {
    /// The `group-4` (warpgroup) parallel level.
    Warpgroups,
    /// The `cluster` parallel level (thread-block clusters).
    Clusters,
    /// `setmaxnreg` (`croq::cuda::setreg_inc` / `setreg_dec`).
    SetMaxNReg,
    /// Shared events (mbarriers).
    SharedEvents,
    /// `__to` to `f8_ue4m3`, `f8_ue8m0`, `f6_e2m3`, `f6_e3m2` or `f4_e2m1`.
    NarrowFloatConversion,
}

impl Feature {
    /// How diagnostics name the construct.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Warpgroups => "group-4 level",
            Feature::Clusters => "cluster level",
            Feature::SetMaxNReg => "setmaxnreg",
            Feature::SharedEvents => "shared event",
            Feature::NarrowFloatConversion => "`__to` to f8_ue4m3/f8_ue8m0/f6/f4",
        }
    }

    /// The oldest architecture that has it, as diagnostics name it.
    pub fn min_arch(self) -> &'static str {
        match self {
            Feature::Warpgroups | Feature::SetMaxNReg => "sm_90a",
            Feature::Clusters | Feature::NarrowFloatConversion => "sm_90",
            Feature::SharedEvents => "sm_80",
        }
    }
}

/// What a register-count hint (`setmaxnreg`) becomes on a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RegisterHint {
    /// The instruction.
    Emit,
    /// Nothing: the target has no such instruction and the hint changes no result.
    Ignore,
    /// An error: the architecture is new enough for the construct but lacks the instruction.
    Unsupported,
}

/// The limit on threads per block that every target enforces (spec §8.4: "Total physical threads
/// per block must not exceed 1024"). The CPU target keeps the CUDA limit so that a program that
/// runs on one backend runs on the other.
const MAX_THREADS_PER_BLOCK: u64 = 1024;

/// Static shared memory a kernel may declare without opting in (48 KiB on every CUDA arch).
const STATIC_SHARED_BYTES: u64 = 48 * 1024;

impl Target {
    /// The CUDA architecture, when compiling for a GPU.
    pub fn arch(self) -> Option<Arch> {
        match self {
            Target::Cuda(arch) => Some(arch),
            Target::Cpu => None,
        }
    }

    /// The most threads one block may have (a parallel-by's intra-block levels multiplied).
    pub fn max_threads_per_block(self) -> u64 {
        MAX_THREADS_PER_BLOCK
    }

    /// Whether the `group-4` (warpgroup, 128 threads) level exists: sm_90a, and the CPU
    /// (which emulates any level).
    pub fn has_warpgroups(self) -> bool {
        match self {
            Target::Cuda(arch) => arch.is_hopper_specific(),
            Target::Cpu => true,
        }
    }

    /// Whether the `cluster` level and distributed shared memory exist (sm_90 and later), and
    /// the CPU (whose runtime runs a cluster's blocks together, so that they can synchronise).
    pub fn has_clusters(self) -> bool {
        match self {
            Target::Cuda(arch) => arch.sm() >= 90,
            Target::Cpu => true,
        }
    }

    /// Whether `feature` exists on this target (the CPU emulates every one it runs).
    pub fn supports(self, feature: Feature) -> bool {
        match feature {
            Feature::Warpgroups => self.has_warpgroups(),
            Feature::Clusters => self.has_clusters(),
            Feature::SetMaxNReg => self.setmaxnreg() != RegisterHint::Unsupported,
            Feature::SharedEvents => self.has_shared_events(),
            Feature::NarrowFloatConversion => match self {
                Target::Cuda(arch) => arch.sm() >= 90,
                Target::Cpu => true,
            },
        }
    }

    /// What `setmaxnreg` (`croq::cuda::setreg_inc/dec`) becomes (spec-tier3 §7.2 ⚠): the
    /// instruction on sm_90a, nothing below sm_90 (and on the CPU), an error on the other
    /// sm_90+ architectures (the instruction is sm_90a-specific).
    pub fn setmaxnreg(self) -> RegisterHint {
        match self {
            Target::Cuda(arch) if arch.is_hopper_specific() => RegisterHint::Emit,
            Target::Cuda(arch) if arch.sm() >= 90 => RegisterHint::Unsupported,
            Target::Cuda(_) | Target::Cpu => RegisterHint::Ignore,
        }
    }

    /// Whether shared events exist: mbarriers, sm_80 and later (spec-tier3 §2.8), and the CPU
    /// (whose runtime implements them).
    pub fn has_shared_events(self) -> bool {
        match self {
            Target::Cuda(arch) => arch.sm() >= 80,
            Target::Cpu => true,
        }
    }

    /// Whether TMA (the bulk tensor copy engine) exists (sm_90 and later; the CPU emulates
    /// it with a copy routine of its runtime).
    pub fn has_tma(self) -> bool {
        match self {
            Target::Cuda(arch) => arch.sm() >= 90,
            Target::Cpu => true,
        }
    }

    /// The tensor-core instruction kinds available, oldest first (empty on the CPU).
    pub fn tensor_core_kinds(self) -> &'static [TensorCoreKind] {
        use TensorCoreKind::{MmaSync, Wgmma, Wmma};
        match self {
            Target::Cuda(arch) if arch.is_hopper_specific() => &[Wmma, MmaSync, Wgmma],
            Target::Cuda(arch) if arch.sm() >= 80 => &[Wmma, MmaSync],
            Target::Cuda(_) => &[Wmma],
            Target::Cpu => &[],
        }
    }

    /// Shared memory one block may use without opting in (static `__shared__` declarations).
    pub fn static_shared_bytes(self) -> u64 {
        STATIC_SHARED_BYTES
    }

    /// The alignment of every shared buffer in bytes (spec §1.4): 128 on sm_90 and later (what
    /// TMA and WGMMA need), 16 below.
    pub fn shared_alignment(self) -> u64 {
        match self {
            Target::Cuda(arch) if arch.sm() < 90 => 16,
            _ => 128,
        }
    }

    /// The bytes of `local` buffers one thread of a kernel may declare (spec §1.4: checked at
    /// compile time; 1 KiB below sm_80, 2 KiB from sm_80).
    pub fn local_bytes_per_thread(self) -> u64 {
        match self {
            Target::Cuda(arch) if arch.sm() < 80 => 1024,
            _ => 2048,
        }
    }

    /// Shared memory one block may use at most, after opting in above
    /// [`Target::static_shared_bytes`] (`cudaFuncAttributeMaxDynamicSharedMemorySize`). The CPU
    /// target takes the largest CUDA value so that what compiles for a GPU compiles for it.
    pub fn max_shared_bytes(self) -> u64 {
        match self {
            Target::Cuda(arch) => arch.max_shared_bytes(),
            Target::Cpu => Arch::SM_90A.max_shared_bytes(),
        }
    }
}

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

    /// Whether this is `sm_90a`: the Hopper-specific features (WGMMA, `setmaxnreg`, the
    /// `group-4` level) are available.
    pub fn is_hopper_specific(self) -> bool {
        self.sm == 90 && self.specific
    }

    /// The nvcc `-gencode` value: `arch=compute_90a,code=sm_90a`.
    pub fn gencode(self) -> String {
        let suffix = if self.specific { "a" } else { "" };
        format!("arch=compute_{0}{1},code=sm_{0}{1}", self.sm, suffix)
    }

    /// Shared memory per block after opting in (CUDA programming guide, compute capabilities).
    fn max_shared_bytes(self) -> u64 {
        match self.sm {
            70 => 96 * 1024,
            75 => 64 * 1024,
            80 => 163 * 1024,
            86 | 89 | 120 => 99 * 1024,
            _ => 227 * 1024,
        }
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
    }

    #[test]
    fn capabilities_follow_the_architecture() {
        let sm = |s: &str| Target::Cuda(s.parse().expect("known arch"));
        assert!(sm("sm_90a").has_warpgroups());
        assert!(!sm("sm_90").has_warpgroups());
        assert!(sm("sm_90").has_tma() && !sm("sm_80").has_tma());
        assert!(sm("sm_90").has_clusters() && !sm("sm_89").has_clusters());
        assert!(Target::Cpu.has_clusters() && Target::Cpu.has_warpgroups());
        assert_eq!(sm("sm_90a").setmaxnreg(), RegisterHint::Emit);
        assert_eq!(sm("sm_90").setmaxnreg(), RegisterHint::Unsupported);
        assert_eq!(sm("sm_120").setmaxnreg(), RegisterHint::Unsupported);
        assert_eq!(sm("sm_86").setmaxnreg(), RegisterHint::Ignore);
        assert!(!sm("sm_86").supports(Feature::Warpgroups));
        assert!(sm("sm_100").supports(Feature::Clusters));
        assert_eq!(Feature::Warpgroups.min_arch(), "sm_90a");
        assert_eq!(sm("sm_90a").tensor_core_kinds().last(), Some(&TensorCoreKind::Wgmma));
        assert_eq!(sm("sm_80").tensor_core_kinds().last(), Some(&TensorCoreKind::MmaSync));
        assert_eq!(sm("sm_75").tensor_core_kinds(), &[TensorCoreKind::Wmma]);
        assert_eq!(sm("sm_90a").max_shared_bytes(), 227 * 1024);
        assert_eq!(sm("sm_86").max_shared_bytes(), 99 * 1024);
        assert_eq!(Target::Cpu.max_threads_per_block(), sm("sm_70").max_threads_per_block());
        assert!(Target::Cpu.tensor_core_kinds().is_empty());
    }
}
