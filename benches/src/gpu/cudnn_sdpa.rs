//! cuDNN's scaled-dot-product attention forward, the `attention` section's reference: the
//! section uses [`CudnnSdpa`] from here. The code lives in the library
//! (`choreo_bench::cudnn_sdpa`, `src/cudnn_sdpa.rs` and `kernels/cudnn_sdpa.cu`), which its GPU
//! test (`tests/cudnn_sdpa_gpu.rs`) shares.
//!
//! ```ignore
//! let sdpa = CudnnSdpa::load()?;                  // Err(why) without cuDNN 9
//! eprintln!("{}", sdpa.version());                // "cuDNN 9.x.y"
//! unsafe { sdpa.forward(stream.as_raw(), q, k, v, o, batch_heads, seq, 128, causal, scale) }?;
//! let name = sdpa.plan_name(batch_heads, seq, 128, causal); // which engine/form it runs
//! ```

pub use choreo_bench::cudnn_sdpa::CudnnSdpa;
