//! Calls into C++ and built-in calls (spec §17, §18): `call f<targs>(args)`, registered
//! intrinsics, `__atomic_*`, `__bar_arrive`/`__bar_sync`, `__cpp__`, inline asm, `&x.at(i)`,
//! `nullptr`.
//!
//! A device function, an intrinsic, `__cpp__` text and inline assembly are C++ the compiler
//! cannot check: each use is recorded in [`hir::Function::foreign_code`], and the Rust wrapper
//! of a function that has one is `unsafe` to call. Atomics are element accesses like any other
//! (bounds-checked).

use super::fold;
use super::{Checker, Val};
use crate::ast::{self, ExprKind};
use crate::diagnostics::Diagnostic;
use crate::hir::{
    self, AsmInput, AsmOutput, AtomicOp, ElemTy, HExpr, HExprKind, LocalPlace, Place, Stmt,
    StmtKind, Storage, TemplateArg, Ty,
};
use crate::source::Span;
use crate::target::{Feature, RegisterHint};

fn atomic_op(op: crate::token::AtomicOp) -> AtomicOp {
    use crate::token::AtomicOp as T;
    match op {
        T::Add => AtomicOp::Add,
        T::Sub => AtomicOp::Sub,
        T::Exch => AtomicOp::Exch,
        T::Min => AtomicOp::Min,
        T::Max => AtomicOp::Max,
        T::And => AtomicOp::And,
        T::Or => AtomicOp::Or,
        T::Xor => AtomicOp::Xor,
        T::Cas => AtomicOp::Cas,
    }
}

fn path_text(p: &ast::Path) -> String {
    p.segments.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join("::")
}

/// `Some(true)` for `croq::cuda::setreg_inc`, `Some(false)` for `croq::cuda::setreg_dec`.
fn setreg_kind(p: &ast::Path) -> Option<bool> {
    match path_text(p).as_str() {
        "croq::cuda::setreg_inc" => Some(true),
        "croq::cuda::setreg_dec" => Some(false),
        _ => None,
    }
}

impl Checker<'_> {
    /// `call croq::cuda::setreg_inc(n)` / `setreg_dec(n)` (spec-tier3 §7.2): one compile-time
    /// register count in [24, 256], a multiple of 8, in device code (E0620). What it becomes
    /// is the target's decision: `setmaxnreg` on sm_90a, nothing below sm_90 and on the CPU,
    /// E0805 on the other sm_90+ architectures.
    fn setreg(&mut self, c: &ast::Call, inc: bool) -> Option<StmtKind> {
        let name = if inc { "croq::cuda::setreg_inc" } else { "croq::cuda::setreg_dec" };
        if !self.in_device() {
            self.error_label(
                "E0620",
                c.span,
                format!("'{name}' is only allowed inside a parallel-by"),
                "host code",
            );
            return None;
        }
        if c.args.len() != 1 || !c.template_args.is_empty() {
            self.error_label(
                "E0620",
                c.span,
                format!("'{name}' expects exactly one argument."),
                crate::diagnostics::count(c.args.len(), "argument"),
            );
            return None;
        }
        let arg = &c.args[0];
        let v = self.check_int(arg, "a register count");
        if matches!(v.ty, Ty::Error) {
            return None;
        }
        let Some(n) = fold::const_int(&v) else {
            self.error_label(
                "E0620",
                arg.span,
                format!("the argument of '{name}' must be a compile-time integer constant."),
                "not a constant",
            );
            return None;
        };
        if n <= 0 {
            self.error_label(
                "E0620",
                arg.span,
                format!("the argument of '{name}' must be a positive integer."),
                "not positive",
            );
            return None;
        }
        if !(24..=256).contains(&n) || n % 8 != 0 {
            self.error_label(
                "E0620",
                arg.span,
                format!(
                    "setmaxnreg takes a register count from 24 to 256 that is a multiple of 8, \
                     but got {n}"
                ),
                "not a valid register count",
            );
            return None;
        }
        if self.warpgroup_splits > 0 {
            self.warn(
                "W0605",
                c.span,
                "setmaxnreg must be executed by every thread of a warpgroup, but a condition \
                 around this call may hold in some threads of a warpgroup and not in others",
                "may not be warpgroup-uniform",
            );
        }
        match self.target.setmaxnreg() {
            RegisterHint::Emit => {
                if let Some(k) = self.kernel.as_mut() {
                    k.register_roles = true;
                }
                Some(StmtKind::SetMaxNReg { inc, regs: n as u32 })
            }
            RegisterHint::Ignore => None,
            RegisterHint::Unsupported => {
                let arch = self.target.arch().map_or("cpu".to_string(), |a| a.to_string());
                self.diags.push(
                    Diagnostic::error(
                        "E0805",
                        c.span,
                        format!(
                            "setmaxnreg requires sm_90a: it is not supported by the target \
                             architecture: {arch}"
                        ),
                    )
                    .with_label(format!("needs {}", Feature::SetMaxNReg.min_arch()))
                    .with_help("compile for sm_90a (`--arch sm_90a`), or drop the call"),
                );
                None
            }
        }
    }

    /// Reports the `setreg_inc/dec` calls written directly in the body of a parallel-by whose
    /// level is not `block` (E0620).
    pub(crate) fn setreg_outside_block(&mut self, stmts: &[ast::Stmt], level: hir::Level) {
        if level == hir::Level::Block {
            return;
        }
        for s in stmts {
            if let ast::StmtKind::Call(c) = &s.kind {
                if let ast::CallKind::Device(p) | ast::CallKind::Intrinsic(p) = &c.kind {
                    if setreg_kind(p).is_some() {
                        self.error_label(
                            "E0620",
                            c.span,
                            "setreg_inc/dec is only allowed in parallel-by blocks lowered to CUDA \
                             kernels (level : block).",
                            format!("directly in a '{}' level", level.as_str()),
                        );
                    }
                }
            }
        }
    }

    /// An expression whose type the context gives: a C++ call's result takes it (spec §17.1:
    /// a call initialises or is assigned to a typed variable, or is an `if` condition).
    pub(crate) fn check_expr_as(&mut self, e: &ast::Expr, ty: Option<ElemTy>) -> Val {
        match &e.kind {
            ExprKind::Call(c) => self.check_call(c, ty),
            _ => self.check_expr(e),
        }
    }

    /// A call used as a value whose type the context gives (`result`: the declared type of
    /// the variable it initialises or is assigned to, `bool` as a condition; `None` where no
    /// type is known, which only atomics allow).
    pub(crate) fn check_call(&mut self, c: &ast::Call, result: Option<ElemTy>) -> Val {
        match &c.kind {
            ast::CallKind::Device(path) | ast::CallKind::Intrinsic(path) => {
                let Some(e) = self.foreign_call(c, path) else { return Val::Error };
                match result {
                    Some(t) => Val::Scalar(HExpr { ty: Ty::Scalar(t), ..e }),
                    None => {
                        self.error_label(
                            "E0454",
                            c.span,
                            "the result of a call needs a declared type: capture it in a typed \
                             variable (`mutable f32 s = call f(…);`)",
                            "result type unknown",
                        );
                        Val::Error
                    }
                }
            }
            ast::CallKind::Atomic(op, _) => match self.atomic(c, atomic_op(*op)) {
                Some(e) => Val::Scalar(e),
                None => Val::Error,
            },
            ast::CallKind::BarArrive(_) | ast::CallKind::BarSync(_) => {
                self.error_label(
                    "E0454",
                    c.span,
                    "`__bar_arrive` / `__bar_sync` are statements and have no value",
                    "not a value",
                );
                Val::Error
            }
            ast::CallKind::Lib(_) => {
                self.out_of_scope(c.span, "`__lib_*` library calls");
                Val::Error
            }
        }
    }

    /// A call statement.
    pub(crate) fn check_call_stmt(&mut self, c: &ast::Call, span: Span, out: &mut Vec<Stmt>) {
        let kind = match &c.kind {
            ast::CallKind::Device(path) | ast::CallKind::Intrinsic(path)
                if setreg_kind(path).is_some() =>
            {
                match self.setreg(c, setreg_kind(path) == Some(true)) {
                    Some(k) => k,
                    None => return,
                }
            }
            ast::CallKind::Device(path) | ast::CallKind::Intrinsic(path) => {
                match self.foreign_call(c, path) {
                    Some(e) => StmtKind::Eval(e),
                    None => return,
                }
            }
            ast::CallKind::Atomic(op, _) => match self.atomic(c, atomic_op(*op)) {
                Some(e) => StmtKind::Eval(e),
                None => return,
            },
            ast::CallKind::BarArrive(_) | ast::CallKind::BarSync(_) => {
                match self.named_barrier(c, matches!(c.kind, ast::CallKind::BarSync(_))) {
                    Some(k) => k,
                    None => return,
                }
            }
            ast::CallKind::Lib(_) => return self.out_of_scope(c.span, "`__lib_*` library calls"),
        };
        out.push(Stmt { kind, span });
    }

    /// `call f<targs>(args)` or an intrinsic: the call expression (type `void`).
    fn foreign_call(&mut self, c: &ast::Call, path: &ast::Path) -> Option<HExpr> {
        if !self.in_device() {
            self.error_label(
                "E0454",
                c.span,
                "unable to call kernel function outside the parallel-by block(s).",
                "host code",
            );
            return None;
        }
        let callee = path_text(path);
        let mut targs = Vec::with_capacity(c.template_args.len());
        for t in &c.template_args {
            targs.push(self.template_arg(t)?);
        }
        let mut args = Vec::with_capacity(c.args.len());
        let mut ok = true;
        for (i, a) in c.args.iter().enumerate() {
            match self.call_arg(a, i) {
                Some(e) => args.push(e),
                None => ok = false,
            }
        }
        if !ok {
            return None;
        }
        self.foreign.push((c.span, format!("`call {}`", path_text(path))));
        Some(HExpr { kind: HExprKind::Call { callee, targs, args }, ty: Ty::Void, span: c.span })
    }

    /// A template argument: a scalar type, a compile-time integer, or a C++ name.
    fn template_arg(&mut self, t: &ast::TemplateArg) -> Option<TemplateArg> {
        match t {
            ast::TemplateArg::Type(ty, _) => {
                Some(TemplateArg::Type(super::types::scalar_from_ast(*ty)))
            }
            ast::TemplateArg::Value(e) => {
                if let ExprKind::Path(p) = &e.kind {
                    return Some(TemplateArg::Name(path_text(p)));
                }
                let v = self.check_int(e, "a template argument");
                if matches!(v.ty, Ty::Error) {
                    return None;
                }
                match fold::const_int(&v) {
                    Some(n) => Some(TemplateArg::Int(n)),
                    None => {
                        self.error_label(
                            "E0454",
                            e.span,
                            "a template argument must be known at compile time",
                            "not a constant",
                        );
                        None
                    }
                }
            }
        }
    }

    /// One argument of a C++ call: a scalar by value, spanned data as the address of its first
    /// element, `nullptr`, an address.
    fn call_arg(&mut self, a: &ast::Expr, i: usize) -> Option<HExpr> {
        if let ExprKind::Null = a.kind {
            return Some(HExpr {
                kind: HExprKind::Null,
                ty: Ty::Pointer(ElemTy::U8),
                span: a.span,
            });
        }
        match self.check_expr(a) {
            Val::Scalar(e) => (!matches!(e.ty, Ty::Error)).then_some(e),
            v @ (Val::Buffer(..) | Val::View(_) | Val::Future(_)) => self.call_arg_from(v, a),
            Val::Error => None,
            other => {
                self.error_label(
                    "E0454",
                    a.span,
                    format!(
                        "({}) argument of type '{}` can not be passed to the kernel function.",
                        super::ordinal(i + 1),
                        other.describe()
                    ),
                    "not passable",
                );
                None
            }
        }
    }

    /// Whether a device built-in call is in device code with `want` arguments (`what` names
    /// them in the message); reports `code` otherwise.
    fn device_builtin(
        &mut self,
        code: &'static str,
        c: &ast::Call,
        name: &str,
        want: usize,
        what: &str,
    ) -> bool {
        if !self.in_device() {
            self.error_label(
                code,
                c.span,
                format!("'{name}' is only allowed inside a parallel-by"),
                "host code",
            );
            return false;
        }
        if c.args.len() != want {
            self.error_label(
                code,
                c.span,
                format!(
                    "'{name}' expects {}{what} but got {}",
                    crate::diagnostics::count(want, "argument"),
                    c.args.len()
                ),
                "wrong number of arguments",
            );
            return false;
        }
        true
    }

    /// `__atomic_op(x.at(i), v…)`.
    fn atomic(&mut self, c: &ast::Call, op: AtomicOp) -> Option<HExpr> {
        let name = op.as_str();
        if !self.device_builtin("E0455", c, name, 1 + op.operands(), "") {
            return None;
        }
        let target = &c.args[0];
        let ExprKind::At { base, indices } = &target.kind else {
            let v = self.check_expr(target);
            if !matches!(v, Val::Error) {
                self.error_label(
                    "E0455",
                    target.span,
                    format!(
                        "'{name}' is not supported on '{}': its first argument is an element \
                         of shared or global data (`x.at(i)`)",
                        v.describe()
                    ),
                    "not an element",
                );
            }
            return None;
        };
        let (buffer, index, elem) = self.check_at(base, indices, target.span)?;
        let storage = self.buffer_storage(buffer);
        if storage == Storage::Local {
            self.error_label(
                "E0455",
                target.span,
                format!("'{name}' is not supported on {} with 'local' storage", elem.as_str()),
                "a per-thread buffer",
            );
            return None;
        }
        if !op.supports(elem) {
            self.error_label(
                "E0455",
                target.span,
                format!("'{name}' is not supported on '{}' elements", elem.as_str()),
                "unsupported element type",
            );
            return None;
        }
        let mut args = Vec::with_capacity(op.operands());
        for a in &c.args[1..] {
            let v = self.check_scalar(a, "an atomic operand");
            if matches!(v.ty, Ty::Error) {
                return None;
            }
            args.push(self.convert_or_report(v, elem, name, a.span));
        }
        self.mark_access(buffer, true, true);
        let id = self.next_access();
        Some(HExpr {
            kind: HExprKind::Atomic { op, buffer, index, id, args },
            ty: Ty::Scalar(elem),
            span: c.span,
        })
    }

    /// Where a buffer lives.
    fn buffer_storage(&self, b: hir::BufferRef) -> Storage {
        match b {
            hir::BufferRef::Param(_) => Storage::Global,
            hir::BufferRef::Local(v) => match self.locals.get(v.index()).map(|l| &l.ty) {
                Some(Ty::Spanned(t)) => t.storage,
                _ => Storage::Global,
            },
        }
    }

    /// `__bar_arrive(id, n)` / `__bar_sync(id, n)`.
    fn named_barrier(&mut self, c: &ast::Call, sync: bool) -> Option<StmtKind> {
        let name = if sync { "__bar_sync" } else { "__bar_arrive" };
        if !self.device_builtin("E0456", c, name, 2, " (barrier, threads)") {
            return None;
        }
        let id = self.check_int(&c.args[0], "a barrier number");
        let threads = self.check_int(&c.args[1], "a thread count");
        if matches!(id.ty, Ty::Error) || matches!(threads.ty, Ty::Error) {
            return None;
        }
        if let Some(v) = fold::const_int(&id) {
            if !(0..15).contains(&v) {
                self.error_label(
                    "E0456",
                    c.args[0].span,
                    format!("named barrier {v} is not available: use 0 to 14 (15 is reserved)"),
                    "out of range",
                );
                return None;
            }
        }
        if let Some(n) = fold::const_int(&threads) {
            if n <= 0 || n % 32 != 0 {
                self.error_label(
                    "E0456",
                    c.args[1].span,
                    format!("the thread count of a named barrier must be a positive multiple of 32, but got {n}"),
                    "not a multiple of 32",
                );
                return None;
            }
        }
        // A thread count that does not match the warps that arrive is undefined behaviour in
        // PTX (a hang at best): the caller vouches for it like for C++.
        self.foreign.push((c.span, format!("`{name}`")));
        Some(StmtKind::NamedBarrier { sync, id, threads })
    }

    /// `__cpp__("…");`
    pub(crate) fn check_cpp(&mut self, text: &str, span: Span, out: &mut Vec<Stmt>) {
        self.foreign.push((span, "`__cpp__`".to_string()));
        out.push(Stmt { kind: StmtKind::Cpp(text.to_string()), span });
    }

    /// Inline assembly (spec §17.4).
    pub(crate) fn check_asm(&mut self, a: &ast::Asm, span: Span, out: &mut Vec<Stmt>) {
        if !self.in_device() {
            self.error_label(
                "E0456",
                span,
                "inline assembly is only allowed inside a parallel-by",
                "host code",
            );
            return;
        }
        let mut outputs = Vec::with_capacity(a.outputs.len());
        let mut ok = true;
        for o in &a.outputs {
            let name = o.name.as_ref().map(|n| n.name.clone());
            let constraint = o.constraint.value.clone();
            let place = match &o.expr.kind {
                ExprKind::At { base, indices } => match self.check_at(base, indices, o.expr.span) {
                    Some((buffer, index, elem)) => {
                        self.mark_access(buffer, constraint.starts_with('+'), true);
                        let id = self.next_access();
                        Some((Place::Elem { buffer, index, id }, elem))
                    }
                    None => None,
                },
                ExprKind::Ident(id) => match self.check_expr(&o.expr) {
                    Val::Scalar(HExpr { kind: HExprKind::Var(v), ty, .. }) => {
                        let local = self.locals.get(v.index());
                        let mutable = local.is_some_and(|l| {
                            l.mutable
                                && matches!(
                                    l.place,
                                    LocalPlace::DeviceScalar | LocalPlace::SharedScalar
                                )
                        });
                        match (mutable, ty.scalar()) {
                            (true, Some(t)) => Some((Place::Var(v), t)),
                            _ => {
                                self.error_label(
                                    "E0456",
                                    o.expr.span,
                                    format!(
                                        "the asm output '{}' must be a mutable scalar of the \
                                         kernel or an element",
                                        id.name
                                    ),
                                    "not assignable",
                                );
                                None
                            }
                        }
                    }
                    Val::Error => None,
                    _ => {
                        self.error_label(
                            "E0456",
                            o.expr.span,
                            "an asm output must be a mutable scalar or an element",
                            "not assignable",
                        );
                        None
                    }
                },
                _ => {
                    let _ = self.check_expr(&o.expr);
                    self.error_label(
                        "E0456",
                        o.expr.span,
                        "an asm output must be a mutable scalar or an element",
                        "not assignable",
                    );
                    None
                }
            };
            match place {
                Some((place, ty)) => outputs.push(AsmOutput { name, constraint, place, ty }),
                None => ok = false,
            }
        }
        let mut inputs = Vec::with_capacity(a.inputs.len());
        for i in &a.inputs {
            let value = match self.check_expr(&i.expr) {
                Val::Scalar(e) if !matches!(e.ty, Ty::Error) => e,
                Val::Error | Val::Scalar(_) => {
                    ok = false;
                    continue;
                }
                v @ (Val::Buffer(..) | Val::View(_) | Val::Future(_)) => {
                    match self.call_arg_from(v, &i.expr) {
                        Some(e) => e,
                        None => {
                            ok = false;
                            continue;
                        }
                    }
                }
                other => {
                    self.error_label(
                        "E0456",
                        i.expr.span,
                        format!("an asm input of type '{}' is not supported", other.describe()),
                        "not a value",
                    );
                    ok = false;
                    continue;
                }
            };
            inputs.push(AsmInput {
                name: i.name.as_ref().map(|n| n.name.clone()),
                constraint: i.constraint.value.clone(),
                value,
            });
        }
        // A named operand the template refers to must exist: the CUDA emitter turns names into
        // positions (nvcc has no named operands).
        let declared: Vec<&str> = outputs
            .iter()
            .filter_map(|o| o.name.as_deref())
            .chain(inputs.iter().filter_map(|i| i.name.as_deref()))
            .collect();
        for name in named_references(&a.template.value) {
            if !declared.contains(&name.as_str()) {
                self.error_label(
                    "E0456",
                    span,
                    format!(
                        "the asm template refers to `%[{name}]`, but no operand is named '{name}'"
                    ),
                    "unknown operand name",
                );
                ok = false;
            }
        }
        if !ok {
            return;
        }
        self.foreign.push((span, "inline assembly".to_string()));
        let asm = hir::Asm {
            volatile: a.volatile.is_some(),
            template: a.template.value.clone(),
            outputs,
            inputs,
            clobbers: a.clobbers.iter().map(|c| c.value.clone()).collect(),
        };
        out.push(Stmt { kind: StmtKind::Asm(Box::new(asm)), span });
    }

    /// Spanned data as the address of its first element.
    fn call_arg_from(&mut self, v: Val, e: &ast::Expr) -> Option<HExpr> {
        let view = self.view_of(v, e.span, "an operand")?;
        self.mark_access(view.buffer, true, true);
        let zeros = vec![fold::int_lit(0, e.span); view.dims.len()];
        Some(HExpr {
            kind: HExprKind::Address { buffer: view.buffer, index: view.element(zeros, e.span) },
            ty: Ty::Pointer(view.elem),
            span: e.span,
        })
    }

    /// `&x.at(i)` / `&x` of spanned data: an address (print, call and asm arguments).
    pub(crate) fn check_address_of(&mut self, inner: &ast::Expr, span: Span) -> Val {
        match &inner.kind {
            ExprKind::At { base, indices } => match self.check_at(base, indices, inner.span) {
                Some((buffer, index, elem)) => Val::Scalar(HExpr {
                    kind: HExprKind::Address { buffer, index },
                    ty: Ty::Pointer(elem),
                    span,
                }),
                None => Val::Error,
            },
            _ => match self.check_expr(inner) {
                v @ (Val::Buffer(..) | Val::View(_) | Val::Future(_)) => {
                    match self.call_arg_from(v, inner) {
                        Some(e) => Val::Scalar(HExpr { span, ..e }),
                        None => Val::Error,
                    }
                }
                Val::Error => Val::Error,
                _ => {
                    self.unsupported(span, "the address of a scalar", 2);
                    Val::Error
                }
            },
        }
    }

    /// `__to<"C++ type">(e)` (spec §18): a verbatim C cast. Its type is a scalar when the text
    /// names one (`float`, `int`, `unsigned`, `s32`, …); a pointer type (`float*`) gives an
    /// address, usable as a call or asm argument. The cast is C++ the compiler cannot check.
    pub(crate) fn check_cpp_cast(
        &mut self,
        cpp_type: &str,
        type_span: Span,
        operand: &ast::Expr,
        span: Span,
    ) -> Val {
        let value = match operand.kind {
            ExprKind::Null => {
                HExpr { kind: HExprKind::Null, ty: Ty::Pointer(ElemTy::U8), span: operand.span }
            }
            _ => match self.check_expr(operand) {
                Val::Scalar(e) if !matches!(e.ty, Ty::Error) => e,
                Val::Error | Val::Scalar(_) => return Val::Error,
                v @ (Val::Buffer(..) | Val::View(_) | Val::Future(_)) => {
                    match self.call_arg_from(v, operand) {
                        Some(e) => e,
                        None => return Val::Error,
                    }
                }
                other => {
                    self.error_label(
                        "E0454",
                        operand.span,
                        format!("a value of type '{}' can not be cast to C++", other.describe()),
                        "not castable",
                    );
                    return Val::Error;
                }
            },
        };
        let ty = match cpp_scalar(cpp_type) {
            Some(t) => Ty::Scalar(t),
            None if cpp_type.trim_end().ends_with('*') => Ty::Pointer(ElemTy::U8),
            None => {
                self.diags.push(
                    crate::diagnostics::Diagnostic::error(
                        "E0454",
                        type_span,
                        format!("`{cpp_type}` is not a C++ scalar or pointer type Choreo knows"),
                    )
                    .with_label("unknown type")
                    .with_help(
                        "use a scalar (`float`, `int`, `unsigned`, `s32`, …) or a pointer type \
                         (`float*`), or `__to<T>` for a Choreo type",
                    ),
                );
                return Val::Error;
            }
        };
        self.foreign.push((span, format!("`__to<\"{cpp_type}\">`")));
        Val::Scalar(HExpr {
            kind: HExprKind::CppCast { cpp_type: cpp_type.to_string(), operand: Box::new(value) },
            ty,
            span,
        })
    }
}

/// The scalar type a C++ type name denotes, for the names kernels commonly cast to.
fn cpp_scalar(name: &str) -> Option<ElemTy> {
    let words: Vec<&str> = name.split_whitespace().collect();
    Some(match words.join(" ").as_str() {
        "bool" => ElemTy::Bool,
        "float" | "f32" | "choreo::f32" => ElemTy::F32,
        "double" | "f64" | "choreo::f64" => ElemTy::F64,
        "int" | "signed" | "signed int" | "int32_t" | "std::int32_t" | "s32" | "choreo::s32" => {
            ElemTy::S32
        }
        "unsigned" | "unsigned int" | "uint32_t" | "std::uint32_t" | "u32" | "choreo::u32" => {
            ElemTy::U32
        }
        "long long" | "long" | "int64_t" | "std::int64_t" | "s64" | "choreo::s64" => ElemTy::S64,
        "unsigned long long" | "unsigned long" | "uint64_t" | "std::uint64_t" | "size_t"
        | "std::size_t" | "u64" | "choreo::u64" => ElemTy::U64,
        "short" | "int16_t" | "s16" => ElemTy::S16,
        "unsigned short" | "uint16_t" | "u16" => ElemTy::U16,
        "signed char" | "char" | "int8_t" | "s8" => ElemTy::S8,
        "unsigned char" | "uint8_t" | "u8" => ElemTy::U8,
        "half" | "__half" | "f16" | "choreo::f16" => ElemTy::F16,
        "__nv_bfloat16" | "bf16" | "choreo::bf16" => ElemTy::Bf16,
        _ => return None,
    })
}

/// The operand names an asm template refers to (`%[name]`).
fn named_references(template: &str) -> Vec<String> {
    let mut names = Vec::new();
    hir::rewrite_named_operands(template, |name| {
        names.push(name.to_string());
        None
    });
    names
}
