//! Driving nvcc: the command line, the per-file object cache, parallel runs, the archive.
//!
//! Objects are compiled by running nvcc directly rather than through `cc::Build`: cc cannot
//! skip a file whose inputs did not change (it recompiles everything it is given), takes nvcc
//! only from the process environment (`NVCC`), adds `-G` in debug profiles and, for CUDA
//! archives, an extra `--device-link` nvcc run. Owning the command line also makes it exactly
//! known, so it can be part of the cache key. `cc` still provides the target's archiver (`AR`,
//! cross prefixes) and, for cross builds, the target's C++ compiler for `-ccbin`.
//!
//! The same command line serves the generated `.cu` files and the hand-written ones; the latter
//! also get `-I` the generated folder (for `choreo.h`), and their objects live in `obj/cuda/`.
//!
//! Cache: each object is named by its architectures (`<module>.sm_80-sm_90.o`), so every
//! architecture list keeps its own entry. Next to each object, `<object stem>.key` holds the
//! key the object was built with — a hash of the `.cu` text (comments left out, see
//! `comments`), `choreo.h`, the nvcc path, size, modification time and CUDA
//! version, the full argument list and `NVCC_PREPEND_FLAGS`/`NVCC_APPEND_FLAGS` — and, one
//! line each, the hash of every other header nvcc read (from its `-MD` dependency file),
//! leaving out system headers under `/usr/` and headers of the toolkit (both change only with
//! a toolkit or compiler update, which changes the nvcc key or is out of scope, as in
//! ccache's default mode). A file is recompiled when its key or one of those headers changed,
//! or its object is missing. The key file is removed before nvcc runs, so a failed or
//! interrupted run never leaves an entry that looks valid.
//!
//! Parallelism: the compile jobs of both compilers (nvcc here, the host C++ compiler in `cpu`)
//! run through [`parallel_map`], on at most `NUM_JOBS` threads (else the available
//! parallelism). Under cargo, which gives a build script its jobserver (`CARGO_MAKEFLAGS`,
//! `--jobserver-auth=fifo:PATH` or `R,W` descriptors; also make's `MAKEFLAGS`), they share
//! cargo's `-j` with everything else it runs: one worker runs jobs on the token cargo holds for
//! the build script, each other worker runs each job on a token acquired from the jobserver
//! (through `jobserver::HelperThread`, whose blocking wait is interrupted when the queue is
//! empty) and released when it ends, so a build script never runs more compilers than cargo
//! lends it tokens, and never waits for a token: without one to lend, the first worker does
//! all the work. (A blocking `Client::acquire` in the extra workers deadlocked `cargo -j2`
//! with two build scripts, each holding its token and waiting for the other's;
//! `Client::try_acquire` is unsupported on cargo's anonymous-pipe jobserver.) Without a jobserver (`choreoc`, a test calling the library) the thread bound alone
//! applies.

use crate::error::{Error, NvccFailure};
use crate::hash::{Digest, Hasher};
use crate::shared_cache::SharedCache;
use choreo_compiler::compile::Arch;
use choreo_toolkit::Toolkit;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::UNIX_EPOCH;

/// Everything about the nvcc command line that is the same for all files of a build.
#[derive(Debug, Clone)]
pub(crate) struct NvccConfig {
    /// The toolkit (nvcc path, root, version).
    pub(crate) toolkit: Toolkit,
    /// The build's GPU architectures (hand-written `.cu` files are compiled for all of them;
    /// each generated file for those chosen for it, [`Job::archs`]).
    pub(crate) archs: Vec<Arch>,
    /// `-D` definitions (also given to the Choreo preprocessor).
    pub(crate) defines: Vec<(String, Option<String>)>,
    /// Extra include directories.
    pub(crate) include_dirs: Vec<PathBuf>,
    /// The host compiler for `-ccbin`, when one was chosen.
    pub(crate) ccbin: Option<PathBuf>,
    /// `--target-directory` for cross builds (`sbsa-linux`).
    pub(crate) target_dir: Option<&'static str>,
    /// Define `CHOREO_LEAN_PRELUDE` (choreo.h then leaves out upstream's extra std headers).
    pub(crate) lean_prelude: bool,
    /// Compile host code position-independent (`-Xcompiler -fPIC`), as cc does on Unix.
    pub(crate) pic: bool,
    /// Flags added by the user, last on the line.
    pub(crate) user_flags: Vec<String>,
    /// `NVCC_PREPEND_FLAGS` and `NVCC_APPEND_FLAGS` (nvcc reads them itself): part of the key.
    pub(crate) env_flags: Vec<(&'static str, String)>,
    /// The build's output folder, written `$OUT_DIR` in keys (see `shared_cache`).
    pub(crate) out_dir: PathBuf,
    /// The cache shared by the builds of the target folder, if any.
    pub(crate) shared: Option<SharedCache>,
}

pub(crate) use crate::arch::gencode_flags;

/// One `.cu` to compile: generated from a `.co` file, or hand-written.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    /// The file the user wrote, as given (for messages): the `.co` file the `.cu` was generated
    /// from, or the hand-written `.cu` itself.
    pub(crate) source: PathBuf,
    /// The folder of `source` (absolute): `-I`, so its `#include "…"` resolve.
    pub(crate) source_dir: PathBuf,
    /// The `.cu` to compile (absolute).
    pub(crate) cu: PathBuf,
    /// The object to produce.
    pub(crate) object: PathBuf,
    /// The folder of the generated files (`choreo.h`, the generated `.cu`s; absolute). Its
    /// files are not tracked as dependencies: they are written by the build and `choreo.h` is
    /// part of the key.
    pub(crate) generated_dir: PathBuf,
    /// A hand-written `.cu`: it gets `-I <generated_dir>` (so `#include "choreo.h"` works; a
    /// generated `.cu` finds it next to itself) and nvcc's messages name it, not a `.co` file.
    pub(crate) hand_written: bool,
    /// The architectures to compile for (`-gencode`), oldest first.
    pub(crate) archs: Vec<Arch>,
}

impl Job {
    fn key_file(&self) -> PathBuf {
        self.object.with_extension("key")
    }

    fn dep_file(&self) -> PathBuf {
        self.object.with_extension("d")
    }
}

impl NvccConfig {
    /// The full argument list for one job.
    pub(crate) fn args(&self, job: &Job) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["-c".into(), "-std=c++17".into(), "-O3".into()];
        args.extend(gencode_flags(&job.archs).into_iter().map(OsString::from));
        if self.pic {
            args.extend(["-Xcompiler".into(), "-fPIC".into()]);
        }
        if self.lean_prelude {
            args.push("-DCHOREO_LEAN_PRELUDE".into());
        }
        for (name, value) in &self.defines {
            args.push(match value {
                Some(value) => format!("-D{name}={value}").into(),
                None => format!("-D{name}").into(),
            });
        }
        args.push("-I".into());
        args.push(job.source_dir.clone().into());
        if job.hand_written {
            args.push("-I".into());
            args.push(job.generated_dir.clone().into());
        }
        for dir in &self.include_dirs {
            args.push("-I".into());
            args.push(dir.clone().into());
        }
        if let Some(ccbin) = &self.ccbin {
            args.push("-ccbin".into());
            args.push(ccbin.clone().into());
        }
        if let Some(dir) = self.target_dir {
            args.push("--target-directory".into());
            args.push(dir.into());
        }
        args.extend(self.user_flags.iter().map(OsString::from));
        args.extend(["-MD".into(), "-MF".into(), job.dep_file().into()]);
        args.extend(["-o".into(), job.object.clone().into(), job.cu.clone().into()]);
        args
    }

    /// The command line as text (for messages).
    pub(crate) fn command_line(&self, job: &Job) -> String {
        std::iter::once(self.toolkit.nvcc.clone().into_os_string())
            .chain(self.args(job))
            .map(|arg| shell_quote(&arg.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The cache key of a job, given the digests of its `.cu` and of `choreo.h`.
    pub(crate) fn key(&self, job: &Job, cu: Digest, header: Digest) -> Digest {
        let mut hasher = Hasher::new();
        hasher.field("choreo-build object cache v1");
        hasher.field(self.toolkit.nvcc.as_os_str().as_encoded_bytes());
        if let Ok(meta) = fs::metadata(&self.toolkit.nvcc) {
            hasher.field(meta.len().to_le_bytes());
            let modified = meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok());
            hasher.field(modified.map_or(0, |d| d.as_nanos()).to_le_bytes());
        }
        hasher.field(self.toolkit.version.to_le_bytes());
        // Another root (CUDA_HOME changed while NVCC names the same wrapper) recompiles.
        hasher.field(self.toolkit.root.as_os_str().as_encoded_bytes());
        // The same in every build folder, so that the shared cache can serve other builds.
        for arg in self.args(job) {
            hasher.field(SharedCache::portable(arg.as_encoded_bytes(), &self.out_dir));
        }
        for (var, value) in &self.env_flags {
            hasher.field(var).field(value);
        }
        hasher.field(cu.to_string()).field(header.to_string());
        hasher.finish()
    }

    /// Headers from a dependency list that belong in the cache entry: not the `.cu` itself
    /// (its digest is in the key), not the generated files (`choreo.h`), not system or
    /// toolkit headers. For a hand-written `.cu` that keeps the local headers next to it.
    ///
    /// Nor the `.co` file of a generated `.cu`: the host compiler lists the file named by the
    /// `#line` directives among the dependencies, but nvcc never reads it, and what it
    /// contributes is the `.cu` (whose comment-insensitive digest is in the key). Tracking its
    /// bytes would recompile on every comment edit.
    fn tracked_dependency(&self, job: &Job, dep: &Path) -> bool {
        let same_file = |a: &Path, b: &Path| {
            a == b || fs::canonicalize(a).ok().is_some_and(|a| fs::canonicalize(b).ok() == Some(a))
        };
        let in_generated_dir = dep.starts_with(&job.generated_dir)
            || fs::canonicalize(&job.generated_dir).is_ok_and(|dir| dep.starts_with(dir));
        !(same_file(dep, &job.cu)
            || (!job.hand_written && same_file(dep, &job.source))
            || in_generated_dir
            || dep.starts_with("/usr/")
            || dep.starts_with(&self.toolkit.root)
            || self
                .toolkit
                .nvcc
                .parent()
                .and_then(Path::parent)
                .is_some_and(|r| dep.starts_with(r)))
    }
}

/// What the cache says about a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CacheState {
    /// The object is up to date; the headers it depends on (beyond the `.cu`).
    Fresh(Vec<PathBuf>),
    /// It must be compiled.
    Stale,
}

/// Checks the cache entry of `job` against `key`.
pub(crate) fn check_cache(job: &Job, key: Digest) -> CacheState {
    let Ok(text) = fs::read_to_string(job.key_file()) else { return CacheState::Stale };
    if !job.object.is_file() {
        return CacheState::Stale;
    }
    check_entry(&text, key)
}

/// Checks an entry's text (the build's own, or the shared cache's) against `key`: its key line
/// and the current content of every header it lists.
fn check_entry(text: &str, key: Digest) -> CacheState {
    let mut lines = text.lines();
    if lines.next().and_then(|line| line.strip_prefix("key ")).and_then(Digest::parse) != Some(key)
    {
        return CacheState::Stale;
    }
    let mut deps = Vec::new();
    for line in lines {
        let Some((digest, path)) = line.strip_prefix("dep ").and_then(|rest| rest.split_once(' '))
        else {
            return CacheState::Stale;
        };
        let path = PathBuf::from(path);
        let current = fs::read(&path).ok().map(Digest::of);
        if current.is_none() || current != Digest::parse(digest) {
            return CacheState::Stale;
        }
        deps.push(path);
    }
    CacheState::Fresh(deps)
}

/// Brings `job`'s object from the shared cache, when it has a valid entry for `key` (another
/// build folder of the same target folder compiled the same file): copies the object, writes
/// the build's own entry and returns the headers it depends on.
pub(crate) fn fetch_shared(config: &NvccConfig, job: &Job, key: Digest) -> Option<Vec<PathBuf>> {
    let shared = config.shared.as_ref()?;
    let text = shared.entry_text(&key.to_string())?;
    let CacheState::Fresh(deps) = check_entry(&text, key) else { return None };
    let _ = fs::remove_file(job.key_file());
    if !shared.copy_object(&key.to_string(), &job.object) {
        return None;
    }
    fs::write(job.key_file(), &text).ok()?;
    Some(deps)
}

/// The result of compiling one job.
#[derive(Debug, Clone)]
pub(crate) struct Compiled {
    /// Headers the object depends on (tracked in its cache entry).
    pub(crate) deps: Vec<PathBuf>,
    /// nvcc's output (warnings), possibly empty.
    pub(crate) output: String,
}

/// Compiles one job and writes its cache entry.
fn compile_one(config: &NvccConfig, job: &Job, key: Digest) -> Result<Compiled, JobError> {
    let _ = fs::remove_file(job.key_file());
    let _ = fs::remove_file(&job.object);
    let output = Command::new(&config.toolkit.nvcc)
        .args(config.args(job))
        .current_dir(job.cu.parent().unwrap_or(Path::new(".")))
        .output()
        .map_err(|source| {
            JobError::Fatal(Error::Spawn { program: config.toolkit.nvcc.clone(), source })
        })?;
    let mut text = String::from_utf8_lossy(&output.stderr).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stdout));
    if !output.status.success() {
        return Err(JobError::Failed(Box::new(NvccFailure {
            source_file: job.source.clone(),
            cu_file: job.cu.clone(),
            hand_written: job.hand_written,
            command: config.command_line(job),
            status: output.status.to_string(),
            output: text,
        })));
    }
    let cwd = job.cu.parent().unwrap_or(Path::new("."));
    let depfile = fs::read_to_string(job.dep_file())
        .map_err(|e| JobError::Fatal(Error::io("read", job.dep_file(), e)))?;
    let mut entry = format!("key {key}\n");
    let mut deps = Vec::new();
    for dep in parse_depfile(&depfile) {
        let dep = cwd.join(dep);
        let dep = fs::canonicalize(&dep).unwrap_or(dep);
        if !config.tracked_dependency(job, &dep) || deps.contains(&dep) {
            continue;
        }
        // A header that cannot be read now cannot be validated later: no entry at all.
        let bytes = fs::read(&dep).map_err(|e| JobError::Fatal(Error::io("read", &dep, e)))?;
        entry.push_str(&format!("dep {} {}\n", Digest::of(bytes), dep.display()));
        deps.push(dep);
    }
    fs::write(job.key_file(), &entry)
        .map_err(|e| JobError::Fatal(Error::io("write", job.key_file(), e)))?;
    if let Some(shared) = &config.shared {
        shared.publish(&key.to_string(), &job.object, &entry);
    }
    Ok(Compiled { deps, output: text })
}

/// Why a job did not produce an object.
#[derive(Debug)]
pub(crate) enum JobError {
    /// nvcc rejected the file (boxed: a failure is rare and large).
    Failed(Box<NvccFailure>),
    /// Something else (nvcc could not start, a file could not be written).
    Fatal(Error),
}

/// Compiles `jobs` (with their keys) on up to `threads` threads; results in job order.
pub(crate) fn compile_all(
    config: &NvccConfig,
    jobs: &[(Job, Digest)],
    threads: usize,
) -> Vec<Result<Compiled, JobError>> {
    parallel_map(jobs, threads, |(job, key)| compile_one(config, job, *key))
        .into_iter()
        .zip(jobs)
        .map(|(result, (job, _))| {
            result.unwrap_or_else(|| {
                Err(JobError::Fatal(Error::io(
                    "compile",
                    &job.cu,
                    std::io::Error::other("the compile thread stopped"),
                )))
            })
        })
        .collect()
}

/// `run` on every item, on up to `threads` threads taking items in order; results in item
/// order (`None` for an item whose thread stopped, i.e. panicked, before finishing it). The
/// compile jobs of both compilers (nvcc here, the host C++ compiler in `cpu`) run through it.
/// Under cargo's jobserver (see [`jobserver`]) the jobs also hold its tokens, see
/// [`parallel_map_with`].
pub(crate) fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    run: impl Fn(&T) -> R + Sync,
) -> Vec<Option<R>> {
    parallel_map_with(items, threads, jobserver(), run)
}

/// The jobserver of the process's environment (`CARGO_MAKEFLAGS`, `MAKEFLAGS` or `MFLAGS` with
/// `--jobserver-auth=fifo:PATH` or `--jobserver-auth=R,W`), as cargo gives one to a build
/// script; `None` outside one (`choreoc`, a test calling the library directly). Opened once.
pub(crate) fn jobserver() -> Option<&'static jobserver::Client> {
    static CLIENT: std::sync::OnceLock<Option<jobserver::Client>> = std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| {
            // SAFETY: the descriptors named in the environment are the jobserver's, inherited
            // from cargo (or make) for this purpose and used by nothing else in this process;
            // `check_pipe` rejects descriptors that are not pipes (closed and reused ones) and
            // the client is created once, on first use.
            unsafe { jobserver::Client::from_env_ext(true) }.client.ok()
        })
        .as_ref()
}

/// [`parallel_map`] with the token source given. Without one, `threads` jobs run at once.
/// With one, at most `threads` and at most one more than the tokens it lends: the first
/// worker runs on the token the process holds implicitly (cargo holds it for a running build
/// script) and never waits; every other worker runs each of its jobs on a token acquired from
/// the jobserver (by a helper thread, whose blocking wait is interrupted once no items are
/// left), released when the job ends, also when it fails or panics. When the jobserver lends
/// nothing, the first worker runs every job and the others stop as soon as the queue is empty:
/// a build never waits for a token another build holds. No acquired token is held while no
/// job needs it.
pub(crate) fn parallel_map_with<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    tokens: Option<&jobserver::Client>,
    run: impl Fn(&T) -> R + Sync,
) -> Vec<Option<R>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    let threads = threads.clamp(1, items.len().max(1));
    let pool = match tokens {
        Some(client) if threads > 1 => Some(TokenPool::new(client)),
        _ => None,
    };
    let claim = || {
        let index = next.fetch_add(1, Ordering::Relaxed);
        if index + 1 >= items.len() {
            if let Some(pool) = &pool {
                pool.finish(); // Nothing left to start: waiting workers stop.
            }
        }
        items.get(index).map(|item| (index, item))
    };
    let pool = &pool;
    let worker = |implicit: bool| {
        // If the implicit token's worker stops (a job panicked), the others must not wait for
        // tokens that may never come: the queue ends with it.
        let _finish = FinishOnDrop(pool.as_ref().filter(|_| implicit));
        loop {
            // Worker 0 runs on the implicit token; the others on acquired ones.
            let _token = match pool {
                Some(pool) if !implicit => match pool.take() {
                    Some(token) => Some(token),
                    None => break,
                },
                _ => None,
            };
            let Some((index, item)) = claim() else { break };
            let result = run(item);
            if let Ok(mut results) = results.lock() {
                results[index] = Some(result);
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            let worker = &worker;
            scope.spawn(move || worker(false));
        }
        // The implicit token's worker is the calling thread itself.
        worker(true);
    });
    results.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Calls [`TokenPool::finish`] when dropped (also when unwinding).
struct FinishOnDrop<'a>(Option<&'a TokenPool>);

impl Drop for FinishOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(pool) = self.0 {
            pool.finish();
        }
    }
}

/// The tokens that the workers of one [`parallel_map_with`] other than the first acquire from
/// the jobserver through its helper thread.
struct TokenPool {
    state: Arc<(Mutex<TokenState>, Condvar)>,
    /// Acquires tokens on request; `None` if it could not be started (then only the implicit
    /// token is used). Dropping it interrupts a pending acquisition.
    helper: Option<jobserver::HelperThread>,
}

#[derive(Default)]
struct TokenState {
    /// Acquired tokens not yet taken by a worker.
    acquired: Vec<jobserver::Acquired>,
    /// Requests sent to the helper thread and not answered yet.
    requested: usize,
    /// Workers waiting for a token.
    waiting: usize,
    /// All items are taken: tokens that arrive are released at once.
    finished: bool,
}

/// An acquired token a job runs on, released to the jobserver when dropped.
struct Token {
    _acquired: jobserver::Acquired,
}

impl TokenPool {
    fn new(client: &jobserver::Client) -> TokenPool {
        let state = Arc::new((Mutex::new(TokenState::default()), Condvar::new()));
        let for_helper = Arc::clone(&state);
        let helper = client
            .clone()
            .into_helper_thread(move |token| {
                let (lock, ready) = &*for_helper;
                let mut state = lock_ignoring_poison(lock);
                state.requested = state.requested.saturating_sub(1);
                // An error leaves the work to the implicit token's worker.
                if let Ok(token) = token {
                    if !state.finished && state.waiting > 0 {
                        state.acquired.push(token);
                        ready.notify_one();
                    }
                }
            })
            .ok();
        TokenPool { state, helper }
    }

    /// Waits for an acquired token; `None` once no item is left.
    fn take(&self) -> Option<Token> {
        let (lock, ready) = &*self.state;
        let mut state = lock_ignoring_poison(lock);
        loop {
            if state.finished {
                return None;
            }
            if let Some(acquired) = state.acquired.pop() {
                return Some(Token { _acquired: acquired });
            }
            state.waiting += 1;
            if let Some(helper) = &self.helper {
                if state.requested < state.waiting {
                    helper.request_token();
                    state.requested += 1;
                }
            }
            state = ready.wait(state).unwrap_or_else(|poisoned| poisoned.into_inner());
            state.waiting -= 1;
        }
    }

    /// No item is left: wake the waiting workers, release the unused tokens.
    fn finish(&self) {
        let (lock, ready) = &*self.state;
        let mut state = lock_ignoring_poison(lock);
        state.finished = true;
        state.acquired.clear();
        ready.notify_all();
    }
}

impl Drop for TokenPool {
    fn drop(&mut self) {
        // Stop the helper first, so no token arrives after the unused ones are released.
        drop(self.helper.take());
        lock_ignoring_poison(&self.state.0).acquired.clear();
    }
}

fn lock_ignoring_poison<T>(lock: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The prerequisites listed in a make-style dependency file (`target: a b \` …), with `\ `
/// and `$$` unescaped.
pub(crate) fn parse_depfile(text: &str) -> Vec<PathBuf> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.peek() {
                Some('\n') => {
                    chars.next();
                    finish_word(&mut word, &mut words);
                }
                Some('\r') => {
                    chars.next();
                    if chars.peek() == Some(&'\n') {
                        chars.next();
                    }
                    finish_word(&mut word, &mut words);
                }
                Some(' ') | Some('#') | Some('\\') => word.push(chars.next().unwrap_or(' ')),
                _ => word.push('\\'),
            },
            '$' if chars.peek() == Some(&'$') => {
                chars.next();
                word.push('$');
            }
            c if c.is_whitespace() => finish_word(&mut word, &mut words),
            c => word.push(c),
        }
    }
    finish_word(&mut word, &mut words);
    // Everything after the first word that ends the target list (`x.o:` or a lone `:`).
    let mut prerequisites = Vec::new();
    let mut in_targets = true;
    for word in words {
        if in_targets {
            in_targets = !word.ends_with(':');
            continue;
        }
        prerequisites.push(PathBuf::from(word));
    }
    prerequisites
}

fn finish_word(word: &mut String, words: &mut Vec<String>) {
    if !word.is_empty() {
        words.push(std::mem::take(word));
    }
}

/// Creates (or re-creates) the static library `lib` from `objects` with the archiver command
/// `ar` (from cc), unless `lib` exists and was made from exactly these objects with these
/// digests (of their content; recorded in `<lib>.key`). Returns whether it was (re)created.
pub(crate) fn archive(
    mut ar: Command,
    lib: &Path,
    objects: &[(PathBuf, Digest)],
) -> Result<bool, Error> {
    let mut hasher = Hasher::new();
    hasher.field("choreo-build archive v1");
    for (object, key) in objects {
        hasher.field(object.as_os_str().as_encoded_bytes()).field(key.to_string());
    }
    let key = hasher.finish().to_string();
    let key_file = lib.with_extension("key");
    if lib.is_file() && fs::read_to_string(&key_file).is_ok_and(|text| text.trim() == key) {
        return Ok(false);
    }
    let _ = fs::remove_file(&key_file);
    // `ar` adds to an existing archive; start fresh so removed files leave no members behind.
    match fs::remove_file(lib) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("remove", lib, e)),
    }
    ar.arg("crs").arg(lib).args(objects.iter().map(|(object, _)| object));
    // Not `{ar:?}`: cc's commands carry the whole environment, which Debug would list.
    let command = std::iter::once(ar.get_program())
        .chain(ar.get_args())
        .map(|arg| shell_quote(&arg.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ");
    let output = ar
        .output()
        .map_err(|source| Error::Spawn { program: PathBuf::from(ar.get_program()), source })?;
    if !output.status.success() {
        return Err(Error::Archive {
            command,
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    fs::write(&key_file, key).map_err(|e| Error::io("write", &key_file, e))?;
    Ok(true)
}

/// Quotes an argument for display in a POSIX shell, when needed.
fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_=+,./:@%".contains(c));
    if plain { arg.to_owned() } else { format!("'{}'", arg.replace('\'', r"'\''")) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use choreo_toolkit::FoundBy;

    fn config() -> NvccConfig {
        NvccConfig {
            toolkit: Toolkit {
                nvcc: "/cuda/bin/nvcc".into(),
                root: "/cuda".into(),
                version: 13000,
                lib_dir: "/cuda/lib64".into(),
                found_by: FoundBy::Root("CUDA_HOME"),
                root_from: choreo_toolkit::RootFrom::Var("CUDA_HOME"),
            },
            archs: vec!["sm_90a".parse().unwrap()],
            defines: vec![("TILE".into(), Some("64".into())), ("FAST".into(), None)],
            include_dirs: vec!["/inc".into()],
            ccbin: None,
            target_dir: None,
            lean_prelude: true,
            pic: true,
            user_flags: vec!["-lineinfo".into()],
            env_flags: vec![],
            out_dir: "/t/debug/build/app-1/out".into(),
            shared: None,
        }
    }

    fn job() -> Job {
        Job {
            source: "k/scale.co".into(),
            source_dir: "/pkg/k".into(),
            cu: "/out/choreo/kernels/scale.cu".into(),
            object: "/out/choreo/kernels/obj/scale.o".into(),
            generated_dir: "/out/choreo/kernels".into(),
            hand_written: false,
            archs: vec!["sm_90a".parse().unwrap()],
        }
    }

    fn hand_job() -> Job {
        Job {
            source: "cuda/util.cu".into(),
            source_dir: "/pkg/cuda".into(),
            cu: "/pkg/cuda/util.cu".into(),
            object: "/out/choreo/kernels/obj/cuda/util-0123456789abcdef.o".into(),
            generated_dir: "/out/choreo/kernels".into(),
            hand_written: true,
            archs: vec!["sm_90a".parse().unwrap()],
        }
    }

    /// Runs `jobs` jobs through [`parallel_map_with`]; returns the most that ran at once and
    /// the results. Each job waits (up to a moment, never asserted on) until `overlap` jobs run,
    /// so that jobs overlap whenever the tokens allow.
    fn max_concurrency(
        jobs: usize,
        threads: usize,
        tokens: Option<&jobserver::Client>,
        overlap: usize,
    ) -> (usize, Vec<Option<usize>>) {
        let running = Mutex::new((0usize, 0usize)); // (now, most)
        let changed = Condvar::new();
        let items: Vec<usize> = (0..jobs).collect();
        let results = parallel_map_with(&items, threads, tokens, |&item| {
            let mut guard = running.lock().unwrap();
            guard.0 += 1;
            guard.1 = guard.1.max(guard.0);
            changed.notify_all();
            let wait = std::time::Duration::from_millis(20);
            guard = changed
                .wait_timeout_while(guard, wait, |(now, most)| *now < overlap && *most < overlap)
                .unwrap()
                .0;
            guard.0 -= 1;
            changed.notify_all();
            item * 2
        });
        let most = running.lock().unwrap().1;
        (most, results)
    }

    #[test]
    fn jobs_hold_jobserver_tokens_beyond_the_implicit_one() {
        for tokens in [0, 1, 3] {
            let client = jobserver::Client::new(tokens).unwrap();
            let (most, results) = max_concurrency(40, 8, Some(&client), tokens + 1);
            assert!(most <= tokens + 1, "{most} jobs at once with {tokens} tokens");
            assert!(most >= 1);
            let expected: Vec<Option<usize>> = (0..40).map(|i| Some(i * 2)).collect();
            assert_eq!(results, expected, "all jobs ran, results in order");
            // Every token is back once the jobs are done.
            assert_eq!(client.available().unwrap(), tokens);
        }
        // The thread bound still holds with more tokens than threads.
        let client = jobserver::Client::new(16).unwrap();
        let (most, results) = max_concurrency(30, 2, Some(&client), 3);
        assert!(most <= 2, "{most} jobs at once on 2 threads");
        assert!(results.iter().all(Option::is_some));
        assert_eq!(client.available().unwrap(), 16);
    }

    /// Runs `jobs` jobs on up to 8 threads with `tokens`, each job taking `job_time`, in a
    /// thread of its own: a deadlock fails the test after a minute instead of hanging it.
    /// Returns the thread each job ran on, in job order.
    fn run_with_deadline(
        jobs: usize,
        tokens: jobserver::Client,
        job_time: std::time::Duration,
    ) -> Vec<std::thread::ThreadId> {
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let items: Vec<usize> = (0..jobs).collect();
            let ran_on = parallel_map_with(&items, 8, Some(&tokens), |_| {
                std::thread::sleep(job_time);
                std::thread::current().id()
            });
            let _ = send.send(ran_on);
        });
        let ran_on = receive
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the jobs did not finish: deadlock");
        ran_on.into_iter().map(|id| id.expect("every job ran")).collect()
    }

    /// `cargo -j1`: cargo makes a one-token jobserver and holds the token itself, for the build
    /// script it runs (the implicit token). No token is left to lend, so every job runs on
    /// the implicit token, one after the other on one thread, and the helper thread that asks
    /// for more stops asking when the queue is empty.
    #[test]
    fn without_a_token_to_lend_all_jobs_run_on_the_implicit_token_alone() {
        let client = jobserver::Client::new(1).unwrap();
        client.acquire_raw().unwrap(); // As cargo does: its own (the build script's) token.
        let ran_on = run_with_deadline(12, client.clone(), std::time::Duration::from_millis(5));
        assert_eq!(ran_on.len(), 12);
        assert!(ran_on.iter().all(|id| *id == ran_on[0]), "jobs ran on several threads");
        assert_eq!(client.available().unwrap(), 0, "no token was taken or made up");
        client.release_raw().unwrap();
        assert_eq!(client.available().unwrap(), 1);
    }

    /// `cargo -j2` with two build scripts running: each holds one token, none is left. Each
    /// finishes its jobs on its own token; neither waits for the other's (the deadlock of a
    /// blocking `Client::acquire` in the extra threads).
    #[test]
    fn two_builds_holding_every_token_both_finish() {
        let client = jobserver::Client::new(2).unwrap();
        client.acquire_raw().unwrap();
        client.acquire_raw().unwrap();
        let builds: Vec<_> = (0..2)
            .map(|_| {
                let client = client.clone();
                std::thread::spawn(move || {
                    run_with_deadline(6, client, std::time::Duration::from_millis(10))
                })
            })
            .collect();
        for build in builds {
            let ran_on = build.join().expect("a build finished");
            assert!(ran_on.iter().all(|id| *id == ran_on[0]), "jobs ran on several threads");
        }
        assert_eq!(client.available().unwrap(), 0);
    }

    /// With tokens to lend, jobs run concurrently: one on the implicit token and one on each
    /// token the helper thread acquires, never more.
    #[test]
    fn with_tokens_to_lend_jobs_run_concurrently() {
        // `cargo -j4`: four tokens, one held by cargo for this build script, three to lend.
        let client = jobserver::Client::new(4).unwrap();
        client.acquire_raw().unwrap();
        // Each job waits (up to 20 ms) until four run at once, and at most four do.
        let (most, results) = max_concurrency(16, 8, Some(&client), 4);
        assert!(results.iter().all(Option::is_some));
        assert!(most > 1, "the jobs never ran concurrently");
        assert!(most <= 4, "{most} jobs at once with three tokens to lend");
        assert_eq!(client.available().unwrap(), 3, "every lent token is back");
        // Several threads ran jobs (with a long job time, so the tokens arrive in time).
        let ran_on = run_with_deadline(8, client.clone(), std::time::Duration::from_millis(200));
        let mut threads = ran_on.clone();
        threads.sort_by_key(|id| format!("{id:?}"));
        threads.dedup();
        assert!(threads.len() > 1, "all jobs ran on one thread despite three free tokens");
        assert_eq!(client.available().unwrap(), 3);
    }

    #[test]
    fn jobserver_tokens_are_released_when_a_job_panics() {
        let client = jobserver::Client::new(2).unwrap();
        let items: Vec<usize> = (0..12).collect();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            parallel_map_with(&items, 4, Some(&client), |&item| {
                assert_ne!(item, 5, "job 5 fails");
                item
            })
        }));
        assert!(outcome.is_err());
        assert_eq!(client.available().unwrap(), 2);
        // No token to lend: the implicit token's worker runs every job, and when one of its
        // jobs panics the other workers stop waiting for tokens (no hang).
        let client = jobserver::Client::new(1).unwrap();
        client.acquire_raw().unwrap();
        let (send, receive) = std::sync::mpsc::channel();
        let tokens = client.clone();
        std::thread::spawn(move || {
            let outcome = std::panic::catch_unwind(|| {
                parallel_map_with(&[0, 1, 2], 4, Some(&tokens), |&item| {
                    assert_ne!(item, 0, "job 0 fails");
                    item
                })
            });
            let _ = send.send(outcome.is_err());
        });
        let panicked = receive.recv_timeout(std::time::Duration::from_secs(60));
        assert_eq!(panicked, Ok(true), "the panic did not end the jobs");
        assert_eq!(client.available().unwrap(), 0);
    }

    #[test]
    fn without_a_jobserver_the_thread_count_bounds_the_jobs() {
        let (most, results) = max_concurrency(24, 3, None, 3);
        assert!(most <= 3, "{most} jobs at once on 3 threads");
        assert_eq!(results, (0..24).map(|i| Some(i * 2)).collect::<Vec<_>>());
        let (most, results) = max_concurrency(5, 1, None, 2);
        assert_eq!(most, 1);
        assert_eq!(results.len(), 5);
        assert!(parallel_map_with(&[] as &[u8], 4, None, |_| ()).is_empty());
    }

    #[test]
    fn gencode_adds_ptx_only_for_portable_archs() {
        assert_eq!(
            gencode_flags(&["sm_90a".parse().unwrap()]),
            ["-gencode=arch=compute_90a,code=sm_90a"]
        );
        assert_eq!(
            gencode_flags(&["sm_80".parse().unwrap()]),
            ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_80,code=compute_80"]
        );
    }

    #[test]
    fn command_line_has_the_documented_flags_and_nothing_accidental() {
        let line = config().command_line(&job());
        assert_eq!(
            line,
            "/cuda/bin/nvcc -c -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xcompiler \
             -fPIC -DCHOREO_LEAN_PRELUDE -DTILE=64 -DFAST -I /pkg/k -I /inc -lineinfo -MD -MF \
             /out/choreo/kernels/obj/scale.d -o /out/choreo/kernels/obj/scale.o \
             /out/choreo/kernels/scale.cu"
        );
        for accidental in ["-rdc", "--relocatable-device-code", "-G", "--device-debug", "-dc"] {
            assert!(!line.split(' ').any(|arg| arg == accidental), "{accidental} in {line}");
        }
        let mut cross = config();
        cross.ccbin = Some("/usr/bin/aarch64-linux-gnu-g++".into());
        cross.target_dir = Some("sbsa-linux");
        let line = cross.command_line(&job());
        assert!(
            line.contains("-ccbin /usr/bin/aarch64-linux-gnu-g++ --target-directory sbsa-linux"),
            "{line}"
        );
    }

    #[test]
    fn hand_written_files_get_the_same_flags_and_the_generated_folder_as_include_dir() {
        let generated = config().command_line(&job());
        let hand = config().command_line(&hand_job());
        assert_eq!(
            hand,
            "/cuda/bin/nvcc -c -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xcompiler \
             -fPIC -DCHOREO_LEAN_PRELUDE -DTILE=64 -DFAST -I /pkg/cuda -I /out/choreo/kernels \
             -I /inc -lineinfo -MD -MF /out/choreo/kernels/obj/cuda/util-0123456789abcdef.d -o \
             /out/choreo/kernels/obj/cuda/util-0123456789abcdef.o /pkg/cuda/util.cu"
        );
        // Everything up to the include folders is shared with the generated files' line.
        let shared = "-DFAST -I ";
        assert_eq!(
            hand.split_once(shared).map(|(head, _)| head),
            generated.split_once(shared).map(|(head, _)| head)
        );
        // A generated `.cu` finds `choreo.h` next to itself: no extra `-I`.
        assert!(!generated.contains("-I /out/choreo/kernels "), "{generated}");
    }

    #[test]
    fn key_of_a_hand_written_file_depends_on_its_content_and_command_line() {
        let cu = Digest::of("__global__ void k() {}");
        let h = Digest::of("h");
        let base = config().key(&hand_job(), cu, h);
        assert_eq!(base, config().key(&hand_job(), cu, h));
        assert_ne!(base, config().key(&hand_job(), Digest::of("__global__ void k2() {}"), h));
        // Another file with the same content compiles to another object.
        let mut other = hand_job();
        other.object = "/out/choreo/kernels/obj/cuda/util-fedcba9876543210.o".into();
        assert_ne!(base, config().key(&other, cu, h));
        let mut other = config();
        other.defines.push(("EXTRA".into(), None));
        assert_ne!(base, other.key(&hand_job(), cu, h));
        // The same text as a generated file is another command line (the extra `-I`).
        let mut generated = hand_job();
        generated.hand_written = false;
        assert_ne!(base, config().key(&generated, cu, h));
    }

    #[test]
    fn key_depends_on_every_input() {
        let cu = Digest::of("cu");
        let h = Digest::of("h");
        let base = config().key(&job(), cu, h);
        assert_eq!(base, config().key(&job(), cu, h));
        assert_ne!(base, config().key(&job(), Digest::of("cu2"), h));
        assert_ne!(base, config().key(&job(), cu, Digest::of("h2")));
        let mut other = job();
        other.archs = vec!["sm_80".parse().unwrap(), "sm_90".parse().unwrap()];
        assert_ne!(base, config().key(&other, cu, h));
        let mut other = config();
        other.user_flags.push("-G".into());
        assert_ne!(base, other.key(&job(), cu, h));
        let mut other = config();
        other.toolkit.version = 13010;
        assert_ne!(base, other.key(&job(), cu, h));
        let mut other = config();
        other.toolkit.root = "/other-cuda".into();
        assert_ne!(base, other.key(&job(), cu, h));
        let mut other = config();
        other.env_flags.push(("NVCC_APPEND_FLAGS", "-DX".into()));
        assert_ne!(base, other.key(&job(), cu, h));
    }

    #[test]
    fn parses_make_dependency_files() {
        let text = "scale.o : scale.cu \\\n    choreo.h \\\n    /usr/include/stdio.h \\\n    \
                    /my\\ dir/a$$b.h\n";
        assert_eq!(
            parse_depfile(text),
            [
                PathBuf::from("scale.cu"),
                PathBuf::from("choreo.h"),
                PathBuf::from("/usr/include/stdio.h"),
                PathBuf::from("/my dir/a$b.h"),
            ]
        );
        assert_eq!(parse_depfile("a.o: x.h\r\n"), [PathBuf::from("x.h")]);
        assert!(parse_depfile("").is_empty());
    }

    #[test]
    fn system_toolkit_and_generated_headers_are_not_tracked() {
        let config = config();
        let job = job();
        assert!(!config.tracked_dependency(&job, Path::new("/out/choreo/kernels/choreo.h")));
        assert!(!config.tracked_dependency(&job, Path::new("/usr/include/stdio.h")));
        assert!(!config.tracked_dependency(&job, Path::new("/cuda/include/cuda_runtime.h")));
        assert!(config.tracked_dependency(&job, Path::new("/pkg/k/common.h")));
        // The `.co` file (named by `#line`, so listed by the host compiler) is not read by
        // nvcc: the generated `.cu` stands for it.
        let mut absolute = job.clone();
        absolute.source = "/pkg/k/scale.co".into();
        assert!(!config.tracked_dependency(&absolute, Path::new("/pkg/k/scale.co")));
        assert!(config.tracked_dependency(&absolute, Path::new("/pkg/k/other.co")));
        // A hand-written file: its neighbours are tracked, itself and choreo.h are not.
        let hand = hand_job();
        assert!(config.tracked_dependency(&hand, Path::new("/pkg/cuda/util.h")));
        assert!(!config.tracked_dependency(&hand, Path::new("/pkg/cuda/util.cu")));
        assert!(!config.tracked_dependency(&hand, Path::new("/out/choreo/kernels/choreo.h")));
        assert!(!config.tracked_dependency(&hand, Path::new("/cuda/include/cuda_fp8.h")));
    }

    #[test]
    fn cache_entry_is_fresh_only_with_matching_key_object_and_headers() {
        let dir = std::env::temp_dir().join(format!("choreo-build-cache-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let job = Job {
            source: "a.co".into(),
            source_dir: dir.clone(),
            cu: dir.join("a.cu"),
            object: dir.join("a.o"),
            generated_dir: dir.clone(),
            hand_written: false,
            archs: vec!["sm_90a".parse().unwrap()],
        };
        let key = Digest::of("key");
        let header = dir.join("common.h");
        fs::write(&header, "#define A 1\n").unwrap();
        assert_eq!(check_cache(&job, key), CacheState::Stale); // no entry
        fs::write(
            job.key_file(),
            format!("key {key}\ndep {} {}\n", Digest::of("#define A 1\n"), header.display()),
        )
        .unwrap();
        assert_eq!(check_cache(&job, key), CacheState::Stale); // no object
        fs::write(&job.object, "obj").unwrap();
        assert_eq!(check_cache(&job, key), CacheState::Fresh(vec![header.clone()]));
        assert_eq!(check_cache(&job, Digest::of("other")), CacheState::Stale);
        fs::write(&header, "#define A 2\n").unwrap();
        assert_eq!(check_cache(&job, key), CacheState::Stale); // header changed
        fs::remove_file(&header).unwrap();
        assert_eq!(check_cache(&job, key), CacheState::Stale); // header gone
    }

    #[test]
    fn archive_is_skipped_when_its_objects_did_not_change() {
        let dir = std::env::temp_dir().join(format!("choreo-build-archive-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        // A stand-in archiver that records its calls (the real `ar` is exercised by the
        // integration tests).
        let log = dir.join("calls");
        let fake_ar = dir.join("fake-ar");
        fs::write(&fake_ar, format!("#!/bin/sh\necho \"$@\" >> {}\n: > \"$2\"\n", log.display()))
            .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&fake_ar, fs::Permissions::from_mode(0o755)).unwrap();
        }
        let lib = dir.join("libk.a");
        let objects = vec![(dir.join("a.o"), Digest::of("a")), (dir.join("b.o"), Digest::of("b"))];
        assert!(archive(Command::new(&fake_ar), &lib, &objects).unwrap());
        assert!(!archive(Command::new(&fake_ar), &lib, &objects).unwrap());
        let changed = vec![(dir.join("a.o"), Digest::of("a2")), objects[1].clone()];
        assert!(archive(Command::new(&fake_ar), &lib, &changed).unwrap());
        let calls = fs::read_to_string(&log).unwrap();
        assert_eq!(calls.lines().count(), 2, "{calls}");
        assert!(calls.starts_with("crs "), "{calls}");
    }
}
