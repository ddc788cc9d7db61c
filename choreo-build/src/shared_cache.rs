//! The object cache shared by the builds of one target folder.
//!
//! Cargo gives a build script another `OUT_DIR` whenever the unit's fingerprint differs —
//! `cargo clippy` (which sets `RUSTC_WORKSPACE_WRAPPER`), `cargo check` and `cargo build` of the
//! same package each run it in their own folder — so a cache kept only under `OUT_DIR` made
//! `cargo clippy` after `cargo build` run nvcc on every file again. Each object is therefore
//! also published, under its cache key, to a folder shared by all builds of the target folder:
//! `<target>/<profile>/choreo-cache/` (the folder above `build/<package>-<hash>/out`), or
//! `CHOREO_CACHE_DIR` when set (`CHOREO_CACHE_DIR=off` turns the shared cache off). A build
//! whose own entry is stale first looks there, and copies the object when the entry is valid.
//!
//! Keys must mean the same in every build folder: they hash the compiler's arguments with the
//! build's `OUT_DIR` written as `$OUT_DIR` ([`SharedCache::portable`]); everything else in a
//! key (the `.cu` text, headers, toolkit, flags) is independent of the folder already. An entry
//! is `<key>.o` and `<key>.key` (the key line and the tracked headers, as in the build's own
//! cache); both are written to a temporary name and renamed, the object first, so a reader
//! never sees a key file without its complete object, even with two builds writing at once.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The shared cache of a build, when it has one.
#[derive(Debug, Clone)]
pub(crate) struct SharedCache {
    /// Where the entries live.
    dir: PathBuf,
}

impl SharedCache {
    /// The shared cache of a build writing to `out_dir`: `override_dir` (the value of
    /// `CHOREO_CACHE_DIR`) when given (`off`, `0`, `false` or `none`: no shared cache), else
    /// `<profile>/choreo-cache` when `out_dir` is cargo's `<profile>/build/<unit>/out`, else
    /// none (a library caller's own output folder: only the build's own cache applies).
    pub(crate) fn locate(out_dir: &Path, override_dir: Option<&str>) -> Option<SharedCache> {
        if let Some(value) = override_dir {
            return match value.trim() {
                "off" | "0" | "false" | "none" => None,
                dir => Some(SharedCache { dir: PathBuf::from(dir) }),
            };
        }
        let unit = out_dir.parent()?;
        let build = unit.parent()?;
        let is_cargo_layout = out_dir.file_name()? == "out" && build.file_name()? == "build";
        if !is_cargo_layout {
            return None;
        }
        Some(SharedCache { dir: build.parent()?.join("choreo-cache") })
    }

    /// `arg` with every occurrence of `out_dir` written as `$OUT_DIR`, for hashing into keys
    /// that must be equal in every build folder.
    pub(crate) fn portable(arg: &[u8], out_dir: &Path) -> Vec<u8> {
        let needle = out_dir.as_os_str().as_encoded_bytes();
        if needle.is_empty() {
            return arg.to_vec();
        }
        let mut text = Vec::with_capacity(arg.len());
        let mut rest = arg;
        while let Some(at) = rest.windows(needle.len()).position(|window| window == needle) {
            text.extend_from_slice(&rest[..at]);
            text.extend_from_slice(b"$OUT_DIR");
            rest = &rest[at + needle.len()..];
        }
        text.extend_from_slice(rest);
        text
    }

    fn object(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.o"))
    }

    fn entry(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.key"))
    }

    /// The entry text of `key` (its first line is `key <key>`), when the shared cache has the
    /// entry and its object: the caller validates the headers it lists, then calls
    /// [`SharedCache::copy_object`].
    pub(crate) fn entry_text(&self, key: &str) -> Option<String> {
        let text = fs::read_to_string(self.entry(key)).ok()?;
        let first = text.lines().next()?;
        (first.strip_prefix("key ") == Some(key) && self.object(key).is_file()).then_some(text)
    }

    /// Copies the object of `key` to `to` (through a temporary file next to it, so an
    /// interrupted copy never leaves a truncated object under the final name).
    pub(crate) fn copy_object(&self, key: &str, to: &Path) -> bool {
        let temporary = temporary_name(to);
        let copied =
            fs::copy(self.object(key), &temporary).is_ok() && fs::rename(&temporary, to).is_ok();
        if !copied {
            let _ = fs::remove_file(&temporary);
        }
        copied
    }

    /// Publishes `object` under `key` with the entry text `entry`. Failures are ignored: the
    /// shared cache is an optimisation, and the build's own cache already has the entry.
    pub(crate) fn publish(&self, key: &str, object: &Path, entry: &str) {
        if fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        let (object_to, entry_to) = (self.object(key), self.entry(key));
        let (object_tmp, entry_tmp) = (temporary_name(&object_to), temporary_name(&entry_to));
        let published = fs::copy(object, &object_tmp).is_ok()
            && fs::rename(&object_tmp, &object_to).is_ok()
            && fs::write(&entry_tmp, entry).is_ok()
            && fs::rename(&entry_tmp, &entry_to).is_ok();
        if !published {
            let _ = fs::remove_file(&object_tmp);
            let _ = fs::remove_file(&entry_tmp);
        }
    }
}

/// A name next to `path` that no other writer uses (process id and a counter).
fn temporary_name(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let unique = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp-{}-{unique}", std::process::id()));
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_folder_is_next_to_cargo_build_folders_or_chosen_by_the_variable() {
        let out = Path::new("/t/target/debug/build/app-0123/out");
        let found = SharedCache::locate(out, None).expect("cargo layout");
        assert_eq!(found.dir, Path::new("/t/target/debug/choreo-cache"));
        assert!(SharedCache::locate(Path::new("/tmp/my-out"), None).is_none());
        let chosen = SharedCache::locate(out, Some("/cache")).expect("chosen");
        assert_eq!(chosen.dir, Path::new("/cache"));
        for off in ["off", "0", "false", "none"] {
            assert!(SharedCache::locate(out, Some(off)).is_none(), "{off}");
        }
    }

    #[test]
    fn portable_arguments_name_the_out_dir_by_a_token() {
        let out = Path::new("/t/target/debug/build/app-0123/out");
        let arg =
            b"-I/t/target/debug/build/app-0123/out/choreo/k:/t/target/debug/build/app-0123/out";
        assert_eq!(SharedCache::portable(arg, out), b"-I$OUT_DIR/choreo/k:$OUT_DIR".to_vec());
        assert_eq!(SharedCache::portable(b"-O3", out), b"-O3".to_vec());
    }

    #[test]
    fn published_entries_are_found_and_copied() {
        let dir = std::env::temp_dir().join(format!("choreo-shared-cache-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let cache = SharedCache { dir: dir.join("cache") };
        let object = dir.join("a.o");
        fs::write(&object, b"object bytes").unwrap();
        assert!(cache.entry_text("k1").is_none());
        cache.publish("k1", &object, "key k1\ndep 00 /x.h\n");
        assert_eq!(cache.entry_text("k1").as_deref(), Some("key k1\ndep 00 /x.h\n"));
        // An entry whose first line names another key is not this key's.
        fs::write(cache.entry("k2"), "key k3\n").unwrap();
        fs::write(cache.object("k2"), b"x").unwrap();
        assert!(cache.entry_text("k2").is_none());
        let copy = dir.join("copy.o");
        assert!(cache.copy_object("k1", &copy));
        assert_eq!(fs::read(&copy).unwrap(), b"object bytes");
        let _ = fs::remove_dir_all(&dir);
    }
}
