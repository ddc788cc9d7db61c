//! Shared pieces of the benchmark harness (`choreo-bench`): statistics over repeated trials, the
//! plain-text / Markdown result table, and the hand-written WGMMA GEMM with its checks (shared by
//! the `gemm` section and its GPU test).

pub mod gemm;
pub mod gemm_fp8;
pub mod stats;
pub mod table;
