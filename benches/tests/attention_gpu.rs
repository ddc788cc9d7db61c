//! The Choreo attention forward (`kernels/attention.co`) on the GPU against the float64 host
//! reference of `choreo_bench::attention` (tolerance argued there: bf16 output, bf16 P):
//! small shapes on every element, one large shape on sampled rows, causal and not, and the
//! shape refusals before the launch. Needs an sm_90 GPU (`cargo test -p choreo-bench --release
//! --test attention_gpu -- --ignored`).

use choreo::{DeviceTensor, HostView, Stream, bf16};
use choreo_bench::attention::{self, HEAD_DIM};

mod kernels {
    choreo::include_kernels!("attention");
}
use kernels::attention::{attn_fwd_bf16, attn_fwd_causal_bf16};

fn on_gpu(bh: usize, s: usize, causal: bool, every_row: bool) {
    let [hq, hk, hv] = attention::random_qkv(bh, s, 100 + s as u64);
    let stream = Stream::new().unwrap();
    let shape = [bh, s, HEAD_DIM];
    let t =
        |x: &[bf16]| DeviceTensor::from_host(&stream, HostView::new(x, shape).unwrap()).unwrap();
    let (q, k, v) = (t(&hq), t(&hk), t(&hv));
    let mut o = t(&vec![bf16::NAN; bh * s * HEAD_DIM]);
    let run = if causal { attn_fwd_causal_bf16 } else { attn_fwd_bf16 };
    run(&stream, &q, &k, &v, &mut o).unwrap().wait().unwrap();
    let ho = o.to_host(&stream).unwrap().as_slice().to_vec();
    let what = format!("attention on the GPU, BH {bh}, S {s}, causal {causal}");
    let rows = if every_row { attention::all_rows(bh, s) } else { attention::sample_rows(bh, s) };
    match attention::check_rows(&what, (&hq, &hk, &hv, &ho), s, &rows, causal) {
        Ok(worst) => {
            eprintln!("{what}: {} rows right (worst {worst:.2} of the tolerance)", rows.len())
        }
        Err(message) => panic!("{message}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn small_shapes() {
    for causal in [false, true] {
        on_gpu(1, 128, causal, true);
        on_gpu(2, 256, causal, true);
        on_gpu(3, 640, causal, true);
    }
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn a_large_shape() {
    on_gpu(4, 4096, false, false);
    on_gpu(4, 4096, true, false);
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90)"]
fn bad_shapes_are_refused_before_the_launch() {
    let s = Stream::new().unwrap();
    let q = DeviceTensor::<bf16, 3>::zeros_on(&s, [1, 200, HEAD_DIM]).unwrap();
    let mut o = DeviceTensor::<bf16, 3>::zeros_on(&s, [1, 200, HEAD_DIM]).unwrap();
    for run in [attn_fwd_bf16, attn_fwd_causal_bf16] {
        match run(&s, &q, &q, &q, &mut o).and_then(|p| p.wait()) {
            Err(choreo::Error::RuntimeCheck { message, .. }) => {
                assert!(message.contains("S must be a multiple of 128"), "{message}");
            }
            other => panic!("expected a failed run-time check, got {other:?}"),
        }
    }
    // K of another sequence length than Q: the wrapper's shape check.
    let q = DeviceTensor::<bf16, 3>::zeros_on(&s, [1, 256, HEAD_DIM]).unwrap();
    let k = DeviceTensor::<bf16, 3>::zeros_on(&s, [1, 128, HEAD_DIM]).unwrap();
    let mut o = DeviceTensor::<bf16, 3>::zeros_on(&s, [1, 256, HEAD_DIM]).unwrap();
    match attn_fwd_bf16(&s, &q, &k, &k, &mut o).and_then(|p| p.wait()) {
        Err(choreo::Error::Shape { param, dim: 1, expected: 256, got: 128 }) => {
            assert_eq!(param, "k");
        }
        other => {
            panic!("K [1, 128, 128] with Q [1, 256, 128]: expected a shape error, got {other:?}")
        }
    }
}
