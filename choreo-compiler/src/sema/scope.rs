//! Lexical scopes (spec §6): the function scope holds parameters, symbolic dimensions and the
//! body's top-level locals; every block body (and every binder with its body) opens a scope.

use crate::hir::{Dim, HExpr, ParamId, SymId, VarId};
use crate::source::Span;
use std::collections::HashMap;

/// What a name denotes.
#[derive(Debug, Clone)]
pub(crate) enum Symbol {
    /// A parameter.
    Param(ParamId),
    /// A symbolic dimension.
    Sym(SymId),
    /// A local (scalar, global buffer, bounded variable, bounded-ituple name).
    Local(VarId),
    /// An immutable mdspan value (`sh : [4, 8];`), expanded at every use.
    Shape(Vec<Dim>),
    /// A data future (spec §5.6, §14).
    Future(FutureSym),
    /// A shared event (spec-tier3 §2): only `trigger` and `wait` name it.
    Event(crate::hir::EventId),
    /// A named view (`t = a.chunkat(p, _);`, spec §13.3): its coordinates were computed into
    /// immutable locals where needed, so it is expanded at every use.
    View(crate::hir::View),
    /// An MMA fragment (spec-tier3 §5): only MMA statements and `op=` name it.
    Frag(crate::hir::mma::FragId),
    /// The future of an asynchronous WGMMA (spec-tier3 §5.4; an index of
    /// `Checker::wg_futures`): only `wait` names it.
    MmaFuture(usize),
    /// An immutable ituple value (`t = {1, 2};`), expanded at every use.
    Tuple {
        /// The components.
        items: Vec<HExpr>,
        /// Whether it is bounded.
        bounded: bool,
    },
}

/// A data future: where its data is, and the copy group it waits for.
#[derive(Debug, Clone)]
pub(crate) struct FutureSym {
    /// Its data.
    pub(crate) data: FutureData,
    /// For an asynchronous future (and a placeholder): the local holding its copy group.
    pub(crate) group: Option<VarId>,
    /// Whether it was declared by `dma.any`.
    pub(crate) placeholder: bool,
}

/// Where a future's data is.
#[derive(Debug, Clone)]
pub(crate) enum FutureData {
    /// A buffer the DMA allocated, through a [`crate::hir::LocalPlace::Future`] pointer local
    /// (exchanged by `swap`; a placeholder's has no type until a DMA binds it).
    Pointer(VarId),
    /// The destination view the DMA wrote.
    View(crate::hir::View),
}

/// One scope: names declared in it, with the span of each declaration.
#[derive(Debug, Default)]
struct Scope {
    names: HashMap<String, (Symbol, Span)>,
    /// A number no other scope of the function has.
    id: u32,
}

/// The scope stack of one function.
#[derive(Debug)]
pub(crate) struct Scopes {
    stack: Vec<Scope>,
    /// The number of scopes opened so far.
    opened: u32,
}

impl Scopes {
    /// A stack with the function scope.
    pub(crate) fn new() -> Scopes {
        Scopes { stack: vec![Scope::default()], opened: 0 }
    }

    /// Opens a scope.
    pub(crate) fn push(&mut self) {
        self.opened += 1;
        self.stack.push(Scope { names: HashMap::new(), id: self.opened });
    }

    /// The identity of the innermost scope.
    pub(crate) fn current_id(&self) -> u32 {
        self.stack.last().map_or(0, |s| s.id)
    }

    /// Closes the innermost scope (the function scope is never closed).
    pub(crate) fn pop(&mut self) {
        if self.stack.len() > 1 {
            self.stack.pop();
        }
    }

    /// The declaration span of `name` in the innermost scope, if declared there.
    pub(crate) fn declared_here(&self, name: &str) -> Option<Span> {
        self.stack.last().and_then(|s| s.names.get(name)).map(|(_, span)| *span)
    }

    /// Declares `name` in the innermost scope (overwrites: callers check `declared_here`).
    pub(crate) fn declare(&mut self, name: &str, symbol: Symbol, span: Span) {
        if let Some(scope) = self.stack.last_mut() {
            scope.names.insert(name.to_string(), (symbol, span));
        }
    }

    /// The nearest visible declaration of `name`.
    pub(crate) fn lookup(&self, name: &str) -> Option<&Symbol> {
        self.stack.iter().rev().find_map(|s| s.names.get(name)).map(|(sym, _)| sym)
    }

    /// The nearest visible declaration of `name` with its span.
    pub(crate) fn lookup_with_span(&self, name: &str) -> Option<(&Symbol, Span)> {
        self.stack.iter().rev().find_map(|s| s.names.get(name)).map(|(sym, span)| (sym, *span))
    }

    /// The depth of the scope (1 = function scope) that holds the visible declaration of
    /// `name`.
    pub(crate) fn declaring_depth(&self, name: &str) -> Option<usize> {
        self.stack.iter().rposition(|s| s.names.contains_key(name)).map(|i| i + 1)
    }

    /// Current depth (1 = function scope).
    pub(crate) fn depth(&self) -> usize {
        self.stack.len()
    }

    /// Closes scopes until `depth` remain (used to unwind after a kernel).
    pub(crate) fn truncate(&mut self, depth: usize) {
        while self.stack.len() > depth.max(1) {
            self.stack.pop();
        }
    }
}
