//! The host functions of a `__co__` function: the entry checks, the core (the body on device
//! pointers), the C++ wrapper with the upstream signature, and the `extern "C"` entry.

use super::types::cpp_elem;
use super::writer::{c_escape, comment_text};
use super::{Dialect, FnEmitter, Region};
use crate::hir::{self, Dim, ElemTy, ParamId, ParamKind, ReturnTy};
use crate::lower::{AbiParam, AfterLaunch};
use crate::source::Span;

impl FnEmitter<'_, '_> {
    /// Parameter declarations of the check function: extents of spanned parameters, scalars.
    pub(super) fn check_params(&self) -> Vec<String> {
        let mut out = vec!["__choreo_frame& __frame".to_string()];
        for (i, p) in self.f.params.iter().enumerate() {
            let id = ParamId(i as u32);
            match p.kind {
                ParamKind::HostIn | ParamKind::HostInOut | ParamKind::Global => {
                    for d in 0..p.dims.len() as u32 {
                        out.push(format!("std::uint64_t {}", self.names().extent(id, d)));
                    }
                }
                ParamKind::Scalar(t) => {
                    out.push(format!("{} {}", cpp_elem(t), self.param_name(id)))
                }
                ParamKind::Stream => {}
            }
        }
        out
    }

    /// Binds the symbolic dimensions from the extents (check and core functions).
    pub(super) fn bind_syms(&mut self, span: Span) {
        for (i, s) in self.f.sym_dims.iter().enumerate() {
            let (p, d) = s.bound_from;
            let name = self.names().sym(hir::SymId(i as u32)).to_string();
            let extent = self.names().extent(p, d);
            self.w.line(span, &format!("[[maybe_unused]] const std::uint64_t {name} = {extent};"));
        }
    }

    pub(super) fn check_function(&mut self) {
        self.w.resync();
        let f = self.f;
        let span = f.span;
        let params = self.check_params();
        let symbol = self.plan.symbols.check.clone();
        self.w.line(span, &format!("static int {symbol}({}) {{", params.join(", ")));
        self.w.indent += 1;
        self.bind_syms(span);
        if self.options.runtime_checks {
            for c in &f.entry_checks {
                self.check(c);
            }
        }
        self.w.line(span, "goto __choreo_exit;");
        self.exit_label(span);
    }

    /// The end of a check or core function: every path leaves through `__choreo_exit`, which
    /// returns the frame's status (the guards of the function's buffers run on the way).
    fn exit_label(&mut self, span: Span) {
        self.w.indent -= 1;
        self.w.line(span, "__choreo_exit:");
        self.w.indent += 1;
        self.w.line(span, "return __frame.status();");
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    pub(super) fn ret_pointer_type(&self) -> Option<String> {
        match &self.f.ret {
            ReturnTy::Void => None,
            ReturnTy::Scalar(t) | ReturnTy::Spanned { elem: t, .. } => {
                Some(format!("{}*", cpp_elem(*t)))
            }
        }
    }

    pub(super) fn core_params(&self) -> Vec<String> {
        let mut out = vec!["__choreo_frame& __frame".to_string()];
        for (i, p) in self.f.params.iter().enumerate() {
            let id = ParamId(i as u32);
            let name = self.param_name(id);
            match (p.kind, p.elem) {
                (ParamKind::HostIn | ParamKind::HostInOut | ParamKind::Global, Some(t)) => {
                    out.push(format!("{}* {name}", cpp_elem(t)));
                    for d in 0..p.dims.len() as u32 {
                        out.push(format!("std::uint64_t {}", self.names().extent(id, d)));
                    }
                }
                (ParamKind::Scalar(t), _) => out.push(format!("{} {name}", cpp_elem(t))),
                (ParamKind::Stream, _) => out.push(format!("cudaStream_t {name}")),
                _ => out.push(format!("void* {name}")),
            }
        }
        if let Some(t) = self.ret_pointer_type() {
            out.push(format!("{t} __choreo_ret"));
        }
        if self.plan.guards {
            out.push("__choreo_bounds_record* __choreo_bounds".to_string());
            out.push("unsigned char* __choreo_bounds_used".to_string());
        }
        if !self.plan.memory.returned_params.is_empty() {
            out.push("int* __choreo_returned_param".to_string());
        }
        out
    }

    pub(super) fn core_function(&mut self) {
        self.w.resync();
        let f = self.f;
        let span = f.span;
        let params = self.core_params();
        let symbol = self.plan.symbols.core.clone();
        self.w.line(span, &format!("static int {symbol}({}) {{", params.join(", ")));
        self.w.indent += 1;
        self.bind_syms(span);
        self.preload_kernels(span);
        if let Some(dims) = self.result_shape() {
            let count = self.count_u64(&dims);
            self.w.line(span, &format!("const std::uint64_t __choreo_ret_count = {count};"));
        }
        self.w.line(span, "{");
        self.w.indent += 1;
        self.stmts(&f.body, Region::Host);
        self.w.line(span, "goto __choreo_exit;");
        self.w.indent -= 1;
        self.w.line(span, "}");
        self.exit_label(span);
    }

    /// Loads every kernel of a function that leaves asynchronous work running before its
    /// first launch. With CUDA's lazy module loading (the default since CUDA 12), the first
    /// launch of a kernel loads it, and loading waits for work already running on the device:
    /// the second `.async` kernel of a call would wait for the first one instead of overlapping
    /// with it on its own stream. Querying a kernel's attributes loads it without launching.
    pub(super) fn preload_kernels(&mut self, span: Span) {
        let kernels = &self.plan.kernels;
        if kernels.len() < 2 || !kernels.iter().any(|k| k.after == AfterLaunch::Track) {
            return;
        }
        let names = self.plan.symbols.kernels.clone();
        self.w.line(
            span,
            "{  // load the kernels before the first launch (lazy loading would serialise them)",
        );
        self.w.indent += 1;
        self.w.line(span, "cudaFuncAttributes __choreo_attributes;");
        for name in names {
            self.w.line(
                span,
                &format!("__CHOREO_TRY(cudaFuncGetAttributes(&__choreo_attributes, {name}));"),
            );
        }
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    pub(super) fn cpp_return_type(&mut self) -> String {
        match self.f.ret.clone() {
            ReturnTy::Void => "void".to_string(),
            ReturnTy::Scalar(t) => cpp_elem(t).to_string(),
            ReturnTy::Spanned { elem, dims } => {
                format!("choreo::spanned_data<{}, {}>", cpp_elem(elem), dims.len())
            }
        }
    }

    pub(super) fn cpp_wrapper(&mut self) {
        self.w.resync();
        let f = self.f;
        let span = f.span;
        let device = self.plan.memory.device_data;
        let mut params = Vec::new();
        for (i, p) in f.params.iter().enumerate() {
            let name = self.param_name(ParamId(i as u32));
            params.push(match (p.kind, p.elem) {
                (ParamKind::Scalar(t), _) => format!("{} {name}", cpp_elem(t)),
                (ParamKind::Stream, _) => format!("choreo::stream_t {name}"),
                (_, Some(t)) => {
                    format!("const choreo::spanned_view<{}, {}>& {name}", cpp_elem(t), p.dims.len())
                }
                (_, None) => format!("void* {name}"),
            });
        }
        let ret = self.cpp_return_type();
        self.w.line(
            span,
            &format!("// C++ wrapper (upstream signature): {}", comment_text(&f.co_signature)),
        );
        let wrapper = self.plan.symbols.wrapper.clone();
        // Internal linkage: C++ code of the same file calls it; two files may both define one.
        self.w.line(
            span,
            &format!("[[maybe_unused]] static {ret} {wrapper}({}) {{", params.join(", ")),
        );
        self.w.indent += 1;
        if device {
            self.w.line(span, "#if defined(__CHOREO_ENABLE_CUDA_RUNTIME_ENV_CHECK__)");
            self.w.line(span, "choreo::__choreo_check_cuda_environment__();");
            self.w.line(span, "#endif");
        }
        self.w.line(span, "char __choreo_message[1024] = {};");
        self.w.line(
            span,
            &format!(
                "__choreo_frame __frame({}, __choreo_message, sizeof __choreo_message);",
                if device { "true" } else { "false" }
            ),
        );
        // Entry checks.
        let mut check_args = vec!["__frame".to_string()];
        let mut core_args = vec!["__frame".to_string()];
        for (i, p) in f.params.iter().enumerate() {
            let id = ParamId(i as u32);
            let name = self.param_name(id);
            match p.kind {
                ParamKind::HostIn | ParamKind::HostInOut | ParamKind::Global => {
                    let elem = cpp_elem(p.elem.unwrap_or(ElemTy::U8));
                    let pointer = if !device || p.kind == ParamKind::Global {
                        format!("{name}.data()")
                    } else if self.plan.memory.uploads.contains(&id) {
                        format!("static_cast<{elem}*>({name}__mem.ptr)")
                    } else {
                        // The function does not use the data: no device copy.
                        "nullptr".to_string()
                    };
                    core_args.push(pointer);
                    for d in 0..p.dims.len() {
                        check_args.push(format!("{name}.shape()[{d}]"));
                        core_args.push(format!("{name}.shape()[{d}]"));
                    }
                }
                ParamKind::Scalar(_) => {
                    check_args.push(name.clone());
                    core_args.push(name);
                }
                ParamKind::Stream => core_args.push(name),
            }
        }
        self.w.line(
            span,
            &format!(
                "::__choreo_abort_on_failure(__frame, {}({}));",
                self.plan.symbols.check,
                check_args.join(", ")
            ),
        );
        // The host side of the return value.
        let mut result_pointer = None;
        match f.ret.clone() {
            ReturnTy::Void => {}
            ReturnTy::Scalar(t) => {
                self.w.line(span, &format!("{} __choreo_result{{}};", cpp_elem(t)));
                result_pointer = Some("&__choreo_result".to_string());
            }
            ReturnTy::Spanned { elem, .. } => {
                let dims = self.result_shape().unwrap_or_default();
                // The return shape may use every extent and symbol of the parameters: bind them
                // like the core does (symbols from their first mention, like upstream).
                for (i, p) in f.params.iter().enumerate() {
                    if !p.is_spanned() {
                        continue;
                    }
                    let id = ParamId(i as u32);
                    let pname = self.param_name(id);
                    for d in 0..p.dims.len() as u32 {
                        let extent = self.names().extent(id, d);
                        self.w.line(
                            span,
                            &format!(
                                "[[maybe_unused]] const std::uint64_t {extent} = {pname}.shape()[{d}];"
                            ),
                        );
                    }
                }
                self.bind_syms(span);
                let shape: Vec<String> = dims
                    .iter()
                    .map(|d| match d {
                        Dim::Const(c) => c.to_string(),
                        _ => {
                            let v = self.dim_u64(d);
                            format!("static_cast<std::size_t>({v})")
                        }
                    })
                    .collect();
                let elem_text = cpp_elem(elem);
                self.w.line(
                    span,
                    &format!(
                        "auto __choreo_result = choreo::make_spandata<{elem_text}, {}>({{{}}});",
                        dims.len(),
                        shape.join(", ")
                    ),
                );
                result_pointer = Some(if device {
                    format!("static_cast<{elem_text}*>(__choreo_result__mem.ptr)")
                } else {
                    "__choreo_result.data()".to_string()
                });
            }
        }
        // Device memory lives in this block: its guards free it at the closing brace, and a
        // failed free is reported after it.
        self.w.line(span, "{");
        self.w.indent += 1;
        // Device copies of host parameters (spec §7.4 step 4).
        if device {
            for p in self.plan.memory.uploads.clone() {
                let name = self.param_name(p);
                self.w.line(span, &format!("__choreo_buffer {name}__mem(__frame);"));
                self.w.line(
                    span,
                    &format!(
                        "choreo::abend_true(__frame.alloc(&{name}__mem.ptr, {name}.bytes()));"
                    ),
                );
                self.w.line(
                    span,
                    &format!(
                        "choreo::abend_true(__frame.to_device({name}__mem.ptr, {name}.data(), {name}.bytes()));"
                    ),
                );
            }
            if matches!(f.ret, ReturnTy::Spanned { .. }) {
                self.w.line(span, "__choreo_buffer __choreo_result__mem(__frame);");
                self.w.line(
                    span,
                    "choreo::abend_true(__frame.alloc(&__choreo_result__mem.ptr, __choreo_result.bytes()));",
                );
            }
        }
        if let Some(pointer) = result_pointer {
            core_args.push(pointer);
        }
        if self.plan.guards {
            // The kernels note the first access that fails its bounds check here.
            self.w.line(span, "__choreo_buffer __choreo_bounds__mem(__frame);");
            self.w.line(
                span,
                "choreo::abend_true(::__choreo_bounds_alloc(__frame, &__choreo_bounds__mem.ptr));",
            );
            core_args
                .push("static_cast<__choreo_bounds_record*>(__choreo_bounds__mem.ptr)".to_string());
            self.w.line(span, "unsigned char __choreo_bounds_used = 0;");
            core_args.push("&__choreo_bounds_used".to_string());
        }
        if !self.plan.memory.returned_params.is_empty() {
            self.w.line(span, "int __choreo_returned_param = -1;");
            core_args.push("&__choreo_returned_param".to_string());
        }
        self.w.line(
            span,
            &format!(
                "::__choreo_abort_on_failure(__frame, {}({}));",
                self.plan.symbols.core,
                core_args.join(", ")
            ),
        );
        if device {
            // Every launch of a function with `&` parameters has finished here (the seed rules
            // synchronise them), so the copy-back sees the final data.
            let returns_data = matches!(f.ret, ReturnTy::Spanned { .. })
                || !self.plan.memory.returned_params.is_empty();
            if self.plan.leaves_async_work && returns_data {
                self.w.line(span, "choreo::abend_true(__frame.wait_async());");
            }
            for p in self.plan.memory.copy_back.clone() {
                let name = self.param_name(p);
                self.w.line(
                    span,
                    &format!(
                        "choreo::abend_true(__frame.to_host({name}.data(), {name}__mem.ptr, {name}.bytes()));"
                    ),
                );
            }
            for p in self.plan.memory.returned_params.clone() {
                if self.f.param(p).map(|p| p.kind) != Some(ParamKind::HostIn) {
                    continue;
                }
                let name = self.param_name(p);
                self.w.line(
                    span,
                    &format!(
                        "if (__choreo_returned_param == {}) choreo::abend_true(__frame.to_host({name}.data(), {name}__mem.ptr, {name}.bytes()));",
                        p.0
                    ),
                );
            }
            if matches!(f.ret, ReturnTy::Spanned { .. }) {
                self.w.line(
                    span,
                    "choreo::abend_true(__frame.to_host(__choreo_result.data(), __choreo_result__mem.ptr, __choreo_result.bytes()));",
                );
            }
            // Asynchronous work may still run: the C++ API does not wait for it, so only a
            // function without it reports a failed bounds check (the access was skipped either
            // way).
            if self.plan.guards && !self.plan.leaves_async_work {
                let sites = self.bounds_sites();
                self.w.line(
                    span,
                    &format!("static const char* const __choreo_sites[] = {{{sites}}};"),
                );
                self.w.line(
                    span,
                    "if (__choreo_bounds_used) ::__choreo_bounds_check(__frame, __choreo_bounds__mem.ptr, __choreo_sites, sizeof __choreo_sites / sizeof *__choreo_sites);",
                );
            }
        }
        self.w.indent -= 1;
        self.w.line(span, "}");
        self.w.line(span, "::__choreo_abort_on_failure(__frame, __frame.status());");
        if !matches!(f.ret, ReturnTy::Void) {
            self.w.line(span, "return __choreo_result;");
        }
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    /// The accesses of the function as C string literals, by access number: the buffer and the
    /// `.co` location (for the message of a failed bounds check).
    fn bounds_sites(&self) -> String {
        let sites: Vec<String> = self
            .plan
            .accesses
            .iter()
            .map(|a| {
                let name = self.f.buffer_name(a.buffer);
                format!(
                    "\"{}\"",
                    c_escape(&format!("'{name}' at {}", self.db.location(a.span)), true)
                )
            })
            .collect();
        sites.join(", ")
    }

    /// The returned shape as the caller computes it (host locals resolved by lowering).
    pub(super) fn result_shape(&self) -> Option<Vec<Dim>> {
        match &self.plan.entry.result_shape {
            Some(Ok(dims)) => Some(dims.clone()),
            Some(Err(_)) | None => None,
        }
    }

    /// The `extern "C"` entry ([`crate::lower::abi`]): the check and core functions on the
    /// caller's device pointers, status codes instead of aborts.
    pub(super) fn rs_entry(&mut self) {
        self.w.resync();
        let f = self.f;
        let span = f.span;
        let entry = self.plan.entry.clone();
        let mut params = Vec::new();
        let mut check_args = vec!["__frame".to_string()];
        let mut core_args = vec!["__frame".to_string()];
        let mut bits_result = None;
        for p in &entry.params {
            match *p {
                AbiParam::Data { param, elem, .. } => {
                    let name = self.param_name(param);
                    params.push(format!("{}* {name}", cpp_elem(elem)));
                    core_args.push(name);
                }
                AbiParam::Extent { param, dim } => {
                    let e = self.names().extent(param, dim);
                    params.push(format!("std::uint64_t {e}"));
                    check_args.push(e.clone());
                    core_args.push(e);
                }
                AbiParam::Scalar { param, ty } => {
                    let name = self.param_name(param);
                    if AbiParam::as_bits(ty) {
                        params.push(format!("std::uint16_t {name}"));
                        let value = format!("::{}({name})", from_bits(ty));
                        check_args.push(value.clone());
                        core_args.push(value);
                    } else {
                        params.push(format!("{} {name}", cpp_elem(ty)));
                        check_args.push(name.clone());
                        core_args.push(name);
                    }
                }
                AbiParam::Stream { param } => {
                    let name = self.param_name(param);
                    params.push(format!("cudaStream_t {name}"));
                    core_args.push(name);
                }
                AbiParam::ResultData { elem } => {
                    params.push(format!("{}* __choreo_ret", cpp_elem(elem)));
                    core_args.push("__choreo_ret".to_string());
                }
                AbiParam::ResultScalar { ty } if AbiParam::as_bits(ty) => {
                    params.push("std::uint16_t* __choreo_ret".to_string());
                    bits_result = Some(ty);
                    core_args.push("&__choreo_value".to_string());
                }
                AbiParam::ResultScalar { ty } => {
                    params.push(format!("{}* __choreo_ret", cpp_elem(ty)));
                    core_args.push("__choreo_ret".to_string());
                }
                AbiParam::BoundsRecord => {
                    params.push("__choreo_bounds_record* __choreo_bounds".to_string());
                    core_args.push("__choreo_bounds".to_string());
                }
                AbiParam::BoundsUsed => {
                    params.push("unsigned char* __choreo_bounds_used".to_string());
                    core_args.push("__choreo_bounds_used".to_string());
                }
                AbiParam::Message => params.push("char* __choreo_err".to_string()),
                AbiParam::MessageCapacity => {
                    params.push("std::size_t __choreo_err_cap".to_string())
                }
            }
        }
        if !self.plan.memory.returned_params.is_empty() {
            core_args.push("nullptr".to_string());
        }
        self.w.line(
            span,
            &format!(
                "// Entry for the Rust wrapper (see lower/abi.rs): {}",
                comment_text(&f.co_signature)
            ),
        );
        // On the CPU the entry is the one symbol the object exports: choreo-build compiles CPU
        // objects with `-fvisibility=hidden` and makes every other hidden symbol local, so
        // the host code of a `.co` file, also in the CUDA object, is never defined twice.
        let visibility = match self.options.dialect {
            Dialect::Cuda => "",
            Dialect::Cpu => "__attribute__((visibility(\"default\"))) ",
        };
        self.w.line(
            span,
            &format!("extern \"C\" {visibility}int {}({}) {{", entry.symbol, params.join(", ")),
        );
        self.w.indent += 1;
        self.w.line(span, "try {");
        self.w.indent += 1;
        self.w.line(span, "__choreo_frame __frame(true, __choreo_err, __choreo_err_cap);");
        self.w.line(
            span,
            &format!(
                "if ({}({}) != 0) return __frame.status();",
                self.plan.symbols.check,
                check_args.join(", ")
            ),
        );
        let core = self.plan.symbols.core.clone();
        match bits_result {
            Some(t) => {
                self.w.line(span, &format!("{} __choreo_value{{}};", cpp_elem(t)));
                self.w.line(
                    span,
                    &format!("const int __choreo_status = {core}({});", core_args.join(", ")),
                );
                self.w.line(
                    span,
                    &format!(
                        "if (__choreo_status == 0) *__choreo_ret = ::{}(__choreo_value);",
                        to_bits(t)
                    ),
                );
                self.w.line(span, "return __choreo_status;");
            }
            None => self.w.line(span, &format!("return {core}({});", core_args.join(", "))),
        }
        self.w.indent -= 1;
        self.w.line(span, "} catch (...) {");
        self.w.indent += 1;
        self.w.line(span, "return ::__choreo_internal_failure(__choreo_err, __choreo_err_cap);");
        self.w.indent -= 1;
        self.w.line(span, "}");
        self.w.indent -= 1;
        self.w.line(span, "}");
    }
}

/// The support function that makes an `f16`/`bf16` value from its bits.
fn from_bits(t: ElemTy) -> &'static str {
    if t == ElemTy::Bf16 { "__choreo_bf16_from_bits" } else { "__choreo_f16_from_bits" }
}

/// The support function that gives the bits of an `f16`/`bf16` value.
fn to_bits(t: ElemTy) -> &'static str {
    if t == ElemTy::Bf16 { "__choreo_bf16_bits" } else { "__choreo_f16_bits" }
}
