//! How the participants of a DMA (or a `wait`) inside a selecting `inthreads` synchronise
//! ([`Participants::SelectedInstance`]): the threads of one instance of an intra-block
//! level, while other instances of that level may not run the statement at all (spec §10,
//! §14.5). A block barrier would wait for threads that never come, so:
//!
//! - an instance that is the whole block (one instance) takes the block barrier: every thread
//!   of the block comes;
//! - an instance inside one warp (1, 2, 4, 8, 16 or 32 threads, so the instances tile the
//!   warps) takes `__syncwarp` with the lanes of its instance;
//! - an instance of whole warps (a multiple of 32 threads, aligned, since instance `k` is
//!   threads `[k t, (k + 1) t)`) takes a PTX named barrier `bar.sync id, t` of its own:
//!   `id = first + k`, one barrier per instance, so that the instances never count each
//!   other's arrivals.
//!
//! Named barriers are numbered per instance size: levels whose instances have the same size
//! partition the block's threads the same way, so barrier `first + k` is always used by the
//! same warps with the same count, in program order; sizes that differ get disjoint numbers.
//! Barrier 0 is `__syncthreads`, 15 is reserved (spec §15); the numbers come from 14
//! downwards and avoid every constant number the kernel's `__bar_sync`/`__bar_arrive` use.
//! Anything else is `E0810`: instance or block sizes only known at run time, instances that
//! are neither within a warp nor whole warps, too few free barriers, or user code whose
//! barrier numbers cannot be known (a run-time number, PTX barriers in inline assembly or
//! `__cpp__`). C++ reached through `call` is the caller's to vouch for, like everything
//! else it does (the function is `foreign`).

use super::LevelPlan;
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::hir::{LevelId, Participants, Stmt, StmtKind, arith};
use crate::source::Span;
use std::collections::{BTreeMap, BTreeSet};

/// The first named barrier a kernel may use for its own synchronisation (0 is the block
/// barrier's).
const FIRST_FREE: u32 = 1;
/// The last one (15 is reserved, spec §15).
const LAST_FREE: u32 = 14;

/// How the threads of one instance of a level synchronise inside a selecting `inthreads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceSync {
    /// The instance is the whole block: a block barrier.
    Block,
    /// The instance is `threads` lanes of one warp (`threads` divides 32): a warp barrier of
    /// those lanes.
    Warp {
        /// Threads per instance.
        threads: u64,
    },
    /// The instance is whole warps: named barrier `first + instance number`, counting
    /// `threads` threads.
    Named {
        /// The barrier of instance 0.
        first: u32,
        /// Threads per instance (a multiple of 32).
        threads: u64,
    },
}

/// What a kernel body uses that the choice depends on.
#[derive(Debug, Default)]
pub(super) struct Uses {
    /// The levels with selected-instance participants, with the first such statement.
    selected: BTreeMap<LevelId, Span>,
    /// The named barriers the user's code uses: the number when constant.
    user: Vec<(Option<i128>, Span)>,
    /// Inline assembly or `__cpp__` text that names a PTX barrier.
    text: Vec<Span>,
}

impl Uses {
    /// Notes what statement `s` of a kernel body uses.
    pub(super) fn note(&mut self, s: &Stmt) {
        let participants = match &s.kind {
            StmtKind::Dma(dma) => Some(dma.participants),
            StmtKind::Wait { participants, .. } => Some(*participants),
            StmtKind::NamedBarrier { id, .. } => {
                self.user.push((arith::const_int(id), s.span));
                None
            }
            StmtKind::Asm(asm) if names_ptx_barrier(&asm.template) => {
                self.text.push(s.span);
                None
            }
            StmtKind::Cpp(text) if names_ptx_barrier(text) => {
                self.text.push(s.span);
                None
            }
            _ => None,
        };
        if let Some(Participants::SelectedInstance(level)) = participants {
            self.selected.entry(level).or_insert(s.span);
        }
    }
}

/// Whether text (PTX or C++) names a PTX barrier instruction (`bar.sync`, `barrier.arrive`,
/// …) as a word of its own.
fn names_ptx_barrier(text: &str) -> bool {
    ["bar.", "barrier."].iter().any(|word| {
        text.match_indices(word).any(|(at, _)| {
            !text[..at].chars().next_back().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    })
}

/// The synchronisation of every level with selected-instance participants, by level; `E0810`
/// for those that cannot be synchronised. `levels` are the kernel's level plans and the
/// spans of the levels, `block` the threads per block when constant.
pub(super) fn plan(
    uses: &Uses,
    levels: &[(LevelPlan, Span)],
    block: Option<u64>,
    diags: &mut Diagnostics,
) -> BTreeMap<LevelId, InstanceSync> {
    let taken: BTreeSet<u32> =
        uses.user.iter().filter_map(|(id, _)| id.and_then(|v| u32::try_from(v).ok())).collect();
    let mut given: BTreeSet<u32> = BTreeSet::new();
    let mut by_size: BTreeMap<u64, u32> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for (&level, &span) in &uses.selected {
        let Some((plan, level_span)) = levels.get(level.index()) else { continue };
        let what = plan.level.as_str();
        let error = |message: String, label: &str| {
            Diagnostic::error("E0810", span, message).with_label(label).with_secondary(
                *level_span,
                format!("the `{what}` level whose instances take part"),
            )
        };
        let threads = plan.threads_per_instance.as_const();
        let sync = match (threads, block) {
            (Some(t), Some(b)) if t >= b => InstanceSync::Block,
            (Some(t), Some(_)) if t <= 32 && 32 % t == 0 => InstanceSync::Warp { threads: t },
            (Some(t), Some(b)) if t % 32 == 0 && b % t == 0 => {
                if let Some(&first) = by_size.get(&t) {
                    InstanceSync::Named { first, threads: t }
                } else {
                    if let Some((_, user)) = uses.user.iter().find(|(id, _)| id.is_none()) {
                        diags.push(
                            error(
                                "the threads of one instance cannot be synchronised here: a \
                                 named barrier of this kernel has a number only known at run \
                                 time, which may be one this synchronisation needs"
                                    .to_string(),
                                "synchronises one instance with a named barrier",
                            )
                            .with_secondary(*user, "barrier number known only at run time")
                            .with_help("give `__bar_sync`/`__bar_arrive` constant barrier numbers"),
                        );
                        continue;
                    }
                    if let Some(text) = uses.text.first() {
                        diags.push(
                            error(
                                "the threads of one instance cannot be synchronised here: \
                                 inline assembly or `__cpp__` of this kernel uses PTX barriers \
                                 whose numbers the compiler cannot know"
                                    .to_string(),
                                "synchronises one instance with a named barrier",
                            )
                            .with_secondary(*text, "uses PTX barriers")
                            .with_help(
                                "use `__bar_sync`/`__bar_arrive` with constant barrier numbers \
                                 instead",
                            ),
                        );
                        continue;
                    }
                    let count = b / t;
                    let fits = |first: u32| {
                        (first..first + count as u32)
                            .all(|id| !taken.contains(&id) && !given.contains(&id))
                    };
                    let first = (count <= u64::from(LAST_FREE - FIRST_FREE + 1))
                        .then(|| {
                            (FIRST_FREE..=LAST_FREE + 1 - count as u32).rev().find(|&f| fits(f))
                        })
                        .flatten();
                    let Some(first) = first else {
                        let free = (FIRST_FREE..=LAST_FREE)
                            .filter(|id| !taken.contains(id) && !given.contains(id))
                            .count();
                        diags.push(
                            error(
                                format!(
                                    "the threads of one instance cannot be synchronised here: \
                                     the {count} instances of {t} threads need {count} \
                                     consecutive named barriers (one each), but only {free} of \
                                     barriers {FIRST_FREE}–{LAST_FREE} are free in this kernel"
                                ),
                                "synchronises one instance with a named barrier",
                            )
                            .with_help(
                                "use fewer, larger instances, free barrier numbers used by \
                                 `__bar_sync`/`__bar_arrive`, or select with block indices \
                                 only",
                            ),
                        );
                        continue;
                    };
                    given.extend(first..first + count as u32);
                    by_size.insert(t, first);
                    InstanceSync::Named { first, threads: t }
                }
            }
            (Some(t), Some(_)) => {
                diags.push(
                    error(
                        format!(
                            "the threads of one instance cannot be synchronised here: an \
                             instance has {t} threads, neither a part of one warp (1, 2, 4, 8, \
                             16 or 32 threads) nor whole warps"
                        ),
                        "its participants are one instance",
                    )
                    .with_help(
                        "give the instances a number of threads that divides 32 or is a \
                         multiple of 32",
                    ),
                );
                continue;
            }
            _ => {
                diags.push(
                    error(
                        "the threads of one instance cannot be synchronised here: the threads \
                         of an instance or of the block are only known at run time"
                            .to_string(),
                        "its participants are one instance",
                    )
                    .with_help(
                        "give the parallel-bys of the kernel constant extents, or make the \
                         `inthreads` predicate depend on block indices only",
                    ),
                );
                continue;
            }
        };
        out.insert(level, sync);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::names_ptx_barrier;

    #[test]
    fn ptx_barriers_are_words_of_their_own() {
        assert!(names_ptx_barrier("bar.sync 1, 64;"));
        assert!(names_ptx_barrier("{ barrier.cta.arrive 3; }"));
        assert!(!names_ptx_barrier("foobar.x = 1;"));
        assert!(!names_ptx_barrier("__syncthreads();"));
    }
}
