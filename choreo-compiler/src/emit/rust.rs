//! Rust wrapper emission: a checked program → the `.rs` module text of one `.co` file
//! (design §4). `choreo-build` writes the text to `<OUT_DIR>/choreo/<name>/<stem>.rs` and
//! includes it inside `pub mod <stem> { … }`, so it holds only items: no inner attributes or
//! inner doc comments.
//!
//! # What a wrapper looks like
//!
//! One safe `pub fn` per `__co__` function, with the same name, a doc comment quoting the
//! `.co` signature and its location, and a `# Errors` section. Parameters map as in the
//! design's table:
//!
//! | `.co` parameter | Rust parameter |
//! |---|---|
//! | `stream s` | `s: &Stream` |
//! | `global T [d…] x`, only read | `x: &DeviceTensor<T, R>` |
//! | `global T [d…] x`, written | `x: &mut DeviceTensor<T, R>` |
//! | `T [d…] x` | `x: HostView<'_, T, R>` |
//! | `T [d…] &x` | `x: HostViewMut<'_, T, R>` |
//! | scalar `s32`, `f16`, `bool`, … | `i32`, `choreo::f16`, `bool`, … |
//!
//! (all types from the `choreo` crate). A function without `parallel.async` is synchronous
//! and returns `Result<Ret, Error>` once all its device work has finished; a function with
//! `parallel.async` returns `Result<Pending<'a, Ret>, Error>`, where `'a` is the lifetime of
//! every stream, `HostViewMut` and device tensor argument: the guard borrows what the device
//! may still read or write and what its completion writes. `Ret` is `()`, the scalar, or an
//! owned `HostTensor<T, R>` for spanned returns.
//!
//! # The body of a wrapper
//!
//! 1. Shape checks, before anything is allocated or launched: every constant extent and every
//!    repeated symbolic dimension of every spanned argument (symbols bind at their first
//!    mention, left to right), `Error::Shape` on a mismatch. `?`/`??` extents are not checked.
//!    The returned shape is computed from the symbols and extents (derived extents such as
//!    `cdiv(N, 64)` exactly as the C++ code computes them, or an error).
//! 2. Streams: host data is staged on the first `stream` parameter, else on the legacy default
//!    stream. The *work streams* are the streams the function launches on (its bound stream
//!    parameters, and the default stream for unbound launches), plus the staging stream when
//!    the function returns spanned data (the C++ entry copies the returned value there) or
//!    launches nothing.
//! 3. Device copies, owned by the call, of host data the function uses (`from_host` stages them
//!    through pinned memory, so the caller's memory is not used after the wrapper returns), and
//!    the device buffer of a spanned return value.
//! 4. Device pointers through `choreo::kernels::WorkStreams` (`read_ptr` / `write_ptr` per the
//!    compiler's read/write sets), which order every work stream after earlier accesses.
//! 5. The `unsafe` call of the `extern "C"` entry `__choreo_rs_<fn>` (see [`super::cuda`]),
//!    with the device of the staging stream current.
//! 6. Recording the call's accesses on every tensor (even when the entry failed: work may have
//!    been enqueued), then mapping the status: CUDA errors, `Error::RuntimeCheck`.
//! 7. Results. Synchronous: blocking copies of `&` data into the caller's views and of the
//!    returned value into a `HostTensor`. Asynchronous: the copies back are enqueued now into
//!    runtime-owned pinned staging on the first work stream, and the returned `Pending` (bound
//!    to the work streams) copies them into the caller's views when waited for.
//!
//! In stub mode (no kernels compiled) every wrapper has the same signature and returns
//! `Err(Error::NotBuilt)`.
//!
//! A function the wrapper cannot serve is still emitted with its signature, marked
//! `#[deprecated]` with the reason (so a call draws a warning) and returning
//! `Error::InvalidArgument`: a returned shape that depends on values the body computes in ways
//! the wrapper cannot evaluate before the call. Element types without a Rust counterpart are
//! rejected by `lower` before emission; should one arrive, the function is left out with a
//! comment.

use crate::hir::{
    self, BinOp, Dim, ElemTy, Function, HExpr, HExprKind, MathFn, Param, ParamId, ParamKind,
    ReturnTy, SymId, Ty, UnOp,
};
use crate::lower::{AbiParam, FunctionPlan, Plan, StreamRef, SymbolScope};
use crate::source::SourceDb;
use crate::target::Target;
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// Options of [`emit_rust`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RustOptions {
    /// Whether the kernels are compiled for CUDA (the wrappers call the CUDA entry on CUDA
    /// streams).
    pub cuda: bool,
    /// Whether the kernels are compiled for the CPU (the wrappers call the CPU entry on CPU
    /// streams). With neither, the wrappers are stubs: they must not reference any
    /// `extern "C"` entry and return `Err(choreo::Error::NotBuilt)`.
    pub cpu: bool,
    /// The `.co` file as shown in the generated comments (e.g. its path).
    pub module_doc_source: String,
}

/// The Rust module text (items only) of a checked, lowered, error-free program. Deterministic.
pub fn emit_rust(db: &SourceDb, program: &hir::Program, plan: &Plan, opts: &RustOptions) -> String {
    let mut out = String::new();
    let source = doc_text(&opts.module_doc_source);
    let _ = writeln!(
        out,
        "// @generated by choreo-compiler (emit::rust) from `{source}`: safe wrappers of its\n\
         // `__co__` functions. Do not edit. Included inside `pub mod <file stem>` by\n\
         // `choreo::include_kernels!`."
    );
    if !opts.cuda && !opts.cpu {
        out.push_str(
            "// Stub build: the kernels were not compiled (no nvcc), so every function returns\n\
             // `Err(choreo::Error::NotBuilt)`.\n",
        );
    }
    let all = plan;
    for (f, plan) in program.functions().zip(&all.functions) {
        out.push('\n');
        match FnEmitter::new(db, f, plan, &all.scope, opts) {
            Ok(e) => e.emit(&mut out),
            Err(reason) => {
                let _ = writeln!(
                    out,
                    "// `{}` ({}) has no Rust wrapper: {reason}.",
                    f.name,
                    doc_text(&f.location)
                );
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Names and types
// ---------------------------------------------------------------------------------------------

/// Rust keywords that cannot be used as plain identifiers (strict and reserved, 2024 edition).
const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "do", "dyn",
    "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in", "let",
    "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref", "return",
    "static", "struct", "trait", "true", "try", "type", "typeof", "unsafe", "unsized", "use",
    "virtual", "where", "while", "yield",
];

/// A `.co` identifier as a Rust identifier: raw (`r#type`) for keywords, with a trailing `_`
/// for the names that cannot be raw.
fn rust_ident(name: &str) -> String {
    if matches!(name, "self" | "Self" | "super" | "crate" | "_") {
        format!("{name}_")
    } else if KEYWORDS.contains(&name) {
        format!("r#{name}")
    } else {
        name.to_string()
    }
}

/// Text for a doc comment or a code span: no backticks, no line breaks.
fn doc_text(text: &str) -> String {
    text.replace('`', "'").replace(['\n', '\r'], " ")
}

/// The Rust type of an element or scalar type.
fn rust_elem(t: ElemTy) -> Option<&'static str> {
    Some(match t {
        ElemTy::Bool => "bool",
        ElemTy::S8 => "i8",
        ElemTy::S16 => "i16",
        ElemTy::S32 => "i32",
        ElemTy::S64 => "i64",
        ElemTy::U8 => "u8",
        ElemTy::U16 => "u16",
        ElemTy::U32 => "u32",
        ElemTy::U64 => "u64",
        ElemTy::F16 => "::choreo::f16",
        ElemTy::Bf16 => "::choreo::bf16",
        ElemTy::F32 => "f32",
        ElemTy::F64 => "f64",
        ElemTy::F8E4m3 => "::choreo::F8E4M3",
        ElemTy::F8E5m2 => "::choreo::F8E5M2",
        ElemTy::F8Ue4m3 => "::choreo::F8UE4M3",
        ElemTy::F8Ue8m0 => "::choreo::F8UE8M0",
        ElemTy::F6E2m3 => "::choreo::F6E2M3",
        ElemTy::F6E3m2 => "::choreo::F6E3M2",
        ElemTy::F4E2m1 => "::choreo::F4E2M1",
        ElemTy::S6 => "::choreo::S6",
        ElemTy::U6 => "::choreo::U6",
        ElemTy::S4 => "::choreo::S4",
        ElemTy::U4 => "::choreo::U4",
        ElemTy::S2 => "::choreo::S2",
        ElemTy::U2 => "::choreo::U2",
        ElemTy::U1 => "::choreo::U1",
        ElemTy::Bin1 => "::choreo::Bin1",
        ElemTy::Tf32 => return None,
    })
}

/// The Rust type of a scalar at the C ABI. `f16`/`bf16` travel as their bits; the one-byte
/// types as themselves: `F8E4M3`, `F4E2M1`, `S4`, … are `#[repr(transparent)]` over `u8`, and
/// the C ABI passes the C++ `__nv_fp8_e4m3`, `choreo::f4_e2m1`, `choreo::s4`, … (trivially
/// copyable one-byte structs) like a one-byte integer.
fn abi_scalar(t: ElemTy) -> Option<&'static str> {
    match t {
        ElemTy::F16 | ElemTy::Bf16 => Some("u16"),
        _ => rust_elem(t),
    }
}

/// A zero of a scalar type, as Rust source.
fn zero_of(t: ElemTy) -> &'static str {
    match t {
        ElemTy::Bool => "false",
        ElemTy::F32 | ElemTy::F64 => "0.0",
        ElemTy::F8E4m3 => "::choreo::F8E4M3::ZERO",
        ElemTy::F8E5m2 => "::choreo::F8E5M2::ZERO",
        ElemTy::F8Ue4m3 => "::choreo::F8UE4M3::ZERO",
        ElemTy::F8Ue8m0 => "::choreo::F8UE8M0::ZERO",
        ElemTy::F6E2m3 => "::choreo::F6E2M3::ZERO",
        ElemTy::F6E3m2 => "::choreo::F6E3M2::ZERO",
        ElemTy::F4E2m1 => "::choreo::F4E2M1::ZERO",
        ElemTy::S6 => "::choreo::S6::ZERO",
        ElemTy::U6 => "::choreo::U6::ZERO",
        ElemTy::S4 => "::choreo::S4::ZERO",
        ElemTy::U4 => "::choreo::U4::ZERO",
        ElemTy::S2 => "::choreo::S2::ZERO",
        ElemTy::U2 => "::choreo::U2::ZERO",
        ElemTy::U1 => "::choreo::U1::ZERO",
        ElemTy::Bin1 => "::choreo::Bin1::ZERO",
        _ => "0",
    }
}

/// The range constant of `choreo::kernels::extent` for an integer type.
fn int_range(t: ElemTy) -> Option<&'static str> {
    Some(match t {
        ElemTy::S8 => "S8",
        ElemTy::S16 => "S16",
        ElemTy::S32 => "S32",
        ElemTy::S64 => "S64",
        ElemTy::U8 => "U8",
        ElemTy::U16 => "U16",
        ElemTy::U32 => "U32",
        ElemTy::U64 => "U64",
        _ => return None,
    })
}

/// The integer type of an expression's value (bounded integers are `int`).
fn int_type_of(e: &HExpr) -> Option<ElemTy> {
    match &e.ty {
        Ty::BoundedInt => Some(ElemTy::S32),
        Ty::Scalar(t) if t.is_int() => Some(*t),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Per-function analysis
// ---------------------------------------------------------------------------------------------

/// A parameter with everything the emitter decides about it.
struct ParamInfo<'f> {
    p: &'f Param,
    /// Its index.
    id: ParamId,
    /// The Rust identifier of the parameter.
    ident: String,
    /// The plain name, for generated local names (`__choreo_ptr_<tag>`) and messages.
    tag: String,
    /// The Rust element / scalar type.
    elem: &'static str,
    /// Host data: whether the call makes a device copy (the plan's uploads).
    uploaded: bool,
    /// Whether the entry gets a real device pointer for this spanned parameter (the ABI's
    /// `used`; null otherwise).
    has_pointer: bool,
    /// Whether the device may write the data.
    written: bool,
}

impl ParamInfo<'_> {
    fn rank(&self) -> usize {
        self.p.dims.len()
    }

    /// The local that holds the device data (the caller's tensor or the call's copy).
    fn device_data(&self) -> String {
        match self.p.kind {
            ParamKind::Global => self.ident.clone(),
            _ => format!("__choreo_dev_{}", self.tag),
        }
    }
}

/// The `extern "C"` entry of one backend the kernels were compiled for.
struct BackendEntry {
    /// The runtime's name of the backend: the variant of `choreo::Backend`.
    variant: &'static str,
    /// The backend in prose, for comments.
    described: &'static str,
    /// The entry symbol.
    symbol: String,
}

impl BackendEntry {
    fn new(target: Target, symbol: String) -> BackendEntry {
        let (variant, described) = match target {
            Target::Cuda(_) => ("Cuda", "CUDA"),
            Target::Cpu => ("Cpu", "the CPU"),
        };
        BackendEntry { variant, described, symbol }
    }
}

/// Writes one wrapper.
struct FnEmitter<'f> {
    db: &'f SourceDb,
    f: &'f Function,
    plan: &'f FunctionPlan,
    /// The entries of the backends the kernels were compiled for; empty in a stub build.
    entries: Vec<BackendEntry>,
    source: String,
    params: Vec<ParamInfo<'f>>,
    /// The Rust type of the value the function returns (`()` for void).
    ret_rust: String,
    /// For spanned returns: the Rust element type and the dims.
    ret_spanned: Option<(&'static str, &'f [Dim])>,
    /// For scalar returns: the type.
    ret_scalar: Option<ElemTy>,
    /// Why the wrapper cannot serve this function (it is then emitted as failing).
    unsupported: Option<String>,
}

impl<'f> FnEmitter<'f> {
    fn new(
        db: &'f SourceDb,
        f: &'f Function,
        plan: &'f FunctionPlan,
        scope: &SymbolScope,
        opts: &RustOptions,
    ) -> Result<FnEmitter<'f>, String> {
        let mut params = Vec::with_capacity(f.params.len());
        for (index, p) in f.params.iter().enumerate() {
            let elem = match (p.kind, p.elem) {
                (ParamKind::Stream, _) => "",
                (ParamKind::Scalar(t), _) => rust_elem(t).ok_or_else(|| {
                    format!(
                        "parameter `{}` has type `{}`, which Rust has no type for",
                        p.name,
                        t.as_str()
                    )
                })?,
                (_, Some(t)) if t != ElemTy::Bool => rust_elem(t).ok_or_else(|| {
                    format!(
                        "parameter `{}` has element type `{}`, which Rust has no type for",
                        p.name,
                        t.as_str()
                    )
                })?,
                (_, _) => return Err(format!("parameter `{}` has no element type", p.name)),
            };
            let id = ParamId(index as u32);
            let (has_pointer, written) = plan
                .entry
                .params
                .iter()
                .find_map(|a| match *a {
                    AbiParam::Data { param, writable, used, .. } if param == id => {
                        Some((used, writable))
                    }
                    _ => None,
                })
                .unwrap_or((false, false));
            params.push(ParamInfo {
                p,
                id,
                ident: rust_ident(&p.name),
                tag: p.name.clone(),
                elem,
                uploaded: plan.memory.uploads.contains(&id),
                has_pointer,
                written,
            });
        }
        let (ret_rust, ret_spanned, ret_scalar) = match &f.ret {
            ReturnTy::Void => ("()".to_string(), None, None),
            ReturnTy::Scalar(t) => {
                let rust = rust_elem(*t).ok_or_else(|| {
                    format!("its return type `{}` has no Rust counterpart", t.as_str())
                })?;
                (rust.to_string(), None, Some(*t))
            }
            ReturnTy::Spanned { elem, dims } => {
                // The shape the caller computes before the call (host locals resolved).
                let dims = match &plan.entry.result_shape {
                    Some(Ok(resolved)) => resolved,
                    Some(Err(reason)) => return Err(reason.clone()),
                    None => dims,
                };
                let rust = rust_elem(*elem).filter(|_| *elem != ElemTy::Bool).ok_or_else(|| {
                    format!("its return element type `{}` has no Rust counterpart", elem.as_str())
                })?;
                (
                    format!("::choreo::HostTensor<{rust}, {}>", dims.len()),
                    Some((rust, dims.as_slice())),
                    None,
                )
            }
        };
        let mut emitter = FnEmitter {
            db,
            f,
            plan,
            entries: [(opts.cuda, Target::default()), (opts.cpu, Target::Cpu)]
                .into_iter()
                .filter(|(built, _)| *built)
                .map(|(_, target)| BackendEntry::new(target, scope.entry_symbol(&f.name, target)))
                .collect(),
            source: doc_text(&opts.module_doc_source),
            params,
            ret_rust,
            ret_spanned,
            ret_scalar,
            unsupported: None,
        };
        if let Some((_, dims)) = emitter.ret_spanned {
            for (d, dim) in dims.iter().enumerate() {
                if emitter.ret_extent(dim, d).is_none() {
                    emitter.unsupported = Some(format!(
                        "extent {d} of its returned shape depends on values that its body \
                         computes, which the Rust wrapper cannot evaluate before the call"
                    ));
                }
            }
        }
        Ok(emitter)
    }

    fn param(&self, id: ParamId) -> Option<&ParamInfo<'f>> {
        self.params.get(id.index())
    }

    /// The parameter an ABI parameter of the entry belongs to (the entry is built from the
    /// same parameter list, so it exists).
    fn abi_param(&self, id: ParamId) -> &ParamInfo<'f> {
        &self.params[id.index()]
    }

    fn sym_local(&self, s: SymId) -> String {
        let name = self.f.sym(s).map_or("unknown", |s| s.name.as_str());
        format!("__choreo_sym_{name}")
    }

    fn stream_expr(&self, s: StreamRef) -> String {
        match s {
            StreamRef::Param(id) => self.param(id).map_or_else(|| "?".into(), |p| p.ident.clone()),
            StreamRef::Default => "&__choreo_default_stream".to_string(),
        }
    }

    /// Whether the returned `Pending` borrows arguments (`'a`) or not (`'static`).
    fn borrows(&self) -> bool {
        self.params.iter().any(|p| {
            matches!(p.p.kind, ParamKind::Stream | ParamKind::Global | ParamKind::HostInOut)
        })
    }

    fn emit(&self, out: &mut String) {
        self.doc(out);
        self.signature(out);
        let mut body = Body::default();
        if self.entries.is_empty() {
            self.stub_body(&mut body);
        } else if let Some(reason) = &self.unsupported {
            self.unsupported_body(&mut body, reason);
        } else {
            self.body(&mut body);
        }
        out.push_str(&without_unused_symbols(&body.text));
        out.push_str("}\n");
    }

    // -----------------------------------------------------------------------------------------
    // Doc comment and signature
    // -----------------------------------------------------------------------------------------

    fn dims_text(&self, p: &Param) -> String {
        let dims: Vec<String> = p
            .dims
            .iter()
            .enumerate()
            .map(|(d, dim)| match dim {
                Dim::Const(c) => c.to_string(),
                Dim::Sym(s) => self.f.sym(*s).map_or("?".into(), |s| s.name.clone()),
                Dim::Dynamic { .. } if p.unbounded.get(d).copied().unwrap_or(false) => "??".into(),
                Dim::Dynamic { .. } => "?".into(),
                Dim::Expr(_) => "…".into(),
            })
            .collect();
        format!("[{}]", dims.join(", "))
    }

    fn doc(&self, out: &mut String) {
        let f = self.f;
        let mut doc = Vec::new();
        doc.push(format!("Runs the `__co__` function `{}` of `{}`:", f.name, self.source));
        doc.push(String::new());
        doc.push("```text".into());
        doc.push(doc_text(&f.co_signature).replace("```", "'''"));
        doc.push("```".into());
        doc.push(String::new());
        doc.push(format!("Defined at `{}`.", doc_text(&f.location)));
        if !self.params.is_empty() {
            doc.push(String::new());
            doc.push("Arguments:".into());
            for p in &self.params {
                doc.push(format!("- `{}`: {}", p.tag, self.param_doc(p)));
            }
        }
        doc.push(String::new());
        let streams: Vec<String> = self
            .plan
            .streams
            .launches
            .iter()
            .map(|s| match s {
                StreamRef::Param(id) => format!("`{}`", self.param(*id).map_or("?", |p| &p.tag)),
                StreamRef::Default => "the default stream".into(),
            })
            .collect();
        if f.is_async {
            doc.push(format!(
                "Asynchronous (it has `parallel.async` launches): returns once the work is \
                 enqueued (on {}). The returned `choreo::Pending` completes when it is done; \
                 `wait()` or `.await` then delivers the results{}. Dropping or forgetting it \
                 is safe: the device work still completes, only the results are not \
                 delivered.",
                if streams.is_empty() { "no stream".into() } else { streams.join(", ") },
                if self.params.iter().any(|p| p.p.kind == ParamKind::HostInOut) {
                    " and copies `&` data into its views"
                } else {
                    ""
                }
            ));
        } else {
            doc.push(
                "Synchronous: all device work of the call has finished when it returns."
                    .to_string(),
            );
        }
        if self.entries.is_empty() {
            doc.push(String::new());
            doc.push(
                "**Stub build**: the kernels were not compiled (nvcc was not found), so this \
                 always returns `Error::NotBuilt`."
                    .into(),
            );
        }
        if let Some(reason) = &self.unsupported {
            doc.push(String::new());
            doc.push(format!("**Not callable from Rust**: {reason}."));
        }
        doc.push(String::new());
        doc.push("# Errors".into());
        doc.push(String::new());
        doc.push(
            "- `Error::Shape` when an argument's extent differs from the signature (a constant \
             extent, or a repeated symbolic dimension); checked before anything is allocated \
             or launched;"
                .into(),
        );
        doc.push(
            "- `Error::RuntimeCheck` when a runtime check of the generated code fails (e.g. a \
             parallel bound that is not positive), with the check's message;"
                .into(),
        );
        if self.plan.guards {
            doc.push(
                "- `Error::OutOfBounds` when an element access that the compiler could not prove \
                 in bounds fails its run-time check (the access is skipped, no memory outside \
                 the arguments is touched, and no result is delivered);"
                    .into(),
            );
        }
        doc.push(
            "- `Error::Cuda`, `Error::NoDevice`, … when a CUDA call fails, `Error::NotBuilt` in \
             a stub build."
                .into(),
        );
        if self.plan.unchecked {
            doc.push(String::new());
            doc.push("# Safety".into());
            doc.push(String::new());
            doc.push(
                "The kernels were compiled without run-time bounds checks, and some element \
                 accesses are not proven in bounds by the compiler: the caller must make sure \
                 every index the function computes is within its buffer, or the kernels read or \
                 write memory outside the arguments."
                    .into(),
            );
        }
        if self.plan.foreign {
            if !self.plan.unchecked {
                doc.push(String::new());
                doc.push("# Safety".into());
            }
            doc.push(String::new());
            doc.push(
                "The function runs C++ that the compiler cannot check; the caller must make sure \
                 it only touches memory the function is given and is free of data races:"
                    .into(),
            );
            for (span, what) in &self.f.foreign_code {
                doc.push(format!("- {what} at {}", doc_text(&self.db.location(*span))));
            }
        }
        let mut in_code = false;
        for entry in doc {
            if entry.starts_with("```") {
                in_code = !in_code;
            }
            if entry.is_empty() {
                out.push_str("///\n");
            } else if in_code || entry.starts_with("```") {
                let _ = writeln!(out, "/// {entry}");
            } else {
                let (first, rest) = if entry.starts_with("- ") { ("", "  ") } else { ("", "") };
                for (i, line) in wrap(&entry, 92).into_iter().enumerate() {
                    let _ = writeln!(out, "/// {}{line}", if i == 0 { first } else { rest });
                }
            }
        }
    }

    fn param_doc(&self, p: &ParamInfo<'_>) -> String {
        let elem = p.p.elem.map_or("", ElemTy::as_str);
        match p.p.kind {
            ParamKind::Stream => {
                let mut text = format!("the stream `{}`", p.tag);
                if StreamRef::Param(p.id) == self.plan.streams.result {
                    text.push_str(" (host data is staged on it)");
                }
                text
            }
            ParamKind::Scalar(t) => format!("`{}`", t.as_str()),
            ParamKind::HostIn => {
                format!("`{elem} {}` host data, copied to the device", self.dims_text(p.p))
            }
            ParamKind::HostInOut => format!(
                "`{elem} {} &` host data, copied to the device and back once the work is done",
                self.dims_text(p.p)
            ),
            ParamKind::Global => format!(
                "`global {elem} {}` device data, {}",
                self.dims_text(p.p),
                if p.written { "read and written in place" } else { "only read" }
            ),
        }
    }

    fn signature(&self, out: &mut String) {
        let is_async = self.f.is_async;
        let lifetime = if is_async && self.borrows() { Some("'a") } else { None };
        let mut allows = vec!["non_snake_case"];
        if self.params.len() > 7 {
            // The `.co` signature decides the parameters.
            allows.push("clippy::too_many_arguments");
        }
        let _ = writeln!(out, "#[allow({})]", allows.join(", "));
        if let Some(reason) = &self.unsupported {
            let _ =
                writeln!(out, "#[deprecated = {:?}]", format!("not callable from Rust: {reason}"));
        }
        let name = rust_ident(&self.f.name);
        let generics = lifetime.map_or(String::new(), |l| format!("<{l}>"));
        // Unchecked accesses make the call unsound for some arguments: the caller vouches.
        let unsafety = if self.plan.unchecked || self.plan.foreign { "unsafe " } else { "" };
        let _ = writeln!(out, "pub {unsafety}fn {name}{generics}(");
        let borrow = lifetime.map_or("&".to_string(), |l| format!("&{l} "));
        let view_lifetime = lifetime.unwrap_or("'_");
        for p in &self.params {
            let ty = match p.p.kind {
                ParamKind::Stream => format!("{borrow}::choreo::Stream"),
                ParamKind::Scalar(_) => p.elem.to_string(),
                ParamKind::HostIn => format!("::choreo::HostView<'_, {}, {}>", p.elem, p.rank()),
                ParamKind::HostInOut => {
                    format!("::choreo::HostViewMut<{view_lifetime}, {}, {}>", p.elem, p.rank())
                }
                ParamKind::Global if p.written => {
                    format!("{borrow}mut ::choreo::DeviceTensor<{}, {}>", p.elem, p.rank())
                }
                ParamKind::Global => {
                    format!("{borrow}::choreo::DeviceTensor<{}, {}>", p.elem, p.rank())
                }
            };
            let _ = writeln!(out, "    {}: {ty},", p.ident);
        }
        let ret = if is_async {
            format!("::choreo::Pending<{}, {}>", lifetime.unwrap_or("'static"), self.ret_rust)
        } else {
            self.ret_rust.clone()
        };
        let _ = writeln!(out, ") -> Result<{ret}, ::choreo::Error> {{");
    }

    // -----------------------------------------------------------------------------------------
    // Bodies
    // -----------------------------------------------------------------------------------------

    fn ignore_params(&self, b: &mut Body) {
        match self.params.as_slice() {
            [] => {}
            [only] => b.line(&format!("let _ = {};", only.ident)),
            all => {
                let names: Vec<&str> = all.iter().map(|p| p.ident.as_str()).collect();
                b.line(&format!("let _ = ({});", names.join(", ")));
            }
        }
    }

    fn stub_body(&self, b: &mut Body) {
        self.ignore_params(b);
        b.line(&format!("Err(::choreo::Error::NotBuilt {{ function: {:?} }})", self.f.name));
    }

    fn unsupported_body(&self, b: &mut Body, reason: &str) {
        self.ignore_params(b);
        b.line(&format!(
            "Err(::choreo::Error::InvalidArgument({:?}.to_string()))",
            format!("`{}` is not callable from Rust: {reason}", self.f.name)
        ));
    }

    fn body(&self, b: &mut Body) {
        let f = self.f;
        self.extern_decl(b);
        self.shape_checks(b);
        self.streams(b);
        self.device_data(b);
        self.pointers(b);
        self.call(b);
        b.blank();
        b.line("// The call's accesses, recorded even when it failed (work may be enqueued).");
        for p in self.params.iter().filter(|p| p.has_pointer) {
            if p.written {
                b.line(&format!("__choreo_work.record_write({}.buffer_mut());", p.device_data()));
            } else {
                b.line(&format!("__choreo_work.record_read({}.buffer());", p.device_data()));
            }
        }
        if self.ret_spanned.is_some() {
            b.line("__choreo_work.record_write(__choreo_ret.buffer_mut());");
        }
        if self.plan.guards {
            b.line("__choreo_work.record_bounds(&mut __choreo_bounds);");
        }
        b.line(&format!(
            "__choreo_message.result_for(__choreo_work.backend(), __choreo_status, {:?})?;",
            f.name
        ));
        b.line("__choreo_work.recorded()?;");
        b.blank();
        if f.is_async {
            self.async_results(b);
        } else {
            self.sync_results(b);
        }
    }

    fn extern_decl(&self, b: &mut Body) {
        b.line("unsafe extern \"C\" {");
        b.indent += 1;
        for entry in &self.entries {
            b.line(&format!(
                "// The C entry of `{}` in the kernels compiled from the same `.co` file for {}.",
                self.f.name, entry.described
            ));
            self.entry_decl(b, &entry.symbol);
        }
        b.indent -= 1;
        b.line("}");
    }

    /// The declaration of one entry (the same C signature for every backend).
    fn entry_decl(&self, b: &mut Body, entry: &str) {
        b.line(&format!("fn {entry}("));
        b.indent += 1;
        for a in &self.plan.entry.params {
            let line = match *a {
                AbiParam::Data { param, writable, .. } => {
                    let p = self.abi_param(param);
                    let pointer = if writable { "*mut" } else { "*const" };
                    format!("{}: {pointer} {},", p.ident, p.elem)
                }
                AbiParam::Extent { param, dim } => {
                    format!("{}__e{dim}: u64,", self.abi_param(param).tag)
                }
                AbiParam::Scalar { param, ty } => {
                    format!("{}: {},", self.abi_param(param).ident, abi_scalar(ty).unwrap_or("u8"))
                }
                AbiParam::Stream { param } => {
                    format!("{}: ::choreo::sys::cudaStream_t,", self.abi_param(param).ident)
                }
                AbiParam::ResultData { .. } => {
                    format!("__choreo_ret: *mut {},", self.ret_spanned.map_or("u8", |(e, _)| e))
                }
                AbiParam::ResultScalar { ty } => {
                    format!("__choreo_ret: *mut {},", abi_scalar(ty).unwrap_or("u8"))
                }
                AbiParam::BoundsRecord => "__choreo_bounds: *mut u64,".to_string(),
                AbiParam::BoundsUsed => "__choreo_bounds_used: *mut u8,".to_string(),
                AbiParam::Message => "__choreo_err: *mut ::core::ffi::c_char,".to_string(),
                AbiParam::MessageCapacity => "__choreo_err_cap: usize,".to_string(),
            };
            b.line(&line);
        }
        b.indent -= 1;
        b.line(") -> i32;");
    }

    fn shape_checks(&self, b: &mut Body) {
        let spanned: Vec<&ParamInfo<'_>> =
            self.params.iter().filter(|p| p.p.is_spanned()).collect();
        if spanned.is_empty() && self.ret_spanned.is_none() {
            return;
        }
        b.blank();
        b.line("// Shapes, checked before anything is allocated or launched.");
        for p in &spanned {
            b.line(&format!("let __choreo_shape_{} = {}.shape();", p.tag, p.ident));
        }
        let mut bound = BTreeSet::new();
        for p in &spanned {
            for (d, dim) in p.p.dims.iter().enumerate() {
                let got = format!("__choreo_shape_{}[{d}]", p.tag);
                match dim {
                    Dim::Const(c) => b.line(&format!(
                        "::choreo::kernels::check_extent({:?}, {d}, {c}, {got})?;",
                        p.tag
                    )),
                    Dim::Sym(s) => {
                        let local = self.sym_local(*s);
                        if bound.insert(*s) {
                            b.line(&format!("let {local} = {got};"));
                        } else {
                            b.line(&format!(
                                "::choreo::kernels::check_extent({:?}, {d}, {local}, {got})?;",
                                p.tag
                            ));
                        }
                    }
                    Dim::Dynamic { .. } | Dim::Expr(_) => {}
                }
            }
        }
        if self.unsupported.is_some() {
            return;
        }
        if let Some((_, dims)) = self.ret_spanned {
            let extents: Vec<String> = dims
                .iter()
                .enumerate()
                .map(|(d, dim)| self.ret_extent(dim, d).unwrap_or_default())
                .collect();
            if dims.iter().any(|d| matches!(d, Dim::Expr(_))) {
                b.line("use ::choreo::kernels::extent as __choreo_extent;");
            }
            b.line(&format!(
                "let __choreo_ret_shape: [usize; {}] = [{}];",
                dims.len(),
                extents.join(", ")
            ));
        }
    }

    fn streams(&self, b: &mut Body) {
        let work = &self.plan.streams.work;
        let staging = self.plan.streams.result;
        b.blank();
        b.line(
            "// Streams: host data is staged on the first stream parameter (else the default \
             stream);",
        );
        b.line("// the work streams are those the function's device work runs on.");
        if staging == StreamRef::Default || work.contains(&StreamRef::Default) {
            b.line("let __choreo_default_stream = ::choreo::Stream::default_stream();");
        }
        b.line(&format!(
            "let __choreo_staging: &::choreo::Stream = {};",
            self.stream_expr(staging)
        ));
        let list: Vec<String> = work.iter().map(|s| self.stream_expr(*s)).collect();
        let backends: Vec<String> = self
            .entries
            .iter()
            .map(|entry| format!("::choreo::Backend::{}", entry.variant))
            .collect();
        b.line(&format!(
            "let mut __choreo_work = ::choreo::kernels::WorkStreams::for_backends(&[{}], &[{}])?;",
            backends.join(", "),
            list.join(", ")
        ));
    }

    fn device_data(&self, b: &mut Body) {
        if self.plan.guards {
            b.blank();
            b.line(
                "// The accesses checked at run time, by number, and the record where the \
                 kernels note",
            );
            b.line(
                "// the first one that fails (it is skipped, and the call fails): mapped pinned \
                 host memory,",
            );
            b.line("// zeroed by the host, read by it once the call's work has completed.");
            let sites: Vec<String> = self
                .plan
                .accesses
                .iter()
                .map(|a| {
                    let name = self.f.buffer_name(a.buffer);
                    format!(
                        "::choreo::kernels::BoundsSite {{ param: {name:?}, location: {:?} }}",
                        doc_text(&self.db.location(a.span))
                    )
                })
                .collect();
            b.line(&format!(
                "static __CHOREO_SITES: [::choreo::kernels::BoundsSite; {}] = [",
                sites.len()
            ));
            b.indent += 1;
            for site in sites {
                b.line(&format!("{site},"));
            }
            b.indent -= 1;
            b.line("];");
            b.line(&format!(
                "let mut __choreo_bounds = ::choreo::kernels::BoundsRecord::new(&__choreo_work, {:?}, &__CHOREO_SITES)?;",
                self.f.name
            ));
        }
        let uploads: Vec<&ParamInfo<'_>> = self.params.iter().filter(|p| p.uploaded).collect();
        if uploads.is_empty() && self.ret_spanned.is_none() {
            return;
        }
        b.blank();
        b.line("// Device data owned by the call: copies of host data, the returned value.");
        for p in uploads {
            let view = match p.p.kind {
                ParamKind::HostInOut => format!("{}.as_view()", p.ident),
                _ => p.ident.clone(),
            };
            let mutability = if p.written { "mut " } else { "" };
            b.line(&format!(
                "let {mutability}__choreo_dev_{} = ::choreo::DeviceTensor::from_host(__choreo_staging, {view})?;",
                p.tag
            ));
        }
        if let Some((elem, dims)) = self.ret_spanned {
            b.line(&format!(
                "let mut __choreo_ret = ::choreo::kernels::return_tensor::<{elem}, {}>(__choreo_staging, __choreo_ret_shape)?;",
                dims.len()
            ));
        }
    }

    fn pointers(&self, b: &mut Body) {
        let with_pointer: Vec<&ParamInfo<'_>> =
            self.params.iter().filter(|p| p.has_pointer).collect();
        if with_pointer.is_empty() && self.ret_spanned.is_none() && !self.plan.guards {
            return;
        }
        b.blank();
        b.line(
            "// Device pointers; every work stream is ordered after earlier accesses, and a \
             written",
        );
        b.line("// buffer that overlaps another argument is refused before anything runs.");
        for p in with_pointer {
            let data = p.device_data();
            if p.written {
                b.line(&format!(
                    "let __choreo_ptr_{} = __choreo_work.write_param_ptr({:?}, {data}.buffer_mut())?;",
                    p.tag, p.tag
                ));
            } else {
                b.line(&format!(
                    "let __choreo_ptr_{} = __choreo_work.read_param_ptr({:?}, {data}.buffer())?;",
                    p.tag, p.tag
                ));
            }
        }
        if self.ret_spanned.is_some() {
            b.line(
                "let __choreo_ptr_ret = __choreo_work.write_param_ptr(\"return value\", \
                 __choreo_ret.buffer_mut())?;",
            );
        }
        if self.plan.guards {
            b.line("// The bounds record is the call's alone: nothing to order it after.");
            b.line("let __choreo_ptr_bounds = __choreo_bounds.device_ptr();");
        }
    }

    fn call(&self, b: &mut Body) {
        b.blank();
        // The entry of the backend the call's streams and tensors live on (`WorkStreams`
        // refused any other, and a mix of backends, before anything was allocated).
        let entry = match self.entries.as_slice() {
            [only] => only.symbol.clone(),
            several => {
                let arity = self.plan.entry.params.len();
                let placeholders = vec!["_"; arity].join(", ");
                b.line("let __choreo_entry = match __choreo_work.backend() {");
                b.indent += 1;
                for (i, BackendEntry { variant: backend, symbol, .. }) in several.iter().enumerate()
                {
                    if i == 0 {
                        b.line(&format!(
                            "::choreo::Backend::{backend} => {symbol} as unsafe extern \"C\" fn({placeholders}) -> i32,"
                        ));
                    } else {
                        b.line(&format!("::choreo::Backend::{backend} => {symbol},"));
                    }
                }
                b.indent -= 1;
                b.line("};");
                "__choreo_entry".to_string()
            }
        };
        b.line("let mut __choreo_message = ::choreo::kernels::EntryMessage::new();");
        if let Some(t) = self.ret_scalar {
            b.line(&format!(
                "let mut __choreo_value: {} = {};",
                abi_scalar(t).unwrap_or("u8"),
                zero_of(t)
            ));
        }
        b.line("let __choreo_status = {");
        b.indent += 1;
        // Seals the work streams' lazily recorded points that others still need (before the
        // entry enqueues anything) and makes the call's device current.
        b.line("let _device = __choreo_work.enter()?;");
        let mut safety = format!(
            "SAFETY: `{entry}` is the entry of `{}` in the kernels compiled from the same `.co` \
             file for the backend of the call's streams and tensors, declared above with its C \
             signature. Each pointer is null (data the function \
             does not use) or comes from a live device tensor, owned by this call or borrowed \
             for it, whose own extents are passed next to it, so the entry gets exactly the \
             memory it is told about; data the function only reads is passed `*const`. The \
             streams are live handles. The entry keeps no pointer beyond the device work it \
             enqueues, and that work is recorded on every tensor right after the call, so the \
             memory outlives it even if a tensor is dropped early. The message buffer is \
             writable for the capacity passed",
            self.f.name
        );
        if self.ret_scalar.is_some() {
            safety
                .push_str(", and `__choreo_value` is a writable local of the entry's return type");
        }
        safety.push('.');
        if self.plan.guards {
            safety.push_str(
                " The bounds record's pointer is the device address of mapped pinned host memory \
                 that the record owns, zeroed, and keeps from reuse until the call's work has \
                 completed (the call is recorded on it right after); its used flag is a byte of \
                 the record that the entry writes only during the call.",
            );
        }
        for line in wrap(&safety, 88) {
            b.line(&format!("// {line}"));
        }
        b.line("unsafe {");
        b.indent += 1;
        b.line(&format!("{entry}("));
        b.indent += 1;
        for a in &self.plan.entry.params {
            let line = match *a {
                AbiParam::Data { param, .. } => {
                    let p = self.abi_param(param);
                    if p.has_pointer {
                        format!("__choreo_ptr_{},", p.tag)
                    } else {
                        "::core::ptr::null(),".to_string()
                    }
                }
                AbiParam::Extent { param, dim } => {
                    format!("__choreo_shape_{}[{dim}] as u64,", self.abi_param(param).tag)
                }
                AbiParam::Scalar { param, ty } if AbiParam::as_bits(ty) => {
                    format!("{}.to_bits(),", self.abi_param(param).ident)
                }
                AbiParam::Scalar { param, .. } => format!("{},", self.abi_param(param).ident),
                AbiParam::Stream { param } => format!("{}.as_raw(),", self.abi_param(param).ident),
                AbiParam::ResultData { .. } => "__choreo_ptr_ret,".to_string(),
                AbiParam::ResultScalar { .. } => "&mut __choreo_value,".to_string(),
                AbiParam::BoundsRecord => "__choreo_ptr_bounds,".to_string(),
                AbiParam::BoundsUsed => "__choreo_bounds.used_flag(),".to_string(),
                AbiParam::Message => "__choreo_message.as_mut_ptr(),".to_string(),
                AbiParam::MessageCapacity => "__choreo_message.capacity(),".to_string(),
            };
            b.line(&line);
        }
        b.indent -= 1;
        b.line(")");
        b.indent -= 1;
        b.line("}");
        b.indent -= 1;
        b.line("};");
    }

    /// The returned scalar, as a Rust expression of the wrapper's return type.
    fn scalar_value(&self) -> Option<String> {
        self.ret_scalar.map(|t| match t {
            ElemTy::F16 => "::choreo::f16::from_bits(__choreo_value)".to_string(),
            ElemTy::Bf16 => "::choreo::bf16::from_bits(__choreo_value)".to_string(),
            _ => "__choreo_value".to_string(),
        })
    }

    fn copied_back(&self) -> impl Iterator<Item = &ParamInfo<'f>> {
        self.plan.memory.copy_back.iter().filter_map(|&id| self.param(id))
    }

    fn sync_results(&self, b: &mut Body) {
        if self.plan.guards {
            b.line("// A failed bounds check fails the call before anything is delivered.");
            b.line("__choreo_bounds.check()?;");
        }
        let copies: Vec<&ParamInfo<'_>> = self.copied_back().collect();
        if !copies.is_empty() {
            b.line("// `&` data back into the caller's views (blocking).");
        }
        for p in copies {
            b.line(&format!(
                "__choreo_dev_{}.copy_to_host(__choreo_staging, {})?;",
                p.tag, p.ident
            ));
        }
        if self.ret_spanned.is_some() {
            b.line("__choreo_ret.to_host(__choreo_staging)");
        } else if let Some(value) = self.scalar_value() {
            b.line(&format!("Ok({value})"));
        } else {
            b.line("Ok(())");
        }
    }

    fn async_results(&self, b: &mut Body) {
        b.line("// Complete when the call's work is (the events recorded right after the call);");
        b.line("// copies back go to runtime-owned pinned staging now and into the caller's views");
        b.line("// in `wait()`.");
        if self.plan.guards {
            b.line("// A failed bounds check fails `wait()` (the record is read once the work is done).");
            b.line(
                "let __choreo_pending = __choreo_work.pending(move || __choreo_bounds.check())?;",
            );
        } else {
            b.line("let __choreo_pending = __choreo_work.pending(|| Ok(()))?;");
        }
        for p in self.copied_back() {
            b.line(&format!(
                "let __choreo_pending = ::choreo::kernels::join_unit(__choreo_pending, __choreo_dev_{}.copy_to_host_async(__choreo_work.first(), {})?);",
                p.tag, p.ident
            ));
        }
        if self.ret_spanned.is_some() {
            b.line("Ok(::choreo::kernels::join_value(__choreo_pending, __choreo_ret.to_host_async(__choreo_work.first())?))");
        } else if let Some(value) = self.scalar_value() {
            b.line(&format!("let __choreo_result = {value};"));
            b.line("Ok(__choreo_pending.map(move |()| Ok(__choreo_result)))");
        } else {
            b.line("Ok(__choreo_pending)");
        }
    }

    // -----------------------------------------------------------------------------------------
    // Returned shapes
    // -----------------------------------------------------------------------------------------

    /// Extent `d` of the returned shape as a Rust `usize` expression (it may use `?`).
    fn ret_extent(&self, dim: &Dim, d: usize) -> Option<String> {
        match dim {
            Dim::Const(c) => Some(c.to_string()),
            Dim::Sym(s) => Some(self.sym_local(*s)),
            Dim::Dynamic { param, dim } => {
                let p = self.param(*param).filter(|p| p.p.is_spanned())?;
                Some(format!("__choreo_shape_{}[{dim}]", p.tag))
            }
            Dim::Expr(e) => {
                let value = self.extent_expr(e, 0)?;
                Some(format!("__choreo_extent::finish({:?}, {d}, {value})?", self.f.name))
            }
        }
    }

    /// An integer expression as checked `choreo::kernels::extent` arithmetic (an
    /// `Option<i128>` expression), or `None` when it uses something the wrapper cannot
    /// evaluate before the call.
    fn extent_expr(&self, e: &HExpr, depth: u32) -> Option<String> {
        if depth > 64 {
            return None;
        }
        let ty = int_range(int_type_of(e)?)?;
        let operand = |x: &HExpr| -> Option<String> {
            let text = self.extent_expr(x, depth + 1)?;
            // C++ converts operands to the operation's type first; a conversion that changes
            // the value makes the result differ from the mathematical one, so it must fail.
            if int_range(int_type_of(x)?)? == ty {
                Some(text)
            } else {
                Some(format!("__choreo_extent::cast(__choreo_extent::{ty}, {text})"))
            }
        };
        Some(match &e.kind {
            HExprKind::Int(v) => format!("__choreo_extent::value(__choreo_extent::{ty}, {v}i128)"),
            HExprKind::SymDim(s) => {
                format!("__choreo_extent::value(__choreo_extent::{ty}, {})", self.sym_local(*s))
            }
            HExprKind::ParamExtent { param, dim } => {
                let p = self.param(*param).filter(|p| p.p.is_spanned())?;
                format!(
                    "__choreo_extent::value(__choreo_extent::{ty}, __choreo_shape_{}[{dim}])",
                    p.tag
                )
            }
            HExprKind::Param(id) => {
                let p = self.param(*id)?;
                match p.p.kind {
                    ParamKind::Scalar(t) if t.is_int() => {
                        format!("__choreo_extent::value(__choreo_extent::{ty}, {})", p.ident)
                    }
                    _ => return None,
                }
            }
            HExprKind::Unary { op: UnOp::Neg, operand: x } => {
                format!("__choreo_extent::neg(__choreo_extent::{ty}, {})", operand(x)?)
            }
            HExprKind::Binary { op, lhs, rhs } => {
                let name = match op {
                    BinOp::Add => "add",
                    BinOp::Sub => "sub",
                    BinOp::Mul => "mul",
                    BinOp::Div => "div",
                    BinOp::Rem => "rem",
                    BinOp::Shl => "shl",
                    BinOp::Shr => "shr",
                    _ => return None,
                };
                format!(
                    "__choreo_extent::{name}(__choreo_extent::{ty}, {}, {})",
                    operand(lhs)?,
                    operand(rhs)?
                )
            }
            HExprKind::Cdiv(a, b) => format!(
                "__choreo_extent::cdiv(__choreo_extent::{ty}, {}, {})",
                operand(a)?,
                operand(b)?
            ),
            HExprKind::Cast { to, operand: x, .. } if to.is_int() => {
                let inner = self.extent_expr(x, depth + 1)?;
                format!("__choreo_extent::cast(__choreo_extent::{ty}, {inner})")
            }
            HExprKind::Math { func: func @ (MathFn::Min | MathFn::Max), args }
                if args.len() == 2 =>
            {
                let name = if *func == MathFn::Min { "min" } else { "max" };
                format!(
                    "__choreo_extent::{name}(__choreo_extent::{ty}, {}, {})",
                    operand(&args[0])?,
                    operand(&args[1])?
                )
            }
            _ => return None,
        })
    }
}

/// `body` without the bindings of symbolic dimensions that nothing uses (a symbol mentioned
/// once and not in the returned shape), which would draw `unused_variables` warnings.
fn without_unused_symbols(body: &str) -> String {
    let mut kept = String::with_capacity(body.len());
    for line in body.split_inclusive('\n') {
        let binding = line
            .trim_start()
            .strip_prefix("let ")
            .and_then(|rest| rest.split_once(" = "))
            .map(|(name, _)| name)
            .filter(|name| name.starts_with("__choreo_sym_"));
        if let Some(name) = binding {
            let uses = body
                .match_indices(name)
                .filter(|(at, _)| {
                    // Whole identifiers only (`__choreo_sym_N` is not a use of `__choreo_sym_NB`).
                    !body[at + name.len()..]
                        .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                })
                .count();
            if uses <= 1 {
                continue;
            }
        }
        kept.push_str(line);
    }
    kept
}

/// `text` broken into lines of at most `width` characters (at spaces).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// A function body under construction (indented by one level).
struct Body {
    text: String,
    indent: usize,
}

impl Default for Body {
    fn default() -> Body {
        Body { text: String::new(), indent: 1 }
    }
}

impl Body {
    fn line(&mut self, line: &str) {
        for _ in 0..self.indent {
            self.text.push_str("    ");
        }
        self.text.push_str(line);
        self.text.push('\n');
    }

    /// An empty line (never two in a row, never first).
    fn blank(&mut self) {
        if !self.text.is_empty() && !self.text.ends_with("\n\n") {
            self.text.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_that_are_rust_keywords_are_escaped() {
        assert_eq!(rust_ident("x"), "x");
        assert_eq!(rust_ident("type"), "r#type");
        assert_eq!(rust_ident("match"), "r#match");
        assert_eq!(rust_ident("self"), "self_");
        assert_eq!(rust_ident("Self"), "Self_");
        assert_eq!(rust_ident("crate"), "crate_");
    }

    #[test]
    fn unused_symbol_bindings_are_dropped_and_used_ones_kept() {
        let body = "    let __choreo_sym_N = a[0];\n    let __choreo_sym_NB = b[0];\n    \
                    f(__choreo_sym_NB);\n";
        assert_eq!(
            without_unused_symbols(body),
            "    let __choreo_sym_NB = b[0];\n    f(__choreo_sym_NB);\n"
        );
    }

    #[test]
    fn text_wraps_at_spaces() {
        assert_eq!(wrap("aa bb cc dd", 5), vec!["aa bb", "cc dd"]);
        assert_eq!(wrap("a-very-long-word b", 4), vec!["a-very-long-word", "b"]);
        assert!(wrap("", 10).is_empty());
    }
}
