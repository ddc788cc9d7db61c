//! The attention forward of `kernels/hopper/attention.co` (FlashAttention style: TMA producer
//! warpgroup, two WGMMA consumer warpgroups, online softmax in registers; bf16, head dimension
//! 128), called through its generated wrappers `attention::attn_fwd_bf16` and
//! `attention::attn_fwd_causal_bf16`:
//!
//! - checked against a CPU reference (float64 softmax of the same bf16 inputs), causal and
//!   not, on a small shape that the CPU backend runs in a moment, every element; on a CUDA GPU
//!   also on large shapes, at sampled rows;
//! - a sequence length that is not a multiple of the 128-row tile is `Err(Error::RuntimeCheck)`
//!   before anything is launched;
//! - timed with events around each call: the median of a few calls after a warm-up, as TFLOP/s
//!   (4·BH·S²·128 operations, halved when causal).
//!
//! The kernels are built for sm_90a (Hopper) only: on another GPU the first call returns the
//! CUDA error of the launch; the app says so and skips the section.

use choreo::{Device, DeviceTensor, Error, HostTensor, HostView, Pending, Stream, bf16};

use crate::hopper::attention as kernels;
use crate::matmul::three_digits;
use crate::{AppError, random_vec};

/// The head dimension of the kernels.
const D: usize = 128;

// ANCHOR: attention_call
/// O = softmax(Q·Kᵀ / √128) · V for every head, Q, K, V [BH, S, 128] bf16: upload, run on
/// stream `s` (causal: query i sees keys j <= i), download O.
pub fn attention(
    s: &Stream,
    (q, k, v): (HostView<'_, bf16, 3>, HostView<'_, bf16, 3>, HostView<'_, bf16, 3>),
    causal: bool,
) -> choreo::Result<HostTensor<bf16, 3>> {
    let q = DeviceTensor::from_host(s, q)?;
    let k = DeviceTensor::from_host(s, k)?;
    let v = DeviceTensor::from_host(s, v)?;
    let mut o = DeviceTensor::zeros_on(s, q.shape())?;
    if causal {
        kernels::attn_fwd_causal_bf16(s, &q, &k, &v, &mut o)?.wait()?;
    } else {
        kernels::attn_fwd_bf16(s, &q, &k, &v, &mut o)?.wait()?;
    }
    o.to_host(s)
}
// ANCHOR_END: attention_call

/// One launch of the kernel on device tensors.
fn launch<'a>(
    s: &'a Stream,
    (q, k, v): (&'a DeviceTensor<bf16, 3>, &'a DeviceTensor<bf16, 3>, &'a DeviceTensor<bf16, 3>),
    o: &'a mut DeviceTensor<bf16, 3>,
    causal: bool,
) -> choreo::Result<Pending<'a, ()>> {
    if causal {
        kernels::attn_fwd_causal_bf16(s, q, k, v, o)
    } else {
        kernels::attn_fwd_bf16(s, q, k, v, o)
    }
}

/// The shape the CPU backend runs too: 2 heads of 256 tokens (checked in full).
const SMALL: (usize, usize) = (2, 256);
/// The shapes run on a CUDA GPU only, (BH, S): 16k tokens of 16 heads (checked at sampled rows).
const LARGE: [(usize, usize); 2] = [(64, 4096), (16, 16384)];
/// Timed calls after the warm-up.
const RUNS: usize = 5;
const CPU_RUNS: usize = 2;

/// The attention section of the app. `Ok` also when the GPU cannot run the kernels (not
/// Hopper): then it prints why and does nothing else.
pub fn run(device: Device, s: &Stream) -> Result<(), AppError> {
    for causal in [false, true] {
        if !check_small(s, device, causal)? {
            return Ok(());
        }
    }
    refuse_partial_tiles(s)?;
    for causal in [false, true] {
        if device.is_cpu() {
            timed(s, SMALL, causal, CPU_RUNS)?;
        } else {
            for shape in LARGE {
                timed(s, shape, causal, RUNS)?;
            }
        }
    }
    Ok(())
}

/// Q, K in [-2, 2) and V in [-1, 1), rounded to bf16: scaled scores of a standard deviation
/// of about 1.3 (neither a flat nor a one-hot softmax).
fn random_qkv((bh, s): (usize, usize), seed: u64) -> [HostTensor<bf16, 3>; 3] {
    let n = bh * s * D;
    let make = |scale: f32, seed: u64| {
        let values = random_vec(n, seed).into_iter().map(|x| bf16::from_f32(scale * x)).collect();
        HostTensor::new(values, [bh, s, D]).expect("the shape matches the data")
    };
    [make(2.0, seed), make(2.0, seed + 1), make(1.0, seed + 2)]
}

/// The small shape through [`attention`], every element checked. `Ok(false)` when the call
/// failed with a CUDA error on a GPU other than Hopper (printed).
fn check_small(s: &Stream, device: Device, causal: bool) -> Result<bool, AppError> {
    let [q, k, v] = random_qkv(SMALL, 21);
    let o = match attention(s, (q.view(), k.view(), v.view()), causal) {
        Ok(o) => o,
        Err(error @ Error::Cuda { .. }) if !device.is_cpu() => {
            let (major, minor) = device.compute_capability()?;
            if (major, minor) == (9, 0) {
                return Err(error.into());
            }
            println!(
                "attention  not run: kernels/hopper/attention.co is built for sm_90a (Hopper) \
                 only, and this GPU is sm_{major}{minor}: {error}"
            );
            return Ok(false);
        }
        Err(error) => return Err(error.into()),
    };
    let (bh, seq) = SMALL;
    let every: Vec<(usize, usize)> = (0..bh).flat_map(|h| (0..seq).map(move |i| (h, i))).collect();
    let worst = check(&q, &k, &v, &o, &every, causal)?;
    println!(
        "attention  {} BH {bh} S {seq} D {D}, all {} rows  max error {worst:.2} of the tolerance  ok",
        kind(causal),
        every.len()
    );
    Ok(true)
}

fn kind(causal: bool) -> &'static str {
    if causal { "causal    " } else { "non-causal" }
}

/// Tolerance: O is rounded to bf16 once (2⁻⁸ relative) and the softmax weights P are rounded
/// to bf16 before P·V (2⁻⁸ relative each; O is a convex combination of V's rows, |V| < 1), so
/// |error| <= 2⁻⁸ |O| + 2·2⁻⁸: we allow 0.01 + 0.008 |O|. A wrong mask, scale or tile is off
/// by far more (O's elements are of the order of 0.1).
const ABS_TOL: f64 = 0.01;
const REL_TOL: f64 = 0.008;

/// Compares the rows `rows` = (head, query) of `o` with the float64 reference; the largest
/// error as a fraction of the tolerance, or the first element beyond it.
fn check(
    q: &HostTensor<bf16, 3>,
    k: &HostTensor<bf16, 3>,
    v: &HostTensor<bf16, 3>,
    o: &HostTensor<bf16, 3>,
    rows: &[(usize, usize)],
    causal: bool,
) -> Result<f64, AppError> {
    let [_, seq, _] = q.shape();
    let f = |t: &HostTensor<bf16, 3>, h: usize, j: usize| -> Vec<f64> {
        let at = (h * seq + j) * D;
        t.as_slice()[at..at + D].iter().map(|x| f64::from(x.to_f32())).collect()
    };
    let mut worst = 0f64;
    for &(h, i) in rows {
        let qi = f(q, h, i);
        let keys = if causal { i + 1 } else { seq };
        let scores: Vec<f64> = (0..keys)
            .map(|j| {
                f(k, h, j).iter().zip(&qi).map(|(a, b)| a * b).sum::<f64>() / (D as f64).sqrt()
            })
            .collect();
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut want = vec![0f64; D];
        let mut sum = 0f64;
        for (j, x) in scores.iter().enumerate() {
            let w = (x - max).exp();
            sum += w;
            want.iter_mut().zip(f(v, h, j)).for_each(|(o, v)| *o += w * v);
        }
        for (c, (w, g)) in want.iter().zip(f(o, h, i)).enumerate() {
            let w = w / sum;
            let error = (g - w).abs() / (ABS_TOL + REL_TOL * w.abs());
            if error.is_nan() || error > 1.0 {
                return Err(AppError::Failed(format!(
                    "attention ({}): O[{h}][{i}][{c}] = {g}, want {w:.6}",
                    kind(causal).trim_end()
                )));
            }
            worst = worst.max(error);
        }
    }
    Ok(worst)
}

/// A sequence length that is not a multiple of the 128-row tile (S = 200) is refused by the
/// kernel's `assert` before anything is launched: `Err(Error::RuntimeCheck)`.
fn refuse_partial_tiles(s: &Stream) -> Result<(), AppError> {
    let q = DeviceTensor::<bf16, 3>::zeros_on(s, [1, 200, D])?;
    let mut o = DeviceTensor::<bf16, 3>::zeros_on(s, [1, 200, D])?;
    match launch(s, (&q, &q, &q), &mut o, false) {
        Err(error @ Error::RuntimeCheck { .. }) => {
            println!("attention  BH 1 S 200 refused: {error}  ok");
            Ok(())
        }
        Err(error) => Err(error.into()),
        Ok(pending) => {
            pending.wait()?;
            Err(AppError::Failed("attention: S = 200 (not a multiple of 128) was accepted".into()))
        }
    }
}

/// Times `runs` calls (after one warm-up call), each between two events on `s`, prints the
/// median as TFLOP/s, and checks sampled rows of O.
fn timed(s: &Stream, (bh, seq): (usize, usize), causal: bool, runs: usize) -> Result<(), AppError> {
    let [hq, hk, hv] = random_qkv((bh, seq), 31);
    let q = DeviceTensor::from_host(s, hq.view())?;
    let k = DeviceTensor::from_host(s, hk.view())?;
    let v = DeviceTensor::from_host(s, hv.view())?;
    let mut o = DeviceTensor::<bf16, 3>::zeros_on(s, [bh, seq, D])?;
    launch(s, (&q, &k, &v), &mut o, causal)?.wait()?; // warm-up
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = s.record_event()?;
        let pending = launch(s, (&q, &k, &v), &mut o, causal)?;
        let end = s.record_event()?;
        pending.wait()?;
        end.synchronize()?;
        times.push(start.elapsed_ms(&end)?);
    }
    times.sort_by(f32::total_cmp);
    let ms = times[times.len() / 2];
    let flops = 4.0 * (bh * seq * seq * D) as f64 / if causal { 2.0 } else { 1.0 };
    let tflops = flops / (f64::from(ms) * 1e-3) / 1e12;
    let ho = o.to_host(s)?;
    let rows: Vec<(usize, usize)> =
        [0, 1, 127, 128, seq / 2 + 63, seq - 129, seq - 1].iter().map(|&i| (i % bh, i)).collect();
    let worst = check(&hq, &hk, &hv, &ho, &rows, causal)?;
    println!(
        "attention  {} BH {bh} S {seq} D {D}  {ms:8.3} ms (median of {runs})  {} TFLOP/s  \
         max error {worst:.2} of the tolerance  ok",
        kind(causal),
        three_digits(tflops)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu() -> Stream {
        Stream::new_on_device(Device::cpu()).expect("a CPU stream")
    }

    /// The call on the CPU backend (which emulates TMA, WGMMA and the fragments): every
    /// element right, causal and not; and a wrong output is caught.
    #[test]
    fn attention_is_right_on_the_cpu() {
        let s = cpu();
        let [q, k, v] = random_qkv((1, 128), 5);
        let rows: Vec<(usize, usize)> = (0..128).map(|i| (0, i)).collect();
        for causal in [false, true] {
            let o = attention(&s, (q.view(), k.view(), v.view()), causal).unwrap();
            assert!(check(&q, &k, &v, &o, &rows, causal).unwrap() <= 1.0);
            // The other variant's output is wrong for this one (rows before the last differ).
            let other = attention(&s, (q.view(), k.view(), v.view()), !causal).unwrap();
            assert!(check(&q, &k, &v, &other, &rows, causal).is_err());
        }
    }

    #[test]
    fn partial_tiles_are_a_runtime_check_error() {
        refuse_partial_tiles(&cpu()).unwrap();
    }
}
