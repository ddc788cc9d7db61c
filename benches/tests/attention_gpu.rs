//! The Choreo attention forward (`kernels/attention.co`) on the GPU against the float64 host
//! reference of `choreo_bench::attention` (tolerance argued there: bf16 output, bf16 P):
//! small shapes on every element, one large shape on sampled rows, causal and not, and the
//! shape refusals before the launch. Needs an sm_90 GPU (`cargo test -p choreo-bench --release
//! --test attention_gpu -- --ignored`).

#[path = "support/attention_run.rs"]
mod attention_run;

use choreo::Stream;

fn on_gpu(bh: usize, s: usize, causal: bool, every_row: bool) {
    let run = (100 + s as u64, every_row);
    let (what, rows, worst) =
        attention_run::run_checked(&Stream::new().unwrap(), "GPU", [bh, s], causal, run);
    eprintln!("{what}: {rows} rows right (worst {worst:.2} of the tolerance)");
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
    attention_run::refuses_bad_shapes(&Stream::new().unwrap(), 200);
}
