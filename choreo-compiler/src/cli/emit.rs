//! `choreoc emit-cu`, `emit-cpp` and `emit-rs`: the outputs of one file.

use super::{compile_options, output_mode, translate, write_output};
use crate::{Options, Status};
use choreo_compiler::compile::{CompileOptions, Target};

/// `choreoc emit-cu`: the `.cu` (library mode unless `--standalone`) on stdout or to `-o`.
pub(crate) fn run_emit_cu(options: &Options) -> Status {
    let target = Target::Cuda(options.arch.unwrap_or_default());
    let opts = compile_options(options, target, output_mode(options));
    match translate(options, &opts) {
        Ok(compilation) => write_output(options, compilation.cu.as_deref().unwrap_or_default()),
        Err(status) => status,
    }
}

/// `choreoc emit-cpp`: the CPU backend's `.cpp` (library mode unless `--standalone`).
pub(crate) fn run_emit_cpp(options: &Options) -> Status {
    let opts = compile_options(options, Target::Cpu, output_mode(options));
    match translate(options, &opts) {
        Ok(compilation) => write_output(options, compilation.cpp.as_deref().unwrap_or_default()),
        Err(status) => status,
    }
}

/// `choreoc emit-rs`: the Rust wrapper module (stubs with `--stub`) on stdout or to `-o`.
pub(crate) fn run_emit_rs(options: &Options) -> Status {
    let opts = CompileOptions {
        defines: options.defines.clone(),
        cuda_wrappers: !options.stub,
        cpu_wrappers: options.cpu_wrappers,
        bounds_checks: options.bounds_checks,
        ..CompileOptions::default()
    };
    match translate(options, &opts) {
        Ok(compilation) => write_output(options, compilation.rs.as_deref().unwrap_or_default()),
        Err(status) => status,
    }
}
