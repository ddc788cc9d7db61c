//! `choreoc`: the command-line front end of the Choreo translator.
//!
//! ```text
//! choreoc check [--syntax-only] [--dump=hir|plan] [--message-format=human|json] [-D …]... FILE...
//! choreoc parse [--dump] [--message-format=…] [-D NAME[=VALUE]]... FILE
//! choreoc lex [--message-format=…] [-D …]... FILE
//! choreoc emit-cu FILE.co [-D …]... [--arch sm_90a] [--standalone] [--no-runtime-checks]
//!                [--no-bounds-checks]
//!                 [-o OUT.cu]
//! choreoc emit-cpp FILE.co [-D …]... [--standalone] [--no-runtime-checks]
//!                [--no-bounds-checks] [-o OUT.cpp]
//! choreoc emit-rs FILE.co [-D …]... [--stub] [--cpu] [-o OUT.rs]
//! choreoc build FILE.co -o EXE [--arch sm_90a | --target cpu] [-D …]... [--nvcc PATH]
//!               [--no-runtime-checks] [-- NVCC (or C++ COMPILER) FLAGS...]
//! choreoc explain [CODE]
//! choreoc --help | --version
//! ```
//!
//! - `check` runs the whole pipeline (preprocess, parse, semantic analysis, lowering) and
//!   reports every diagnostic; `--dump=hir` then prints the checked program and `--dump=plan`
//!   the lowered plan (kernels, launches, streams, memory, entry ABI) on stdout.
//! - `emit-cu` prints the `.cu` of one file (library mode unless `--standalone`), `emit-cpp`
//!   the `.cpp` of the CPU backend (the same C++ for the host compiler and `choreo_cpu.h`),
//!   `emit-rs` its
//!   Rust wrapper module (`--stub`: wrappers that return `Err(choreo::Error::NotBuilt)`, as a
//!   build without nvcc generates them).
//! - `build` translates one file as a whole program and compiles it with nvcc, found like
//!   build scripts find it (`choreo-toolkit`: `--nvcc`, `NVCC`, `CUDA_HOME`/`CUDA_PATH`,
//!   `PATH`, the pip wheels of `python3`, the `ci/install-cuda` cache); everything after `--`
//!   goes to nvcc.
//! - `explain CODE` prints the long description of a diagnostic code (what it means, why, an
//!   example and its fix); without a code it lists every code with its one-line summary. An
//!   unknown code is a usage error (exit status 2).
//!
//! Exit status: 0 when every file is accepted (warnings may be printed), 1 when errors were
//! reported in a file (or nvcc failed), 2 for a usage error or a file that cannot be read or
//! written.
//!
//! Human diagnostics go to stderr (coloured when stderr is a terminal and `NO_COLOR` is unset),
//! followed by one summary line per file with errors and the `choreoc explain` command for
//! their codes; `--message-format=json` prints one JSON object per diagnostic on stdout
//! instead. Dumps and translations go to stdout (or `-o`).
//!
//! Argument parsing is clap's (derive): [`Cli`] declares every subcommand and its options,
//! and [`Options::from_command`] turns the parsed command into the [`Options`] that the
//! commands of the `cli` modules of this binary read. The library does no I/O and spawns
//! nothing (and does not depend on clap: the binary needs the default-on `cli` feature).

mod cli;

use choreo_compiler::compile::Arch;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

const EXIT_STATUS_HELP: &str =
    "Exit status: 0 accepted (warnings may be printed), 1 errors reported, 2 usage or I/O error.";
const EXIT_STATUS_TRANSLATE: &str =
    "Exit status: 0 translated (warnings may be printed), 1 errors reported, 2 usage or I/O error.";

/// choreoc: translate Choreo (.co) kernels to CUDA C++ and Rust wrappers
#[derive(Parser, Debug)]
#[command(
    name = "choreoc",
    version,
    about = "choreoc: translate Choreo (.co) kernels to CUDA C++ and Rust wrappers",
    after_help = EXIT_STATUS_HELP,
    subcommand_required = true
)]
struct Cli {
    #[command(subcommand)]
    command: CliCommand,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
enum CliCommand {
    /// check .co files and report diagnostics
    #[command(after_help = EXIT_STATUS_HELP)]
    Check {
        /// preprocess and parse only (accepts tier-2/3 syntax that semantic analysis does not
        /// support yet)
        #[arg(long, conflicts_with = "dump")]
        syntax_only: bool,
        /// after the diagnostics, print the checked program (hir), the lowered plan (plan), or
        /// which element accesses are proven in bounds and which are checked at run time
        /// (bounds)
        #[arg(long, value_name = "WHAT", require_equals = true)]
        dump: Option<IrDump>,
        #[command(flatten)]
        diagnostics: DiagnosticArgs,
        #[command(flatten)]
        defines: DefineArgs,
        /// the .co files to check (each one is checked and reported, even after one fails)
        #[arg(value_name = "FILE", required = true)]
        files: Vec<PathBuf>,
    },
    /// parse one .co file; with --dump, print its syntax tree
    #[command(after_help = EXIT_STATUS_HELP)]
    Parse {
        /// print the syntax tree on stdout (even when there are errors)
        #[arg(long)]
        dump: bool,
        #[command(flatten)]
        diagnostics: DiagnosticArgs,
        #[command(flatten)]
        defines: DefineArgs,
        /// the .co file
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// print the tokens of every __co__ function of one .co file
    #[command(after_help = EXIT_STATUS_HELP)]
    Lex {
        #[command(flatten)]
        diagnostics: DiagnosticArgs,
        #[command(flatten)]
        defines: DefineArgs,
        /// the .co file
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// translate one .co file and print the .cu
    #[command(name = "emit-cu", after_help = EXIT_STATUS_TRANSLATE)]
    EmitCu {
        /// the .co file
        #[arg(value_name = "FILE.co")]
        file: PathBuf,
        #[command(flatten)]
        defines: DefineArgs,
        #[command(flatten)]
        arch: ArchArg,
        #[command(flatten)]
        translate: TranslateArgs,
        /// write the .cu to OUT.cu instead of stdout
        #[arg(short = 'o', value_name = "OUT.cu")]
        output: Option<PathBuf>,
    },
    /// translate one .co file for the CPU and print the .cpp
    #[command(
        name = "emit-cpp",
        after_help = "The .cpp is C++17 for the host compiler; it includes choreo.h, which \
                      includes the\nCPU runtime header choreo_cpu.h, and links with \
                      choreo_cpu_runtime.cpp.\n\nExit status: 0 translated (warnings may be \
                      printed), 1 errors reported, 2 usage or I/O error."
    )]
    EmitCpp {
        /// the .co file
        #[arg(value_name = "FILE.co")]
        file: PathBuf,
        #[command(flatten)]
        defines: DefineArgs,
        #[command(flatten)]
        translate: TranslateArgs,
        /// write the .cpp to OUT.cpp instead of stdout
        #[arg(short = 'o', value_name = "OUT.cpp")]
        output: Option<PathBuf>,
    },
    /// translate one .co file and print its Rust wrapper module
    #[command(
        name = "emit-rs",
        after_help = "The module holds the items that choreo-build puts in \
                      <OUT_DIR>/choreo/<name>/<stem>.rs\n(one safe function per __co__ \
                      function).\n\nExit status: 0 translated (warnings may be printed), 1 \
                      errors reported, 2 usage or I/O error."
    )]
    EmitRs {
        /// the .co file
        #[arg(value_name = "FILE.co")]
        file: PathBuf,
        #[command(flatten)]
        defines: DefineArgs,
        /// wrappers that do not call the CUDA kernels (a build without nvcc); with neither
        /// kernels they return Err(NotBuilt)
        #[arg(long)]
        stub: bool,
        /// wrappers that also call the CPU kernels (emit-cpp) on CPU streams; with --stub,
        /// only those
        #[arg(long)]
        cpu: bool,
        #[command(flatten)]
        bounds: BoundsArg,
        /// write the .rs to OUT.rs instead of stdout
        #[arg(short = 'o', value_name = "OUT.rs")]
        output: Option<PathBuf>,
    },
    /// translate one .co file as a whole program and compile it with nvcc
    #[command(after_help = "The .cu and choreo.h are written to a temporary directory, which is \
                      removed on success.\n\nExit status: 0 built, 1 errors in the .co file or \
                      nvcc failed, 2 usage or I/O error.")]
    Build {
        /// the .co file
        #[arg(value_name = "FILE.co")]
        file: PathBuf,
        /// the executable to write
        #[arg(short = 'o', value_name = "EXE", required = true)]
        output: PathBuf,
        #[command(flatten)]
        defines: DefineArgs,
        #[command(flatten)]
        arch: ArchArg,
        /// cuda: nvcc; cpu: the host C++ compiler (CXX, else c++) and the CPU runtime, no CUDA
        /// needed
        #[arg(long, value_enum, default_value_t = BuildTarget::Cuda)]
        target: BuildTarget,
        /// the nvcc to use (default: $NVCC, $CUDA_HOME, $CUDA_PATH, PATH, python3's nvidia/cu13
        /// wheels, the ci/install-cuda cache)
        #[arg(long, value_name = "PATH")]
        nvcc: Option<PathBuf>,
        /// leave out the entry and launch checks of the generated code
        #[arg(long)]
        no_runtime_checks: bool,
        #[command(flatten)]
        bounds: BoundsArg,
        /// extra flags for nvcc (or for the C++ compiler with --target cpu), after `--`
        #[arg(last = true, value_name = "FLAGS")]
        compiler_flags: Vec<OsString>,
    },
    /// describe a diagnostic code (E0401, W0403, …) in full
    #[command(
        after_help = "Prints what the code means, why the rule exists, a small wrong example \
                      and its fix.\nWithout CODE, lists every code with its one-line \
                      summary.\n\nExit status: 0 described, 2 unknown code or usage error."
    )]
    Explain {
        /// the code, e.g. E0401 (any case)
        code: Option<String>,
    },
}

/// `--message-format`.
#[derive(Args, Debug)]
struct DiagnosticArgs {
    /// human: rendered diagnostics on stderr; json: one JSON object per diagnostic on stdout
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = MessageFormat::Human)]
    message_format: MessageFormat,
}

/// `-D NAME[=VALUE]`.
#[derive(Args, Debug)]
struct DefineArgs {
    /// predefine a macro for the Choreo preprocessor (VALUE defaults to 1; also -DNAME[=VALUE])
    #[arg(short = 'D', value_name = "NAME[=VALUE]", value_parser = parse_define)]
    define: Vec<(String, Option<String>)>,
}

/// `--arch`.
#[derive(Args, Debug)]
struct ArchArg {
    /// target architecture, e.g. sm_80 (default sm_90a; --help lists all)
    #[arg(long, value_name = "ARCH", value_parser = clap::value_parser!(Arch), long_help = arch_help())]
    arch: Option<Arch>,
}

/// `--no-bounds-checks`.
#[derive(Args, Debug)]
struct BoundsArg {
    /// do not check at run time the element accesses that are not proven in bounds (their
    /// Rust wrappers become unsafe fns)
    #[arg(long)]
    no_bounds_checks: bool,
}

/// The options of `emit-cu` and `emit-cpp`.
#[derive(Args, Debug)]
struct TranslateArgs {
    /// keep the host main() (a whole program; default: library mode, which renames a host
    /// main() to __choreo_unused_main)
    #[arg(long)]
    standalone: bool,
    /// leave out the entry and launch checks of the generated code
    #[arg(long)]
    no_runtime_checks: bool,
    #[command(flatten)]
    bounds: BoundsArg,
}

/// `build --target`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
enum BuildTarget {
    /// nvcc
    Cuda,
    /// the host C++ compiler and the CPU runtime
    Cpu,
}

/// The long help of `--arch`: the default and every known architecture.
fn arch_help() -> String {
    let all: Vec<String> = Arch::all().map(|arch| arch.to_string()).collect();
    format!("target architecture (default {}): {}", Arch::default(), all.join(" "))
}

/// The outcome of a run, ordered by severity; the exit status is the worst one seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Status {
    /// Accepted.
    Ok = 0,
    /// Errors were reported in the input (or nvcc failed).
    Errors = 1,
    /// Bad command line, or a file could not be read or written.
    Usage = 2,
}

impl From<Status> for ExitCode {
    fn from(status: Status) -> ExitCode {
        ExitCode::from(status as u8)
    }
}

/// `--message-format`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
enum MessageFormat {
    /// rendered diagnostics on stderr
    Human,
    /// one JSON object per diagnostic on stdout
    Json,
}

/// What `check --dump=` prints.
#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
enum IrDump {
    // Help texts, for users; the dumps are `Compilation::program`, `Compilation::plan` and
    // `lower::bounds::report`.
    /// the checked program
    Hir,
    /// the lowered plan (kernels, launches, streams, memory, entry ABI)
    Plan,
    /// which element accesses are proven in bounds, which are checked at run time
    Bounds,
}

/// Parsed options of a subcommand, as the commands read them.
struct Options {
    message_format: MessageFormat,
    defines: Vec<(String, Option<String>)>,
    dump: bool,
    ir_dump: Option<IrDump>,
    syntax_only: bool,
    arch: Option<Arch>,
    standalone: bool,
    runtime_checks: bool,
    bounds_checks: bool,
    stub: bool,
    cpu_wrappers: bool,
    /// `--target cpu`.
    target_cpu: bool,
    nvcc: Option<PathBuf>,
    output: Option<PathBuf>,
    nvcc_flags: Vec<OsString>,
    files: Vec<PathBuf>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            message_format: MessageFormat::Human,
            defines: Vec::new(),
            dump: false,
            ir_dump: None,
            syntax_only: false,
            arch: None,
            standalone: false,
            runtime_checks: true,
            bounds_checks: true,
            stub: false,
            cpu_wrappers: false,
            target_cpu: false,
            nvcc: None,
            output: None,
            nvcc_flags: Vec::new(),
            files: Vec::new(),
        }
    }
}

/// A command that runs on files: its options and the function that runs it.
type Run = fn(&Options) -> Status;

impl Options {
    /// The options of `command` and the function that runs it; `None` for `explain`.
    fn from_command(command: CliCommand) -> Result<(Options, Run), Option<String>> {
        let o = Options::default();
        Ok(match command {
            CliCommand::Check { syntax_only, dump, diagnostics, defines, files } => (
                Options {
                    syntax_only,
                    ir_dump: dump,
                    message_format: diagnostics.message_format,
                    defines: defines.define,
                    files,
                    ..o
                },
                cli::front::run_check,
            ),
            CliCommand::Parse { dump, diagnostics, defines, file } => (
                Options {
                    dump,
                    message_format: diagnostics.message_format,
                    defines: defines.define,
                    files: vec![file],
                    ..o
                },
                cli::front::run_parse,
            ),
            CliCommand::Lex { diagnostics, defines, file } => (
                Options {
                    message_format: diagnostics.message_format,
                    defines: defines.define,
                    files: vec![file],
                    ..o
                },
                cli::front::run_lex,
            ),
            CliCommand::EmitCu { file, defines, arch, translate, output } => (
                Options {
                    files: vec![file],
                    defines: defines.define,
                    arch: arch.arch,
                    standalone: translate.standalone,
                    runtime_checks: !translate.no_runtime_checks,
                    bounds_checks: !translate.bounds.no_bounds_checks,
                    output,
                    ..o
                },
                cli::emit::run_emit_cu,
            ),
            CliCommand::EmitCpp { file, defines, translate, output } => (
                Options {
                    files: vec![file],
                    defines: defines.define,
                    standalone: translate.standalone,
                    runtime_checks: !translate.no_runtime_checks,
                    bounds_checks: !translate.bounds.no_bounds_checks,
                    output,
                    ..o
                },
                cli::emit::run_emit_cpp,
            ),
            CliCommand::EmitRs { file, defines, stub, cpu, bounds, output } => (
                Options {
                    files: vec![file],
                    defines: defines.define,
                    stub,
                    cpu_wrappers: cpu,
                    bounds_checks: !bounds.no_bounds_checks,
                    output,
                    ..o
                },
                cli::emit::run_emit_rs,
            ),
            CliCommand::Build {
                file,
                output,
                defines,
                arch,
                target,
                nvcc,
                no_runtime_checks,
                bounds,
                compiler_flags,
            } => (
                Options {
                    files: vec![file],
                    output: Some(output),
                    defines: defines.define,
                    arch: arch.arch,
                    target_cpu: target == BuildTarget::Cpu,
                    nvcc,
                    runtime_checks: !no_runtime_checks,
                    bounds_checks: !bounds.no_bounds_checks,
                    nvcc_flags: compiler_flags,
                    ..o
                },
                cli::build::run_build,
            ),
            CliCommand::Explain { code } => return Err(code),
        })
    }
}

fn main() -> ExitCode {
    match Options::from_command(Cli::parse().command) {
        Ok((options, run)) => run(&options).into(),
        Err(code) => explain(code.as_deref()).into(),
    }
}

/// `choreoc explain [CODE]`: the long description of one code, or the list of all codes.
fn explain(code: Option<&str>) -> Status {
    use choreo_compiler::explain;
    let Some(code) = code else {
        cli::print_stdout(&explain::render_index());
        return Status::Ok;
    };
    match explain::lookup(code) {
        Some(entry) => {
            cli::print_stdout(&explain::render(&entry));
            Status::Ok
        }
        None => {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(
                err,
                "error: '{code}' is not a Choreo diagnostic code (codes look like E0401, W0403 \
                 or N0701; 'choreoc explain' lists them all)"
            );
            Status::Usage
        }
    }
}

/// `NAME[=VALUE]` → `(NAME, VALUE)`; `NAME` may be function-like (`F(x)=x*2`). The
/// preprocessor validates the definition itself and reports a malformed one as E0107.
fn parse_define(definition: &str) -> Result<(String, Option<String>), String> {
    let (name, value) = match definition.split_once('=') {
        Some((name, value)) => (name, Some(value.to_string())),
        None => (definition, None),
    };
    if name.trim().is_empty() {
        return Err(format!("invalid macro definition '-D{definition}': the name is missing"));
    }
    Ok((name.to_string(), value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Parses `choreoc COMMAND ARGS...` into the options of a file command, or clap's message.
    fn parse(command: &str, list: &[&str]) -> Result<Options, String> {
        let args =
            std::iter::once("choreoc").chain(std::iter::once(command)).chain(list.iter().copied());
        let cli = Cli::try_parse_from(args).map_err(|e| e.to_string())?;
        Options::from_command(cli.command).map(|(options, _)| options).map_err(|_| "explain".into())
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn build_options_parse_and_everything_after_double_dash_goes_to_nvcc() {
        let o = parse("build", &["a.co", "-DX=2", "-D", "Y", "--arch", "sm_80", "-o", "e"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(o.files, [PathBuf::from("a.co")]);
        assert_eq!(o.defines, vec![("X".into(), Some("2".into())), ("Y".into(), None)]);
        assert_eq!(o.arch.map(|a| a.to_string()).as_deref(), Some("sm_80"));
        assert_eq!(o.output, Some(PathBuf::from("e")));
        assert!(!o.target_cpu);
        let o = parse("build", &["a.co", "-o", "e", "--nvcc=/x/nvcc", "--", "-lineinfo", "-G"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(o.nvcc_flags, [OsString::from("-lineinfo"), OsString::from("-G")]);
        assert_eq!(o.nvcc, Some(PathBuf::from("/x/nvcc")));
        let o = parse("build", &["a.co", "-o", "e", "--target", "cpu"]).unwrap_or_default();
        assert!(o.target_cpu);
    }

    #[test]
    fn each_command_accepts_only_its_own_options() {
        let error = parse("build", &["a.co"]).err().unwrap_or_default();
        assert!(error.contains("-o <EXE>"), "{error}");
        let error = parse("emit-cu", &["a.co", "--arch", "sm_1"]).err().unwrap_or_default();
        assert!(error.contains("unknown CUDA architecture 'sm_1'"), "{error}");
        let error = parse("emit-cu", &["a.co", "b.co"]).err().unwrap_or_default();
        assert!(error.contains("unexpected argument 'b.co'"), "{error}");
        // For the commands that run no nvcc, `--` only ends the options.
        let error = parse("emit-cu", &["a.co", "--", "-G"]).err().unwrap_or_default();
        assert!(error.contains("unexpected argument '-G'"), "{error}");
        let error = parse("emit-cu", &["a.co", "--nvcc", "x"]).err().unwrap_or_default();
        assert!(error.contains("unexpected argument '--nvcc'"), "{error}");
        let error = parse("build", &["a.co", "-o", "e", "--standalone"]).err().unwrap_or_default();
        assert!(error.contains("unexpected argument '--standalone'"), "{error}");
        let error = parse("emit-rs", &["a.co", "--arch", "sm_80"]).err().unwrap_or_default();
        assert!(error.contains("unexpected argument '--arch'"), "{error}");
        assert!(parse("emit-rs", &["a.co", "--stub", "-o", "a.rs"]).is_ok_and(|o| o.stub));
        let error = parse("check", &["-D", "=3", "a.co"]).err().unwrap_or_default();
        assert!(error.contains("the name is missing"), "{error}");
        // clap's path parser refuses empty file names.
        assert!(parse("check", &[""]).is_err());
    }

    #[test]
    fn check_dump_takes_hir_plan_or_bounds() {
        for (text, dump) in [
            ("--dump=hir", IrDump::Hir),
            ("--dump=plan", IrDump::Plan),
            ("--dump=bounds", IrDump::Bounds),
        ] {
            assert_eq!(parse("check", &[text, "a.co"]).map(|o| o.ir_dump), Ok(Some(dump)));
        }
        let error = parse("check", &["--dump=x", "a.co"]).err().unwrap_or_default();
        assert!(error.contains("invalid value 'x' for '--dump=<WHAT>'"), "{error}");
        let error = parse("check", &["--dump", "a.co"]).err().unwrap_or_default();
        assert!(error.contains("equal sign is needed"), "{error}");
        let error =
            parse("check", &["--dump=hir", "--syntax-only", "a.co"]).err().unwrap_or_default();
        assert!(error.contains("'--syntax-only'"), "{error}");
        // `parse --dump` is the syntax tree and takes no value.
        let error = parse("parse", &["--dump=hir", "a.co"]).err().unwrap_or_default();
        assert!(error.contains("unexpected value 'hir' for '--dump'"), "{error}");
    }

    #[test]
    fn every_command_has_a_help_with_its_options_and_exit_status() {
        let mut cli = Cli::command();
        cli.build();
        for command in cli.get_subcommands_mut() {
            if command.get_name() == "help" {
                continue;
            }
            let help = command.render_help().to_string();
            assert!(help.contains(&format!("Usage: choreoc {}", command.get_name())), "{help}");
            assert!(help.contains("Exit status: 0"), "{help}");
            assert!(help.contains("-h, --help"), "{help}");
        }
    }
}
