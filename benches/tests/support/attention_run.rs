//! What the attention tests on the CPU (`attention_cpu.rs`) and the GPU (`attention_gpu.rs`)
//! share, included by both (`#[path] mod`): a run checked against the float64 host reference
//! of `choreo_bench::attention`, and the shape refusals.

use choreo::{DeviceTensor, HostView, Stream, bf16};
use choreo_bench::attention::{self, HEAD_DIM};

mod kernels {
    choreo::include_kernels!("attention");
}
use kernels::attention::{attn_fwd_bf16, attn_fwd_causal_bf16};

/// Runs the (`causal`) attention forward of `bh` heads of `s` rows on `stream` (`place` names
/// it in messages) with random Q, K, V of `seed`, and checks every row (`every_row`) or
/// `attention::sample_rows` against the host reference. Panics with the mismatches; else
/// returns what ran, the rows checked and the worst error as a fraction of the tolerance.
pub fn run_checked(
    stream: &Stream,
    place: &str,
    [bh, s]: [usize; 2],
    causal: bool,
    (seed, every_row): (u64, bool),
) -> (String, usize, f64) {
    let [hq, hk, hv] = attention::random_qkv(bh, s, seed);
    let shape = [bh, s, HEAD_DIM];
    let t = |x: &[bf16]| DeviceTensor::from_host(stream, HostView::new(x, shape).unwrap()).unwrap();
    let (q, k, v) = (t(&hq), t(&hk), t(&hv));
    let mut o = t(&vec![bf16::NAN; bh * s * HEAD_DIM]);
    let run = if causal { attn_fwd_causal_bf16 } else { attn_fwd_bf16 };
    run(stream, &q, &k, &v, &mut o).unwrap().wait().unwrap();
    let ho = o.to_host(stream).unwrap().as_slice().to_vec();
    let what = format!("attention on the {place}, BH {bh}, S {s}, causal {causal}");
    let rows = if every_row { attention::all_rows(bh, s) } else { attention::sample_rows(bh, s) };
    match attention::check_rows(&what, (&hq, &hk, &hv, &ho), s, &rows, causal) {
        Ok(worst) => (what, rows.len(), worst),
        Err(message) => panic!("{message}"),
    }
}

/// Both kernels refuse a sequence length `s` that is no multiple of 128 (a run-time check),
/// and K and V of another sequence length than Q (the wrapper's shape check).
pub fn refuses_bad_shapes(stream: &Stream, s: usize) {
    let q = DeviceTensor::<bf16, 3>::zeros_on(stream, [1, s, HEAD_DIM]).unwrap();
    let mut o = DeviceTensor::<bf16, 3>::zeros_on(stream, [1, s, HEAD_DIM]).unwrap();
    for run in [attn_fwd_bf16, attn_fwd_causal_bf16] {
        match run(stream, &q, &q, &q, &mut o).and_then(|p| p.wait()) {
            Err(choreo::Error::RuntimeCheck { message, .. }) => {
                assert!(message.contains("S must be a multiple of 128"), "{message}");
            }
            other => panic!("expected a failed run-time check, got {other:?}"),
        }
    }
    let q = DeviceTensor::<bf16, 3>::zeros_on(stream, [1, 256, HEAD_DIM]).unwrap();
    let k = DeviceTensor::<bf16, 3>::zeros_on(stream, [1, 128, HEAD_DIM]).unwrap();
    let mut o = DeviceTensor::<bf16, 3>::zeros_on(stream, [1, 256, HEAD_DIM]).unwrap();
    match attn_fwd_bf16(stream, &q, &k, &k, &mut o).and_then(|p| p.wait()) {
        Err(choreo::Error::Shape { param, dim: 1, expected: 256, got: 128 }) => {
            assert_eq!(param, "k");
        }
        other => {
            panic!("K [1, 128, 128] with Q [1, 256, 128]: expected a shape error, got {other:?}")
        }
    }
}
