//! Which GPU architectures a build compiles for (see "The architectures" in the crate docs).
//!
//! A build has a list of architectures: [`Builder::arch`](crate::Builder::arch), else
//! `CHOREO_CUDA_ARCH`, else `CUDA_COMPUTE_CAP` (each a comma-separated list), else the GPUs
//! that `nvidia-smi` shows at build time, else [`DEFAULT_ARCHS`]. Each `.co` file is translated
//! once, for the lowest architecture of the list it is built for, and nvcc compiles that one
//! `.cu` for every architecture of that list ([`file_archs`] says which).

use choreo_compiler::compile::Arch;
use choreo_toolkit::Env;
use std::fmt;
use std::process::Command;

/// The architectures of a build without a setting and without a visible GPU: SASS for sm_80
/// (Ampere) and sm_90 (Hopper), plus compute_90 PTX, which the driver compiles for any newer
/// GPU (Blackwell and later) when the program loads.
pub const DEFAULT_ARCHS: &[&str] = &["sm_80", "sm_90"];

/// Where a build's list of architectures came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchOrigin {
    /// [`Builder::arch`](crate::Builder::arch).
    Builder,
    /// An environment variable (`CHOREO_CUDA_ARCH` or `CUDA_COMPUTE_CAP`).
    Env(&'static str),
    /// The compute capabilities `nvidia-smi` reported at build time.
    Detected,
    /// [`DEFAULT_ARCHS`].
    Default,
}

impl ArchOrigin {
    /// Whether the list was chosen by choreo-build rather than by the user: a file that needs
    /// sm_90a is then built for sm_90a alone (see [`file_archs`]).
    pub fn automatic(&self) -> bool {
        matches!(self, ArchOrigin::Detected | ArchOrigin::Default)
    }
}

impl fmt::Display for ArchOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArchOrigin::Builder => f.write_str("Builder::arch"),
            ArchOrigin::Env(var) => f.write_str(var),
            ArchOrigin::Detected => f.write_str("the GPU found by nvidia-smi"),
            ArchOrigin::Default => f.write_str("the default architectures"),
        }
    }
}

/// A build's architectures: sorted, without duplicates, never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchList {
    /// The architectures, oldest first.
    pub archs: Vec<Arch>,
    /// Where they came from.
    pub origin: ArchOrigin,
    /// What a build should say about how they were chosen (a detected GPU that the toolkit
    /// cannot compile for, one no architecture is known for), as cargo warnings.
    pub notes: Vec<String>,
}

impl ArchList {
    /// The oldest architecture.
    pub fn floor(&self) -> Arch {
        self.archs[0]
    }

    /// `sm_80,sm_90`.
    pub fn joined(&self) -> String {
        join(&self.archs)
    }
}

/// `sm_80,sm_90`.
pub fn join(archs: &[Arch]) -> String {
    archs.iter().map(Arch::to_string).collect::<Vec<_>>().join(",")
}

/// Parses one architecture as a user writes it: `sm_86`, `compute_90`, `90a`, `86` or, as
/// `CUDA_COMPUTE_CAP` and `nvidia-smi` write compute capabilities, `8.6`.
fn parse_one(text: &str) -> Option<Arch> {
    let text = text.trim();
    match text.split_once('.') {
        Some((major, minor)) => {
            let (major, minor) = (major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?);
            (minor < 10).then_some(())?;
            format!("sm_{}", major * 10 + minor).parse().ok()
        }
        None => text.parse().ok(),
    }
}

/// Parses a comma-separated list (blanks around items are ignored); the error names the item
/// that is not an architecture and lists the known ones.
pub fn parse_list(text: &str) -> Result<Vec<Arch>, String> {
    let mut archs = Vec::new();
    for item in text.split(',') {
        if item.trim().is_empty() {
            continue;
        }
        match parse_one(item) {
            Some(arch) => archs.push(arch),
            None => {
                let message = match item.trim().parse::<Arch>() {
                    Err(error) => error.to_string(),
                    Ok(_) => format!("unknown CUDA architecture '{}'", item.trim()),
                };
                return Err(message);
            }
        }
    }
    if archs.is_empty() {
        return Err(format!("no architecture in {text:?} (e.g. `sm_90a` or `sm_80,sm_90`)"));
    }
    archs.sort();
    archs.dedup();
    Ok(archs)
}

/// The architecture nvcc should build for a GPU of compute capability `major.minor`
/// (as `nvidia-smi` reports it): the exact one when the compiler knows it (`9.0` is `sm_90a`,
/// since the binary is for this very GPU), else the newest known one of the same major that
/// is not newer (a cubin runs on later GPUs of its major: `8.7` gets `sm_86`); `None` when
/// there is none.
pub fn arch_for_gpu(major: u32, minor: u32) -> Option<Arch> {
    if (major, minor) == (9, 0) {
        return "sm_90a".parse().ok();
    }
    let sm = major * 10 + minor;
    Arch::all()
        .filter(|arch| {
            arch.sm() / 10 == major && arch.sm() <= sm && !arch.to_string().ends_with('a')
        })
        .max()
}

/// Whether nvcc of CUDA `version` (`CUDART_VERSION`, e.g. 12040) compiles for `arch`: sm_100
/// and sm_120 need CUDA 12.8, and CUDA 13 dropped sm_70 (Volta). `Err` says why not.
pub fn toolkit_supports(arch: Arch, version: u32) -> Result<(), String> {
    let text = |v: u32| format!("{}.{}", v / 1000, v % 1000 / 10);
    if arch.sm() >= 100 && version < 12080 {
        return Err(format!(
            "{arch} needs CUDA 12.8 or later, and the toolkit is CUDA {}",
            text(version)
        ));
    }
    if arch.sm() < 75 && version >= 13000 {
        return Err(format!(
            "CUDA 13 no longer compiles for {arch} (the toolkit is CUDA {}); use a CUDA 12 \
             toolkit",
            text(version)
        ));
    }
    Ok(())
}

/// The build's list: [`Builder::arch`](crate::Builder::arch) (`builder`), `CHOREO_CUDA_ARCH`,
/// `CUDA_COMPUTE_CAP`, the GPUs `detect` reports (compute capabilities; `None`: none
/// visible), [`DEFAULT_ARCHS`], the first that is set. `cuda_version` is the toolkit's (when
/// one was found): a detected GPU it cannot compile for falls back to the defaults with a
/// note, a set architecture it cannot compile for is an error.
pub fn resolve(
    builder: Option<&str>,
    env: &Env,
    cuda_version: Option<u32>,
    detect: impl FnOnce() -> Option<Vec<(u32, u32)>>,
) -> Result<ArchList, (ArchOrigin, String)> {
    let set = match builder {
        Some(text) => Some((text.to_owned(), ArchOrigin::Builder)),
        None => ["CHOREO_CUDA_ARCH", "CUDA_COMPUTE_CAP"]
            .into_iter()
            .find_map(|var| env.text(var).map(|text| (text, ArchOrigin::Env(var)))),
    };
    if let Some((text, origin)) = set {
        let archs = parse_list(&text).map_err(|message| (origin.clone(), message))?;
        if let Some(version) = cuda_version {
            for arch in &archs {
                toolkit_supports(*arch, version).map_err(|message| (origin.clone(), message))?;
            }
        }
        return Ok(ArchList { archs, origin, notes: Vec::new() });
    }
    let mut notes = Vec::new();
    if let Some(gpus) = detect().filter(|gpus| !gpus.is_empty()) {
        let mut archs = Vec::new();
        for (major, minor) in gpus {
            match arch_for_gpu(major, minor) {
                Some(arch) => match cuda_version.map(|v| toolkit_supports(arch, v)) {
                    Some(Err(why)) => notes.push(format!(
                        "the GPU found (compute capability {major}.{minor}) needs {arch}, but \
                         {why}: building the default architectures, whose PTX the driver \
                         compiles for it"
                    )),
                    _ => archs.push(arch),
                },
                None => notes.push(format!(
                    "no architecture is known for the GPU found (compute capability \
                     {major}.{minor}): building the default architectures, whose PTX the \
                     driver compiles for it"
                )),
            }
        }
        if notes.is_empty() {
            archs.sort();
            archs.dedup();
            return Ok(ArchList { archs, origin: ArchOrigin::Detected, notes });
        }
    }
    let archs = DEFAULT_ARCHS.iter().filter_map(|arch| arch.parse().ok()).collect();
    Ok(ArchList { archs, origin: ArchOrigin::Default, notes })
}

/// The compute capabilities of the GPUs `nvidia-smi` lists (`9.0` per line), or `None` when
/// it is not installed, fails, or lists none.
pub fn detect_gpus() -> Option<Vec<(u32, u32)>> {
    let output = Command::new("nvidia-smi")
        .args(["--query-gpu=compute_cap", "--format=csv,noheader"])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let gpus: Vec<(u32, u32)> = text
        .lines()
        .filter_map(|line| {
            let (major, minor) = line.trim().split_once('.')?;
            Some((major.parse().ok()?, minor.parse().ok()?))
        })
        .collect();
    (!gpus.is_empty()).then_some(gpus)
}

/// What [`file_archs`] chose for one `.co` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileArchs {
    /// Build for these (the translation for the first is the code; nvcc compiles it for all).
    /// `dropped` are the build's architectures the file cannot be built for (its translation
    /// for them failed): a warning names them.
    Archs {
        /// The architectures, oldest first.
        archs: Vec<Arch>,
        /// The build's architectures left out.
        dropped: Vec<Arch>,
    },
    /// The file translates for none of the build's architectures, but for sm_90a (it uses an
    /// sm_90a-only construct such as `setmaxnreg` or the `group-4` level) and the list was
    /// automatic: it is built for sm_90a alone, with a warning.
    Hopper,
    /// It translates for none of them (and the list was set by the user, or sm_90a does not
    /// help either): the build fails with the diagnostics of the first architecture.
    None,
}

/// Chooses the architectures of one file from the build's `list` and `accepts`, which says
/// whether the file translates for an architecture without error:
///
/// - every architecture of the list: all of them;
/// - only the newer ones from some point on (a construct needs e.g. sm_90: TMA, clusters):
///   those, the others dropped with a warning (older GPUs lack the construct);
/// - none, or not a contiguous newest part (`setmaxnreg` translates for sm_80, where it is
///   ignored, but not for sm_90): sm_90a alone when the list is automatic
///   ([`ArchOrigin::automatic`]) and the file translates for it, else none.
///
/// The code for the oldest architecture of the result runs on the newer ones: everything the
/// translator decides from the architecture is whether a construct exists and how large a
/// limit is, so code for an older architecture only uses what the newer ones have too.
pub fn file_archs(list: &ArchList, mut accepts: impl FnMut(Arch) -> bool) -> FileArchs {
    let ok: Vec<bool> = list.archs.iter().map(|&arch| accepts(arch)).collect();
    if let Some(first) = ok.iter().position(|&ok| ok) {
        if ok[first..].iter().all(|&ok| ok) {
            return FileArchs::Archs {
                archs: list.archs[first..].to_vec(),
                dropped: list.archs[..first].to_vec(),
            };
        }
    }
    let hopper: Arch = Arch::SM_90A;
    if list.origin.automatic() && !list.archs.contains(&hopper) && accepts(hopper) {
        return FileArchs::Hopper;
    }
    FileArchs::None
}

/// The `-gencode` flags for `archs`: SASS for each, plus PTX of the newest that has no `a`
/// suffix (PTX of an `a` architecture cannot run on later GPUs, so it would only add size; PTX
/// of the older ones would never be chosen by the driver over the newer one).
pub fn gencode_flags(archs: &[Arch]) -> Vec<String> {
    let mut flags: Vec<String> =
        archs.iter().map(|arch| format!("-gencode={}", arch.gencode())).collect();
    let portable = archs.iter().filter(|arch| !arch.to_string().ends_with('a')).max();
    if let Some(arch) = portable {
        let sass = arch.gencode(); // arch=compute_XX,code=sm_XX
        let compute = sass.split(',').next().unwrap_or_default(); // arch=compute_XX
        let ptx = compute.replace("arch=", "code=");
        flags.push(format!("-gencode={compute},{ptx}"));
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archs(text: &str) -> Vec<Arch> {
        parse_list(text).unwrap()
    }

    fn list(text: &str, origin: ArchOrigin) -> ArchList {
        ArchList { archs: archs(text), origin, notes: Vec::new() }
    }

    #[test]
    fn lists_parse_in_every_spelling_sorted_and_deduplicated() {
        assert_eq!(archs("sm_90,sm_80"), archs("sm_80,sm_90"));
        assert_eq!(join(&archs(" sm_90 , 80, compute_90, 8.0 ")), "sm_80,sm_90");
        assert_eq!(join(&archs("9.0")), "sm_90");
        assert_eq!(join(&archs("90a,sm_86")), "sm_86,sm_90a");
        assert_eq!(join(&archs("12.0,10.0")), "sm_100,sm_120");
        let error = parse_list("sm_80,sm_91").unwrap_err();
        assert!(error.contains("sm_91") && error.contains("supported"), "{error}");
        assert!(parse_list(" , ").unwrap_err().contains("no architecture"));
        assert!(parse_list("8.10").is_err());
    }

    #[test]
    fn gpus_map_to_the_architecture_whose_cubin_runs_on_them() {
        let gpu = |major, minor| arch_for_gpu(major, minor).map(|a| a.to_string());
        assert_eq!(gpu(9, 0).as_deref(), Some("sm_90a"));
        assert_eq!(gpu(8, 0).as_deref(), Some("sm_80"));
        assert_eq!(gpu(8, 7).as_deref(), Some("sm_86"));
        assert_eq!(gpu(8, 9).as_deref(), Some("sm_89"));
        assert_eq!(gpu(10, 3).as_deref(), Some("sm_100"));
        assert_eq!(gpu(12, 1).as_deref(), Some("sm_120"));
        assert_eq!(gpu(6, 1), None);
        assert_eq!(gpu(11, 0), None);
    }

    #[test]
    fn toolkits_compile_only_the_architectures_they_know() {
        let arch = |text: &str| text.parse::<Arch>().unwrap();
        assert!(toolkit_supports(arch("sm_120"), 12080).is_ok());
        let error = toolkit_supports(arch("sm_100"), 12040).unwrap_err();
        assert!(error.contains("CUDA 12.8") && error.contains("12.4"), "{error}");
        assert!(toolkit_supports(arch("sm_70"), 12040).is_ok());
        assert!(toolkit_supports(arch("sm_70"), 13000).unwrap_err().contains("CUDA 12"));
        assert!(toolkit_supports(arch("sm_75"), 13000).is_ok());
    }

    #[test]
    fn the_list_comes_from_the_builder_then_the_environment_then_the_gpu_then_the_default() {
        let none = Env::fixed([]);
        let no_gpu = || None;
        let h200 = || Some(vec![(9, 0)]);
        let resolved = resolve(None, &none, Some(13000), no_gpu).unwrap();
        assert_eq!(
            (resolved.joined(), resolved.origin),
            ("sm_80,sm_90".into(), ArchOrigin::Default)
        );
        let resolved = resolve(None, &none, Some(13000), h200).unwrap();
        assert_eq!((resolved.joined(), resolved.origin), ("sm_90a".into(), ArchOrigin::Detected));
        // Two GPUs: both architectures.
        let resolved = resolve(None, &none, None, || Some(vec![(8, 6), (9, 0)])).unwrap();
        assert_eq!(resolved.joined(), "sm_86,sm_90a");
        let cap = Env::fixed([("CUDA_COMPUTE_CAP", "80,8.6")]);
        let resolved = resolve(None, &cap, None, h200).unwrap();
        assert_eq!(
            (resolved.joined(), resolved.origin),
            ("sm_80,sm_86".into(), ArchOrigin::Env("CUDA_COMPUTE_CAP"))
        );
        let both = Env::fixed([("CHOREO_CUDA_ARCH", "sm_90a"), ("CUDA_COMPUTE_CAP", "80")]);
        let resolved = resolve(None, &both, None, h200).unwrap();
        assert_eq!(
            (resolved.joined(), resolved.origin),
            ("sm_90a".into(), ArchOrigin::Env("CHOREO_CUDA_ARCH"))
        );
        let resolved = resolve(Some("sm_75"), &both, None, h200).unwrap();
        assert_eq!((resolved.joined(), resolved.origin), ("sm_75".into(), ArchOrigin::Builder));
        // A bad value is an error naming where it came from.
        let bad = Env::fixed([("CHOREO_CUDA_ARCH", "sm_80,sm_91")]);
        let (origin, message) = resolve(None, &bad, None, no_gpu).unwrap_err();
        assert_eq!(origin, ArchOrigin::Env("CHOREO_CUDA_ARCH"));
        assert!(message.contains("sm_91"), "{message}");
        // A set architecture the toolkit cannot compile for is an error; a detected one falls
        // back to the defaults with a note.
        let new = Env::fixed([("CHOREO_CUDA_ARCH", "sm_120")]);
        let (_, message) = resolve(None, &new, Some(12040), no_gpu).unwrap_err();
        assert!(message.contains("CUDA 12.8"), "{message}");
        let resolved = resolve(None, &none, Some(12040), || Some(vec![(12, 0)])).unwrap();
        assert_eq!(
            (resolved.joined(), resolved.origin),
            ("sm_80,sm_90".into(), ArchOrigin::Default)
        );
        assert!(resolved.notes[0].contains("compute capability 12.0"), "{:?}", resolved.notes);
        let resolved = resolve(None, &none, Some(13000), || Some(vec![(11, 0)])).unwrap();
        assert_eq!(resolved.origin, ArchOrigin::Default);
        assert!(resolved.notes[0].contains("no architecture is known"), "{:?}", resolved.notes);
    }

    #[test]
    fn each_file_gets_the_newest_part_of_the_list_it_translates_for() {
        let default = list("sm_80,sm_90", ArchOrigin::Default);
        let set = list("sm_80,sm_90", ArchOrigin::Env("CHOREO_CUDA_ARCH"));
        let from = |min: u32| move |arch: Arch| arch.sm() >= min;
        // Everything translates: the whole list.
        assert_eq!(
            file_archs(&default, |_| true),
            FileArchs::Archs { archs: archs("sm_80,sm_90"), dropped: vec![] }
        );
        // TMA (sm_90+): sm_90 only, sm_80 dropped.
        assert_eq!(
            file_archs(&set, from(90)),
            FileArchs::Archs { archs: archs("sm_90"), dropped: archs("sm_80") }
        );
        // setmaxnreg: fine on sm_80 (ignored) and sm_90a, an error on sm_90.
        let setmaxnreg = |arch: Arch| arch.sm() < 90 || arch.is_hopper_specific();
        assert_eq!(file_archs(&default, setmaxnreg), FileArchs::Hopper);
        assert_eq!(file_archs(&set, setmaxnreg), FileArchs::None);
        // The group-4 level: sm_90a only.
        let group4 = |arch: Arch| arch.is_hopper_specific();
        assert_eq!(file_archs(&default, group4), FileArchs::Hopper);
        assert_eq!(
            file_archs(&list("sm_90a", ArchOrigin::Detected), group4),
            FileArchs::Archs { archs: archs("sm_90a"), dropped: vec![] }
        );
        // A file with errors of its own translates nowhere.
        assert_eq!(file_archs(&default, |_| false), FileArchs::None);
    }

    #[test]
    fn gencode_has_sass_for_each_and_ptx_for_the_newest_portable_one() {
        assert_eq!(gencode_flags(&archs("sm_90a")), ["-gencode=arch=compute_90a,code=sm_90a"]);
        assert_eq!(
            gencode_flags(&archs("sm_80,sm_90")),
            [
                "-gencode=arch=compute_80,code=sm_80",
                "-gencode=arch=compute_90,code=sm_90",
                "-gencode=arch=compute_90,code=compute_90"
            ]
        );
        assert_eq!(
            gencode_flags(&archs("sm_86,sm_90a")),
            [
                "-gencode=arch=compute_86,code=sm_86",
                "-gencode=arch=compute_90a,code=sm_90a",
                "-gencode=arch=compute_86,code=compute_86"
            ]
        );
    }
}
