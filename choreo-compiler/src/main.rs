//! `choreoc`: the command-line front end of the Choreo translator.
//!
//! ```text
//! choreoc check [--message-format=human|json] [-D NAME[=VALUE]]... FILE...
//! choreoc parse [--dump] [--message-format=…] [-D …]... FILE
//! choreoc lex [--message-format=…] [-D …]... FILE
//! choreoc emit-cu FILE.co [-D …]... [--arch sm_90a] [--no-runtime-checks] [-o OUT.cu]
//! choreoc build FILE.co -o EXE [--arch sm_90a] [-D …]... [--nvcc PATH] [-- NVCC FLAGS...]
//! choreoc --help | --version
//! ```
//!
//! Exit status: 0 when every file is accepted (warnings may be printed), 1 when errors were
//! reported in a file, 2 for a usage error or a file that cannot be read.
//!
//! Human diagnostics go to stderr (coloured when stderr is a terminal and `NO_COLOR` is unset),
//! followed by one summary line per file with errors; `--message-format=json` prints one JSON
//! object per diagnostic on stdout instead. Dumps go to stdout.
//!
//! Argument parsing is hand-written. Every subcommand is one entry of [`COMMANDS`]: its name,
//! the options it accepts (parsed by the shared [`parse_options`]), how many files it takes and
//! the function that runs it. A later subcommand (`emit-cu`, `emit-rs`, `build`) is a new entry
//! plus, if it needs one, a new [`Flag`].

use choreo_compiler::compile::{BUILD_HELP, EMIT_CU_HELP, cli_build, cli_emit_cu};
use choreo_compiler::diagnostics::{Diagnostics, render_json, write_human};
use choreo_compiler::dump::{dump_file, dump_tokens};
use choreo_compiler::frontend::parse_file;
use choreo_compiler::lexer::{IntrinsicNames, lex};
use choreo_compiler::preprocess::{PreprocessOptions, Region, preprocess};
use choreo_compiler::source::{FileId, SourceDb};
use codespan_reporting::term::termcolor::{
    Color, ColorChoice, ColorSpec, StandardStream, WriteColor,
};
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A subcommand: name, help, accepted options, file arity and the function that runs it.
struct Command {
    name: &'static str,
    summary: &'static str,
    /// The argument part of the usage line.
    usage: &'static str,
    flags: &'static [Flag],
    files: Arity,
    run: fn(&Options) -> Status,
}

/// The options a subcommand may accept. Parsing is shared; each command lists its own.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flag {
    /// `--message-format=human|json`
    MessageFormat,
    /// `-D NAME[=VALUE]` / `-DNAME[=VALUE]`
    Define,
    /// `--dump`
    Dump,
    /// `--syntax-only`
    SyntaxOnly,
}

impl Flag {
    fn help(self) -> &'static str {
        match self {
            Flag::MessageFormat => {
                "  --message-format=human|json  human (default): rendered diagnostics on stderr;\n\
                 \x20                              json: one JSON object per diagnostic on stdout\n"
            }
            Flag::Define => {
                "  -D NAME[=VALUE]              predefine a macro for the Choreo preprocessor\n\
                 \x20                              (VALUE defaults to 1; also -DNAME[=VALUE])\n"
            }
            Flag::Dump => "  --dump                       print the syntax tree on stdout\n",
            Flag::SyntaxOnly => {
                "  --syntax-only                preprocess and parse only (accepts tier-2/3 syntax\n\
                 \x20                              that semantic analysis does not support yet)\n"
            }
        }
    }
}

/// How many file operands a command takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arity {
    One,
    OneOrMore,
}

const COMMANDS: &[Command] = &[
    Command {
        name: "check",
        summary: "check .co files and report diagnostics",
        usage: "[--syntax-only] [--message-format=human|json] [-D NAME[=VALUE]]... FILE...",
        flags: &[Flag::SyntaxOnly, Flag::MessageFormat, Flag::Define],
        files: Arity::OneOrMore,
        run: run_check,
    },
    Command {
        name: "parse",
        summary: "parse one .co file; with --dump, print its syntax tree",
        usage: "[--dump] [--message-format=human|json] [-D NAME[=VALUE]]... FILE",
        flags: &[Flag::Dump, Flag::MessageFormat, Flag::Define],
        files: Arity::One,
        run: run_parse,
    },
    Command {
        name: "lex",
        summary: "print the tokens of every __co__ function of one .co file",
        usage: "[--message-format=human|json] [-D NAME[=VALUE]]... FILE",
        flags: &[Flag::MessageFormat, Flag::Define],
        files: Arity::One,
        run: run_lex,
    },
];

/// The outcome of a run, ordered by severity; the exit status is the worst one seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Status {
    /// Accepted.
    Ok = 0,
    /// Errors were reported in the input.
    Errors = 1,
    /// Bad command line, or a file could not be read.
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

/// Parsed options of a subcommand.
struct Options {
    message_format: MessageFormat,
    defines: Vec<(String, Option<String>)>,
    dump: bool,
    syntax_only: bool,
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
                Some("emit-cu") if first == "help" => EMIT_CU_HELP.to_string(),
                Some("build") if first == "help" => BUILD_HELP.to_string(),
                Some(name) if first == "help" => command_help(find_command(name)?),
                _ => main_help(),
            };
            print_stdout(&text);
            return Ok(Status::Ok);
        }
        "-V" | "--version" => {
            print_stdout(&format!("choreoc {}\n", env!("CARGO_PKG_VERSION")));
            return Ok(Status::Ok);
        }
        _ => {}
    }
    if first.starts_with('-') {
        return Err(UsageError { message: format!("unknown option '{first}'"), command: None });
    }
    // The code-generation commands parse their own options (compile.rs).
    let raw_command: Option<fn(&[OsString]) -> i32> = match first {
        "emit-cu" => Some(cli_emit_cu),
        "build" => Some(cli_build),
        _ => None,
    };
    if let Some(run) = raw_command {
        return Ok(match run(&args[1..]) {
            0 => Status::Ok,
            1 => Status::Errors,
            _ => Status::Usage,
        });
    }
    let command = find_command(first)?;
    let rest = &args[1..];
    if rest.iter().take_while(|a| *a != "--").any(|a| a == "-h" || a == "--help") {
        print_stdout(&command_help(command));
        return Ok(Status::Ok);
    }
    let options = parse_options(command, rest)?;
    Ok((command.run)(&options))
}

fn find_command(name: &str) -> Result<&'static Command, UsageError> {
    COMMANDS.iter().find(|c| c.name == name).ok_or_else(|| UsageError {
        message: format!(
            "unknown command '{name}' (commands: {}, emit-cu, build)",
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
    text.push_str("  emit-cu translate one .co file and print the .cu\n");
    text.push_str("  build   translate one .co file as a program and compile it with nvcc\n");
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
        text.push_str(flag.help());
    }
    text.push_str("  -h, --help                   print this help\n\n");
    text.push_str(EXIT_STATUS_HELP);
    text
}

const EXIT_STATUS_HELP: &str =
    "Exit status: 0 accepted (warnings may be printed), 1 errors reported, 2 usage or I/O error.\n";

/// Parses the options and file operands of `command` (shared by every command).
fn parse_options(command: &'static Command, args: &[OsString]) -> Result<Options, UsageError> {
    let usage = |message: String| UsageError { message, command: Some(command) };
    let accepts = |flag: Flag| command.flags.contains(&flag);
    let mut options = Options {
        message_format: MessageFormat::Human,
        defines: Vec::new(),
        dump: false,
        syntax_only: false,
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
        if text == "--" {
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
        } else if accepts(Flag::SyntaxOnly) && text == "--syntax-only" {
            options.syntax_only = true;
        } else {
            return Err(usage(format!("unknown option '{text}' for 'choreoc {}'", command.name)));
        }
    }
    match (command.files, options.files.len()) {
        (_, 0) => Err(usage("no input file given".to_string())),
        (Arity::One, n) if n > 1 => {
            Err(usage(format!("'choreoc {}' takes one file, got {n}", command.name)))
        }
        _ => Ok(options),
    }
}

/// The argument after an option that takes a separate value (`-D NAME`), if it is there.
fn next_value(args: &[OsString], i: &mut usize) -> Option<String> {
    let value = args.get(*i)?.to_str()?.to_string();
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

/// Writes to stdout; a closed pipe (`choreoc parse --dump x.co | head`) is not an error.
fn print_stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Reads `path` into `db`; on failure prints a message naming the path and returns `None`.
fn load(db: &mut SourceDb, path: &Path) -> Option<FileId> {
    let failure = match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => return Some(db.add(path.display().to_string(), text)),
            Err(e) => format!(
                "is not valid UTF-8 (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        },
        Err(e) => e.to_string(),
    };
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "error: cannot read '{}': {failure}", path.display());
    None
}

/// Prints the diagnostics of one file in the chosen format; returns the file's status.
fn report(options: &Options, db: &SourceDb, file: FileId, diags: &Diagnostics) -> Status {
    let status = if diags.has_errors() { Status::Errors } else { Status::Ok };
    match options.message_format {
        MessageFormat::Json => print_stdout(&render_json(db, diags.as_slice())),
        MessageFormat::Human => {
            if diags.is_empty() {
                return status;
            }
            let mut stderr = StandardStream::stderr(stderr_color_choice());
            write_human(db, diags.as_slice(), &mut stderr);
            let name = db.file(file).name();
            let errors = diags.error_count();
            let warnings = diags.len() - errors;
            let (label, color, count, what) = if errors > 0 {
                ("error", Color::Red, errors, "error")
            } else {
                ("warning", Color::Yellow, warnings, "warning")
            };
            if count > 0 {
                let plural = if count == 1 { "" } else { "s" };
                let _ = stderr.set_color(ColorSpec::new().set_fg(Some(color)).set_bold(true));
                let _ = write!(stderr, "{label}");
                let _ = stderr.reset();
                let _ = writeln!(stderr, ": {count} {what}{plural} reported in {name}");
            }
        }
    }
    status
}

/// Colour when stderr is a terminal and `NO_COLOR` is unset or empty (no-color.org);
/// `ColorChoice::Auto` additionally honours `TERM=dumb`.
fn stderr_color_choice() -> ColorChoice {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    if !no_color && std::io::stderr().is_terminal() {
        ColorChoice::Auto
    } else {
        ColorChoice::Never
    }
}

fn preprocess_options(options: &Options) -> PreprocessOptions {
    PreprocessOptions { defines: options.defines.clone() }
}

/// `choreoc check`: every file is checked and reported, even after one fails.
fn run_check(options: &Options) -> Status {
    let mut db = SourceDb::new();
    let mut status = Status::Ok;
    for path in &options.files {
        let Some(file) = load(&mut db, path) else {
            status = status.max(Status::Usage);
            continue;
        };
        if options.syntax_only {
            let mut diags = Diagnostics::new();
            let _ast = parse_file(&db, file, &preprocess_options(options), &mut diags);
            status = status.max(report(options, &db, file, &diags));
            continue;
        }
        // The whole pipeline (preprocess, parse, sema, lowering): everything that can reject
        // a program is reported, exactly as a build would.
        let compile_options = choreo_compiler::compile::CompileOptions {
            defines: options.defines.clone(),
            ..Default::default()
        };
        let compilation = choreo_compiler::compile::compile(&db, file, &compile_options);
        let mut diags = Diagnostics::new();
        diags.extend(compilation.diagnostics);
        status = status.max(report(options, &db, file, &diags));
    }
    status
}

/// `choreoc parse [--dump]`: the dump is printed even when there are errors (the tree then
/// holds what error recovery kept).
fn run_parse(options: &Options) -> Status {
    let mut db = SourceDb::new();
    let Some(file) = options.files.first().and_then(|path| load(&mut db, path)) else {
        return Status::Usage;
    };
    let mut diags = Diagnostics::new();
    let ast = parse_file(&db, file, &preprocess_options(options), &mut diags);
    if options.dump {
        print_stdout(&dump_file(&db, &ast));
    }
    report(options, &db, file, &diags)
}

/// `choreoc lex`: the tokens of each `__co__` function in file order, each list ending with
/// its `eof` token.
fn run_lex(options: &Options) -> Status {
    let mut db = SourceDb::new();
    let Some(file) = options.files.first().and_then(|path| load(&mut db, path)) else {
        return Status::Usage;
    };
    let mut diags = Diagnostics::new();
    let pre = preprocess(&db, file, &preprocess_options(options), &mut diags);
    let intrinsics = IntrinsicNames::from_preprocessed(&pre);
    let mut out = String::new();
    for region in &pre.regions {
        if let Region::CoFunction { text, .. } = region {
            out.push_str(&dump_tokens(&db, &lex(text, &intrinsics, &mut diags)));
        }
    }
    print_stdout(&out);
    report(options, &db, file, &diags)
}
