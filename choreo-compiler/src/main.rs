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
//! Argument parsing is hand-written and shared: every subcommand is one entry of [`COMMANDS`]
//! (its name, the options it accepts, how many files it takes and the function that runs it),
//! and [`parse_options`] parses the options of all of them. The commands themselves live in the
//! `cli` modules of this binary; the library does no I/O and spawns nothing.

mod cli;

use choreo_compiler::compile::Arch;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// A subcommand: name, help, accepted options, file arity and the function that runs it.
struct Command {
    name: &'static str,
    summary: &'static str,
    /// The argument part of the usage line.
    usage: &'static str,
    flags: &'static [Flag],
    files: Arity,
    /// Whether `-o` must be given.
    output_required: bool,
    /// Help text after the options (may be empty).
    notes: &'static str,
    /// The exit status paragraph of the help.
    exit_status: &'static str,
    run: fn(&Options) -> Status,
}

/// The options a subcommand may accept. Parsing is shared; each command lists its own.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flag {
    /// `--message-format=human|json`
    MessageFormat,
    /// `-D NAME[=VALUE]` / `-DNAME[=VALUE]`
    Define,
    /// `--dump` (the syntax tree)
    Dump,
    /// `--dump=hir|plan` (the checked program or the lowered plan)
    IrDump,
    /// `--syntax-only`
    SyntaxOnly,
    /// `--arch ARCH` / `--arch=ARCH`
    Arch,
    /// `--standalone`
    Standalone,
    /// `--no-runtime-checks`
    NoRuntimeChecks,
    /// `--no-bounds-checks`
    NoBoundsChecks,
    /// `--stub`
    Stub,
    /// `--cpu` (wrappers that call the CPU entries too)
    Cpu,
    /// `--target cpu|cuda`
    Target,
    /// `--nvcc PATH` / `--nvcc=PATH`
    Nvcc,
    /// `-o FILE`
    Output,
    /// `-- FLAGS...`: the rest of the command line goes to nvcc.
    NvccFlags,
}

/// One option row of a help text: the option, then its description from column 31.
fn row(option: &str, lines: &[&str]) -> String {
    let mut text = String::new();
    for (i, line) in lines.iter().enumerate() {
        if i == 0 {
            text.push_str(&format!("  {option:<29}{line}\n"));
        } else {
            text.push_str(&format!("{:31}{line}\n", ""));
        }
    }
    text
}

impl Flag {
    fn help(self, command: &Command) -> String {
        match self {
            Flag::MessageFormat => row(
                "--message-format=human|json",
                &[
                    "human (default): rendered diagnostics on stderr;",
                    "json: one JSON object per diagnostic on stdout",
                ],
            ),
            Flag::Define => row(
                "-D NAME[=VALUE]",
                &[
                    "predefine a macro for the Choreo preprocessor",
                    "(VALUE defaults to 1; also -DNAME[=VALUE])",
                ],
            ),
            Flag::Dump => row("--dump", &["print the syntax tree on stdout"]),
            Flag::IrDump => row(
                "--dump=hir|plan|bounds",
                &[
                    "after the diagnostics, print the checked program (hir),",
                    "the lowered plan (plan), or which element accesses are",
                    "proven in bounds and which are checked at run time (bounds)",
                ],
            ),
            Flag::SyntaxOnly => row(
                "--syntax-only",
                &[
                    "preprocess and parse only (accepts tier-2/3 syntax",
                    "that semantic analysis does not support yet)",
                ],
            ),
            Flag::Arch => {
                let all: Vec<String> = Arch::all().map(|arch| arch.to_string()).collect();
                let default = Arch::default();
                row(
                    "--arch ARCH",
                    &[&format!("target architecture (default {default}):"), &all.join(" ")],
                )
            }
            Flag::Standalone => row(
                "--standalone",
                &[
                    "keep the host main() (a whole program; default: library",
                    "mode, which renames a host main() to __choreo_unused_main)",
                ],
            ),
            Flag::NoRuntimeChecks => row(
                "--no-runtime-checks",
                &["leave out the entry and launch checks of the generated code"],
            ),
            Flag::NoBoundsChecks => row(
                "--no-bounds-checks",
                &[
                    "do not check at run time the element accesses that are not",
                    "proven in bounds (their Rust wrappers become unsafe fns)",
                ],
            ),
            Flag::Stub => row(
                "--stub",
                &[
                    "wrappers that do not call the CUDA kernels (a build without",
                    "nvcc); with neither kernels they return Err(NotBuilt)",
                ],
            ),
            Flag::Target => row(
                "--target cpu|cuda",
                &[
                    "cuda (default): nvcc; cpu: the host C++ compiler (CXX, else",
                    "c++) and the CPU runtime, no CUDA needed",
                ],
            ),
            Flag::Cpu => row(
                "--cpu",
                &[
                    "wrappers that also call the CPU kernels (emit-cpp) on CPU",
                    "streams; with --stub, only those",
                ],
            ),
            Flag::Nvcc => row(
                "--nvcc PATH",
                &[
                    "the nvcc to use (default: $NVCC, $CUDA_HOME, $CUDA_PATH, PATH,",
                    "python3's nvidia/cu13 wheels, the ci/install-cuda cache)",
                ],
            ),
            Flag::Output => match command.name {
                "build" => row("-o EXE", &["the executable to write (required)"]),
                "emit-rs" => row("-o OUT.rs", &["write the .rs to OUT.rs instead of stdout"]),
                _ => row("-o OUT.cu", &["write the .cu to OUT.cu instead of stdout"]),
            },
            Flag::NvccFlags => row("-- FLAGS...", &["pass the remaining arguments to nvcc"]),
        }
    }
}

/// How many file operands a command takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arity {
    One,
    OneOrMore,
}

const EXIT_STATUS_HELP: &str =
    "Exit status: 0 accepted (warnings may be printed), 1 errors reported, 2 usage or I/O error.\n";

const COMMANDS: &[Command] = &[
    Command {
        name: "check",
        summary: "check .co files and report diagnostics",
        usage: "[--syntax-only] [--dump=hir|plan] [--message-format=human|json] \
                [-D NAME[=VALUE]]... FILE...",
        flags: &[Flag::SyntaxOnly, Flag::IrDump, Flag::MessageFormat, Flag::Define],
        files: Arity::OneOrMore,
        output_required: false,
        notes: "",
        exit_status: EXIT_STATUS_HELP,
        run: cli::front::run_check,
    },
    Command {
        name: "parse",
        summary: "parse one .co file; with --dump, print its syntax tree",
        usage: "[--dump] [--message-format=human|json] [-D NAME[=VALUE]]... FILE",
        flags: &[Flag::Dump, Flag::MessageFormat, Flag::Define],
        files: Arity::One,
        output_required: false,
        notes: "",
        exit_status: EXIT_STATUS_HELP,
        run: cli::front::run_parse,
    },
    Command {
        name: "lex",
        summary: "print the tokens of every __co__ function of one .co file",
        usage: "[--message-format=human|json] [-D NAME[=VALUE]]... FILE",
        flags: &[Flag::MessageFormat, Flag::Define],
        files: Arity::One,
        output_required: false,
        notes: "",
        exit_status: EXIT_STATUS_HELP,
        run: cli::front::run_lex,
    },
    Command {
        name: "emit-cu",
        summary: "translate one .co file and print the .cu",
        usage: "FILE.co [-D NAME[=VALUE]]... [--arch sm_90a] [--standalone] \
                [--no-runtime-checks] [--no-bounds-checks] [-o OUT.cu]",
        flags: &[
            Flag::Define,
            Flag::Arch,
            Flag::Standalone,
            Flag::NoRuntimeChecks,
            Flag::NoBoundsChecks,
            Flag::Output,
        ],
        files: Arity::One,
        output_required: false,
        notes: "",
        exit_status: "Exit status: 0 translated (warnings may be printed), 1 errors reported, 2 \
                      usage or I/O error.\n",
        run: cli::emit::run_emit_cu,
    },
    Command {
        name: "emit-cpp",
        summary: "translate one .co file for the CPU and print the .cpp",
        usage: "FILE.co [-D NAME[=VALUE]]... [--standalone] [--no-runtime-checks] \
                [--no-bounds-checks] [-o OUT.cpp]",
        flags: &[
            Flag::Define,
            Flag::Standalone,
            Flag::NoRuntimeChecks,
            Flag::NoBoundsChecks,
            Flag::Output,
        ],
        files: Arity::One,
        output_required: false,
        notes: "The .cpp is C++17 for the host compiler; it includes choreo.h, which includes the\n\
                CPU runtime header choreo_cpu.h, and links with choreo_cpu_runtime.cpp.\n\n",
        exit_status: "Exit status: 0 translated (warnings may be printed), 1 errors reported, 2 \
                      usage or I/O error.\n",
        run: cli::emit::run_emit_cpp,
    },
    Command {
        name: "emit-rs",
        summary: "translate one .co file and print its Rust wrapper module",
        usage: "FILE.co [-D NAME[=VALUE]]... [--stub] [--cpu] [--no-bounds-checks] [-o OUT.rs]",
        flags: &[Flag::Define, Flag::Stub, Flag::Cpu, Flag::NoBoundsChecks, Flag::Output],
        files: Arity::One,
        output_required: false,
        notes: "The module holds the items that choreo-build puts in <OUT_DIR>/choreo/<name>/<stem>.rs\n\
                (one safe function per __co__ function).\n\n",
        exit_status: "Exit status: 0 translated (warnings may be printed), 1 errors reported, 2 \
                      usage or I/O error.\n",
        run: cli::emit::run_emit_rs,
    },
    Command {
        name: "build",
        summary: "translate one .co file as a whole program and compile it with nvcc",
        usage: "FILE.co -o EXE [--arch sm_90a | --target cpu] [-D NAME[=VALUE]]... [--nvcc PATH] \
                [--no-runtime-checks] [--no-bounds-checks] [-- EXTRA COMPILER FLAGS...]",
        flags: &[
            Flag::Output,
            Flag::Define,
            Flag::Arch,
            Flag::Target,
            Flag::Nvcc,
            Flag::NoRuntimeChecks,
            Flag::NoBoundsChecks,
            Flag::NvccFlags,
        ],
        files: Arity::One,
        output_required: true,
        notes: "The .cu and choreo.h are written to a temporary directory, which is removed on \
                success.\n",
        exit_status: "Exit status: 0 built, 1 errors in the .co file or nvcc failed, 2 usage or \
                      I/O error.\n",
        run: cli::build::run_build,
    },
];

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

#[derive(Clone, Copy, PartialEq, Eq)]
enum MessageFormat {
    Human,
    Json,
}

/// What `check --dump=` prints.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum IrDump {
    /// The checked program (`Compilation::program`).
    Hir,
    /// The lowered plan (`Compilation::plan`).
    Plan,
    /// The verdicts of the bounds analysis (`lower::bounds::report`).
    Bounds,
}

/// Parsed options of a subcommand.
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

/// A command-line mistake: the message, and the command whose usage to show.
struct UsageError {
    message: String,
    command: Option<&'static Command>,
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match dispatch(&args) {
        Ok(status) => status.into(),
        Err(e) => {
            let usage = match e.command {
                Some(c) => format!("Usage: choreoc {} {}", c.name, c.usage),
                None => "Usage: choreoc <COMMAND> [OPTIONS] FILE...".to_string(),
            };
            let help = match e.command {
                Some(c) => format!("choreoc {} --help", c.name),
                None => "choreoc --help".to_string(),
            };
            let mut err = std::io::stderr().lock();
            let _ = writeln!(
                err,
                "error: {}\n\n{usage}\n\nFor more information, try '{help}'.",
                e.message
            );
            Status::Usage.into()
        }
    }
}

fn dispatch(args: &[OsString]) -> Result<Status, UsageError> {
    let Some(first) = args.first() else {
        return Err(UsageError { message: "no command given".to_string(), command: None });
    };
    let first = first.to_string_lossy();
    let first = first.as_ref();
    match first {
        "-h" | "--help" | "help" => {
            let text = match args.get(1).and_then(|a| a.to_str()) {
                Some("explain") if first == "help" => explain_help(),
                Some(name) if first == "help" => command_help(find_command(name)?),
                _ => main_help(),
            };
            cli::print_stdout(&text);
            return Ok(Status::Ok);
        }
        "-V" | "--version" => {
            cli::print_stdout(&format!("choreoc {}\n", env!("CARGO_PKG_VERSION")));
            return Ok(Status::Ok);
        }
        _ => {}
    }
    if first.starts_with('-') {
        return Err(UsageError { message: format!("unknown option '{first}'"), command: None });
    }
    if first == "explain" {
        return Ok(explain(&args[1..]));
    }
    let command = find_command(first)?;
    let rest = &args[1..];
    if rest.iter().take_while(|a| *a != "--").any(|a| a == "-h" || a == "--help") {
        cli::print_stdout(&command_help(command));
        return Ok(Status::Ok);
    }
    let options = parse_options(command, rest)?;
    Ok((command.run)(&options))
}

/// The usage line and help of `choreoc explain`, which takes a code rather than files.
const EXPLAIN_USAGE: &str = "Usage: choreoc explain [CODE]";
const EXPLAIN_SUMMARY: &str = "describe a diagnostic code (E0401, W0403, …) in full";

/// `choreoc explain [CODE]`: the long description of one code, or the list of all codes.
fn explain(args: &[OsString]) -> Status {
    use choreo_compiler::explain;
    let args: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    match args.as_slice() {
        [] => cli::print_stdout(&explain::render_index()),
        [flag] if flag == "-h" || flag == "--help" => cli::print_stdout(&explain_help()),
        [code] => match explain::lookup(code) {
            Some(entry) => cli::print_stdout(&explain::render(&entry)),
            None => {
                let mut err = std::io::stderr().lock();
                let _ = writeln!(
                    err,
                    "error: '{code}' is not a Choreo diagnostic code (codes look like E0401, \
                     W0403 or N0701; 'choreoc explain' lists them all)"
                );
                return Status::Usage;
            }
        },
        _ => {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(
                err,
                "error: 'choreoc explain' takes at most one code\n\n{EXPLAIN_USAGE}\n\n\
                 For more information, try 'choreoc explain --help'."
            );
            return Status::Usage;
        }
    }
    Status::Ok
}

fn explain_help() -> String {
    format!(
        "choreoc explain: {EXPLAIN_SUMMARY}\n\n{EXPLAIN_USAGE}\n\n\
         Prints what the code means, why the rule exists, a small wrong example and its fix.\n\
         Without CODE, lists every code with its one-line summary.\n\n\
         Exit status: 0 described, 2 unknown code or usage error.\n"
    )
}

fn find_command(name: &str) -> Result<&'static Command, UsageError> {
    COMMANDS.iter().find(|c| c.name == name).ok_or_else(|| UsageError {
        message: format!(
            "unknown command '{name}' (commands: {}, explain)",
            COMMANDS.iter().map(|c| c.name).collect::<Vec<_>>().join(", ")
        ),
        command: None,
    })
}

fn main_help() -> String {
    let mut text = String::from(
        "choreoc: translate Choreo (.co) kernels to CUDA C++ and Rust wrappers\n\n\
         Usage: choreoc <COMMAND> [OPTIONS] FILE...\n\nCommands:\n",
    );
    for c in COMMANDS {
        text.push_str(&format!("  {:<8}{}\n", c.name, c.summary));
    }
    text.push_str(&format!("  {:<8}{EXPLAIN_SUMMARY}\n", "explain"));
    text.push_str(
        "\nOptions:\n  -h, --help     print help (also 'choreoc <COMMAND> --help')\n  \
         -V, --version  print the version\n\n",
    );
    text.push_str(EXIT_STATUS_HELP);
    text
}

fn command_help(command: &Command) -> String {
    let mut text = format!(
        "choreoc {}: {}\n\nUsage: choreoc {} {}\n\nOptions:\n",
        command.name, command.summary, command.name, command.usage
    );
    for flag in command.flags {
        text.push_str(&flag.help(command));
    }
    text.push_str(&row("-h, --help", &["print this help"]));
    text.push('\n');
    text.push_str(command.notes);
    text.push_str(command.exit_status);
    text
}

/// Parses the options and file operands of `command` (shared by every command).
fn parse_options(command: &'static Command, args: &[OsString]) -> Result<Options, UsageError> {
    let usage = |message: String| UsageError { message, command: Some(command) };
    let accepts = |flag: Flag| command.flags.contains(&flag);
    let mut options = Options {
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
    };
    let mut i = 0;
    let mut only_files = false;
    while let Some(arg) = args.get(i) {
        i += 1;
        let text = arg.to_str();
        let is_option = !only_files && text.is_some_and(|t| t.starts_with('-') && t != "-");
        if !is_option {
            if arg.is_empty() {
                return Err(usage("empty file name".to_string()));
            }
            options.files.push(PathBuf::from(arg));
            continue;
        }
        let text = text.unwrap_or_default();
        if text == "--" && accepts(Flag::NvccFlags) {
            options.nvcc_flags.extend(args[i..].iter().cloned());
            break;
        } else if text == "--" {
            only_files = true;
        } else if accepts(Flag::MessageFormat)
            && (text == "--message-format" || text.starts_with("--message-format="))
        {
            let value = match text.strip_prefix("--message-format=") {
                Some(v) => v.to_string(),
                None => next_value(args, &mut i).ok_or_else(|| {
                    usage("'--message-format' needs a value (human or json)".to_string())
                })?,
            };
            options.message_format = match value.as_str() {
                "human" => MessageFormat::Human,
                "json" => MessageFormat::Json,
                other => {
                    return Err(usage(format!(
                        "invalid value '{other}' for '--message-format' (expected human or json)"
                    )));
                }
            };
        } else if accepts(Flag::Define) && text.starts_with("-D") {
            let definition = match &text[2..] {
                "" => next_value(args, &mut i).ok_or_else(|| {
                    usage("'-D' needs a macro definition NAME[=VALUE]".to_string())
                })?,
                attached => attached.to_string(),
            };
            options.defines.push(parse_define(&definition).map_err(usage)?);
        } else if accepts(Flag::Dump) && text == "--dump" {
            options.dump = true;
        } else if accepts(Flag::IrDump) && (text == "--dump" || text.starts_with("--dump=")) {
            options.ir_dump = Some(match text.strip_prefix("--dump=") {
                Some("hir") => IrDump::Hir,
                Some("plan") => IrDump::Plan,
                Some("bounds") => IrDump::Bounds,
                Some(other) => {
                    return Err(usage(format!(
                        "invalid value '{other}' for '--dump' (expected hir, plan or bounds)"
                    )));
                }
                None => {
                    return Err(usage(
                        "'--dump' needs a value: --dump=hir, --dump=plan or --dump=bounds".into(),
                    ));
                }
            });
        } else if accepts(Flag::SyntaxOnly) && text == "--syntax-only" {
            options.syntax_only = true;
        } else if accepts(Flag::Arch) && (text == "--arch" || text.starts_with("--arch=")) {
            let value = match text.strip_prefix("--arch=") {
                Some(v) => v.to_string(),
                None => next_value(args, &mut i)
                    .ok_or_else(|| usage("'--arch' needs a value, e.g. sm_90a".to_string()))?,
            };
            options.arch = Some(value.parse::<Arch>().map_err(|e| usage(e.to_string()))?);
        } else if accepts(Flag::Standalone) && text == "--standalone" {
            options.standalone = true;
        } else if accepts(Flag::NoRuntimeChecks) && text == "--no-runtime-checks" {
            options.runtime_checks = false;
        } else if accepts(Flag::NoBoundsChecks) && text == "--no-bounds-checks" {
            options.bounds_checks = false;
        } else if accepts(Flag::Stub) && text == "--stub" {
            options.stub = true;
        } else if accepts(Flag::Cpu) && text == "--cpu" {
            options.cpu_wrappers = true;
        } else if accepts(Flag::Target) && (text == "--target" || text.starts_with("--target=")) {
            let value = match text.strip_prefix("--target=") {
                Some(value) => value.to_string(),
                None => next_value(args, &mut i)
                    .ok_or_else(|| usage("'--target' needs a value: cpu or cuda".to_string()))?,
            };
            options.target_cpu = match value.as_str() {
                "cpu" => true,
                "cuda" => false,
                other => {
                    return Err(usage(format!("unknown target '{other}': expected cpu or cuda")));
                }
            };
        } else if accepts(Flag::Nvcc) && (text == "--nvcc" || text.starts_with("--nvcc=")) {
            options.nvcc = Some(match text.strip_prefix("--nvcc=") {
                Some(v) => PathBuf::from(v),
                None => PathBuf::from(
                    next_os_value(args, &mut i)
                        .ok_or_else(|| usage("'--nvcc' needs the path of an nvcc".to_string()))?,
                ),
            });
        } else if accepts(Flag::Output) && text == "-o" {
            options.output = Some(PathBuf::from(
                next_os_value(args, &mut i)
                    .ok_or_else(|| usage("'-o' needs a file name".to_string()))?,
            ));
        } else {
            return Err(usage(format!("unknown option '{text}' for 'choreoc {}'", command.name)));
        }
    }
    if options.syntax_only && options.ir_dump.is_some() {
        return Err(usage(
            "'--dump=hir|plan' needs semantic analysis, which '--syntax-only' leaves out"
                .to_string(),
        ));
    }
    match (command.files, options.files.len()) {
        (_, 0) => return Err(usage("no input file given".to_string())),
        (Arity::One, n) if n > 1 => {
            return Err(usage(format!("'choreoc {}' takes one file, got {n}", command.name)));
        }
        _ => {}
    }
    if command.output_required && options.output.is_none() {
        return Err(usage("'-o EXE' is required".to_string()));
    }
    Ok(options)
}

/// The argument after an option that takes a separate value (`-D NAME`), if it is there.
fn next_value(args: &[OsString], i: &mut usize) -> Option<String> {
    let value = args.get(*i)?.to_str()?.to_string();
    *i += 1;
    Some(value)
}

/// Like [`next_value`], for a value that is a path (need not be UTF-8).
fn next_os_value(args: &[OsString], i: &mut usize) -> Option<OsString> {
    let value = args.get(*i)?.clone();
    *i += 1;
    Some(value)
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

    fn parse(command: &str, list: &[&str]) -> Result<Options, String> {
        let command = find_command(command).map_err(|e| e.message)?;
        let args: Vec<OsString> = list.iter().map(OsString::from).collect();
        parse_options(command, &args).map_err(|e| e.message)
    }

    #[test]
    fn build_options_parse_and_everything_after_double_dash_goes_to_nvcc() {
        let o = parse("build", &["a.co", "-DX=2", "-D", "Y", "--arch", "sm_80", "-o", "e"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(o.files, [PathBuf::from("a.co")]);
        assert_eq!(o.defines, vec![("X".into(), Some("2".into())), ("Y".into(), None)]);
        assert_eq!(o.arch.map(|a| a.to_string()).as_deref(), Some("sm_80"));
        assert_eq!(o.output, Some(PathBuf::from("e")));
        let o = parse("build", &["a.co", "-o", "e", "--nvcc=/x/nvcc", "--", "-lineinfo", "-G"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(o.nvcc_flags, [OsString::from("-lineinfo"), OsString::from("-G")]);
        assert_eq!(o.nvcc, Some(PathBuf::from("/x/nvcc")));
    }

    #[test]
    fn each_command_accepts_only_its_own_options() {
        assert_eq!(parse("build", &["a.co"]).err().as_deref(), Some("'-o EXE' is required"));
        let error = parse("emit-cu", &["a.co", "--arch", "sm_1"]).err().unwrap_or_default();
        assert!(error.contains("unknown CUDA architecture 'sm_1'"), "{error}");
        let error = parse("emit-cu", &["a.co", "b.co"]).err().unwrap_or_default();
        assert_eq!(error, "'choreoc emit-cu' takes one file, got 2");
        // For the commands that run no nvcc, `--` ends the options.
        let error = parse("emit-cu", &["a.co", "--", "-G"]).err().unwrap_or_default();
        assert_eq!(error, "'choreoc emit-cu' takes one file, got 2");
        let error = parse("emit-cu", &["a.co", "--nvcc", "x"]).err().unwrap_or_default();
        assert_eq!(error, "unknown option '--nvcc' for 'choreoc emit-cu'");
        let error = parse("build", &["a.co", "-o", "e", "--standalone"]).err().unwrap_or_default();
        assert_eq!(error, "unknown option '--standalone' for 'choreoc build'");
        let error = parse("emit-rs", &["a.co", "--arch", "sm_80"]).err().unwrap_or_default();
        assert_eq!(error, "unknown option '--arch' for 'choreoc emit-rs'");
        assert!(parse("emit-rs", &["a.co", "--stub", "-o", "a.rs"]).is_ok_and(|o| o.stub));
    }

    #[test]
    fn check_dump_takes_hir_or_plan() {
        assert_eq!(
            parse("check", &["--dump=hir", "a.co"]).map(|o| o.ir_dump),
            Ok(Some(IrDump::Hir))
        );
        assert_eq!(
            parse("check", &["--dump=plan", "a.co"]).map(|o| o.ir_dump),
            Ok(Some(IrDump::Plan))
        );
        let error = parse("check", &["--dump=x", "a.co"]).err().unwrap_or_default();
        assert!(error.contains("invalid value 'x' for '--dump'"), "{error}");
        let error = parse("check", &["--dump", "a.co"]).err().unwrap_or_default();
        assert!(error.contains("'--dump' needs a value"), "{error}");
        let error =
            parse("check", &["--dump=hir", "--syntax-only", "a.co"]).err().unwrap_or_default();
        assert!(error.contains("'--syntax-only'"), "{error}");
        // `parse --dump` is the syntax tree and takes no value.
        let error = parse("parse", &["--dump=hir", "a.co"]).err().unwrap_or_default();
        assert_eq!(error, "unknown option '--dump=hir' for 'choreoc parse'");
    }

    #[test]
    fn every_command_has_a_help_with_its_options_and_exit_status() {
        for command in COMMANDS {
            let help = command_help(command);
            assert!(help.contains(&format!("Usage: choreoc {} ", command.name)), "{help}");
            assert!(help.contains("Exit status: 0"), "{help}");
            assert!(help.contains("  -h, --help                   print this help\n"), "{help}");
        }
    }
}
