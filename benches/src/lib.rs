//! Shared pieces of the benchmark harness (`choreo-bench`): statistics over repeated trials and
//! the plain-text / Markdown result table.

pub mod stats;
pub mod table;
