//! The platform the CUDA runtime is linked for.

use crate::env::Env;
use std::path::{Path, PathBuf};

/// The cargo target, as far as the CUDA toolkit is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The target triple (`TARGET`).
    pub triple: String,
    /// `CARGO_CFG_TARGET_OS`, e.g. `linux`.
    pub os: String,
    /// `CARGO_CFG_TARGET_ARCH`, e.g. `x86_64`.
    pub arch: String,
    /// `TARGET` differs from `HOST`: the toolkit's `targets/<arch>-linux/lib` is linked.
    pub cross: bool,
}

impl Target {
    /// From the variables cargo sets for build scripts; outside a build script, the platform
    /// this code was compiled for (build scripts run on the host).
    pub fn from_env(env: &Env) -> Target {
        let os = env.text("CARGO_CFG_TARGET_OS").unwrap_or_else(|| std::env::consts::OS.into());
        let arch =
            env.text("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|| std::env::consts::ARCH.into());
        let triple = env.text("TARGET").unwrap_or_else(|| format!("{arch}-unknown-{os}"));
        let cross = match (env.text("TARGET"), env.text("HOST")) {
            (Some(target), Some(host)) => target != host,
            _ => false,
        };
        Target { triple, os, arch, cross }
    }

    /// The platform this code was compiled for, as a native build (a command-line tool such
    /// as `choreoc build`, which makes programs for the machine it runs on).
    pub fn host() -> Target {
        let (os, arch) = (std::env::consts::OS, std::env::consts::ARCH);
        Target {
            triple: format!("{arch}-unknown-{os}"),
            os: os.into(),
            arch: arch.into(),
            cross: false,
        }
    }

    /// The folder of this target under `<toolkit>/targets/`: `x86_64-linux`, or `sbsa-linux`
    /// for aarch64.
    pub fn toolkit_dir(&self) -> Option<&'static str> {
        match (self.os.as_str(), self.arch.as_str()) {
            ("linux", "x86_64") => Some("x86_64-linux"),
            ("linux", "aarch64") => Some("sbsa-linux"),
            _ => None,
        }
    }

    /// Debian-style multiarch library folder name.
    fn multiarch(&self) -> Option<&'static str> {
        match (self.os.as_str(), self.arch.as_str()) {
            ("linux", "x86_64") => Some("x86_64-linux-gnu"),
            ("linux", "aarch64") => Some("aarch64-linux-gnu"),
            _ => None,
        }
    }

    /// File name of the static CUDA runtime.
    pub fn cudart_static_file(&self) -> &'static str {
        if self.os == "windows" { "cudart_static.lib" } else { "libcudart_static.a" }
    }

    /// Library folders of the toolkit at `root` that may hold the static runtime, most
    /// specific first: for a native build `lib64`, `lib`, `targets/<arch>-linux/lib` and
    /// `lib/<multiarch>`; for a cross build only `targets/<arch>-linux/lib`.
    pub fn lib_dirs(&self, root: &Path) -> Vec<PathBuf> {
        if self.os == "windows" {
            return vec![root.join("lib").join("x64"), root.join("lib")];
        }
        let target_lib = self.toolkit_dir().map(|dir| root.join("targets").join(dir).join("lib"));
        if self.cross {
            return target_lib.into_iter().collect();
        }
        let mut dirs = vec![root.join("lib64"), root.join("lib")];
        dirs.extend(target_lib);
        dirs.extend(self.multiarch().map(|dir| root.join("lib").join(dir)));
        dirs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_from_cargo_variables() {
        let env = Env::fixed([
            ("TARGET", "aarch64-unknown-linux-gnu"),
            ("HOST", "x86_64-unknown-linux-gnu"),
            ("CARGO_CFG_TARGET_OS", "linux"),
            ("CARGO_CFG_TARGET_ARCH", "aarch64"),
        ]);
        let target = Target::from_env(&env);
        assert!(target.cross);
        assert_eq!(target.toolkit_dir(), Some("sbsa-linux"));
        assert_eq!(
            target.lib_dirs(Path::new("/cuda")),
            [Path::new("/cuda/targets/sbsa-linux/lib")]
        );
        let env = Env::fixed([
            ("TARGET", "x86_64-unknown-linux-gnu"),
            ("HOST", "x86_64-unknown-linux-gnu"),
            ("CARGO_CFG_TARGET_OS", "linux"),
            ("CARGO_CFG_TARGET_ARCH", "x86_64"),
        ]);
        assert!(!Target::from_env(&env).cross);
    }

    #[test]
    fn outside_a_build_script_the_target_is_the_host() {
        let target = Target::from_env(&Env::fixed([]));
        assert_eq!(target, Target::host());
        assert_eq!(target.os, std::env::consts::OS);
        assert!(!target.cross);
    }
}
