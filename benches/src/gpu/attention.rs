//! The attention forward (issue 15): the Choreo `attn_fwd_bf16` and `attn_fwd_causal_bf16`
//! (`kernels/attention.co`: FlashAttention-2/3 style, one block per 128 query rows of a head,
//! a TMA producer warpgroup streaming K/V tiles [128, 128] through a 2-slot ring, two WGMMA
//! consumer warpgroups with the online softmax in registers) against cuDNN's SDPA:
//!
//! Q, K, V, O bf16 [BH, S, 128] (contiguous BHSD), softmax scale 1/sqrt(128), f32 accumulation,
//! causal and not, for S ∈ {4096, 8192, 16384} (`--quick`: 1024 and 2048) with BH·S = 16·16384
//! (the FlashAttention papers' 16k tokens of 16 heads of dimension 128: batch 16384 / S).
//! TFLOP/s count 4·BH·S²·128 operations, halved when causal; the fraction of the H200's dense
//! bf16 peak (989 TFLOP/s) is shown too.
//!
//! Checks before timing, on a poisoned (NaN) output: ours against a plain CUDA attention
//! (`kernels/attention_reference.cu`: f32, exact row maxima, no tensor cores) on ~50 sampled
//! rows (head and tile boundaries, the diagonal, random rows), and that reference itself
//! against the float64 host reference on 4 of them; tolerance of `choreo_bench::attention`
//! (bf16 output and P). A kernel that is wrong is reported and not timed.

use std::ffi::c_void;

use choreo::{DeviceTensor, HostView, Stream, bf16};
use choreo_bench::attention::{self, ABS_TOL, HEAD_DIM, REL_TOL};
use choreo_bench::table::three_digits;

use super::cudnn_sdpa::CudnnSdpa;
use super::tiled::{per_launch_ms, row};
use super::{BenchError, BenchResult, Options, interleaved};

/// The generated wrappers of `kernels/attention.co`.
pub(super) mod kernels {
    choreo::include_kernels!("attention");
}

/// The check kernel (`kernels/attention_reference.cu`). Returns a `cudaError_t`.
mod reference {
    use choreo::sys::cudaStream_t;
    use std::ffi::c_void;

    unsafe extern "C" {
        /// Rows `rows[2r], rows[2r + 1]` = (bh, i) of O into `out` [n, 128] (f32), with
        /// `scores` [n, s] of scratch; all device pointers.
        pub fn ref_attention_rows(
            stream: cudaStream_t,
            q: *const c_void,
            k: *const c_void,
            v: *const c_void,
            rows: *const i32,
            n: i32,
            scores: *mut f32,
            out: *mut f32,
            s: i32,
            causal: i32,
            scale: f32,
        ) -> i32;
    }
}

/// The H200's dense bf16 tensor-core peak (SXM, f32 accumulation), TFLOP/s.
pub const PEAK_TFLOPS: f64 = 989.0;
/// Launches per timed trial.
const BATCH: usize = 5;

/// One measured shape.
pub struct Point {
    /// Sequence length.
    pub seq: usize,
    /// Batch · heads.
    pub bh: usize,
    /// Causal or not.
    pub causal: bool,
    /// Ours (median), when ours was right.
    pub ours_tflops: Option<f64>,
    /// cuDNN SDPA (median), when it ran.
    pub cudnn_tflops: Option<f64>,
}

/// The section's outcome.
pub struct Outcome {
    /// Table rows `[variant, median, min, max, derived]`.
    pub rows: Vec<Vec<String>>,
    /// Every measured shape.
    pub points: Vec<Point>,
    /// The checks that failed (each says which and why).
    pub wrong: Vec<String>,
}

fn failed(message: String) -> BenchError {
    BenchError::Failed(format!("attention: {message}"))
}

/// Runs the section.
pub fn run(options: &Options) -> BenchResult<Outcome> {
    if !choreo_bench::gemm::built() {
        return Err(BenchError::CannotRun("the attention kernels were not compiled".into()));
    }
    // The reference: cuDNN's fused SDPA when the machine has cuDNN 9 (else our numbers stand
    // against the dense peak alone, and the table says why).
    let cudnn = match CudnnSdpa::load() {
        Ok(c) => {
            eprintln!("choreo-bench: attention: reference {}", c.version());
            Some(c)
        }
        Err(why) => {
            eprintln!("choreo-bench: attention: no cuDNN reference: {why}");
            None
        }
    };
    let seqs: &[usize] = if options.quick { &[1024, 2048] } else { &[4096, 8192, 16384] };
    let mut outcome = Outcome { rows: Vec::new(), points: Vec::new(), wrong: Vec::new() };
    for &seq in seqs {
        let bh = if options.quick { 4 } else { 16 * 16384 / seq };
        for causal in [false, true] {
            let point = measure(options, cudnn.as_ref(), seq, bh, causal, &mut outcome)?;
            outcome.points.push(point);
        }
    }
    if cudnn.is_none() {
        outcome.rows.push(row_text("cuDNN SDPA: not found on this machine (no reference)".into()));
    }
    Ok(outcome)
}

/// A row with only its first cell filled.
fn row_text(text: String) -> Vec<String> {
    vec![text, String::new(), String::new(), String::new(), String::new()]
}

/// One launch of ours, not waited for.
fn launch_ours(
    s: &Stream,
    causal: bool,
    (q, k, v): (&DeviceTensor<bf16, 3>, &DeviceTensor<bf16, 3>, &DeviceTensor<bf16, 3>),
    o: &mut DeviceTensor<bf16, 3>,
) -> BenchResult<()> {
    let run = if causal {
        kernels::attention::attn_fwd_causal_bf16
    } else {
        kernels::attention::attn_fwd_bf16
    };
    drop(run(s, q, k, v, o)?);
    Ok(())
}

/// Rows `rows` of O by the check kernel, f32 [rows.len(), 128], waited for.
fn reference_rows(
    s: &Stream,
    (q, k, v): (&DeviceTensor<bf16, 3>, &DeviceTensor<bf16, 3>, &DeviceTensor<bf16, 3>),
    rows: &[(usize, usize)],
    causal: bool,
) -> BenchResult<Vec<f32>> {
    let [_, seq, _] = q.shape();
    let n = rows.len();
    let flat: Vec<i32> = rows.iter().flat_map(|&(h, i)| [h as i32, i as i32]).collect();
    let d_rows = DeviceTensor::from_host(s, HostView::new(&flat, [2 * n])?)?;
    let mut scores = DeviceTensor::<f32, 2>::zeros_on(s, [n, seq])?;
    let mut out = DeviceTensor::<f32, 2>::zeros_on(s, [n, HEAD_DIM])?;
    let [pq, pk, pv] = qkv_for_read(s, [q, k, v])?;
    let pr = d_rows.buffer().device_ptr_for_read(s)?;
    let ps = scores.buffer_mut().device_ptr_for_write(s)?;
    let po = out.buffer_mut().device_ptr_for_write(s)?;
    let scale = 1.0 / (HEAD_DIM as f32).sqrt();
    // SAFETY: q, k, v hold [BH, seq, 128] bf16, every row (h, i) of `rows` is inside them,
    // `scores` holds n·seq and `out` n·128 f32; all outlive the kernel: their buffers are told
    // of these accesses on `s` below, and `to_host` waits for it.
    let err = unsafe {
        reference::ref_attention_rows(
            s.as_raw(),
            pq,
            pk,
            pv,
            pr,
            n as i32,
            ps,
            po,
            seq as i32,
            i32::from(causal),
            scale,
        )
    };
    if err != 0 {
        return Err(failed(format!("the check kernel failed to launch (cudaError_t {err})")));
    }
    for t in [q, k, v] {
        t.buffer().record_read(s)?;
    }
    d_rows.buffer().record_read(s)?;
    scores.buffer_mut().record_write(s)?;
    out.buffer_mut().record_write(s)?;
    Ok(out.to_host(s)?.as_slice().to_vec())
}

/// The device pointers of Q, K and V for a kernel that reads them on `s` (the caller tells
/// their buffers of the read, `record_read`, after the launch).
fn qkv_for_read(s: &Stream, qkv: [&DeviceTensor<bf16, 3>; 3]) -> BenchResult<[*const c_void; 3]> {
    let mut out = [std::ptr::null(); 3];
    for (p, t) in out.iter_mut().zip(qkv) {
        *p = t.buffer().device_ptr_for_read(s)?.cast::<c_void>();
    }
    Ok(out)
}

fn measure(
    options: &Options,
    cudnn: Option<&CudnnSdpa>,
    seq: usize,
    bh: usize,
    causal: bool,
    outcome: &mut Outcome,
) -> BenchResult<Point> {
    let kind = if causal { "causal" } else { "non-causal" };
    eprintln!("choreo-bench: attention: BH {bh}, S {seq}, {kind} …");
    let s = Stream::new()?;
    let shape = [bh, seq, HEAD_DIM];
    let [hq, hk, hv] = attention::random_qkv(bh, seq, 0xA77 + seq as u64);
    let q = DeviceTensor::from_host(&s, HostView::new(&hq, shape)?)?;
    let k = DeviceTensor::from_host(&s, HostView::new(&hk, shape)?)?;
    let v = DeviceTensor::from_host(&s, HostView::new(&hv, shape)?)?;
    let nan = vec![bf16::NAN; bh * seq * HEAD_DIM];
    let mut o = DeviceTensor::from_host(&s, HostView::new(&nan, shape)?)?;
    let mut point = Point { seq, bh, causal, ours_tflops: None, cudnn_tflops: None };
    let wrong = |why: String, outcome: &mut Outcome| {
        eprintln!("choreo-bench: attention: FAILED: {why}");
        outcome.rows.push(row_text(format!("WRONG, not timed: {why}")));
        outcome.wrong.push(why);
    };

    // The check: the reference kernel against the host on a few rows, ours against it.
    let rows = attention::sample_rows(bh, seq);
    let want = reference_rows(&s, (&q, &k, &v), &rows, causal)?;
    let n = rows.len();
    for at in [0, n / 3, 2 * n / 3, n - 1] {
        let (h, i) = rows[at];
        let host = attention::reference_row((&hq, &hk, &hv), seq, (h, i), causal);
        let gpu = &want[at * HEAD_DIM..(at + 1) * HEAD_DIM];
        // f32 against float64 on the same inputs: far below 1e-3 when right (NaN fails too).
        let off = |c: usize| {
            let e = (f64::from(gpu[c]) - host[c]).abs();
            e.is_nan() || e > 1e-3
        };
        if let Some(c) = (0..HEAD_DIM).find(|&c| off(c)) {
            wrong(
                format!(
                    "the check kernel itself, BH {bh}, S {seq}, {kind}: O[{h}][{i}][{c}] = {} vs \
                     the host's {:.6}",
                    gpu[c], host[c]
                ),
                outcome,
            );
            return Ok(point);
        }
    }
    let checked = launch_ours(&s, causal, (&q, &k, &v), &mut o)
        .and_then(|()| Ok(o.to_host(&s)?.as_slice().to_vec()));
    let ho = match checked {
        Ok(ho) => ho,
        Err(BenchError::Failed(why) | BenchError::CannotRun(why)) => {
            wrong(format!("ours, BH {bh}, S {seq}, {kind}: {why}"), outcome);
            return Ok(point);
        }
    };
    let worst = match within_tolerance(&ho, seq, (&rows, &want)) {
        Ok(worst) => worst,
        Err(at) => {
            wrong(format!("ours vs the check kernel, BH {bh}, S {seq}, {kind}: {at}"), outcome);
            return Ok(point);
        }
    };

    // cuDNN on the same q, k, v into its own (poisoned) output, checked like ours.
    let mut theirs = match cudnn {
        Some(c) => {
            let mut o2 = DeviceTensor::from_host(&s, HostView::new(&nan, shape)?)?;
            match cudnn_check(&s, c, (&q, &k, &v), &mut o2, causal, (&rows, &want)) {
                Ok(()) => Some((c, o2)),
                Err(why) => {
                    wrong(format!("cuDNN SDPA, BH {bh}, S {seq}, {kind}: {why}"), outcome);
                    None
                }
            }
        }
        None => None,
    };

    // Timing: ours and cuDNN interleaved on the same stream and inputs.
    let (qr, kr, vr) = (&q, &k, &v);
    let sr = &s;
    let mut ours = || per_launch_ms(sr, BATCH, || launch_ours(sr, causal, (qr, kr, vr), &mut o));
    let mut cudnn_run = theirs.as_mut().map(|(c, o2)| {
        let c = *c;
        move || per_launch_ms(sr, BATCH, || launch_cudnn(sr, c, (qr, kr, vr), o2, causal))
    });
    let mut timed: Vec<&mut dyn FnMut() -> BenchResult<f64>> = vec![&mut ours];
    if let Some(f) = cudnn_run.as_mut() {
        timed.push(f);
    }
    let summaries = interleaved(options, &mut timed)?;
    drop(timed);
    let flops = attention::flops(bh, seq, causal);
    let t = flops / (summaries[0].median * 1e-3) / 1e12;
    point.ours_tflops = Some(t);
    point.cudnn_tflops = summaries.get(1).map(|x| flops / (x.median * 1e-3) / 1e12);
    let mut derived = format!(
        "{} TFLOP/s = {} of peak; check max err {} of the tolerance ({} rows)",
        three_digits(t),
        three_digits(t / PEAK_TFLOPS),
        three_digits(worst),
        rows.len()
    );
    if let Some(c) = point.cudnn_tflops {
        derived += &format!("; {} of cuDNN", three_digits(t / c));
    }
    eprintln!("choreo-bench: attention: BH {bh}, S {seq}, {kind}: {derived}");
    outcome.rows.push(row(
        format!(
            "ours: Choreo attn_fwd{}_bf16 BH {bh} S {seq} D 128 (TMA producer + 2 WGMMA consumer \
             warpgroups, 128x128 tiles, 2 stages)",
            if causal { "_causal" } else { "" }
        ),
        &summaries[0],
        derived,
    ));
    if let (Some((c, _)), Some(summary), Some(tc)) = (&theirs, summaries.get(1), point.cudnn_tflops)
    {
        let plan = c.plan_name(bh, seq, HEAD_DIM, causal).unwrap_or_else(|| "cuDNN SDPA".into());
        outcome.rows.push(row(
            format!("{plan} BH {bh} S {seq} D 128 {kind}"),
            summary,
            format!("{} TFLOP/s = {} of peak", three_digits(tc), three_digits(tc / PEAK_TFLOPS)),
        ));
    }
    Ok(point)
}

/// One cuDNN SDPA forward into `o`, not waited for; the buffers are told of the accesses.
fn launch_cudnn(
    s: &Stream,
    cudnn: &CudnnSdpa,
    (q, k, v): (&DeviceTensor<bf16, 3>, &DeviceTensor<bf16, 3>, &DeviceTensor<bf16, 3>),
    o: &mut DeviceTensor<bf16, 3>,
    causal: bool,
) -> BenchResult<()> {
    let [bh, seq, d] = q.shape();
    let [pq, pk, pv] = qkv_for_read(s, [q, k, v])?;
    let po = o.buffer_mut().device_ptr_for_write(s)?;
    let scale = 1.0 / (HEAD_DIM as f32).sqrt();
    // SAFETY: q, k, v, o are [bh, seq, d] bf16 tensors of this stream's device (the same shape:
    // `measure` made them so); they outlive the enqueued work, which their buffers are told of
    // right below, so no later use on another stream can overlap it.
    let result = unsafe {
        cudnn.forward(s.as_raw(), pq, pk, pv, po.cast::<c_void>(), bh, seq, d, causal, scale)
    };
    for t in [q, k, v] {
        t.buffer().record_read(s)?;
    }
    o.buffer_mut().record_write(s)?;
    result.map_err(|why| BenchError::Failed(format!("attention: {why}")))
}

/// cuDNN's output on the sampled rows against the check kernel's (`want`), within the same
/// tolerance as ours.
fn cudnn_check(
    s: &Stream,
    cudnn: &CudnnSdpa,
    qkv: (&DeviceTensor<bf16, 3>, &DeviceTensor<bf16, 3>, &DeviceTensor<bf16, 3>),
    o: &mut DeviceTensor<bf16, 3>,
    causal: bool,
    (rows, want): (&[(usize, usize)], &[f32]),
) -> Result<(), String> {
    let seq = qkv.0.shape()[1];
    let text = |e: BenchError| match e {
        BenchError::Failed(why) | BenchError::CannotRun(why) => why,
    };
    launch_cudnn(s, cudnn, qkv, o, causal).map_err(text)?;
    let ho = o.to_host(s).map_err(|e| text(e.into()))?.as_slice().to_vec();
    within_tolerance(&ho, seq, (rows, want)).map(|_| ())
}

/// `o` (bf16 [BH, seq, 128]) on the sampled rows against the check kernel's `want`: the worst
/// error as a fraction of the tolerance, or the first element outside it.
fn within_tolerance(
    o: &[bf16],
    seq: usize,
    (rows, want): (&[(usize, usize)], &[f32]),
) -> Result<f64, String> {
    let mut worst = 0f64;
    for (r, &(h, i)) in rows.iter().enumerate() {
        for c in 0..HEAD_DIM {
            let g = f64::from(o[(h * seq + i) * HEAD_DIM + c].to_f32());
            let w = f64::from(want[r * HEAD_DIM + c]);
            let ratio = (g - w).abs() / (ABS_TOL + REL_TOL * w.abs());
            if ratio.is_nan() || ratio > 1.0 {
                return Err(format!("O[{h}][{i}][{c}] = {g} vs the check kernel's {w:.6}"));
            }
            worst = worst.max(ratio);
        }
    }
    Ok(worst)
}
