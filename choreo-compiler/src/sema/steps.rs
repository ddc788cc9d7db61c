//! `o++;` / `++o;` / `o--;` / `--o;` as statements: the parser makes them `o += 1` / `o -= 1`
//! ([`ast::Assignment::step`]); here the operand must be a mutable integer local (`E0477`
//! otherwise; an immutable one is `E0403` as for `o += 1`). An increment inside another
//! expression is `E0478` (C's value of an increment is not supported), except as the direct
//! argument of an event's `.at(…)` (sema/wspipe.rs).

use super::Checker;
use super::scope::Symbol;
use crate::ast::{self, ExprKind};
use crate::diagnostics::Diagnostic;
use crate::hir::Ty;
use crate::source::Span;

impl Checker<'_> {
    /// Whether the operand of `o++;` (the operator at `at`) may be stepped; `E0477` when not
    /// (the caller then drops the statement). Immutable and undeclared names are left to the
    /// assignment check (`E0403`, `E0404`).
    pub(crate) fn step_target_ok(&mut self, a: &ast::Assignment, at: Span) -> bool {
        let op = if a.op == ast::AssignOp::Add { "++" } else { "--" };
        let fail = |this: &mut Self, what: String, help: String| {
            this.diags.push(
                Diagnostic::error(
                    "E0477",
                    a.target.span,
                    format!("`{op}` needs a mutable integer variable; {what}"),
                )
                .with_label(what)
                .with_secondary(at, format!("`{op}` here"))
                .with_help(help),
            );
            false
        };
        let ExprKind::Ident(id) = &a.target.kind else {
            let sign = if op == "++" { "+" } else { "-" };
            return fail(
                self,
                "this is an element, not a variable".to_string(),
                format!("write `… {sign}= 1;` to change an element"),
            );
        };
        let ty = match self.scopes.lookup(&id.name) {
            None => return true,
            Some(Symbol::Local(v)) => match self.locals.get(v.index()) {
                Some(l) => l.ty.clone(),
                None => return true,
            },
            Some(Symbol::Param(_)) => {
                return fail(
                    self,
                    format!("`{}` is a parameter", id.name),
                    format!("copy it into a local: `mutable int i = {};`", id.name),
                );
            }
            Some(_) => {
                return fail(
                    self,
                    format!("`{}` is not a scalar variable", id.name),
                    "declare a `mutable int` counter".to_string(),
                );
            }
        };
        if ty.is_integer() || matches!(ty, Ty::Error) {
            return true;
        }
        let sign = if op == "++" { "+" } else { "-" };
        fail(
            self,
            format!("`{}` has type \"{}\"", id.name, super::types::ty_name(&ty)),
            format!("write `{} {sign}= 1;` for a non-integer variable", id.name),
        )
    }
}
