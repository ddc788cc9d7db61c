//! The commands of `choreoc` and what they share: reading the input, reporting diagnostics,
//! writing the output. (Modules of the binary: the library does no I/O.)

pub(crate) mod build;
pub(crate) mod emit;
pub(crate) mod front;

use crate::{MessageFormat, Options, Status};
use choreo_compiler::compile::{Compilation, CompileOptions, OutputMode, Target, compile};
use choreo_compiler::diagnostics::{Diagnostic, render_json, write_human};
use choreo_compiler::source::{FileId, SourceDb};
use codespan_reporting::term::termcolor::{
    Color, ColorChoice, ColorSpec, StandardStream, WriteColor,
};
use std::io::{IsTerminal, Write};
use std::path::Path;

/// Writes to stdout; a closed pipe (`choreoc parse --dump x.co | head`) is not an error.
pub(crate) fn print_stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Reads `path` into `db`; on failure prints a message naming the path and returns `None`.
pub(crate) fn load(db: &mut SourceDb, path: &Path) -> Option<FileId> {
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
pub(crate) fn report(
    options: &Options,
    db: &SourceDb,
    file: FileId,
    diags: &[Diagnostic],
) -> Status {
    let errors = diags.iter().filter(|d| d.is_error()).count();
    let status = if errors > 0 { Status::Errors } else { Status::Ok };
    match options.message_format {
        MessageFormat::Json => print_stdout(&render_json(db, diags)),
        MessageFormat::Human => {
            if diags.is_empty() {
                return status;
            }
            let mut stderr = StandardStream::stderr(stderr_color_choice());
            write_human(db, diags, &mut stderr);
            let name = db.file(file).name();
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
            let _ = write!(stderr, "{}", explain_hint(diags));
        }
    }
    status
}

/// After the errors of a file: which of their codes `choreoc explain` describes, as rustc
/// points at `rustc --explain` (empty when there is no error).
fn explain_hint(diags: &[Diagnostic]) -> String {
    let mut codes: Vec<&str> = diags
        .iter()
        .filter(|d| d.is_error() && choreo_compiler::explain::lookup(d.code).is_some())
        .map(|d| d.code)
        .collect();
    codes.sort_unstable();
    codes.dedup();
    match codes.as_slice() {
        [] => String::new(),
        [code] => format!("For more information about this error, try 'choreoc explain {code}'.\n"),
        [first, ..] => format!(
            "Some errors have detailed explanations: {}.\nFor more information about an error, \
             try 'choreoc explain {first}'.\n",
            codes.join(", ")
        ),
    }
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

/// Reads the one file of a code-generation command and compiles it; reports its diagnostics.
/// `Err(status)` when it cannot be read or has errors.
/// The compile options of the command line (`-D`, the checks) for `target` in `mode`; the
/// wrappers call the entries of `target` only.
pub(crate) fn compile_options(
    options: &Options,
    target: Target,
    mode: OutputMode,
) -> CompileOptions {
    CompileOptions {
        defines: options.defines.clone(),
        target,
        mode,
        runtime_checks: options.runtime_checks,
        cuda_wrappers: target != Target::Cpu,
        cpu_wrappers: target == Target::Cpu,
        symbol_scope: None,
        bounds_checks: options.bounds_checks,
    }
}

/// Library mode, or standalone with `--standalone`.
pub(crate) fn output_mode(options: &Options) -> OutputMode {
    if options.standalone { OutputMode::Standalone } else { OutputMode::Library }
}

pub(crate) fn translate(options: &Options, opts: &CompileOptions) -> Result<Compilation, Status> {
    let mut db = SourceDb::new();
    let Some(file) = options.files.first().and_then(|path| load(&mut db, path)) else {
        return Err(Status::Usage);
    };
    let compilation = compile(&db, file, opts);
    match report(options, &db, file, &compilation.diagnostics) {
        Status::Ok => Ok(compilation),
        status => Err(status),
    }
}

/// Writes `text` to `-o`'s file, or to stdout without one.
pub(crate) fn write_output(options: &Options, text: &str) -> Status {
    match &options.output {
        Some(path) => match std::fs::write(path, text) {
            Ok(()) => Status::Ok,
            Err(e) => {
                eprintln!("error: cannot write '{}': {e}", path.display());
                Status::Usage
            }
        },
        None => {
            print_stdout(text);
            Status::Ok
        }
    }
}
