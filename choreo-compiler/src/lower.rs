//! Lowering, tier 1: checked program ([`hir::Program`]) → launch plan ([`Plan`]).
//!
//! The plan holds the decisions that code generation needs and that are not text: the C++
//! identifier of every parameter, symbol and local (unique within a function, never a C++
//! keyword or a name the generated code uses itself), and per kernel its name, the host values
//! it receives (computed here from what the kernel body uses), its stream and what the host does
//! after the launch (device sync, stream sync, or nothing plus tracking of the asynchronous
//! work so that device memory is freed only after it). The emitter ([`crate::emit::cuda`])
//! walks the checked program and this plan side by side.
//!
//! Lowering also rejects what the code generator cannot express, with `E08xx` errors:
//!
//! | code  | meaning |
//! |-------|---------|
//! | E0801 | internal: the checked program has a shape the generator does not expect (a sema bug) |
//! | E0802 | a `__co__` function name that cannot be a C++ function name (keyword, reserved) |
//! | E0803 | two `__co__` functions with the same name in one file |
//! | E0804 | an element type the code generator does not support yet |
//! | E0805 | a parallel level the target architecture does not have (`group-4` needs sm_90a) |

use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::hir::{
    self, BufferRef, Capture, Dim, ElemTy, HExpr, HExprKind, Level, LocalOrigin, LocalPlace,
    ParamId, ParamKind, Place, ReturnTy, Stmt, StmtKind, SymId, Ty, VarId,
};
use crate::source::Span;
use crate::target::Target;
use std::collections::{BTreeSet, HashSet};

/// The launch plan of a file: one [`FunctionPlan`] per [`hir::Item::Function`], in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The functions, in the order of `program.functions()`.
    pub functions: Vec<FunctionPlan>,
}

/// What the generated code of one `__co__` function needs besides the checked function.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionPlan {
    /// The C++ identifiers of the function's entities.
    pub names: Names,
    /// The kernels, indexed by [`hir::ParallelTree::kernel_index`].
    pub kernels: Vec<KernelPlan>,
    /// Whether spanned data lives in device memory when the C++ wrapper runs the function: true
    /// when the function launches kernels (spec §7.4 step 4) or returns a `global` parameter.
    /// Otherwise the C++ wrapper is plain host code and never touches CUDA. (The `extern "C"`
    /// entry always works on device memory.)
    pub device_data: bool,
    /// Whether some launch may still run when the function returns (an `.async` launch that is
    /// not followed by a synchronisation, spec §8.5).
    pub leaves_async_work: bool,
    /// The stream the returned value of a spanned return is copied on: the first `stream`
    /// parameter in parameter order (`None`: the legacy default stream). The Rust wrapper stages
    /// its data on the same stream.
    pub result_stream: Option<ParamId>,
    /// The non-`global` spanned parameters that some `return` returns (the C++ wrapper copies
    /// their device data back into the caller's buffer when it returns them, spec §7.3).
    pub returned_params: Vec<ParamId>,
}

/// C++ identifiers, indexed like the function's tables.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Names {
    /// One per parameter.
    pub params: Vec<String>,
    /// One per symbolic dimension.
    pub syms: Vec<String>,
    /// One per local.
    pub locals: Vec<String>,
}

impl Names {
    /// The identifier of a parameter.
    pub fn param(&self, id: ParamId) -> &str {
        self.params.get(id.index()).map_or("__choreo_bad_param", String::as_str)
    }

    /// The identifier of a symbolic dimension.
    pub fn sym(&self, id: SymId) -> &str {
        self.syms.get(id.index()).map_or("__choreo_bad_sym", String::as_str)
    }

    /// The identifier of a local.
    pub fn local(&self, id: VarId) -> &str {
        self.locals.get(id.index()).map_or("__choreo_bad_local", String::as_str)
    }

    /// The identifier of extent `dim` of spanned parameter `id` (`x__e0`, …).
    pub fn extent(&self, id: ParamId, dim: u32) -> String {
        format!("{}__e{dim}", self.param(id))
    }
}

/// One kernel: a device-entry parallel-by.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelPlan {
    /// `__choreo_device_<fn>` (plus the kernel index when the function has several).
    pub name: String,
    /// The host values the kernel receives, deduplicated, in kernel-parameter order:
    /// parameters (buffers as device pointers, scalars by value) by id, locals (global buffers
    /// as pointers, host scalars by value) by id, symbolic dimensions by id, anonymous extents.
    /// Exactly what its body uses (the only place captures are computed).
    pub captures: Vec<Capture>,
    /// The stream the kernel is launched on (`None`: the default stream).
    pub stream: Option<ParamId>,
    /// What the host does right after the launch.
    pub after: AfterLaunch,
}

/// What follows a launch on the host (spec §8.5 and the seed rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterLaunch {
    /// `cudaDeviceSynchronize()`: a launch without `.async` and without a stream.
    DeviceSync,
    /// `cudaStreamSynchronize(s)`: a launch bound to a stream without `.async`, or an
    /// asynchronous launch in a function with `&` parameters (which must finish before the
    /// copy-back; `None` is the default stream).
    StreamSync(Option<ParamId>),
    /// Nothing: an `.async` launch. The call only records it so that device memory it may use
    /// is freed after it (stream-ordered).
    Track,
}

/// Lowers every function of `program`. Errors go to `diags`; the plan is only meaningful when
/// none was reported.
pub fn lower(program: &hir::Program, target: Target, diags: &mut Diagnostics) -> Plan {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut functions = Vec::new();
    for f in program.functions() {
        if !seen.insert(f.name.as_str()) {
            diags.push(
                Diagnostic::error(
                    "E0803",
                    f.span,
                    format!("a __co__ function named '{}' is already defined in this file", f.name),
                )
                .with_label("second definition")
                .with_help("give each __co__ function of a file its own name"),
            );
        }
        functions.push(lower_function(f, target, diags));
    }
    Plan { functions }
}

fn lower_function(f: &hir::Function, target: Target, diags: &mut Diagnostics) -> FunctionPlan {
    if !is_valid_function_name(&f.name) {
        diags.push(
            Diagnostic::error(
                "E0802",
                f.span,
                format!("'{}' cannot be the name of the generated C++ function", f.name),
            )
            .with_label("C++ keyword or reserved name")
            .with_help("rename the __co__ function"),
        );
    }
    let names = assign_names(f);
    let mut lowerer = Lowerer {
        f,
        target,
        diags,
        kernels: vec![None; f.kernel_count as usize],
        has_inout: f.params.iter().any(|p| p.kind == ParamKind::HostInOut),
        leaves_async_work: false,
        returned_params: BTreeSet::new(),
        returns_global_param: false,
    };
    lowerer.check_types();
    lowerer.host_stmts(&f.body);
    let Lowerer { kernels, leaves_async_work, returned_params, returns_global_param, .. } = lowerer;
    let kernels: Vec<KernelPlan> = kernels
        .into_iter()
        .enumerate()
        .map(|(i, k)| {
            k.unwrap_or_else(|| {
                // A kernel index without a parallel-by: keep the plan well-formed; sema reported
                // nothing, so report it here.
                diags.push(internal(
                    f.span,
                    &format!("kernel {i} of '{}' has no parallel-by", f.name),
                ));
                KernelPlan {
                    name: kernel_name(f, i as u32),
                    captures: Vec::new(),
                    stream: None,
                    after: AfterLaunch::DeviceSync,
                }
            })
        })
        .collect();
    let spanned_return = matches!(f.ret, ReturnTy::Spanned { .. });
    FunctionPlan {
        names,
        kernels,
        device_data: f.has_parallel || returns_global_param,
        leaves_async_work,
        result_stream: if spanned_return {
            f.params.iter().position(|p| p.kind == ParamKind::Stream).map(|i| ParamId(i as u32))
        } else {
            None
        },
        returned_params: returned_params.into_iter().collect(),
    }
}

/// The kernel name of kernel `index` of `f` (runtime-abi §4).
pub fn kernel_name(f: &hir::Function, index: u32) -> String {
    if f.kernel_count > 1 {
        format!("__choreo_device_{}{index}", f.name)
    } else {
        format!("__choreo_device_{}", f.name)
    }
}

fn internal(span: Span, what: &str) -> Diagnostic {
    Diagnostic::error("E0801", span, format!("internal error in code generation: {what}"))
        .with_label("the checked program is not what the code generator expects here")
        .with_note("this is a bug of the Choreo translator; please report it with this file")
}

struct Lowerer<'a, 'd> {
    f: &'a hir::Function,
    target: Target,
    diags: &'d mut Diagnostics,
    kernels: Vec<Option<KernelPlan>>,
    has_inout: bool,
    leaves_async_work: bool,
    returned_params: BTreeSet<ParamId>,
    returns_global_param: bool,
}

impl Lowerer<'_, '_> {
    fn check_types(&mut self) {
        let f = self.f;
        let report = |diags: &mut Diagnostics, t: ElemTy, span: Span| {
            if !t.is_tier1() {
                diags.push(
                    Diagnostic::error(
                        "E0804",
                        span,
                        format!(
                            "element type '{}' is not supported by the code generator yet",
                            t.as_str()
                        ),
                    )
                    .with_label("not supported yet"),
                );
            }
        };
        for p in &f.params {
            if let Some(t) = p.elem {
                report(self.diags, t, p.span);
            }
            if let ParamKind::Scalar(t) = p.kind {
                report(self.diags, t, p.span);
            }
        }
        for l in &f.locals {
            match &l.ty {
                Ty::Scalar(t) => report(self.diags, *t, l.span),
                Ty::Spanned(s) => report(self.diags, s.elem, l.span),
                _ => {}
            }
        }
        match &f.ret {
            ReturnTy::Scalar(t) | ReturnTy::Spanned { elem: t, .. } => {
                report(self.diags, *t, f.span)
            }
            ReturnTy::Void => {}
        }
    }

    fn host_stmts(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            self.host_stmt(s);
        }
    }

    fn host_stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Block(b) => self.host_stmts(b),
            StmtKind::If { then_body, else_body, .. } => {
                self.host_stmts(then_body);
                self.host_stmts(else_body);
            }
            StmtKind::While { body, .. } | StmtKind::For { body, .. } => self.host_stmts(body),
            StmtKind::Return(Some(value)) => match &value.kind {
                HExprKind::Param(p) if value.ty.scalar().is_none() => {
                    match self.f.param(*p).map(|p| p.kind) {
                        Some(ParamKind::Global) => self.returns_global_param = true,
                        Some(ParamKind::HostIn | ParamKind::HostInOut) => {
                            self.returned_params.insert(*p);
                        }
                        _ => {}
                    }
                }
                _ => {}
            },
            StmtKind::Parallel(tree) => self.kernel(tree),
            StmtKind::InnerParallel(p) => {
                self.diags.push(internal(p.span, "an inner parallel level in host code"))
            }
            StmtKind::SyncBlock => {
                self.diags.push(internal(s.span, "a block barrier in host code"))
            }
            _ => {}
        }
    }

    fn kernel(&mut self, tree: &hir::ParallelTree) {
        let f = self.f;
        let index = tree.kernel_index as usize;
        let sync_after = tree.sync_after || (tree.is_async && self.has_inout);
        let after = match (tree.is_async, tree.stream) {
            (false, None) => AfterLaunch::DeviceSync,
            (false, Some(s)) => AfterLaunch::StreamSync(Some(s)),
            (true, stream) if sync_after => AfterLaunch::StreamSync(stream),
            (true, _) => AfterLaunch::Track,
        };
        if after == AfterLaunch::Track {
            self.leaves_async_work = true;
        }
        if let Some(s) = tree.stream {
            if !matches!(f.param(s).map(|p| p.kind), Some(ParamKind::Stream)) {
                self.diags.push(internal(
                    tree.span,
                    "a launch bound to something that is not a stream parameter",
                ));
            }
        }
        let mut collector = CaptureCollector { f, captures: BTreeSet::new(), problems: Vec::new() };
        collector.device_stmts(&tree.body, self.target);
        for (span, what) in std::mem::take(&mut collector.problems) {
            self.diags.push(if what.starts_with("E0805") {
                Diagnostic::error(
                    "E0805",
                    span,
                    format!(
                        "the group-4 level is not supported by the target architecture: {}",
                        self.target
                    ),
                )
                .with_label("needs sm_90a")
            } else {
                internal(span, &what)
            });
        }
        // Grid and block extents are evaluated on the host; they need no capture, but they
        // must not mention device values.
        let plan = KernelPlan {
            name: kernel_name(f, tree.kernel_index),
            captures: collector.captures.into_iter().collect(),
            stream: tree.stream,
            after,
        };
        match self.kernels.get_mut(index) {
            Some(slot @ None) => *slot = Some(plan),
            Some(Some(_)) => {
                self.diags.push(internal(tree.span, "two kernels with the same index"))
            }
            None => self.diags.push(internal(tree.span, "kernel index out of range")),
        }
    }
}

/// Collects the host values a kernel body uses.
struct CaptureCollector<'a> {
    f: &'a hir::Function,
    captures: BTreeSet<Capture>,
    problems: Vec<(Span, String)>,
}

impl CaptureCollector<'_> {
    fn device_stmts(&mut self, stmts: &[Stmt], target: Target) {
        for s in stmts {
            self.device_stmt(s, target);
        }
    }

    fn device_stmt(&mut self, s: &Stmt, target: Target) {
        match &s.kind {
            StmtKind::Let { init, .. } => {
                if let Some(e) = init {
                    self.expr(e);
                }
            }
            StmtKind::Assign { target, value, .. } => {
                if let Place::Elem { buffer, indices } = target {
                    self.buffer(*buffer);
                    for i in indices {
                        self.expr(i);
                    }
                }
                self.expr(value);
            }
            StmtKind::Block(b) => self.device_stmts(b, target),
            StmtKind::If { cond, then_body, else_body } => {
                self.expr(cond);
                self.device_stmts(then_body, target);
                self.device_stmts(else_body, target);
            }
            StmtKind::While { cond, body } => {
                self.expr(cond);
                self.device_stmts(body, target);
            }
            StmtKind::For { start, end, body, .. } => {
                self.expr(start);
                self.expr(end);
                self.device_stmts(body, target);
            }
            StmtKind::Print { args, .. } => {
                for a in args {
                    self.expr(a);
                }
            }
            StmtKind::InnerParallel(p) => {
                if p.level == Level::Group4 && !target.has_warpgroups() {
                    self.problems.push((p.span, "E0805".to_string()));
                }
                for d in &p.binder.extents {
                    self.dim(d);
                }
                self.dim(&p.stride);
                self.device_stmts(&p.body, target);
            }
            StmtKind::Break | StmtKind::Continue | StmtKind::SyncBlock => {}
            StmtKind::DeclBuffer { .. } => {
                self.problems.push((s.span, "a global buffer declared in device code".into()))
            }
            StmtKind::Return(_) => self.problems.push((s.span, "a return in device code".into())),
            StmtKind::Parallel(_) => {
                self.problems.push((s.span, "a kernel launch inside a kernel".into()))
            }
            StmtKind::Check(_) => {
                self.problems.push((s.span, "a host check inside a kernel".into()))
            }
            StmtKind::SyncGlobal => {
                self.problems.push((s.span, "sync.global inside a kernel".into()))
            }
        }
    }

    fn buffer(&mut self, b: BufferRef) {
        match b {
            BufferRef::Param(p) => {
                self.captures.insert(Capture::Param(p));
                if let Some(param) = self.f.param(p) {
                    for d in &param.dims {
                        self.dim(d);
                    }
                }
            }
            BufferRef::Local(v) => {
                self.captures.insert(Capture::Var(v));
                if let Some(Ty::Spanned(t)) = self.f.local(v).map(|l| &l.ty) {
                    for d in &t.dims {
                        self.dim(d);
                    }
                }
            }
        }
    }

    fn dim(&mut self, d: &Dim) {
        match d {
            Dim::Const(_) => {}
            Dim::Sym(s) => {
                self.captures.insert(Capture::Sym(*s));
            }
            Dim::Dynamic { param, dim } => {
                self.captures.insert(Capture::Extent(*param, *dim));
            }
            Dim::Expr(e) => self.expr(e),
        }
    }

    fn expr(&mut self, e: &HExpr) {
        match &e.kind {
            HExprKind::Int(_)
            | HExprKind::Float(_)
            | HExprKind::Bool(_)
            | HExprKind::Str(_)
            | HExprKind::Error => {}
            HExprKind::Var(v) => match self.f.local(*v) {
                Some(l) => match (&l.place, &l.origin) {
                    (LocalPlace::HostScalar | LocalPlace::GlobalBuffer, _) => {
                        self.captures.insert(Capture::Var(*v));
                    }
                    (LocalPlace::Expanded, LocalOrigin::Tuple { components }) => {
                        for c in components.clone() {
                            self.expr(&HExpr {
                                kind: HExprKind::Var(c),
                                ty: Ty::BoundedInt,
                                span: e.span,
                            });
                        }
                    }
                    _ => {}
                },
                None => self.problems.push((e.span, "an unknown local".into())),
            },
            HExprKind::Param(p) => match self.f.param(*p).map(|p| p.kind) {
                Some(ParamKind::Stream) => {
                    self.problems.push((e.span, "a stream used inside a kernel".into()))
                }
                Some(_) => {
                    self.captures.insert(Capture::Param(*p));
                }
                None => self.problems.push((e.span, "an unknown parameter".into())),
            },
            HExprKind::SymDim(s) => {
                self.captures.insert(Capture::Sym(*s));
            }
            HExprKind::ParamExtent { param, dim } => {
                self.captures.insert(Capture::Extent(*param, *dim));
            }
            HExprKind::Unary { operand, .. } => self.expr(operand),
            HExprKind::Binary { lhs, rhs, .. } => {
                self.expr(lhs);
                self.expr(rhs);
            }
            HExprKind::Ternary { cond, then_value, else_value } => {
                self.expr(cond);
                self.expr(then_value);
                self.expr(else_value);
            }
            HExprKind::Cdiv(a, b) => {
                self.expr(a);
                self.expr(b);
            }
            HExprKind::At { buffer, indices } => {
                self.buffer(*buffer);
                for i in indices {
                    self.expr(i);
                }
            }
            HExprKind::Math { args, .. } => {
                for a in args {
                    self.expr(a);
                }
            }
            HExprKind::Cast { operand, .. } | HExprKind::CppCast { operand, .. } => {
                self.expr(operand)
            }
            HExprKind::Ituple(items) => {
                for i in items {
                    self.expr(i);
                }
            }
            HExprKind::Mdspan(dims) => {
                for d in dims {
                    self.dim(d);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------------

/// C++ keywords and the unqualified names generated code refers to; a user name equal to one
/// of these gets a trailing `_`.
const RESERVED: &[&str] = &[
    // C++ keywords and alternative tokens
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char8_t",
    "char16_t",
    "char32_t",
    "class",
    "compl",
    "concept",
    "const",
    "consteval",
    "constexpr",
    "constinit",
    "const_cast",
    "continue",
    "co_await",
    "co_return",
    "co_yield",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "final",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "import",
    "inline",
    "int",
    "long",
    "module",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "override",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "requires",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
    // names used unqualified by generated code, and common macros
    "choreo",
    "std",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "dim3",
    "uint3",
    "size_t",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "printf",
    "main",
    "NULL",
    "INFINITY",
    "NAN",
    "HUGE_VAL",
    "HUGE_VALF",
    "assert",
    "cudaStream_t",
    "cudaError_t",
    "cudaSuccess",
    "cudaLaunchConfig_t",
    "EOF",
    "errno",
];

/// Whether `name` can be the name of the generated C++ function (and the suffix of its kernel
/// and entry names).
fn is_valid_function_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !RESERVED.contains(&name)
        && !name.starts_with("__choreo")
}

/// A user name made safe: ASCII identifier characters only, no `__` (all generated names
/// contain `__`), not reserved, no leading `_` followed by an upper-case letter.
fn sanitize(name: &str) -> String {
    let mut out: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'v');
    }
    while out.contains("__") {
        out = out.replace("__", "_");
    }
    if out.starts_with('_') {
        out.insert(0, 'u');
    }
    if RESERVED.contains(&out.as_str()) || out.ends_with('_') {
        out.push('v');
    }
    out
}

/// Gives every parameter, symbol and local of `f` a unique C++ identifier: parameters keep
/// their names where possible, then symbols, then locals in declaration order; a repeated name
/// gets `_2`, `_3`, ….
fn assign_names(f: &hir::Function) -> Names {
    let mut taken: HashSet<String> = HashSet::new();
    let mut unique = |name: &str| -> String {
        let base = sanitize(name);
        let mut candidate = base.clone();
        let mut n = 2;
        while taken.contains(&candidate) {
            candidate = format!("{base}_{n}");
            n += 1;
        }
        taken.insert(candidate.clone());
        candidate
    };
    let params = f.params.iter().map(|p| unique(&p.name)).collect();
    let syms = f.sym_dims.iter().map(|s| unique(&s.name)).collect();
    let locals = f.locals.iter().map(|l| unique(&l.name)).collect();
    Names { params, syms, locals }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_keeps_plain_names_and_fixes_dangerous_ones() {
        assert_eq!(sanitize("acc"), "acc");
        assert_eq!(sanitize("new"), "newv");
        assert_eq!(sanitize("a__b"), "a_b");
        assert_eq!(sanitize("_Foo"), "u_Foo");
        assert_eq!(sanitize("x_"), "x_v");
        assert_eq!(sanitize("threadIdx"), "threadIdxv");
        assert!(!sanitize("__choreo_frame").contains("__"));
    }

    #[test]
    fn function_names_must_be_cpp_identifiers() {
        assert!(is_valid_function_name("scale"));
        assert!(!is_valid_function_name("delete"));
        assert!(!is_valid_function_name("__choreo_core"));
        assert!(!is_valid_function_name("main"));
    }
}
