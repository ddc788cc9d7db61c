//! The Choreo attention forward (`kernels/attention.co`: `attn_fwd_bf16`,
//! `attn_fwd_causal_bf16`) through its generated wrappers on the CPU backend (no GPU needed):
//! every element of small shapes against the float64 host reference of
//! `choreo_bench::attention` (tolerance argued there: bf16 output, bf16 P), and the shape
//! refusal. The CPU backend runs the same translation (TMA, events, WGMMA, fragments emulated
//! with the GPU's data layouts), so this checks the kernel's tiling, ring slots, masking and
//! online softmax; only timing needs the GPU.

#[path = "support/attention_run.rs"]
mod attention_run;

use choreo::Stream;

fn cpu_stream() -> Stream {
    Stream::new_on_device(choreo::Device::cpu()).expect("a CPU stream")
}

/// Every row of BH × S against the host reference.
fn on_cpu(bh: usize, s: usize, causal: bool, seed: u64) {
    attention_run::run_checked(&cpu_stream(), "CPU", [bh, s], causal, (seed, true));
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
    attention_run::refuses_bad_shapes(&cpu_stream(), 192);
}
