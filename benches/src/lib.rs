//! Shared pieces of the benchmark harness (`choreo-bench`): statistics over repeated trials, the
//! plain-text / Markdown result table, and the hand-written WGMMA GEMM with its checks (shared by
//! the `gemm` section and its GPU test), the fp8 GEMM's inputs and cuBLASLt (`gemm-fp8`), the
//! hand-written mma.sync GEMM (`gemm-sync`), the attention forward's inputs, host reference and
//! checks (`attention`), and cuDNN's attention forward loaded at run time (`attention`'s
//! reference, shared with its GPU test).

pub mod attention;
pub mod cudnn_sdpa;
pub mod gemm;
pub mod gemm_fp8;
pub mod gemm_sync;
pub mod stats;
pub mod table;
