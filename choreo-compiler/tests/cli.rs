//! Tests of the `choreoc` binary: exit codes, human and JSON diagnostics, `-D`, dumps, usage
//! errors. Each test writes its own files into a fresh temporary directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const VALID: &str = "\
#include <cstdio>
__co__ void scale(f32 [16] a) {
  parallel p by 16 : thread {
    a.at(p) = a.at(p) * 2.0f;
  }
}
int main() { return 0; }
";

/// Lexer error (E0204) at 3:7.
const LEX_ERROR: &str = "\
__co__ void f(s32 [4] a) {
  parallel p by 4 : thread {
    a.at(p) = 99999999999999999999;
  }
}
";

/// A temporary directory removed when the test ends.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("choreoc-cli-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write test file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `choreoc` with `args`; NO_COLOR is cleared so colour decisions rest on stderr not being
/// a terminal.
fn choreoc<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_choreoc"))
        .args(args)
        .env_remove("NO_COLOR")
        .output()
        .expect("run choreoc")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("choreoc exited normally, not by a signal")
}

fn show(out: &Output) -> String {
    format!("status {:?}\n--- stdout\n{}--- stderr\n{}", out.status, stdout(out), stderr(out))
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn check_accepts_a_valid_file() {
    let dir = TempDir::new("valid");
    let file = dir.file("ok.co", VALID);
    let out = choreoc(["check".as_ref(), file.as_os_str()]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(stdout(&out), "", "{}", show(&out));
    assert_eq!(stderr(&out), "", "{}", show(&out));
}

#[test]
fn check_reports_errors_for_humans_with_location_and_summary() {
    let dir = TempDir::new("human");
    let file = dir.file("bad.co", LEX_ERROR);
    let out = choreoc(["check".as_ref(), file.as_os_str()]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    assert_eq!(stdout(&out), "", "human diagnostics go to stderr: {}", show(&out));
    let err = stderr(&out);
    assert!(err.contains("error[E0204]: signed integer literal"), "{err}");
    assert!(err.contains(&format!("{}:3:15", p(&file))), "{err}");
    assert!(
        err.ends_with(&format!(
            "error: 1 error reported in {}\n\
             For more information about this error, try 'choreoc explain E0204'.\n",
            p(&file)
        )),
        "{err}"
    );
    assert!(!err.contains('\x1b'), "no colour when stderr is not a terminal: {err:?}");
}

#[test]
fn check_reports_syntax_errors_and_counts_them() {
    let dir = TempDir::new("syntax");
    let file = dir
        .file("syntax.co", "__co__ void f(s32 [4] a) {\n  a.at(0) = ;\n  s32 x = 1 +;\n  ;\n}\n");
    let out = choreoc(["check".as_ref(), file.as_os_str()]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    let err = stderr(&out);
    assert!(err.contains("error[E03"), "a parser error: {err}");
    assert!(err.contains(&format!("{}:2:", p(&file))), "{err}");
    assert!(err.contains(&format!("{}:3:", p(&file))), "{err}");
    assert!(err.contains(&format!("error: 2 errors reported in {}\n", p(&file))), "{err}");
    assert!(
        err.ends_with("For more information about this error, try 'choreoc explain E0301'.\n"),
        "{err}"
    );
}

#[test]
fn json_diagnostics_are_one_object_per_line_on_stdout() {
    let dir = TempDir::new("json");
    let file = dir.file(
        "bad.co",
        "__co__ void f(s32 [4] a) {\n  a.at(0) = 0x8000000000000000;\n  a.at(1) = 1 @ 2;\n}\n",
    );
    let out = choreoc(["check".as_ref(), "--message-format=json".as_ref(), file.as_os_str()]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    assert_eq!(stderr(&out), "", "no human output in JSON mode: {}", show(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 2, "{text}");
    for line in &lines {
        assert!(line.starts_with('{') && line.ends_with('}'), "one object per line: {line}");
        let file_field = format!("\"file\":{}", json_string(&p(&file)));
        assert!(line.contains(&file_field), "{line}");
        for key in ["\"line\":", "\"column\":", "\"code\":\"E", "\"severity\":", "\"message\":"] {
            assert!(line.contains(key), "{key} in {line}");
        }
    }
    assert!(lines[0].contains("\"code\":\"E0204\""), "{}", lines[0]);
    assert!(lines[0].contains("\"line\":2,\"column\":13"), "{}", lines[0]);
    assert!(lines[1].contains("\"code\":\"E0201\""), "{}", lines[1]);
    assert!(lines[1].contains("\"line\":3,\"column\":15"), "{}", lines[1]);
    // The separate-value form is accepted too.
    let again = choreoc(["check", "--message-format", "json", &p(&file)]);
    assert_eq!((code(&again), stdout(&again)), (1, text));
}

/// JSON string quoting of a path (only `\` and `"` can occur in temp paths).
fn json_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

#[test]
fn warnings_alone_exit_zero() {
    let dir = TempDir::new("warning");
    // An unknown pragma inside a __co__ function is ignored with warning W0102.
    let file = dir.file(
        "warn.co",
        "__co__ void f(s32 [4] a) {\n#pragma unroll\n  parallel p by 4 : thread { a.at(p) = 1; }\n}\n",
    );
    let out = choreoc(["check".as_ref(), file.as_os_str()]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let err = stderr(&out);
    assert!(err.contains("warning[W0102]"), "{err}");
    assert!(err.contains(&format!("warning: 1 warning reported in {}", p(&file))), "{err}");
}

#[test]
fn unreadable_files_are_io_errors_naming_the_path() {
    let dir = TempDir::new("io");
    let missing = dir.0.join("missing.co");
    let out = choreoc(["check".as_ref(), missing.as_os_str()]);
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(stderr(&out).contains(&format!("cannot read '{}'", p(&missing))), "{}", show(&out));

    // A directory and a non-UTF-8 file are also read errors.
    let out = choreoc(["check".as_ref(), dir.0.as_os_str()]);
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(stderr(&out).contains(&p(&dir.0)), "{}", show(&out));
    let latin1 = dir.0.join("latin1.co");
    std::fs::write(&latin1, b"// caf\xe9\n").expect("write");
    let out = choreoc(["check".as_ref(), latin1.as_os_str()]);
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(stderr(&out).contains("not valid UTF-8"), "{}", show(&out));

    // The other files are still checked; the worst status wins.
    let bad = dir.file("bad.co", LEX_ERROR);
    let out = choreoc(["check".as_ref(), missing.as_os_str(), bad.as_os_str()]);
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(stderr(&out).contains("E0204"), "{}", show(&out));
}

#[test]
fn several_files_are_checked_and_summarised_separately() {
    let dir = TempDir::new("several");
    let good = dir.file("good.co", VALID);
    let bad = dir.file("bad.co", LEX_ERROR);
    let out = choreoc(["check".as_ref(), good.as_os_str(), bad.as_os_str()]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    let err = stderr(&out);
    assert!(err.contains(&format!("error: 1 error reported in {}", p(&bad))), "{err}");
    assert!(!err.contains(&p(&good)), "{err}");
}

#[test]
fn defines_reach_the_preprocessor() {
    let dir = TempDir::new("defines");
    let file = dir.file(
        "d.co",
        "#if !defined(FAST)\n#error FAST is not defined\n#endif\n\
         #if TILE != 32\n#error TILE must be 32\n#endif\n\
         __co__ void f(s32 [TILE] a) {\n  parallel p by TILE : thread { a.at(p) = 1; }\n}\n",
    );
    let without = choreoc(["check".as_ref(), file.as_os_str()]);
    assert_eq!(code(&without), 1, "{}", show(&without));
    let err = stderr(&without);
    assert!(err.contains("FAST is not defined"), "{err}");
    assert!(err.contains("TILE must be 32"), "{err}");

    let spellings: [&[&str]; 2] = [&["-D", "FAST", "-D", "TILE=32"], &["-DFAST", "-DTILE=32"]];
    for defines in spellings {
        let mut args = vec!["check"];
        args.extend_from_slice(defines);
        let path = p(&file);
        args.push(&path);
        let out = choreoc(&args);
        assert_eq!(code(&out), 0, "{args:?}: {}", show(&out));
    }
    // A wrong value is seen as such.
    let wrong = choreoc(["check", "-DFAST", "-DTILE=16", &p(&file)]);
    assert_eq!(code(&wrong), 1, "{}", show(&wrong));
    assert!(stderr(&wrong).contains("TILE must be 32"), "{}", show(&wrong));
    // The value also reaches macro expansion in tileflow code: the dump shows the extent.
    let dump = choreoc(["parse", "--dump", "-DFAST", "-DTILE=32", &p(&file)]);
    assert_eq!(code(&dump), 0, "{}", show(&dump));
    assert!(stdout(&dump).contains("(int 7:20 32 s32)"), "{}", show(&dump));
}

#[test]
fn parse_dump_prints_the_tree_even_with_errors() {
    let dir = TempDir::new("dump");
    let file = dir.file("ok.co", VALID);
    let out = choreoc(["parse".as_ref(), "--dump".as_ref(), file.as_os_str()]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let dump = stdout(&out);
    assert!(dump.starts_with("(file\n  (host 1:1-2:1 \"#include <cstdio>\\n\")\n"), "{dump}");
    assert!(dump.contains("(co-function 2:1 \"scale\"@2:13"), "{dump}");
    assert!(dump.contains("(parallel 3:3"), "{dump}");
    assert!(dump.contains("thread@3:22"), "{dump}");
    assert!(dump.contains("(float 4:25 2.0 f32)"), "{dump}");
    assert!(dump.contains("(host 6:2-8:1 \"\\nint main() { return 0; }\\n\")"), "{dump}");

    let bad = dir.file("bad.co", LEX_ERROR);
    let out = choreoc(["parse".as_ref(), "--dump".as_ref(), bad.as_os_str()]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    assert!(stdout(&out).starts_with("(file\n"), "{}", show(&out));
    assert!(stderr(&out).contains("E0204"), "{}", show(&out));

    // Without --dump only diagnostics are printed.
    let quiet = choreoc(["parse".as_ref(), file.as_os_str()]);
    assert_eq!((code(&quiet), stdout(&quiet)), (0, String::new()), "{}", show(&quiet));
}

#[test]
fn lex_prints_one_token_per_line() {
    let dir = TempDir::new("lex");
    let file = dir.file("k.co", "// host\n__co__ void k() { x = 1.5f; }\n");
    let out = choreoc(["lex".as_ref(), file.as_os_str()]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(
        stdout(&out),
        "2:1 keyword __co__\n2:8 keyword void\n2:13 ident k\n2:14 punct (\n2:15 punct )\n\
         2:17 punct {\n2:19 ident x\n2:21 punct =\n2:23 float 1.5 f32\n2:27 punct ;\n\
         2:29 punct }\n2:30 eof\n"
    );
    let bad = dir.file("bad.co", LEX_ERROR);
    let out = choreoc(["lex".as_ref(), bad.as_os_str()]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    assert!(stdout(&out).contains("3:15 int 9223372036854775807 s64\n"), "{}", show(&out));
}

#[test]
fn help_and_version() {
    let out = choreoc(["--help"]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let help = stdout(&out);
    assert!(help.contains("Usage: choreoc <COMMAND>"), "{help}");
    for command in ["check", "parse", "lex", "emit-cu", "emit-cpp", "emit-rs", "build", "explain"] {
        assert!(help.contains(&format!("  {command} ")), "{command} in {help}");
    }
    assert!(help.contains("Exit status: 0"), "{help}");
    let out = choreoc(["check", "--help"]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(stdout(&out).contains("--message-format <FORMAT>"), "{}", show(&out));
    assert!(stdout(&out).contains("- json:"), "{}", show(&out));
    assert!(stdout(&out).contains("-D <NAME[=VALUE]>"), "{}", show(&out));
    let out = choreoc(["help", "parse"]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(stdout(&out).contains("--dump"), "{}", show(&out));
    // Every command has a help with its usage line and exit status, as `-h` and `--help`.
    for command in ["check", "parse", "lex", "emit-cu", "emit-cpp", "emit-rs", "build", "explain"] {
        for flag in ["-h", "--help"] {
            let out = choreoc([command, flag]);
            assert_eq!(code(&out), 0, "{}", show(&out));
            let text = stdout(&out);
            assert!(text.contains(&format!("Usage: choreoc {command} ")), "{text}");
            assert!(text.contains("Exit status: 0"), "{text}");
        }
    }

    let out = choreoc(["--version"]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(stdout(&out), format!("choreoc {}\n", env!("CARGO_PKG_VERSION")));
}

/// The messages are clap's (the command-line parser): each names the offending argument; most
/// are followed by the command's usage line, all by the pointer at `--help`.
#[test]
fn usage_errors_exit_two_with_a_message() {
    let dir = TempDir::new("usage");
    let file = dir.file("ok.co", VALID);
    let f = p(&file);
    let cases: &[(&[&str], &str)] = &[
        (&["frobnicate", &f], "unrecognized subcommand 'frobnicate'"),
        (&["--frob"], "unexpected argument '--frob' found"),
        (&["check"], "the following required arguments were not provided:\n  <FILE>..."),
        (&["check", "--frob", &f], "unexpected argument '--frob' found"),
        (&["check", "--dump", &f], "equal sign is needed when assigning values to '--dump=<WHAT>'"),
        (&["check", "--dump=x", &f], "invalid value 'x' for '--dump=<WHAT>'"),
        (&["check", "--dump=x", &f], "[possible values: hir, plan, bounds]"),
        (&["parse", "--dump=plan", &f], "unexpected value 'plan' for '--dump' found"),
        (&["emit-rs", "--arch", "sm_80", &f], "unexpected argument '--arch' found"),
        (&["emit-cu", "--arch", "sm_1", &f], "unknown CUDA architecture 'sm_1'"),
        (&["check", "--message-format=xml", &f], "invalid value 'xml' for '--message-format"),
        (&["check", "--message-format"], "a value is required for '--message-format <FORMAT>'"),
        (&["check", &f, "-D"], "a value is required for '-D <NAME[=VALUE]>'"),
        (&["check", "-D", "=3", &f], "the name is missing"),
        (&["parse", "--dump", &f, &f], "unexpected argument"),
        (&["lex"], "<FILE>"),
        (&["build", &f], "-o <EXE>"),
        (&["explain", "E0401", "E0402"], "unexpected argument 'E0402' found"),
    ];
    for (args, message) in cases {
        let out = choreoc(*args);
        assert_eq!(code(&out), 2, "{args:?}: {}", show(&out));
        assert_eq!(stdout(&out), "", "{args:?}");
        let err = stderr(&out);
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: expected {message:?} in {err}");
        assert!(err.ends_with("For more information, try '--help'.\n"), "{args:?}: {err}");
    }
    // Without a command: the help, on stderr, and exit status 2.
    let out = choreoc(Vec::<&str>::new());
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(stderr(&out).contains("Usage: choreoc <COMMAND>"), "{}", show(&out));
}

#[test]
fn double_dash_ends_options() {
    let dir = TempDir::new("dashdash");
    let file = dir.file("-odd.co", VALID);
    let run_in_dir = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_choreoc"))
            .args(args)
            .current_dir(&dir.0)
            .output()
            .expect("run choreoc")
    };
    assert!(file.exists());
    let out = run_in_dir(&["check", "--", "-odd.co"]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    // Without `--`, a relative name starting with '-' is an option.
    let out = run_in_dir(&["check", "-odd.co"]);
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(stderr(&out).contains("unexpected argument '-o' found"), "{}", show(&out));
}

/// `check` runs semantic analysis: a type error and an unsupported (tier-3) construct are
/// reported; `--syntax-only` stops after parsing and accepts both.
#[test]
fn check_runs_sema_unless_syntax_only() {
    let dir = TempDir::new("sema");
    let type_error = dir.file(
        "type_error.co",
        "__co__ void f(s32 [4] out, int n) {\n  parallel p by 4 : thread {\n    out.at(p) = !n;\n  }\n}\n",
    );
    let tier2 = dir.file(
        "tier2.co",
        "__co__ void g(f32 [4] a) {\n  parallel p by 1 : block {\n    sync.fence : cluster;\n  }\n}\n",
    );
    for (file, code_wanted) in [(&type_error, "E0"), (&tier2, "E0901")] {
        let out = choreoc(["check".as_ref(), file.as_os_str()]);
        assert_eq!(code(&out), 1, "{}", show(&out));
        assert!(stderr(&out).contains(&format!("error[{code_wanted}")), "{}", show(&out));
        let out = choreoc(["check".as_ref(), "--syntax-only".as_ref(), file.as_os_str()]);
        assert_eq!(code(&out), 0, "{}", show(&out));
    }
}

/// `emit-rs` prints the Rust wrapper module: one safe `pub fn` per `__co__` function, calling
/// the kernel's `extern "C"` entry, or — with `--stub` — returning `Err(NotBuilt)`.
#[test]
fn emit_rs_prints_the_wrapper_module() {
    let dir = TempDir::new("emit-rs");
    let file = dir.file("scale.co", VALID);
    let out = choreoc(["emit-rs".as_ref(), file.as_os_str()]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let rs = stdout(&out);
    assert!(rs.contains("pub fn scale"), "{rs}");
    assert!(rs.contains("extern \"C\""), "{rs}");

    let stub = choreoc(["emit-rs".as_ref(), "--stub".as_ref(), file.as_os_str()]);
    assert_eq!(code(&stub), 0, "{}", show(&stub));
    let stub = stdout(&stub);
    assert!(stub.contains("pub fn scale"), "{stub}");
    assert!(stub.contains("Err(::choreo::Error::NotBuilt"), "{stub}");
    assert!(!stub.contains("extern \"C\""), "{stub}");

    // `-o` writes the same text to a file; `-D` reaches the preprocessor.
    let written = dir.0.join("scale.rs");
    let out = choreoc(["emit-rs".as_ref(), file.as_os_str(), "-o".as_ref(), written.as_os_str()]);
    assert_eq!((code(&out), stdout(&out)), (0, String::new()), "{}", show(&out));
    assert_eq!(std::fs::read_to_string(&written).expect("written"), rs);
    let guarded = dir.file("guarded.co", "#ifndef ON\n#error ON is not defined\n#endif\n");
    let out = choreoc(["emit-rs", "-DON", &p(&guarded)]);
    assert_eq!(code(&out), 0, "{}", show(&out));

    // Errors: diagnostics on stderr, nothing on stdout, exit 1.
    let bad = dir.file("bad.co", LEX_ERROR);
    let out = choreoc(["emit-rs".as_ref(), bad.as_os_str()]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    assert_eq!(stdout(&out), "", "{}", show(&out));
    assert!(stderr(&out).contains("E0204"), "{}", show(&out));
}

/// `check --dump=hir` and `--dump=plan` print the checked program and the lowered plan on
/// stdout, after the diagnostics; a file that does not get that far prints no dump.
#[test]
fn check_dumps_the_checked_program_or_the_plan() {
    let dir = TempDir::new("check-dump");
    let file = dir.file("ok.co", VALID);
    let plan = choreoc(["check".as_ref(), "--dump=plan".as_ref(), file.as_os_str()]);
    assert_eq!(code(&plan), 0, "{}", show(&plan));
    assert!(!stdout(&plan).trim().is_empty(), "{}", show(&plan));
    assert!(stdout(&plan).contains("scale"), "{}", show(&plan));
    let hir = choreoc(["check".as_ref(), "--dump=hir".as_ref(), file.as_os_str()]);
    assert_eq!(code(&hir), 0, "{}", show(&hir));
    assert!(stdout(&hir).contains("scale"), "{}", show(&hir));
    assert_ne!(stdout(&hir), stdout(&plan));

    let bad = dir.file("bad.co", LEX_ERROR);
    let out = choreoc(["check".as_ref(), "--dump=plan".as_ref(), bad.as_os_str()]);
    assert_eq!((code(&out), stdout(&out)), (1, String::new()), "{}", show(&out));
    assert!(stderr(&out).contains("E0204"), "{}", show(&out));
}

/// `check --dump=bounds` says which element accesses are proven in bounds and which are
/// checked at run time (with where and which dimension).
#[test]
fn check_dumps_the_bounds_analysis() {
    let dir = TempDir::new("check-bounds");
    let file = dir.file(
        "k.co",
        "__co__ void k(global f32 [N] x, global f32 [?] y) {\n  parallel p by N : block {\n    \
         x.at(p) = y.at(p);\n  }\n}\n",
    );
    let out = choreoc(["check".as_ref(), "--dump=bounds".as_ref(), file.as_os_str()]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("2 element accesses: 1 proven in bounds, 1 checked at run time\n"),
        "{text}"
    );
    assert!(text.contains("k: 'y' at "), "{text}");
    assert!(text.contains("k.co:3:15: checked at run time: dimension 0 (i < extent)"), "{text}");
}

#[test]
fn explain_prints_a_code_lists_all_and_rejects_unknown_ones() {
    let out = choreoc(["explain", "E0609"]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let text = stdout(&out);
    assert!(text.starts_with("E0609: more than 1024 threads per block\n\n"), "{text}");
    assert!(text.contains("Fix:"), "{text}");
    // Codes are found whatever their case.
    let out = choreoc(["explain", "w0403"]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(stdout(&out).starts_with("W0403: "), "{}", show(&out));

    let out = choreoc(["explain"]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let list = stdout(&out);
    assert!(list.contains("\n  E0401  use of an undeclared name\n"), "{list}");
    assert!(list.contains("\n  N0701  "), "{list}");

    let out = choreoc(["explain", "E9999"]);
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(stderr(&out).contains("'E9999' is not a Choreo diagnostic code"), "{}", show(&out));
    assert!(stdout(&out).is_empty());

    // `check` points at `explain` for the codes of the errors it reported.
    let dir = TempDir::new("explain-hint");
    let file = dir.file("two.co", "__co__ void f(s32 [4] &a) {\n  int x;\n  a.at(0) = 1;\n}\n");
    let out = choreoc(["check".as_ref(), file.as_os_str()]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    assert!(
        stderr(&out).ends_with(
            "Some errors have detailed explanations: E0404, E0425.\n\
             For more information about an error, try 'choreoc explain E0404'.\n"
        ),
        "{}",
        show(&out)
    );

    let out = choreoc(["--help"]);
    assert!(stdout(&out).contains("\n  explain   describe a diagnostic code"), "{}", show(&out));
    for args in [&["explain", "--help"][..], &["help", "explain"][..]] {
        let out = choreoc(args);
        assert_eq!(code(&out), 0, "{}", show(&out));
        assert!(stdout(&out).contains("Usage: choreoc explain [CODE]"), "{}", show(&out));
    }
}

/// `choreoc build --target cpu`: a whole program for the CPU, with the host C++ compiler and
/// the CPU runtime — no CUDA needed — that runs and passes its own checks.
#[test]
fn build_for_the_cpu_makes_a_program_that_runs() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-build-cpu");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let exe = dir.join("scale");
    let source =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/01_block_sync_scale.co");
    let out = choreoc([
        "build".as_ref(),
        source.as_os_str(),
        "-o".as_ref(),
        exe.as_os_str(),
        "--target".as_ref(),
        "cpu".as_ref(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&exe).output().expect("the program runs");
    assert!(run.status.success(), "{run:?}");
    assert!(String::from_utf8_lossy(&run.stdout).contains("Test Passed"), "{run:?}");
    let bad = choreoc(["build", "a.co", "-o", "a", "--target", "tpu"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid value 'tpu' for '--target"));
}

/// The rough edges of issue 16 item 6, as a user sees them: a missing `;` is reported right
/// after the previous token (not at the next statement), counts agree in number, a C spelling
/// of a built-in gets the Choreo spelling as a hint, and E0901 reads well for plural
/// constructs; every label has a text.
#[test]
fn diagnostics_read_well() {
    let dir = TempDir::new("rough-edges");
    let check = |name: &str, text: &str| {
        let file = dir.file(name, text);
        let out = choreoc(["check".as_ref(), file.as_os_str()]);
        assert_eq!(code(&out), 1, "{}", show(&out));
        (p(&file), stderr(&out))
    };
    let (file, err) = check(
        "semi.co",
        "__co__ void f(s32 [4] a) {\n  parallel p by 4 : thread {\n    a.at(p) = 1\n    \
         a.at(p) = 2;\n  }\n}\n",
    );
    assert!(err.contains("error[E0301]: syntax error, missing ';'"), "{err}");
    assert!(err.contains(&format!("{file}:3:16")), "right after `1`: {err}");
    assert!(err.contains("^ expected ';' here"), "{err}");

    let (_, err) = check(
        "arity.co",
        "__co__ void g(f32 [4] a) {\n  parallel p by 4 : thread {\n    \
         a.at(p) = __sqrt(a.at(p), 1.0f) + __max(1.0f);\n  }\n}\n",
    );
    assert!(err.contains("'__sqrt' expects 1 argument but got 2"), "{err}");
    assert!(err.contains("'__max' expects 2 arguments but got 1"), "{err}");
    assert!(!err.contains(" 1 arguments"), "{err}");

    let (_, err) = check(
        "fmax.co",
        "__co__ void g(f32 [4] a) {\n  parallel p by 4 : thread {\n    \
         a.at(p) = fmax(a.at(p), 1.0f);\n  }\n}\n",
    );
    assert!(err.contains("'fmax' is not a Choreo built-in"), "{err}");
    assert!(err.contains("= help: Choreo spells it `__max`"), "{err}");

    let (_, err) = check(
        "tier3.co",
        "__co__ void g() {\n  parallel p by 1 : block {\n    sync.fence : cluster;\n  }\n}\n",
    );
    assert!(
        err.contains("error[E0901]: not supported yet (tier 3): `sync.fence : cluster`"),
        "{err}"
    );
    assert!(err.contains("^^^^^ not supported by this compiler yet"), "{err}");
}
