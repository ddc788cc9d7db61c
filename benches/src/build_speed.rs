//! `choreo-bench build`: how long the steps of a build take.
//!
//! 1. Translation (`.co` → `.cu`, in process, `choreo_compiler::compile::compile` with the
//!    options `choreo-build` uses) of every codegen test fixture, of the example-app kernels and
//!    of one large generated file.
//! 2. nvcc on each generated example-app `.cu`, with `choreo-build`'s flags.
//! 3. `cargo build --release -p example-app`: a no-op build, and a build after touching one
//!    `.co` file (the translation reruns, the object cache keeps nvcc from running).
//!
//! Every number is the median of N trials after one untimed warm-up, with min and max, so a
//! reader can tell a real difference from noise.

use choreo_bench::stats::Summary;
use choreo_bench::table::{Table, three_digits};
use choreo_compiler::compile::{Arch, CHOREO_H, CompileOptions, compile};
use choreo_compiler::diagnostics::{Diagnostic, Diagnostics};
use choreo_compiler::preprocess::PreprocessOptions;
use choreo_compiler::source::SourceDb;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant, SystemTime};

/// The workspace this binary was built from: the default of `--repo`.
const DEFAULT_REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// Trials per measurement when `--trials` is not given.
const DEFAULT_TRIALS: usize = 5;

/// nvcc trials when `--nvcc-trials` is not given (capped by `--trials`): one nvcc run takes
/// seconds, and its spread is small next to that.
const DEFAULT_NVCC_TRIALS: usize = 3;

/// How many `__co__` functions the large generated file has (about 20 000 lines).
pub const LARGE_FUNCTIONS: usize = 800;

/// Where the codegen test fixtures are, relative to the repository root (the `.co` files that
/// `choreo-compiler/tests/codegen.rs` snapshots).
const CODEGEN_FIXTURES: &str = "choreo-compiler/tests/fixtures/codegen";

/// Where the example-app kernels are, relative to the repository root.
const EXAMPLE_KERNELS: &str = "example-app/kernels";

/// The kernel touched to measure an incremental build.
const TOUCHED_KERNEL: &str = "saxpy.co";

/// The cargo command measured, run in the repository root.
const CARGO_ARGS: [&str; 4] = ["build", "--release", "-p", "example-app"];

/// The help text of `choreo-bench build`.
pub const HELP: &str = "\
choreo-bench build: how long translation, nvcc and cargo take

Usage: choreo-bench build [OPTIONS]

Measures, each as the median (with min and max) of N trials after one untimed warm-up:
  1. translation (.co -> .cu, in process) of every codegen test fixture, of each example-app
     kernel and of one generated file of 500 __co__ functions;
  2. nvcc on each example-app kernel's .cu, with choreo-build's flags;
  3. `cargo build --release -p example-app` in the repository: a no-op build, and a build after
     touching example-app/kernels/saxpy.co (translation reruns, nvcc must not).

Options:
  --trials N         trials per measurement (default 5)
  --nvcc-trials N    trials per nvcc measurement (default 3, at most --trials)
  --markdown FILE    also write the table as Markdown to FILE
  --no-nvcc          skip the nvcc measurements
  --no-cargo         skip the cargo measurements
  --repo DIR         the choreo workspace to measure (default: the one this binary was built
                     from)
  -h, --help         print this help

nvcc is found like builds and `choreoc build` find it (choreo-toolkit): $NVCC, $CUDA_HOME,
$CUDA_PATH, PATH, python3's nvidia/cu13 wheels, ~/.cache/choreo/cuda-13.0 (ci/install-cuda);
without one the nvcc rows say so. Progress goes to stderr, the table last to stdout.
Exit status: 0 measured, 1 a measurement failed, 2 usage error.
";

/// What `choreo-bench build` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Trials per measurement.
    pub trials: usize,
    /// Trials per nvcc measurement.
    pub nvcc_trials: usize,
    /// Where to write the Markdown table, if anywhere.
    pub markdown: Option<PathBuf>,
    /// Whether to measure nvcc.
    pub nvcc: bool,
    /// Whether to measure cargo.
    pub cargo: bool,
    /// The workspace root.
    pub repo: PathBuf,
}

/// The parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// `--help`.
    Help,
    /// Measure.
    Run(Options),
}

/// Parses the arguments that follow `build`. `Err` is a one-line usage error.
pub fn parse_args(args: &[String]) -> Result<Invocation, String> {
    let mut trials = None;
    let mut nvcc_trials = None;
    let mut markdown = None;
    let mut nvcc = true;
    let mut cargo = true;
    let mut repo = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        // `--flag=value` and `--flag value` are both accepted.
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag, Some(value.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            match inline.clone().or_else(|| rest.next().cloned()) {
                Some(value) if !value.is_empty() => Ok(value),
                _ => Err(format!("'{flag}' needs {what}")),
            }
        };
        match flag {
            "-h" | "--help" if inline.is_none() => return Ok(Invocation::Help),
            "--trials" => trials = Some(count(flag, &value("a number")?)?),
            "--nvcc-trials" => nvcc_trials = Some(count(flag, &value("a number")?)?),
            "--markdown" => markdown = Some(PathBuf::from(value("a file")?)),
            "--repo" => repo = Some(PathBuf::from(value("a directory")?)),
            "--no-nvcc" if inline.is_none() => nvcc = false,
            "--no-cargo" if inline.is_none() => cargo = false,
            "--no-nvcc" | "--no-cargo" => return Err(format!("'{flag}' takes no value")),
            _ => return Err(format!("unknown argument '{arg}'")),
        }
    }
    let trials = trials.unwrap_or(DEFAULT_TRIALS);
    Ok(Invocation::Run(Options {
        trials,
        nvcc_trials: nvcc_trials.unwrap_or(DEFAULT_NVCC_TRIALS.min(trials)),
        markdown,
        nvcc,
        cargo,
        repo: repo.unwrap_or_else(|| PathBuf::from(DEFAULT_REPO)),
    }))
}

/// A trial count: a whole number of at least 1.
fn count(flag: &str, text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err(format!("'{flag}' must be at least 1")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{flag}' needs a whole number, not '{text}'")),
    }
}

/// `choreo-bench build ARGS`: measures, prints the table to stdout (and writes the Markdown
/// file); 0 when everything was measured, 1 when a measurement failed, 2 on a usage error.
pub fn main(args: &[String]) -> ExitCode {
    let options = match parse_args(args) {
        Ok(Invocation::Help) => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Run(options)) => options,
        Err(message) => {
            eprintln!("error: {message} (see `choreo-bench build --help`)");
            return ExitCode::from(2);
        }
    };
    let mut table = Table::new(["what", "median", "min", "max", "trials", "note"]);
    let mut failures = Vec::new();
    if let Err(message) = check_repo(&options.repo) {
        failures.push(message);
    } else {
        let example_kernels = match translation(&options, &mut table) {
            Ok(kernels) => kernels,
            Err(message) => {
                failures.push(message);
                Vec::new()
            }
        };
        if !options.nvcc {
            table.row(["nvcc", "", "", "", "", "skipped (--no-nvcc)"]);
        } else if let Err(message) = nvcc_section(&options, &example_kernels, &mut table) {
            failures.push(message);
        }
        if !options.cargo {
            table.row(["cargo build", "", "", "", "", "skipped (--no-cargo)"]);
        } else if let Err(message) = cargo_section(&options, &mut table) {
            failures.push(message);
        }
    }
    if let Some(path) = &options.markdown {
        if let Err(e) = std::fs::write(path, table.to_markdown()) {
            failures.push(format!("cannot write the Markdown table to '{}': {e}", path.display()));
        }
    }
    if !table.rows().is_empty() {
        print!("{}", table.to_text());
    }
    for message in &failures {
        eprintln!("error: {message}");
    }
    if failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// Checks that `repo` looks like the choreo workspace, so a wrong `--repo` fails with one line.
fn check_repo(repo: &Path) -> Result<(), String> {
    for dir in [CODEGEN_FIXTURES, EXAMPLE_KERNELS] {
        if !repo.join(dir).is_dir() {
            return Err(format!(
                "'{}' is not the choreo workspace: it has no {dir}/ (pass --repo DIR)",
                repo.display()
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Timing and formatting
// ---------------------------------------------------------------------------------------------

/// Runs `trial` once untimed when `warm_up`, then `trials` times; each call measures itself
/// (so untimed preparation can stay out of the number). The summary is in milliseconds.
fn measure(
    trials: usize,
    warm_up: bool,
    mut trial: impl FnMut() -> Result<Duration, String>,
) -> Result<Summary, String> {
    if warm_up {
        trial()?;
    }
    let mut samples = Vec::with_capacity(trials);
    for _ in 0..trials {
        samples.push(trial()?.as_secs_f64() * 1e3);
    }
    Summary::of(&samples).ok_or_else(|| "no trials were run".to_owned())
}

/// How long `work` takes.
fn timed<T>(work: impl FnOnce() -> Result<T, String>) -> Result<Duration, String> {
    let start = Instant::now();
    black_box(work()?);
    Ok(start.elapsed())
}

/// A time given in milliseconds: `12.3 ms`, or `12.3 s` from 10 s on.
pub fn format_ms(ms: f64) -> String {
    // 9995 ms and more would print as "10000 ms" after rounding.
    if ms >= 9_995.0 {
        format!("{} s", three_digits(ms / 1e3))
    } else {
        format!("{} ms", three_digits(ms))
    }
}

/// Adds a measured row.
fn add_row(table: &mut Table, what: &str, summary: &Summary, note: &str) {
    table.row([
        what.to_owned(),
        format_ms(summary.median),
        format_ms(summary.min),
        format_ms(summary.max),
        summary.trials.to_string(),
        note.to_owned(),
    ]);
}

// ---------------------------------------------------------------------------------------------
// 1. Translation
// ---------------------------------------------------------------------------------------------

/// The options `choreo-build` translates with (its `translate`, with no defines and the
/// default architecture): the defaults.
fn build_options() -> CompileOptions {
    CompileOptions::default()
}

/// A `.co` source: the name the compiler sees and its text.
#[derive(Debug, Clone)]
pub struct Source {
    /// The file name (relative to the repository, or invented for generated text).
    pub name: String,
    /// The text.
    pub text: String,
}

impl Source {
    /// The number of lines.
    pub fn lines(&self) -> usize {
        self.text.lines().count()
    }

    /// The file name without folders.
    fn file_name(&self) -> &str {
        self.name.rsplit('/').next().unwrap_or(&self.name)
    }
}

/// Translates `source` as `choreo-build` does; the `.cu` text, or the first error as one line.
pub fn translate(source: &Source) -> Result<String, String> {
    let mut db = SourceDb::new();
    let file = db.add(source.name.clone(), source.text.clone());
    let compilation = compile(&db, file, &build_options());
    match compilation.cu {
        Some(cu) if !compilation.has_errors() => Ok(cu),
        _ => Err(first_error(&db, &compilation.diagnostics, &source.name)),
    }
}

/// `file:line:col: error[CODE]: message` of the first error, for a one-line failure.
fn first_error(db: &SourceDb, diagnostics: &[Diagnostic], name: &str) -> String {
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    match diagnostics.iter().find(|d| d.is_error()) {
        Some(d) => format!(
            "{} was rejected ({errors} error{}), first: {}: error[{}]: {}",
            name,
            if errors == 1 { "" } else { "s" },
            db.location(d.primary.span),
            d.code,
            d.message.lines().next().unwrap_or_default()
        ),
        None => format!("{name} was rejected without an error diagnostic"),
    }
}

/// The `.co` files of `dir` (sorted), named relative to `repo`.
fn read_sources(repo: &Path, dir: &str) -> Result<Vec<Source>, String> {
    let folder = repo.join(dir);
    let entries = std::fs::read_dir(&folder)
        .map_err(|e| format!("cannot read '{}': {e}", folder.display()))?;
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| format!("cannot read '{}': {e}", folder.display()))?.path();
        if path.extension().is_some_and(|x| x == "co") && path.is_file() {
            paths.push(path);
        }
    }
    paths.sort();
    if paths.is_empty() {
        return Err(format!("no .co files in '{}'", folder.display()));
    }
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read '{}': {e}", path.display()))?;
            let file = path.file_name().unwrap_or_default().to_string_lossy();
            Ok(Source { name: format!("{dir}/{file}"), text })
        })
        .collect()
}

/// Measures the translation of `source`.
fn measure_translation(trials: usize, source: &Source) -> Result<Summary, String> {
    measure(trials, true, || timed(|| translate(source)))
}

/// A generated example-app `.cu`, for the nvcc measurement.
struct GeneratedCu {
    /// The `.co` file stem.
    stem: String,
    /// The `.cu` text.
    cu: String,
}

/// Section 1; returns the example-app kernels' `.cu` texts for section 2.
fn translation(options: &Options, table: &mut Table) -> Result<Vec<GeneratedCu>, String> {
    let trials = options.trials;

    // (a) the codegen fixtures, summarised as one row.
    let fixtures = read_sources(&options.repo, CODEGEN_FIXTURES)?;
    eprintln!("translating {} codegen fixtures...", fixtures.len());
    let mut per_file = Vec::with_capacity(fixtures.len());
    for fixture in &fixtures {
        per_file.push((fixture.file_name(), measure_translation(trials, fixture)?.median));
    }
    let medians: Vec<f64> = per_file.iter().map(|(_, median)| *median).collect();
    let spread = Summary::of(&medians).ok_or("no codegen fixture was measured")?;
    let (slowest, slowest_ms) =
        per_file.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1)).unwrap_or(("", 0.0));
    table.row([
        format!("translate: {} codegen fixtures", fixtures.len()),
        format_ms(spread.median),
        format_ms(spread.min),
        format_ms(spread.max),
        trials.to_string(),
        format!(
            "median/min/max over the per-file medians; slowest {slowest} ({}); all files {}",
            format_ms(slowest_ms),
            format_ms(medians.iter().sum())
        ),
    ]);

    // (b) the example-app kernels, one row each.
    let kernels = read_sources(&options.repo, EXAMPLE_KERNELS)?;
    eprintln!("translating {} example-app kernels...", kernels.len());
    let mut generated = Vec::with_capacity(kernels.len());
    for kernel in &kernels {
        let summary = measure_translation(trials, kernel)?;
        add_row(
            table,
            &format!("translate: {}", kernel.name),
            &summary,
            &format!("{} lines", kernel.lines()),
        );
        let stem = kernel.file_name().trim_end_matches(".co").to_owned();
        generated.push(GeneratedCu { stem, cu: translate(kernel)? });
    }

    // (c) one large generated file, with the cumulative time of the front stages.
    let large = generate_large_source(LARGE_FUNCTIONS);
    let lines = large.lines();
    eprintln!("translating a generated file of {LARGE_FUNCTIONS} functions ({lines} lines)...");
    let whole = measure_translation(trials, &large)?;
    let lines_per_second = lines as f64 / (whole.median / 1e3);
    add_row(
        table,
        &format!("translate: generated, {LARGE_FUNCTIONS} fns"),
        &whole,
        &format!("{lines} lines, {} lines/s, no errors", three_digits(lines_per_second)),
    );
    let stages = [
        (Stage::Parse, "  stages: preprocess+parse"),
        (Stage::Sema, "  stages: preprocess..sema"),
        (Stage::Lower, "  stages: preprocess..lower"),
    ];
    for (stage, what) in stages {
        let summary = measure(trials, true, || timed(|| run_front_stages(&large, stage)))?;
        let share = 100.0 * summary.median / whole.median;
        let rest = if stage == Stage::Lower { "; the rest is .cu emission" } else { "" };
        add_row(table, what, &summary, &format!("{share:.0} % of the whole translation{rest}"));
    }
    Ok(generated)
}

/// How far [`run_front_stages`] goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Preprocess, lex and parse.
    Parse,
    /// … and semantic analysis.
    Sema,
    /// … and lowering to the launch plan.
    Lower,
}

/// Runs the compiler's stages up to `last` (the same calls `compile` makes), failing on any
/// error.
pub fn run_front_stages(source: &Source, last: Stage) -> Result<(), String> {
    let mut db = SourceDb::new();
    let file = db.add(source.name.clone(), source.text.clone());
    let options = build_options();
    let mut diagnostics = Diagnostics::new();
    let preprocess = PreprocessOptions { defines: options.defines.clone() };
    let ast = choreo_compiler::frontend::parse_file(&db, file, &preprocess, &mut diagnostics);
    if last != Stage::Parse && !diagnostics.has_errors() {
        let program = choreo_compiler::sema::check(&db, &ast, options.target, &mut diagnostics);
        if last == Stage::Lower && !diagnostics.has_errors() {
            let lowering = choreo_compiler::lower::LowerOptions::new(
                options.target,
                choreo_compiler::lower::SymbolScope::for_file_name(&source.name),
            );
            black_box(choreo_compiler::lower::lower(&program, &lowering, &mut diagnostics));
        }
        black_box(program);
    }
    black_box(ast);
    if diagnostics.has_errors() {
        return Err(first_error(&db, diagnostics.as_slice(), &source.name));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The large generated file
// ---------------------------------------------------------------------------------------------

/// The shapes of generated functions, one `__co__` function each; `$F` is the function name,
/// `$B` a block size, `$W` a width, `$G` a block count, `$N` an element count, `$C` a small
/// constant (1..=9), `$K` a loop count. Together they cover tier 1: async and synchronous
/// launches on streams and the default stream, `sync.global`, host and device loops,
/// `if`/`else`, `break`/`continue`, scalars of several types, `&` and host and global
/// parameters, returned buffers and scalars, one to three parallel levels, tuple binders,
/// symbolic and `?` dimensions, math and casts.
const TEMPLATES: &[&str] = &[
    // Elementwise stages on two streams and the default stream.
    r#"// $F: elementwise stages on two streams joined by sync.global, a synchronous pass on s0, an
// asynchronous one on the default stream and a device loop on s1.
__co__ void $F(stream s0, stream s1, global f32 [N] a, global f32 [N] b, global f32 [N] c, f32 k) {
  parallel.async<s0> p by cdiv(N, $B) : block, t by $B : thread {
    i = p * $B + t;
    if (i < N) {
      a.at(i) = a.at(i) * k + $C.0f;
    }
  }
  parallel.async<s1> p by cdiv(N, $B) : block, t by $B : thread {
    i = p * $B + t;
    if (i < N) {
      b.at(i) = b.at(i) - k * $C.5f;
    }
  }
  sync.global;
  parallel<s0> p by cdiv(N, $B) : block, t by $B : thread {
    i = p * $B + t;
    if (i < N) {
      f32 sum = a.at(i) + b.at(i);
      if (sum > $C.0f) c.at(i) = sum;
      else if (sum < -$C.0f) c.at(i) = -sum;
      else c.at(i) = 0.0f;
    }
  }
  parallel.async q by cdiv(N, $B) : block {
    parallel t by $B : thread {
      j = q * $B + t;
      if (j < N) c.at(j) = c.at(j) * 0.5f;
    }
  }
  parallel.async<s1> p by cdiv(N, $B) : block, t by $B : thread {
    i = p * $B + t;
    if (i < N) {
      mutable f32 x = b.at(i);
      mutable s32 steps = 0;
      while (x > 1.0f && steps < $K) {
        x = x * 0.5f;
        steps += 1;
      }
      b.at(i) = x + __to<f32>(steps);
    }
  }
}
"#,
    // Host data in, device loops, code between levels, a returned buffer.
    r#"// $F: host data copied in, device while/foreach loops with break and continue, code between
// levels, a host loop, a returned buffer.
__co__ f32 [M, $W] $F(f32 [M, $W] x, f32 [$W] w, int rounds) {
  f32 [x.span] y;
  f32 [x.span] z;
  parallel r by M : block {
    parallel c by $W : thread {
      mutable f32 acc = 0.0f;
      mutable s32 k = 0;
      while (k < rounds) {
        acc += x.at(r, c) * w.at(c);
        if (acc > 1000.0f) break;
        k += 1;
      }
      foreach {j} in [$K] {
        if (j == $C) continue;
        acc = acc + __to<f32>(j) * 0.25f;
      }
      y.at(r, c) = acc;
    }
  }
  mutable int pass = 0;
  while (pass < 2) {
    parallel r by M : block {
      f32 first = y.at(r, 0);
      parallel c by $W : thread {
        if (c > 0) {
          f32 v = y.at(r, c) - first;
          z.at(r, c) = v > 0.0f ? v : 0.0f;
        } else {
          z.at(r, c) = 1.0f + __to<f32>(pass);
        }
      }
    }
    pass = pass + 1;
  }
  println("$F: ", pass, " passes over ", M, " rows");
  return z;
}
"#,
    // A host loop around a launch, integer operators, a host foreach, a device while.
    r#"// $F: copy-in/copy-out data, a host while loop around a launch, integer operators, a host
// foreach around a two-level launch and a device while loop.
__co__ void $F(s32 [$N] &acc, s32 [$N] x, s32 [$N] &steps, int rounds) {
  mutable int r = 0;
  while (r < rounds) {
    parallel p by $N {
      mutable s32 v = acc.at(p) + x.at(p) * r;
      if (v % 2 == 0) v = v / 2;
      else v = 3 * v + 1;
      v = (v << 1) ^ $C;
      v = v & 0xffff | 0x10;
      acc.at(p) = v;
    }
    r = r + 1;
  }
  foreach {k} in [$K] {
    parallel b by $G : block, t by 32 : thread {
      i = (b * 32 + t) % $N;
      if (k > 0 && i < $N) acc.at(i) = acc.at(i) + k;
    }
  }
  parallel p by $N {
    mutable s32 n = __max(acc.at(p), 1);
    mutable s32 count = 0;
    while (n != 1) {
      if (count >= 1000) break;
      count += 1;
      if (n % 2 == 0) {
        n = n / 2;
        continue;
      }
      n = 3 * n + 1;
    }
    steps.at(p) = count;
  }
  println("$F done after ", r, " rounds");
}
"#,
    // Block, group and thread levels.
    r#"// $F: block, group and thread levels, code between levels, a block barrier, three
// unannotated levels and an asynchronous launch on the default stream.
__co__ void $F(f32 [$G, 4, 32] &a, f32 [$G, 128] &b, f32 bias) {
  parallel blk by $G : block {
    f32 base = __to<f32>(blk) * bias;
    parallel g by 4 : group {
      parallel l by 32 : thread {
        a.at(blk, g, l) = a.at(blk, g, l) + base + __to<f32>(g * 32 + l);
      }
    }
    sync.barrier : block;
    parallel t by 128 : thread {
      b.at(blk, t) = a.at(blk, t / 32, t % 32) * 0.5f + __to<f32>($C);
    }
  }
  parallel p by $G, q by 4, r by 32 {
    a.at(p, q, r) = a.at(p, q, r) * 2.0f - __to<f32>(p * 128 + q * 32 + r);
  }
  parallel.async p by $G : block {
    parallel t by 128 : thread {
      if (t % 2 == 0) {
        b.at(p, t) = b.at(p, t) + bias;
      } else {
        b.at(p, t) = b.at(p, t) - bias;
      }
    }
  }
  parallel w by $G : block {
    parallel g by 4 : group {
      parallel l by 32 : thread {
        if (l == 0) a.at(w, g, 0) = 0.0f;
      }
    }
  }
}
"#,
    // Tuple binders in 2-D and 3-D grids.
    r#"// $F: tuple binders, a 2-D grid over a 2-D thread level, a 3-D grid over 3-D threads and
// sibling thread levels of different shapes with a barrier between them.
__co__ void $F(f32 [$G, 2, 8, 32] &a, s32 [2, 3, 4, 2, 4, 8] &c, f32 [$G, 2, 256] &d) {
  parallel {gx, gy} by [$G, 2] : block
    parallel {ty, tx} by [8, 32] : thread {
      a.at(gx, gy, ty, tx) = __to<f32>(gx + gy) * $C.0f + a.at(gx, gy, ty, tx);
    }
  parallel t = {x, y, z} by [2, 3, 4] : block {
    parallel {u, v, w} by [2, 4, 8] : thread {
      c.at(x, y, z, u, v, w) = x + y + z + u + v + w + $C;
    }
  }
  parallel {gx, gy} by [$G, 2] : block {
    f32 scale = __to<f32>(gx * 2 + gy) + 1.0f;
    parallel {ty, tx} by [8, 32] : thread {
      a.at(gx, gy, ty, tx) = a.at(gx, gy, ty, tx) / scale;
    }
    sync.barrier : block;
    parallel t by 256 : thread {
      d.at(gx, gy, t) = a.at(gx, gy, t / 32, t % 32) + scale;
    }
    sync.shared;
    parallel {hi, lo} by [16, 16] : thread {
      if (hi == lo) d.at(gx, gy, hi * 16 + lo) = 0.0f;
    }
  }
}
"#,
    // Math, casts, half precision, integer types, a returned f16 buffer.
    r#"// $F: math built-ins, f64 data, f16 arithmetic, casts, integer types, a returned f16 buffer.
__co__ f16 [$W] $F(f32 [$W] &x, f64 [$W] &y, f16 [$W] h, f16 a, u8 [$W] &b, s64 [$W] &l) {
  f16 [h.span] out;
  parallel p by $W {
    v = x.at(p);
    x.at(p) = __sigmoid(v) + __sqrt(__fabs(v)) + __exp(v) * 0.$Cf;
    y.at(p) = __pow(y.at(p), 2.0) + __tanh(y.at(p));
    out.at(p) = a * h.at(p) + h.at(p);
    f32 wide = __to<f32>(out.at(p));
    out.at(p) = __to<f16>(wide * 0.5f);
    bool ok = __isfinite(v);
    if (!ok) x.at(p) = 0.0f;
  }
  parallel q by 2, t by $W / 2 {
    i = q * ($W / 2) + t;
    b.at(i) = b.at(i) ^ 0x5a;
    l.at(i) = l.at(i) * 1000000007 + __to<s64>(i);
    s32 r = __to<s32>(__floor(x.at(i)));
    x.at(i) = x.at(i) + __to<f32>(__max(r, 0) + __min(r, 100) + __alignup(r, 4));
    y.at(i) = y.at(i) + __atan2(y.at(i), 1.0) + __to<f64>(b.at(i));
  }
  return out;
}
"#,
    // Symbolic and `?` dimensions, a launch on a stream.
    r#"// $F: symbolic and `?` dimensions, a local buffer, a launch on a stream, a returned buffer.
__co__ f32 [M, 4] $F(f32 [M, N] a, f32 [M] bias, f32 [?, 4] w, stream s) {
  f32 [M, 4] o;
  parallel p by M : block {
    parallel q by 4 : thread
      o.at(p, q) = a.at(p, N - 1) * w.at(0, q) + bias.at(p) * $C.0f;
  }
  parallel<s> p by M : block {
    parallel q by 4 : thread {
      if (N > 1) o.at(p, q) = o.at(p, q) + a.at(p, N - 2);
      else o.at(p, q) = o.at(p, q) * 2.0f;
    }
  }
  println("$F: ", M, " x ", N);
  return o;
}
"#,
    // Host code only, a scalar return.
    r#"// $F: host code only, a scalar return.
__co__ f64 $F(int a, int b) {
  if (b == 0) return 0.0;
  return __to<f64>(a) / __to<f64>(b) * $C.0;
}
"#,
    // Host code only, a host loop, an integer return.
    r#"// $F: host code only, a host loop, an integer return.
__co__ int $F(f32 [M, N] a, int extra) {
  mutable int n = M * N + extra;
  mutable int halvings = 0;
  while (n > $C) {
    n = n / 2;
    halvings = halvings + 1;
  }
  return halvings;
}
"#,
    // An async launch with a `&` parameter on a stream; captured host scalars.
    r#"// $F: an async launch on a stream with a copied-back parameter, captured host scalars.
__co__ void $F(f32 [$W] &acc, f32 [$W] x, stream s, int n) {
  base = n * 2;
  mutable f32 scale = 1.0f;
  scale = scale + $C.0f;
  mutable int hits = 0;
  parallel.async<s> i by $W : block {
    hits = hits + 1;
    acc.at(i) = acc.at(i) + x.at(i) * scale + __to<f32>(base + hits);
  }
  println("$F: host hits still ", hits);
}
"#,
    // Device tensors, tiles, a host foreach around async launches.
    r#"// $F: device tensors with symbolic extents, cdiv and spans, a host foreach.
__co__ void $F(global f32 [M, K] a, global f32 [K] b, stream s) {
  parallel p by cdiv(M, 4) : block {
    parallel t by 64 : thread {
      row = p * 4 + t / 16;
      if (row < a.span(0)) {
        foreach {k} in [cdiv(K, 16)] {
          col = k * 16 + t % 16;
          if (col < K) a.at(row, col) = a.at(row, col) + b.at(col) * $C.0f;
        }
      }
    }
  }
  foreach {round} in [$K] {
    parallel.async<s> p by cdiv(K, $B) : block, t by $B : thread {
      i = p * $B + t;
      if (i < K) b.at(i) = b.at(i) * 0.5f + __to<f32>(round);
    }
  }
}
"#,
];

/// A `.co` file of `functions` generated tier-1 `__co__` functions, varied by cycling through
/// [`TEMPLATES`] with changing sizes and constants. Deterministic.
pub fn generate_large_source(functions: usize) -> Source {
    let mut text = String::from(
        "// Generated by `choreo-bench build` to measure translation speed on a large file.\n\n",
    );
    const BLOCKS: [usize; 3] = [64, 128, 256];
    const WIDTHS: [usize; 4] = [16, 32, 64, 128];
    for index in 0..functions {
        let template = TEMPLATES[index % TEMPLATES.len()];
        let round = index / TEMPLATES.len();
        let name = format!("f{index:04}");
        let body = template
            .replace("$F", &name)
            .replace("$B", &BLOCKS[round % BLOCKS.len()].to_string())
            .replace("$W", &WIDTHS[round % WIDTHS.len()].to_string())
            .replace("$G", &(2 + round % 5).to_string())
            .replace("$N", &(64 + 32 * (round % 7)).to_string())
            .replace("$K", &(4 + round % 6).to_string())
            .replace("$C", &(1 + round % 9).to_string());
        let _ = writeln!(text, "{body}");
    }
    Source { name: format!("generated/large_{functions}.co"), text }
}

// ---------------------------------------------------------------------------------------------
// 2. nvcc
// ---------------------------------------------------------------------------------------------

/// A folder under the system temporary folder, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> Result<TempDir, String> {
        let base = std::env::temp_dir();
        for attempt in 0..1000 {
            let path = base.join(format!("choreo-bench-{label}-{}-{attempt}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(TempDir(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(format!("cannot create '{}': {e}", path.display())),
            }
        }
        Err(format!("cannot create a temporary folder in '{}'", base.display()))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort: a leftover folder in the temporary folder is harmless.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// nvcc's arguments for compiling `cu` to `object` as `choreo-build` does (its `nvcc::args`
/// with the default builder: sm_90a, PIC, lean prelude, `-I` the `.co` folder, the host
/// compiler from `NVCC_CCBIN`/`CUDAHOSTCXX`, a dependency file).
pub fn nvcc_args(co_dir: &Path, cu: &Path, object: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = ["-c", "-std=c++17", "-O3"].map(OsString::from).into();
    args.push(format!("-gencode={}", Arch::SM_90A.gencode()).into());
    args.extend(["-Xcompiler", "-fPIC", "-DCHOREO_LEAN_PRELUDE", "-I"].map(OsString::from));
    args.push(co_dir.into());
    let ccbin = ["NVCC_CCBIN", "CUDAHOSTCXX"]
        .iter()
        .find_map(|var| std::env::var_os(var).filter(|value| !value.is_empty()));
    if let Some(ccbin) = ccbin {
        args.push("-ccbin".into());
        args.push(ccbin);
    }
    args.extend(["-MD".into(), "-MF".into(), object.with_extension("d").into_os_string()]);
    args.extend(["-o".into(), object.into(), cu.into()]);
    args
}

/// Section 2.
fn nvcc_section(
    options: &Options,
    kernels: &[GeneratedCu],
    table: &mut Table,
) -> Result<(), String> {
    let env = choreo_toolkit::Env::process();
    let found = choreo_toolkit::find(&env, &choreo_toolkit::Target::host());
    let nvcc = match found {
        Ok(choreo_toolkit::Discovery::Found(toolkit)) => toolkit.nvcc,
        Ok(choreo_toolkit::Discovery::Stub(reason)) => {
            eprintln!("note: nvcc rows skipped: {reason}");
            table.row(["nvcc", "", "", "", "", "skipped: nvcc not found (see stderr)"]);
            return Ok(());
        }
        Err(message) => {
            eprintln!("note: nvcc rows skipped: {message}");
            table.row(["nvcc", "", "", "", "", "skipped: nvcc not found (see stderr)"]);
            return Ok(());
        }
    };
    if kernels.is_empty() {
        return Err("nvcc not measured: the example-app kernels were not translated".to_owned());
    }
    let dir = TempDir::new("nvcc")?;
    let header = dir.0.join("choreo.h");
    std::fs::write(&header, CHOREO_H)
        .map_err(|e| format!("cannot write '{}': {e}", header.display()))?;
    let co_dir = std::path::absolute(options.repo.join(EXAMPLE_KERNELS))
        .map_err(|e| format!("cannot resolve '{EXAMPLE_KERNELS}': {e}"))?;
    let trials = options.nvcc_trials;
    for kernel in kernels {
        let cu = dir.0.join(format!("{}.cu", kernel.stem));
        let object = dir.0.join(format!("{}.o", kernel.stem));
        std::fs::write(&cu, &kernel.cu)
            .map_err(|e| format!("cannot write '{}': {e}", cu.display()))?;
        let args = nvcc_args(&co_dir, &cu, &object);
        eprintln!("nvcc {}.cu ({trials} trials)...", kernel.stem);
        let summary = measure(trials, true, || {
            timed(|| {
                let output = Command::new(&nvcc)
                    .args(&args)
                    .output()
                    .map_err(|e| format!("cannot run '{}': {e}", nvcc.display()))?;
                if output.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "nvcc failed on {}.cu ({}): {}",
                        kernel.stem,
                        output.status,
                        error_line(&output.stderr)
                    ))
                }
            })
        })?;
        add_row(
            table,
            &format!("nvcc: {}.cu", kernel.stem),
            &summary,
            "-O3, sm_90a, lean prelude (choreo-build's flags)",
        );
    }
    Ok(())
}

/// The line of a tool's output that says what went wrong, for a one-line message: the first
/// that mentions an error, else the last non-empty one.
pub fn error_line(output: &[u8]) -> String {
    let text = String::from_utf8_lossy(output);
    let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
    let first_error = lines.clone().find(|line| line.to_ascii_lowercase().contains("error"));
    first_error.or_else(|| lines.next_back()).unwrap_or("(no output)").to_owned()
}

// ---------------------------------------------------------------------------------------------
// 3. cargo
// ---------------------------------------------------------------------------------------------

/// Whether cargo's log says it compiled the example-app crate.
pub fn compiled_example_app(log: &str) -> bool {
    log.lines().any(|line| line.contains("Compiling") && line.contains("example-app v"))
}

/// What the example-app build script's report (`<OUT_DIR>/choreo/kernels.report`) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildReport {
    /// `mode=` (`nvcc` or `stub`).
    pub mode: String,
    /// `nvcc_runs=`.
    pub nvcc_runs: Option<usize>,
}

impl BuildReport {
    /// Reads the `key=value` lines of a report.
    pub fn parse(text: &str) -> BuildReport {
        let value = |key: &str| {
            text.lines().find_map(|line| line.strip_prefix(key)?.strip_prefix('=')).map(str::trim)
        };
        BuildReport {
            mode: value("mode").unwrap_or("unknown").to_owned(),
            nvcc_runs: value("nvcc_runs").and_then(|n| n.parse().ok()),
        }
    }
}

/// The example-app release build report written most recently, with its time.
fn latest_report(repo: &Path) -> Option<(SystemTime, PathBuf)> {
    let target = match std::env::var_os("CARGO_TARGET_DIR").filter(|dir| !dir.is_empty()) {
        Some(dir) => repo.join(dir), // an absolute value replaces `repo`
        None => repo.join("target"),
    };
    let build = target.join("release").join("build");
    std::fs::read_dir(build)
        .ok()?
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("example-app-"))
        .map(|entry| entry.path().join("out").join("choreo").join("kernels.report"))
        .filter_map(|path| Some((std::fs::metadata(&path).ok()?.modified().ok()?, path)))
        .max()
}

/// Sets the modification time of `path` to now, like `touch`.
fn touch(path: &Path) -> Result<(), String> {
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|file| file.set_modified(SystemTime::now()))
        .map_err(|e| format!("cannot touch '{}': {e}", path.display()))
}

/// Section 3.
fn cargo_section(options: &Options, table: &mut Table) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let command = format!("cargo {}", CARGO_ARGS.join(" "));
    let run = || -> Result<(Duration, String), String> {
        let start = Instant::now();
        let output = Command::new(&cargo)
            .args(CARGO_ARGS)
            .current_dir(&options.repo)
            .output()
            .map_err(|e| format!("cannot run `{command}`: {e}"))?;
        let elapsed = start.elapsed();
        if !output.status.success() {
            return Err(format!(
                "`{command}` failed in '{}' ({}): {}",
                options.repo.display(),
                output.status,
                error_line(&output.stderr)
            ));
        }
        Ok((elapsed, String::from_utf8_lossy(&output.stderr).into_owned()))
    };

    eprintln!("{command}: warm-up build (untimed)...");
    run()?;
    eprintln!("{command}: {} no-op builds...", options.trials);
    let no_op = measure(options.trials, false, || {
        let (elapsed, log) = run()?;
        if compiled_example_app(&log) {
            return Err(format!(
                "a no-op `{command}` compiled example-app again (did a file change meanwhile?)"
            ));
        }
        Ok(elapsed)
    })?;
    add_row(table, "cargo build --release (no-op)", &no_op, "example-app not recompiled");

    let touched = options.repo.join(EXAMPLE_KERNELS).join(TOUCHED_KERNEL);
    let mut checked_reports = 0;
    let mut stub = false;
    eprintln!("{command}: {} builds after touching {TOUCHED_KERNEL}...", options.trials);
    let after_touch = measure(options.trials, true, || {
        touch(&touched)?;
        let started = SystemTime::now();
        let (elapsed, log) = run()?;
        if !compiled_example_app(&log) {
            return Err(format!(
                "after touching {TOUCHED_KERNEL}, `{command}` did not rebuild example-app"
            ));
        }
        // The build script's report says whether nvcc ran; a report older than this build
        // belongs to another configuration and proves nothing.
        if let Some((_, path)) = latest_report(&options.repo).filter(|(t, _)| *t >= started) {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read '{}': {e}", path.display()))?;
            let report = BuildReport::parse(&text);
            if report.mode == "stub" {
                stub = true;
            } else if report.nvcc_runs != Some(0) {
                return Err(format!(
                    "after touching {TOUCHED_KERNEL}, nvcc ran again ({} says nvcc_runs={}); \
                     the object cache should have been reused",
                    path.display(),
                    report.nvcc_runs.map_or("?".to_owned(), |n| n.to_string())
                ));
            }
            checked_reports += 1;
        }
        Ok(elapsed)
    })?;
    let note = if stub {
        "build script reran; stub mode (no nvcc found by choreo-build)".to_owned()
    } else if checked_reports == options.trials + 1 {
        "build script reran, nvcc did not (nvcc_runs=0 in its report)".to_owned()
    } else {
        format!(
            "build script reran; nvcc runs checked in {checked_reports} of {} builds \
             (no report written by that build found)",
            options.trials + 1
        )
    };
    add_row(table, &format!("cargo build --release (touch {TOUCHED_KERNEL})"), &after_touch, &note);
    Ok(())
}
