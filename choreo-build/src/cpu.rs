//! The CPU version of the kernels: each `.co` file's `.cpp` (the CUDA emitter's text in its
//! CPU dialect, see `choreo_compiler::emit::cpu`), compiled by the host C++ compiler that `cc`
//! finds for the target, with `choreo.h` and `choreo_cpu.h` from the generated folder. The CPU
//! runtime those objects call (`choreo_cpu_runtime.cpp`) is compiled once, by the `choreo`
//! crate's build script, so every library of a program shares one.
//!
//! The command comes from `cc::Build::try_get_compiler` (the target's compiler, `CXX`/
//! `CXXFLAGS`, cross prefixes, `-fPIC`, the optimisation level of the profile) and is run
//! here, one process per stale file, in parallel (`nvcc::parallel_map`, sharing cargo's jobserver
//! with the nvcc jobs): like the nvcc path, so that a file whose
//! inputs did not change is not recompiled. Its object `obj/cpu/<module>.o` is kept with a
//! `.key` file holding the hash of the `.cpp`, both headers, the full command line and the
//! post-processing below.
//!
//! # One file, two objects, one program
//!
//! A `.co` file's host code (its functions, globals, `__device__` helpers, `__cpp__` text) is
//! in both the `.cu` and the `.cpp`, and a program that uses the file links both objects (each
//! wrapper references both entries). So in a build with CUDA the CPU object keeps everything
//! but its entries to itself: it is compiled with `-fvisibility=hidden` (the entries are
//! declared `visibility("default")`), and then, with `objcopy`, every symbol it defines with
//! hidden visibility is renamed with a suffix unique to the file (`<name>.choreo_cpu_<hash>`;
//! a demangler shows `f(int) [clone .choreo_cpu_…]`) and made local. The CUDA object keeps the
//! symbols global, so what other files or Rust reference by name is its copy. A CPU-only build
//! has nothing to clash with and links its objects as compiled (as a CUDA build links nvcc's:
//! host code of one file can still call another's). The renaming matters for
//! inline functions and template instantiations: their COMDAT groups are named after the
//! symbol, and the linker merges groups by name whatever the symbol's binding, so a CPU copy
//! that kept its name could be replaced by the CUDA object's (a different function: it calls
//! the CUDA runtime) or discarded under references that then dangle. Symbols of default
//! visibility (the entries, `std::` instantiations over built-in types, which are the same code
//! in both objects) stay global. The C API of the CPU runtime (`choreo_cpu_*`) is undefined in
//! the object and untouched.
//!
//! Without an `objcopy` (`OBJCOPY`, `<prefix>objcopy` for a prefixed cross compiler,
//! `<target>-objcopy`, `objcopy`, `llvm-objcopy`) the objects stay as compiled; a build with
//! CUDA then says so, and [`clashes`] names every symbol that both objects of a file define
//! (an error, located at the `.co` file, instead of the linker's).

use crate::elf;
use crate::error::{Error, NvccFailure};
use crate::hash::{Digest, Hasher};
use crate::nvcc::{JobError, parallel_map};
use crate::shared_cache::SharedCache;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One `.cpp` to bring up to date.
pub(crate) struct CpuJob {
    /// The `.co` file it was generated from (for messages).
    pub(crate) source: PathBuf,
    /// The `.co` file's folder (`-I`, for its local includes).
    pub(crate) source_dir: PathBuf,
    /// The generated `.cpp`.
    pub(crate) cpp: PathBuf,
    /// The hash of its text.
    pub(crate) digest: Digest,
    /// The object to write.
    pub(crate) object: PathBuf,
    /// What the object's local symbols get appended (`.choreo_cpu_<hash of the file's symbol
    /// scope>`): unique in the program, so that no two objects' renamed COMDAT groups meet.
    pub(crate) local_suffix: String,
}

/// What every CPU compile of a build shares.
pub(crate) struct CpuConfig {
    /// The compiler and its flags, as `cc` chose them for the target.
    pub(crate) compiler: PathBuf,
    pub(crate) flags: Vec<String>,
    /// The environment `cc` wants the compiler run with.
    pub(crate) env: Vec<(String, String)>,
    /// `-D` definitions (also given to the Choreo preprocessor).
    pub(crate) defines: Vec<(String, Option<String>)>,
    /// The generated folder (`choreo.h`, `choreo_cpu.h`) and the user's include folders.
    pub(crate) include_dirs: Vec<PathBuf>,
    /// The hash of the two runtime headers.
    pub(crate) headers: Digest,
    /// The `objcopy` that makes the objects' hidden symbols local (see the module docs).
    pub(crate) objcopy: Option<PathBuf>,
    /// The build's output folder, written `$OUT_DIR` in keys (see `shared_cache`).
    out_dir: PathBuf,
    /// The cache shared by the builds of the target folder, if any.
    shared: Option<SharedCache>,
}

impl CpuConfig {
    /// The configuration `cc` gives for `target` (its triple) on `host`, at `opt_level`.
    pub(crate) fn from_cc(
        target: &str,
        host: &str,
        opt_level: &str,
        defines: Vec<(String, Option<String>)>,
        include_dirs: Vec<PathBuf>,
        objcopy: impl FnOnce(&Path) -> Option<PathBuf>,
        localize: bool,
    ) -> Result<CpuConfig, Error> {
        let mut build = cc::Build::new();
        build
            .cpp(true)
            .target(target)
            .host(host)
            .opt_level_str(opt_level)
            .cargo_metadata(false)
            .cargo_warnings(false)
            .warnings(false)
            .std("c++17");
        let tool =
            build.try_get_compiler().map_err(|e| Error::CxxNotFound { message: e.to_string() })?;
        let mut flags: Vec<String> =
            tool.args().iter().map(|a| a.to_string_lossy().into_owned()).collect();
        flags.push("-pthread".to_string());
        // Only the entries are exported (see the module docs); MSVC has no such flag.
        let mut objcopy_found = None;
        if tool.is_like_gnu() || tool.is_like_clang() {
            flags.push("-fvisibility=hidden".to_string());
            if localize {
                objcopy_found = objcopy(tool.path());
            }
        }
        let objcopy = objcopy_found;
        let env = tool
            .get_envs()
            .map(|(k, v)| (k.to_string_lossy().into_owned(), v.to_string_lossy().into_owned()))
            .collect();
        let headers = Digest::of(format!(
            "{}\0{}",
            choreo_compiler::runtime::CHOREO_H,
            choreo_compiler::runtime::CHOREO_CPU_H
        ));
        Ok(CpuConfig {
            compiler: tool.path().to_path_buf(),
            flags,
            env,
            defines,
            include_dirs,
            headers,
            objcopy,
            out_dir: PathBuf::new(),
            shared: None,
        })
    }

    /// Keys written for `out_dir`, and objects shared through `shared` (see `shared_cache`).
    pub(crate) fn with_shared_cache(
        mut self,
        out_dir: PathBuf,
        shared: Option<SharedCache>,
    ) -> Self {
        self.out_dir = out_dir;
        self.shared = shared;
        self
    }

    fn args(&self, job: &CpuJob) -> Vec<String> {
        let mut args = self.flags.clone();
        // Errors in the generated code carry `#line` directives naming the `.co` file.
        args.push("-D__CHOREO_CPU__=1".to_string());
        for (name, value) in &self.defines {
            args.push(match value {
                Some(value) => format!("-D{name}={value}"),
                None => format!("-D{name}"),
            });
        }
        for dir in self.include_dirs.iter().chain([&job.source_dir]) {
            args.push(format!("-I{}", dir.display()));
        }
        args.push("-c".to_string());
        args.push(job.cpp.display().to_string());
        args.push("-o".to_string());
        args.push(job.object.display().to_string());
        args
    }

    fn key(&self, job: &CpuJob) -> String {
        let mut hasher = Hasher::new();
        hasher
            // The version names how objects are made and post-processed: a change there
            // (v3: group signatures renamed too) makes them again.
            .field("choreo-build cpu object v3")
            .field(self.compiler.as_os_str().as_encoded_bytes())
            .field(job.digest.to_string())
            .field(self.headers.to_string());
        // The post-processing is part of the object: with another objcopy (or none) it is
        // made again.
        match &self.objcopy {
            Some(objcopy) => {
                hasher.field(objcopy.as_os_str().as_encoded_bytes()).field(&job.local_suffix)
            }
            None => hasher.field("no objcopy"),
        };
        // The same in every build folder, so that the shared cache can serve other builds.
        for arg in self.args(job) {
            hasher.field(SharedCache::portable(arg.as_bytes(), &self.out_dir));
        }
        hasher.finish().to_string()
    }
}

/// The objects of a build's CPU versions, in the order of its jobs.
pub(crate) struct Objects {
    /// Each object with the hash of its content.
    pub(crate) objects: Vec<(PathBuf, Digest)>,
    /// Whether each was compiled (its cache entry was stale).
    pub(crate) compiled: Vec<bool>,
}

/// Compiles the stale objects of `jobs` (`threads` at a time).
pub(crate) fn compile_all(
    config: &CpuConfig,
    jobs: &[CpuJob],
    threads: usize,
) -> Result<Objects, Error> {
    let stale: Vec<bool> = jobs
        .iter()
        .map(|job| {
            let key = config.key(job);
            let fresh = job.object.is_file()
                && fs::read_to_string(key_file(&job.object)).is_ok_and(|text| text.trim() == key);
            !fresh && !fetch_shared(config, job, &key)
        })
        .collect();
    let to_compile: Vec<&CpuJob> =
        jobs.iter().zip(&stale).filter(|(_, stale)| **stale).map(|(job, _)| job).collect();
    let results = parallel_map(&to_compile, threads, |job| compile_one(config, job));
    let mut compile_failures = Vec::new();
    for (result, job) in results.into_iter().zip(&to_compile) {
        match result {
            Some(Ok(())) => {}
            Some(Err(JobError::Failed(failure))) => compile_failures.push(*failure),
            Some(Err(JobError::Fatal(error))) => return Err(error),
            None => {
                let stopped = std::io::Error::other("the compile thread stopped");
                return Err(Error::io("compile", &job.cpp, stopped));
            }
        }
    }
    if !compile_failures.is_empty() {
        return Err(Error::CxxCompile(compile_failures));
    }
    let objects = jobs
        .iter()
        .map(|job| {
            let bytes = fs::read(&job.object).map_err(|e| Error::io("read", &job.object, e))?;
            Ok((job.object.clone(), Digest::of(bytes)))
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(Objects { objects, compiled: stale })
}

/// Brings `job`'s object from the shared cache when it has the entry `key` (another build
/// folder compiled the same file with the same flags); writes the build's own entry.
fn fetch_shared(config: &CpuConfig, job: &CpuJob, key: &str) -> bool {
    let Some(shared) = &config.shared else { return false };
    if shared.entry_text(key).is_none() {
        return false;
    }
    let _ = fs::remove_file(key_file(&job.object));
    let copied = job.object.parent().is_some_and(|dir| fs::create_dir_all(dir).is_ok())
        && shared.copy_object(key, &job.object);
    copied && fs::write(key_file(&job.object), key).is_ok()
}

fn key_file(object: &Path) -> PathBuf {
    object.with_extension("key")
}

/// Runs the compiler on one job: `JobError::Failed` is a compile error of the file (reported
/// with the others), `JobError::Fatal` a failure to run at all.
fn compile_one(config: &CpuConfig, job: &CpuJob) -> Result<(), JobError> {
    let key_path = key_file(&job.object);
    // A failed or interrupted run must not leave an entry that looks valid.
    let _ = fs::remove_file(&key_path);
    if let Some(dir) = job.object.parent() {
        fs::create_dir_all(dir)
            .map_err(|e| JobError::Fatal(Error::io("create directory", dir, e)))?;
    }
    let args = config.args(job);
    let mut command = Command::new(&config.compiler);
    command.args(&args);
    for (name, value) in &config.env {
        command.env(name, value);
    }
    let output = command.output().map_err(|source| {
        JobError::Fatal(Error::Spawn { program: config.compiler.clone(), source })
    })?;
    if !output.status.success() {
        let mut text = String::from_utf8_lossy(&output.stderr).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stdout));
        return Err(JobError::Failed(Box::new(NvccFailure {
            source_file: job.source.clone(),
            cu_file: job.cpp.clone(),
            hand_written: false,
            command: std::iter::once(config.compiler.display().to_string())
                .chain(args)
                .collect::<Vec<_>>()
                .join(" "),
            status: output.status.to_string(),
            output: text,
        })));
    }
    if let Some(objcopy) = &config.objcopy {
        localize(objcopy, job).map_err(JobError::Fatal)?;
    }
    let key = config.key(job);
    fs::write(&key_path, &key).map_err(|e| JobError::Fatal(Error::io("write", &key_path, e)))?;
    if let Some(shared) = &config.shared {
        shared.publish(&key, &job.object, &format!("key {key}\n"));
    }
    Ok(())
}

/// Renames every symbol that the object defines with hidden visibility (`<name><suffix>`) and
/// makes it local, with `objcopy` (see the module docs); a non-ELF object is left alone.
fn localize(objcopy: &Path, job: &CpuJob) -> Result<(), Error> {
    let object = &job.object;
    let bytes = fs::read(object).map_err(|e| Error::io("read", object, e))?;
    if !elf::is_elf(&bytes) {
        return Ok(());
    }
    let malformed = || Error::Objcopy {
        object: object.clone(),
        command: String::new(),
        message: "cannot read the symbol table of the compiled object".to_owned(),
    };
    let tables = elf::tables(&bytes).ok_or_else(malformed)?;
    let hidden: Vec<String> = tables
        .symbols
        .into_iter()
        .filter(|symbol| symbol.hidden && !symbol.name.ends_with(&job.local_suffix))
        .map(|symbol| symbol.name)
        .collect();
    // Every group gets a signature of this file, too: the linker keeps one group per
    // signature, and a group whose signature is not one of its renamed symbols (a constructor's
    // or destructor's `C5`/`D5` group holds the `C1`/`C2` symbols) would otherwise still meet
    // its namesake in another object, and one of the two be discarded under the references to
    // it ("relocation refers to a symbol in a discarded section").
    let mut renamed = hidden.clone();
    for signature in tables.group_signatures {
        if !signature.ends_with(&job.local_suffix) && !renamed.contains(&signature) {
            renamed.push(signature);
        }
    }
    if renamed.is_empty() {
        return Ok(());
    }
    let renames = object.with_extension("rename");
    let locals = object.with_extension("local");
    let mut rename_text = String::new();
    let mut local_text = String::new();
    for name in &renamed {
        rename_text.push_str(&format!("{name} {name}{}\n", job.local_suffix));
    }
    for name in &hidden {
        // GNU objcopy localizes by the new name, llvm-objcopy by the old one: list both.
        local_text.push_str(&format!("{name}\n{name}{}\n", job.local_suffix));
    }
    fs::write(&renames, rename_text).map_err(|e| Error::io("write", &renames, e))?;
    fs::write(&locals, local_text).map_err(|e| Error::io("write", &locals, e))?;
    let mut command = Command::new(objcopy);
    command
        .arg(format!("--redefine-syms={}", renames.display()))
        .arg(format!("--localize-symbols={}", locals.display()))
        .arg(object);
    let line = format!(
        "{} --redefine-syms={} --localize-symbols={} {}",
        objcopy.display(),
        renames.display(),
        locals.display(),
        object.display()
    );
    let output = command
        .output()
        .map_err(|source| Error::Spawn { program: objcopy.to_path_buf(), source })?;
    if !output.status.success() {
        let _ = fs::remove_file(object);
        let mut message = format!("{}: ", output.status);
        message.push_str(String::from_utf8_lossy(&output.stderr).trim());
        return Err(Error::Objcopy { object: object.clone(), command: line, message });
    }
    // Every hidden symbol is renamed now; the renamed ones are local, except GCC's
    // `STB_GNU_UNIQUE` static locals of inline functions (binding unique; harmless: no other
    // object has their names).
    let bytes = fs::read(object).map_err(|e| Error::io("read", object, e))?;
    let left: Vec<String> = elf::defined_symbols(&bytes)
        .ok_or_else(malformed)?
        .into_iter()
        .filter(|symbol| {
            symbol.hidden
                && (!symbol.name.ends_with(&job.local_suffix)
                    || symbol.bind != elf::BIND_GNU_UNIQUE)
        })
        .map(|symbol| symbol.name)
        .collect();
    if !left.is_empty() {
        let _ = fs::remove_file(object);
        return Err(Error::Objcopy {
            object: object.clone(),
            command: line,
            message: format!("these symbols are still global: {}", left.join(", ")),
        });
    }
    Ok(())
}

/// The `objcopy` for objects of `target` (a triple, `cross` when not the host's) compiled by
/// `compiler`: `OBJCOPY` (given by `env_objcopy`; when it does not run, none), the compiler's
/// cross prefix with `objcopy` (`aarch64-linux-gnu-g++` → `aarch64-linux-gnu-objcopy`),
/// `<target>-objcopy` in cross builds, `objcopy`, `llvm-objcopy`: the first that runs.
pub(crate) fn find_objcopy(
    env_objcopy: Option<PathBuf>,
    compiler: &Path,
    target: &str,
    cross: bool,
) -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(objcopy) = env_objcopy {
        // Only that one: one that does not run means none (a warning says so).
        candidates.push(objcopy);
        return candidates.into_iter().find(|candidate| runs(candidate));
    }
    let name = compiler.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    for driver in ["g++", "c++", "gcc", "cc", "clang++", "clang"] {
        if let Some(prefix) = name.strip_suffix(driver).filter(|p| p.ends_with('-')) {
            candidates.push(compiler.with_file_name(format!("{prefix}objcopy")));
            break;
        }
    }
    if cross {
        candidates.push(PathBuf::from(format!("{target}-objcopy")));
    }
    candidates.push(PathBuf::from("objcopy"));
    candidates.push(PathBuf::from("llvm-objcopy"));
    candidates.into_iter().find(|candidate| runs(candidate))
}

/// Whether `objcopy --version` succeeds.
fn runs(objcopy: &Path) -> bool {
    Command::new(objcopy).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// A symbol that two objects of a build define (strong, global), making the program's link
/// fail once both are linked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Clash {
    pub(crate) symbol: String,
    /// The objects, each with the file it was compiled from and its backend.
    pub(crate) first: (PathBuf, &'static str),
    pub(crate) second: (PathBuf, &'static str),
}

/// The symbols that more than one of `objects` (each: object, its source file, backend) define
/// as strong global symbols, in the order found. Objects that are not ELF are skipped.
pub(crate) fn clashes(objects: &[(PathBuf, PathBuf, &'static str)]) -> Vec<Clash> {
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut found = Vec::new();
    for (index, (object, _, _)) in objects.iter().enumerate() {
        let Ok(bytes) = fs::read(object) else { continue };
        let Some(symbols) = elf::defined_symbols(&bytes) else { continue };
        for symbol in symbols.into_iter().filter(|s| s.bind == elf::BIND_GLOBAL) {
            match seen.get(&symbol.name) {
                Some(&first) if first != index => {
                    let (_, first_source, first_backend) = &objects[first];
                    let (_, source, backend) = &objects[index];
                    found.push(Clash {
                        symbol: symbol.name,
                        first: (first_source.clone(), first_backend),
                        second: (source.clone(), backend),
                    });
                }
                Some(_) => {}
                None => {
                    seen.insert(symbol.name, index);
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("choreo-build-cpu-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// `g++ -c` of `source` into `<dir>/<name>.o`; `None` when there is no g++.
    fn compile(dir: &Path, name: &str, source: &str, flags: &[&str]) -> Option<PathBuf> {
        let cpp = dir.join(format!("{name}.cpp"));
        let object = dir.join(format!("{name}.o"));
        fs::write(&cpp, source).unwrap();
        let status = Command::new("g++")
            .args(["-std=c++17", "-O1", "-c"])
            .args(flags)
            .arg(&cpp)
            .arg("-o")
            .arg(&object)
            .status()
            .ok()?;
        assert!(status.success(), "g++ failed on {source}");
        Some(object)
    }

    /// What the CPU and CUDA versions of one file have in common: host code with external
    /// linkage, an inline function with a static local (a COMDAT group), a class template whose
    /// out-of-line constructor and destructor sit in `C5`/`D5` groups (named after no symbol
    /// the object defines), and the same names with different bodies, as when the two dialects
    /// compile one header differently.
    fn host_code(backend: &str, value: i32) -> String {
        format!(
            "int table[2] = {{{value}, {value}}};\n\
             float scale_of(int n) {{ return {value}.0f / n; }}\n\
             inline int which() {{ static int calls = 0; ++calls; return {value}; }}\n\
             template <class T> T twice(T x) {{ return x * 2 + {value} - {value}; }}\n\
             struct Local {{ int v; }};\n\
             template <class T> struct Box {{\n\
               T* p;\n\
               __attribute__((noinline)) Box(int v) : p(new T{{v}}) {{}}\n\
               __attribute__((noinline)) ~Box() {{ delete p; }}\n\
             }};\n\
             extern \"C\" __attribute__((visibility(\"default\"))) int entry_{backend}() {{\n\
               Box<Local> box({value});\n\
               return which() * 1000 + int(scale_of(1)) * 100 + twice(table[0]) + box.p->v * 0;\n\
             }}\n"
        )
    }

    /// The objcopys of this machine (GNU and LLVM), each tested.
    fn objcopies() -> Vec<PathBuf> {
        ["objcopy", "llvm-objcopy"].into_iter().map(PathBuf::from).filter(|o| runs(o)).collect()
    }

    #[test]
    fn localized_cpu_objects_link_with_the_cuda_version_of_the_same_host_code() {
        let dir = temp("localize");
        let Some(cuda) = compile(&dir, "cuda", &host_code("cuda", 1), &["-fPIC"]) else {
            eprintln!("skipped: no g++");
            return;
        };
        let main = compile(
            &dir,
            "main",
            "#include <cstdio>\nextern \"C\" int entry_cuda(); extern \"C\" int entry_cpu();\n\
             int main() { std::printf(\"%d %d\\n\", entry_cuda(), entry_cpu()); }\n",
            &[],
        )
        .unwrap();
        let source = host_code("cpu", 2);
        // As compiled, the two objects clash.
        let plain = compile(&dir, "plain", &source, &["-fPIC", "-fvisibility=hidden"]).unwrap();
        let objects = [
            (cuda.clone(), PathBuf::from("k.co"), "CUDA"),
            (plain.clone(), PathBuf::from("k.co"), "CPU"),
        ];
        let found: Vec<String> = clashes(&objects).into_iter().map(|c| c.symbol).collect();
        assert_eq!(found, ["_Z8scale_ofi", "table"], "weak and unique symbols do not clash");
        for objcopy in objcopies() {
            let name = objcopy.display().to_string();
            let object = compile(&dir, &name, &source, &["-fPIC", "-fvisibility=hidden"]).unwrap();
            let job = CpuJob {
                source: "k.co".into(),
                source_dir: dir.clone(),
                cpp: dir.join("plain.cpp"),
                digest: Digest::of("k"),
                object: object.clone(),
                local_suffix: ".choreo_cpu_0123456789abcdef".to_owned(),
            };
            localize(&objcopy, &job).unwrap();
            let symbols = elf::defined_symbols(&fs::read(&object).unwrap()).unwrap();
            let global: Vec<&str> = symbols
                .iter()
                .filter(|s| s.bind != elf::BIND_GNU_UNIQUE)
                .map(|s| s.name.as_str())
                .collect();
            assert_eq!(global, ["entry_cpu"], "{name}: {symbols:?}");
            // Running it again changes nothing (every hidden symbol has the suffix already).
            localize(&objcopy, &job).unwrap();
            let objects = [
                (cuda.clone(), PathBuf::from("k.co"), "CUDA"),
                (object.clone(), PathBuf::from("k.co"), "CPU"),
            ];
            assert_eq!(clashes(&objects), [], "{name}");
            // Linked in both orders, each entry uses its own object's copies: the COMDAT
            // groups of `which` and `twice` are not merged across the two.
            for (first, second) in [(&cuda, &object), (&object, &cuda)] {
                let exe = dir.join(format!("{name}.exe"));
                let status = Command::new("g++")
                    .arg(&main)
                    .arg(first)
                    .arg(second)
                    .arg("-o")
                    .arg(&exe)
                    .status()
                    .unwrap();
                assert!(status.success(), "{name}: link failed");
                let output = Command::new(&exe).output().unwrap();
                assert_eq!(String::from_utf8_lossy(&output.stdout), "1102 2204\n", "{name}");
            }
        }
    }

    #[test]
    fn a_failing_objcopy_is_an_error_that_leaves_no_object() {
        let dir = temp("failing");
        let Some(object) = compile(&dir, "k", &host_code("cpu", 2), &["-fvisibility=hidden"])
        else {
            eprintln!("skipped: no g++");
            return;
        };
        let fake = dir.join("fake-objcopy");
        fs::write(&fake, "#!/bin/sh\necho 'no such option' >&2\nexit 1\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
        }
        let job = CpuJob {
            source: "k.co".into(),
            source_dir: dir.clone(),
            cpp: dir.join("k.cpp"),
            digest: Digest::of("k"),
            object: object.clone(),
            local_suffix: ".choreo_cpu_0".to_owned(),
        };
        let error = localize(&fake, &job).unwrap_err();
        assert!(matches!(error, Error::Objcopy { .. }), "{error}");
        let text = error.to_string();
        assert!(text.contains("no such option") && text.contains("--redefine-syms"), "{text}");
        assert!(!object.exists());
        // An OBJCOPY that does not run is no objcopy.
        assert_eq!(find_objcopy(Some(dir.join("none")), Path::new("g++"), "x", false), None);
        assert_eq!(find_objcopy(Some(fake.clone()), Path::new("g++"), "x", false), None);
    }
}
