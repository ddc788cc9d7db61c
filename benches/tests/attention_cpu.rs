//! The Choreo attention forward (`kernels/attention.co`: `attn_fwd_bf16`,
//! `attn_fwd_causal_bf16`) through its generated wrappers on the CPU backend (no GPU needed):
//! every element of small shapes against the float64 host reference of
//! `choreo_bench::attention` (tolerance argued there: bf16 output, bf16 P), and the shape
//! refusal. The CPU backend runs the same translation (TMA, events, WGMMA, fragments emulated
//! with the GPU's data layouts), so this checks the kernel's tiling, ring slots, masking and
//! online softmax; only timing needs the GPU.

use choreo::{DeviceTensor, HostView, Stream, bf16};
use choreo_bench::attention::{self, HEAD_DIM};

mod kernels {
    choreo::include_kernels!("attention");
}
use kernels::attention::{attn_fwd_bf16, attn_fwd_causal_bf16};

fn cpu_stream() -> Stream {
    Stream::new_on_device(choreo::Device::cpu()).expect("a CPU stream")
}

fn on_cpu(bh: usize, s: usize, causal: bool, seed: u64) {
    let [hq, hk, hv] = attention::random_qkv(bh, s, seed);
    let stream = cpu_stream();
    let shape = [bh, s, HEAD_DIM];
    let t =
        |x: &[bf16]| DeviceTensor::from_host(&stream, HostView::new(x, shape).unwrap()).unwrap();
    let (q, k, v) = (t(&hq), t(&hk), t(&hv));
    let mut o = t(&vec![bf16::NAN; bh * s * HEAD_DIM]);
    let run = if causal { attn_fwd_causal_bf16 } else { attn_fwd_bf16 };
    run(&stream, &q, &k, &v, &mut o).unwrap().wait().unwrap();
    let ho = o.to_host(&stream).unwrap().as_slice().to_vec();
    let what = format!("attention on the CPU, BH {bh}, S {s}, causal {causal}");
    let rows = attention::all_rows(bh, s);
    if let Err(message) = attention::check_rows(&what, (&hq, &hk, &hv, &ho), s, &rows, causal) {
        panic!("{message}");
    }
}

#[test]
fn attention_on_the_cpu() {
    // One tile (no loop after the peeled first key tile); two heads of two tiles; three tiles
    // (the 2-slot ring wraps; causal: the diagonal-first order over three key tiles).
    on_cpu(1, 128, false, 11);
    on_cpu(2, 256, false, 12);
    on_cpu(1, 384, false, 13);
}

#[test]
fn causal_attention_on_the_cpu() {
    on_cpu(1, 128, true, 21);
    on_cpu(2, 256, true, 22);
    on_cpu(1, 384, true, 23);
}

#[test]
fn sequences_that_are_not_tile_multiples_are_refused_on_the_cpu() {
    let s = cpu_stream();
    let shape = [1, 192, HEAD_DIM];
    let q = DeviceTensor::<bf16, 3>::zeros_on(&s, shape).unwrap();
    let mut o = DeviceTensor::<bf16, 3>::zeros_on(&s, shape).unwrap();
    for run in [attn_fwd_bf16, attn_fwd_causal_bf16] {
        match run(&s, &q, &q, &q, &mut o).and_then(|p| p.wait()) {
            Err(choreo::Error::RuntimeCheck { message, .. }) => {
                assert!(message.contains("S must be a multiple of 128"), "{message}");
            }
            other => panic!("expected a failed run-time check, got {other:?}"),
        }
    }
    // K and V of another sequence length than Q: refused by the wrapper's shape check.
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
