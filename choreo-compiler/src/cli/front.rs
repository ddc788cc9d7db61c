//! `choreoc check`, `parse` and `lex`: the front end's diagnostics and dumps.

use super::{load, print_stdout, report};
use crate::{IrDump, Options, Status};
use choreo_compiler::compile::{Compilation, CompileOptions, compile};
use choreo_compiler::diagnostics::Diagnostics;
use choreo_compiler::dump::{dump_file, dump_tokens};
use choreo_compiler::frontend::parse_file;
use choreo_compiler::lexer::{IntrinsicNames, lex};
use choreo_compiler::preprocess::{PreprocessOptions, Region, preprocess};
use choreo_compiler::source::SourceDb;

fn preprocess_options(options: &Options) -> PreprocessOptions {
    PreprocessOptions { defines: options.defines.clone() }
}

/// What `check --dump=hir|plan` prints: the checked program or the lowered plan, when the
/// pipeline got that far. (For now their `Debug` form; the one place to swap in readable
/// dumps.)
pub(crate) fn ir_dump(which: IrDump, db: &SourceDb, compilation: &Compilation) -> Option<String> {
    match which {
        IrDump::Hir => compilation.program.as_ref().map(|program| format!("{program:#?}\n")),
        IrDump::Plan => compilation.plan.as_ref().map(|plan| format!("{plan:#?}\n")),
        IrDump::Bounds => match (&compilation.program, &compilation.plan) {
            (Some(program), Some(plan)) => {
                Some(choreo_compiler::lower::bounds::report(db, program, plan))
            }
            _ => None,
        },
    }
}

/// `choreoc check`: every file is checked and reported, even after one fails; with
/// `--dump=`, its dump follows its diagnostics.
pub(crate) fn run_check(options: &Options) -> Status {
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
            status = status.max(report(options, &db, file, diags.as_slice()));
            continue;
        }
        // The whole pipeline (preprocess, parse, sema, lowering): everything that can reject
        // a program is reported, exactly as a build would.
        let compile_options =
            CompileOptions { defines: options.defines.clone(), ..Default::default() };
        let compilation = compile(&db, file, &compile_options);
        status = status.max(report(options, &db, file, &compilation.diagnostics));
        if let Some(text) = options.ir_dump.and_then(|which| ir_dump(which, &db, &compilation)) {
            print_stdout(&text);
        }
    }
    status
}

/// `choreoc parse [--dump]`: the dump is printed even when there are errors (the tree then
/// holds what error recovery kept).
pub(crate) fn run_parse(options: &Options) -> Status {
    let mut db = SourceDb::new();
    let Some(file) = options.files.first().and_then(|path| load(&mut db, path)) else {
        return Status::Usage;
    };
    let mut diags = Diagnostics::new();
    let ast = parse_file(&db, file, &preprocess_options(options), &mut diags);
    if options.dump {
        print_stdout(&dump_file(&db, &ast));
    }
    report(options, &db, file, diags.as_slice())
}

/// `choreoc lex`: the tokens of each `__co__` function in file order, each list ending with
/// its `eof` token.
pub(crate) fn run_lex(options: &Options) -> Status {
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
    report(options, &db, file, diags.as_slice())
}
