//! `choreo-bench`: the benchmark harness of issue 6.
//!
//! ```text
//! choreo-bench gpu [--trials N] [--warmup N] [--quick]
//!                  [--only overlap,launch,bandwidth,tiled,tma,gemm,gemm-fp8,gemm-sync,attention] [--markdown FILE]
//! choreo-bench cpu [--elements N] [--trials N] [--markdown FILE]
//! choreo-bench build [ARGS]        (build speed; `choreo-bench build --help`)
//! ```
//!
//! `cpu` runs the generated kernels on the CPU device next to hand-written multithreaded Rust
//! (any machine).
//!
//! `gpu` needs a CUDA GPU (it runs on the H200 from a bundle built elsewhere: see
//! `docs/performance.md`); it prints the environment, one table of all measurements and a
//! summary of the targets. `build` measures translation, nvcc and cargo build times on the
//! machine it runs on.

mod build_speed;
mod cpu;
mod gpu;

use std::process::ExitCode;

use choreo_bench::table::{Table, three_digits};
use gpu::{BenchError, Options};

const USAGE: &str = "usage: choreo-bench gpu [--trials N] [--warmup N] [--quick] \
                     [--only overlap,launch,bandwidth,tiled,tma,gemm,gemm-fp8,gemm-sync,attention] [--markdown FILE]\n       \
                     choreo-bench cpu [--elements N] [--trials N] [--markdown FILE]\n       \
                     choreo-bench build [--help | ARGS]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("gpu") => gpu_main(&args[1..]),
        Some("build") => build_speed::main(&args[1..]),
        Some("cpu") => cpu::main(&args[1..]),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// The sections of `gpu`, in the order they run; all of them by default.
const SECTIONS: [&str; 9] = [
    "overlap",
    "launch",
    "bandwidth",
    "tiled",
    "tma",
    "gemm",
    "gemm-fp8",
    "gemm-sync",
    "attention",
];

/// The parsed arguments of `gpu`.
#[derive(Debug)]
struct GpuArgs {
    options: Options,
    sections: Vec<String>,
    markdown: Option<std::path::PathBuf>,
}

fn parse_gpu_args(args: &[String]) -> Result<GpuArgs, String> {
    let mut parsed = GpuArgs {
        options: Options { trials: 15, warmup: 3, quick: false },
        sections: SECTIONS.iter().map(|s| (*s).to_owned()).collect(),
        markdown: None,
    };
    let mut trials = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let mut value =
            |name: &str| iter.next().cloned().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--trials" => {
                trials = Some(value("--trials")?.parse().map_err(|_| "--trials needs a number")?)
            }
            "--warmup" => {
                parsed.options.warmup =
                    value("--warmup")?.parse().map_err(|_| "--warmup needs a number")?
            }
            "--quick" => parsed.options.quick = true,
            "--only" => {
                parsed.sections = value("--only")?.split(',').map(str::to_owned).collect();
                if let Some(bad) = parsed.sections.iter().find(|s| !SECTIONS.contains(&s.as_str()))
                {
                    return Err(format!("unknown section `{bad}` ({})", SECTIONS.join(", ")));
                }
            }
            "--markdown" => parsed.markdown = Some(value("--markdown")?.into()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    parsed.options.trials = trials.unwrap_or(if parsed.options.quick { 3 } else { 15 });
    if parsed.options.trials == 0 {
        return Err("--trials must be at least 1".into());
    }
    Ok(parsed)
}

fn gpu_main(args: &[String]) -> ExitCode {
    let parsed = match parse_gpu_args(args) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("choreo-bench: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run_gpu(&parsed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(BenchError::CannotRun(reason)) => {
            eprintln!("choreo-bench: cannot run the GPU benchmarks: {reason}");
            ExitCode::FAILURE
        }
        Err(BenchError::Failed(message)) => {
            eprintln!("choreo-bench: FAILED: {message}");
            ExitCode::FAILURE
        }
    }
}

/// A summary row's verdict.
fn met(ok: bool) -> String {
    if ok { "yes" } else { "NO" }.to_owned()
}

/// What a GPU run has measured so far.
struct GpuReport {
    header: Vec<String>,
    table: Table,
    profile: Table,
    summary: Table,
}

impl GpuReport {
    /// A section's table rows, and its summary row that every variant was right: what was
    /// wrong is listed on stderr and counted in the row; `claim` is the row's target.
    fn checked_section(
        &mut self,
        section: &str,
        rows: Vec<Vec<String>>,
        wrong: &[String],
        claim: &str,
    ) {
        gpu::section_rows(&mut self.table, section, rows);
        for why in wrong {
            eprintln!("choreo-bench: {section}: WRONG: {why}");
        }
        self.summary.row([
            claim.to_owned(),
            format!("{} wrong", wrong.len()),
            met(wrong.is_empty()),
        ]);
    }

    /// The tables as text (what the terminal shows) or Markdown (`docs/performance.md`).
    fn render(&self, markdown: bool) -> String {
        let render = |table: &Table| if markdown { table.to_markdown() } else { table.to_text() };
        let mut text = if markdown {
            self.header.iter().map(|line| format!("{line}  \n")).collect::<String>() + "\n"
        } else {
            String::new()
        };
        text += &render(&self.table);
        for table in [&self.profile, &self.summary] {
            if !table.rows().is_empty() {
                text += "\n";
                text += &render(table);
            }
        }
        text
    }
}

fn run_gpu(args: &GpuArgs) -> gpu::BenchResult<()> {
    if !cfg!(choreo_bench_kernels) {
        return Err(BenchError::CannotRun(
            "the benchmark kernels were not compiled (stub build without nvcc)".into(),
        ));
    }
    let mut header = gpu::environment()?;
    let options = &args.options;
    header.push(format!(
        "trials: {} timed after {} warm-up rounds, variants interleaved; median, min, max{}",
        options.trials,
        options.warmup,
        if options.quick { " (QUICK: smoke-test sizes, not figures)" } else { "" }
    ));
    for line in &header {
        println!("{line}");
    }
    let mut report = GpuReport {
        header,
        table: Table::new(["section", "variant", "median", "min", "max", "derived"]),
        profile: Table::new(["CUDA call (host µs per call)", "median", "min", "max"]),
        summary: Table::new(["target", "measured", "met"]),
    };
    // What was measured is printed even when a later section fails.
    let result = run_sections(args, &mut report);
    println!("\n{}", report.render(false));
    if let Some(path) = &args.markdown {
        std::fs::write(path, report.render(true))
            .map_err(|e| BenchError::Failed(format!("cannot write {}: {e}", path.display())))?;
    }
    result
}

fn run_sections(args: &GpuArgs, report: &mut GpuReport) -> gpu::BenchResult<()> {
    let options = &args.options;
    let wants = |name: &str| args.sections.iter().any(|s| s == name);
    if wants("overlap") {
        eprintln!("choreo-bench: overlap …");
        let outcome = gpu::overlap::run(options)?;
        gpu::section_rows(&mut report.table, "overlap", outcome.rows);
        report.summary.row([
            "overlap: ours ≥ 0.97 × hand-written (2 streams)".to_owned(),
            format!(
                "{} ({} ms per kernel)",
                three_digits(outcome.ours_over_hand),
                three_digits(outcome.kernel_ms)
            ),
            met(outcome.ours_over_hand >= 0.97),
        ]);
    }
    if wants("launch") {
        eprintln!("choreo-bench: launch overhead …");
        let outcome = gpu::launch::run(options)?;
        gpu::section_rows(&mut report.table, "launch", outcome.rows);
        for row in outcome.profile {
            report.profile.row(row.into_iter().take(4));
        }
        report.summary.row([
            "launch: ours ≤ 1.25 × raw <<<>>> from C++".to_owned(),
            format!(
                "{}× (vs raw from Rust: {}×)",
                three_digits(outcome.ours_over_cpp),
                three_digits(outcome.ours_over_rust)
            ),
            met(outcome.ours_over_cpp <= 1.25),
        ]);
    }
    if wants("bandwidth") {
        eprintln!("choreo-bench: bandwidth …");
        let outcome = gpu::bandwidth::run(options)?;
        gpu::section_rows(&mut report.table, "bandwidth", outcome.rows);
        let (ratio, kernel) = outcome.ours_over_copy;
        report.summary.row([
            "bandwidth: ours ≥ 0.90 × device-to-device copy".to_owned(),
            format!("{} ({kernel})", three_digits(ratio)),
            met(ratio >= 0.90),
        ]);
        let (add, add4) = outcome.checked_over_proven;
        report.summary.row([
            "bounds checks the host proves: ≤ 1.02 × proven kernel time".to_owned(),
            format!("{} (add), {} (add4)", three_digits(add), three_digits(add4)),
            met(add.max(add4) <= 1.02),
        ]);
        report.summary.row([
            "bounds checks in the kernel: time over the proven kernel (no target)".to_owned(),
            format!("{} (add)", three_digits(outcome.in_kernel_over_proven)),
            "—".to_owned(),
        ]);
    }
    if wants("tiled") {
        eprintln!("choreo-bench: tiled …");
        let outcome = gpu::tiled::run(options)?;
        gpu::section_rows(&mut report.table, "tiled", outcome.rows);
        let ratio = |target: &str, value: f64, goal: f64| {
            [target.to_owned(), three_digits(value), met(value >= goal)]
        };
        report.summary.row(ratio(
            "tiled transpose: ours ≥ 0.95 × hand-written",
            outcome.transpose_over_hand,
            0.95,
        ));
        report.summary.row(ratio(
            "tiled transpose: ours ≥ 0.85 × device-to-device copy",
            outcome.transpose_over_copy,
            0.85,
        ));
        report.summary.row([
            "tiled SGEMM: ours ≥ 0.95 × hand-written (faster twin)".to_owned(),
            format!(
                "{} ({} TFLOP/s)",
                three_digits(outcome.sgemm_over_hand),
                three_digits(outcome.sgemm_tflops)
            ),
            met(outcome.sgemm_over_hand >= 0.95),
        ]);
        report.summary.row([
            "row softmax: ours ≥ 0.95 × hand-written".to_owned(),
            format!(
                "{} ({} of copy bandwidth)",
                three_digits(outcome.softmax_over_hand),
                three_digits(outcome.softmax_over_copy)
            ),
            met(outcome.softmax_over_hand >= 0.95),
        ]);
    }
    if wants("tma") {
        eprintln!("choreo-bench: tma …");
        let outcome = gpu::tma::run(options)?;
        gpu::section_rows(&mut report.table, "tma", outcome.rows);
        let (copy, copy_kernel) = outcome.copy_over_d2d;
        report.summary.row([
            "TMA copy: ours ≥ 0.90 × device-to-device copy".to_owned(),
            format!("{} ({copy_kernel})", three_digits(copy)),
            met(copy >= 0.90),
        ]);
        report.summary.row([
            "TMA copy: ours ≥ the tier-2 copy (dma.copy through shared)".to_owned(),
            three_digits(outcome.copy_over_tier2),
            met(outcome.copy_over_tier2 >= 1.0),
        ]);
        let (transpose, transpose_kernel) = outcome.transpose_over_d2d;
        report.summary.row([
            "TMA transpose: ours ≥ 0.90 × device-to-device copy".to_owned(),
            format!("{} ({transpose_kernel})", three_digits(transpose)),
            met(transpose >= 0.90),
        ]);
        report.summary.row([
            "TMA transpose: ours ≥ the tier-2 transpose".to_owned(),
            three_digits(outcome.transpose_over_tier2),
            met(outcome.transpose_over_tier2 >= 1.0),
        ]);
        report.summary.row([
            "warp-specialised pipeline: consumers busy ≥ 0.90 (no bubble)".to_owned(),
            three_digits(outcome.pipeline_busy),
            met(outcome.pipeline_busy >= 0.90),
        ]);
    }
    if wants("gemm") {
        eprintln!("choreo-bench: gemm …");
        let outcome = gpu::gemm::run(options)?;
        report.checked_section(
            "gemm",
            outcome.rows,
            &outcome.wrong,
            "GEMM: every variant right (host reference, cuBLAS)",
        );
        for point in &outcome.points {
            let label = format!("{} {}³", point.dtype.name(), point.size);
            // The target is the generated code's: the fastest right Choreo GEMM against
            // cuBLAS; the hand-written kernel is shown on a row of its own.
            let cublas = point.cublas_tflops;
            let versus = |tflops: f64, variant: choreo_bench::gemm::Variant| match cublas {
                Some(theirs) => format!(
                    "{} ({} vs {} TFLOP/s; {})",
                    three_digits(tflops / theirs),
                    three_digits(tflops),
                    three_digits(theirs),
                    variant.name()
                ),
                None => format!(
                    "{} TFLOP/s = {} of the 989 TFLOP/s peak (cuBLAS not found; {})",
                    three_digits(tflops),
                    three_digits(tflops / gpu::gemm::PEAK_TFLOPS),
                    variant.name()
                ),
            };
            let (value, verdict) = match point.choreo {
                Some((variant, tflops)) => (
                    versus(tflops, variant),
                    cublas.map_or("—".to_owned(), |theirs| met(tflops / theirs >= 0.90)),
                ),
                None => ("no Choreo GEMM right and timed".to_owned(), "—".to_owned()),
            };
            report.summary.row([format!("GEMM {label}: Choreo ≥ 0.90 × cuBLAS"), value, verdict]);
            if let Some((variant, tflops)) = point.hand {
                report.summary.row([
                    format!("GEMM {label}: hand-written gemm_wgmma vs cuBLAS (no target)"),
                    versus(tflops, variant),
                    "—".to_owned(),
                ]);
            }
        }
    }
    if wants("gemm-fp8") {
        eprintln!("choreo-bench: gemm-fp8 …");
        let outcome = gpu::gemm_fp8::run(options)?;
        report.checked_section(
            "gemm-fp8",
            outcome.rows,
            &outcome.wrong,
            "fp8 GEMM: gemm_e4m3 and cuBLASLt right (host reference, each other)",
        );
        for point in &outcome.points {
            let size = point.size;
            let target = format!("fp8 GEMM e4m3 {size}³: ours ≥ 0.85 × cuBLASLt (fast accum)");
            match (point.ours_tflops, point.cublaslt_tflops) {
                (Some(ours), Some(theirs)) => report.summary.row([
                    target,
                    format!(
                        "{} ({} vs {} TFLOP/s; cuBLASLt default accum {} TFLOP/s)",
                        three_digits(ours / theirs),
                        three_digits(ours),
                        three_digits(theirs),
                        point.cublaslt_default_tflops.map_or("—".into(), three_digits)
                    ),
                    met(ours / theirs >= 0.85),
                ]),
                (Some(ours), None) => report.summary.row([
                    format!("{target} (cuBLASLt not measured)"),
                    format!(
                        "{} TFLOP/s = {} of the 1979 TFLOP/s peak",
                        three_digits(ours),
                        three_digits(ours / gpu::gemm_fp8::PEAK_TFLOPS)
                    ),
                    "—".to_owned(),
                ]),
                (None, _) => {
                    report.summary.row([target, "ours wrong: not timed".to_owned(), met(false)])
                }
            }
        }
    }
    if wants("gemm-sync") {
        eprintln!("choreo-bench: gemm-sync …");
        let outcome = gpu::gemm_sync::run(options)?;
        report.checked_section(
            "gemm-sync",
            outcome.rows,
            &outcome.wrong,
            "mma.sync GEMM: Choreo and hand-written right (host reference, cuBLAS)",
        );
        for point in &outcome.points {
            let size = point.size;
            let target = format!("mma.sync GEMM f16 {size}³: Choreo ≥ 0.95 × hand-written twin");
            match (point.ours_tflops, point.twin_tflops) {
                (Some(ours), Some(twin)) => report.summary.row([
                    target,
                    format!(
                        "{} ({} vs {} TFLOP/s; hand with synchronous copies {}, cuBLAS {} TFLOP/s; {} \
                         elements differ from the twin's)",
                        three_digits(ours / twin),
                        three_digits(ours),
                        three_digits(twin),
                        point.sync_copies_tflops.map_or("—".into(), three_digits),
                        point.cublas_tflops.map_or("—".into(), three_digits),
                        point.differing_from_twin.map_or("?".into(), |d| d.to_string())
                    ),
                    met(ours / twin >= 0.95),
                ]),
                _ => report.summary.row([
                    target,
                    "not timed: a kernel was wrong (see above)".to_owned(),
                    met(false),
                ]),
            }
        }
    }
    if wants("attention") {
        eprintln!("choreo-bench: attention …");
        let outcome = gpu::attention::run(options)?;
        report.checked_section(
            "attention",
            outcome.rows,
            &outcome.wrong,
            "attention forward: Choreo right (plain CUDA check kernel, host reference)",
        );
        for point in &outcome.points {
            let kind = if point.causal { "causal" } else { "non-causal" };
            let target = format!(
                "attention bf16 {kind} BH {} S {} D 128: ours vs cuDNN SDPA",
                point.bh, point.seq
            );
            match (point.ours_tflops, point.cudnn_tflops) {
                (Some(ours), Some(theirs)) => report.summary.row([
                    target,
                    format!(
                        "{} ({} vs {} TFLOP/s)",
                        three_digits(ours / theirs),
                        three_digits(ours),
                        three_digits(theirs)
                    ),
                    "—".to_owned(),
                ]),
                (Some(ours), None) => report.summary.row([
                    format!("{target} (cuDNN SDPA: not wired)"),
                    format!(
                        "{} TFLOP/s = {} of the 989 TFLOP/s peak",
                        three_digits(ours),
                        three_digits(ours / gpu::attention::PEAK_TFLOPS)
                    ),
                    "—".to_owned(),
                ]),
                (None, _) => {
                    report.summary.row([target, "ours wrong: not timed".to_owned(), met(false)])
                }
            }
        }
    }
    match choreo::take_deferred_error() {
        Some(error) => Err(error.into()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::{SECTIONS, parse_gpu_args};

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn gpu_arguments() {
        let parsed = parse_gpu_args(&args(&["--quick", "--only", "launch"])).unwrap();
        assert_eq!(parsed.options.trials, 3);
        assert_eq!(parsed.sections, ["launch"]);
        let parsed = parse_gpu_args(&args(&[])).unwrap();
        assert_eq!(parsed.sections, SECTIONS);
        let parsed = parse_gpu_args(&args(&["--only", "tiled,bandwidth"])).unwrap();
        assert_eq!(parsed.sections, ["tiled", "bandwidth"]);
        let parsed = parse_gpu_args(&args(&["--trials", "7", "--markdown", "x.md"])).unwrap();
        assert_eq!((parsed.options.trials, parsed.options.quick), (7, false));
        assert!(parse_gpu_args(&args(&["--only", "nope"])).unwrap_err().contains("nope"));
        assert!(parse_gpu_args(&args(&["--trials"])).unwrap_err().contains("value"));
        assert!(parse_gpu_args(&args(&["--trials", "0"])).is_err());
    }
}
