//! The attention forward's host side (the `attention` section, its GPU and CPU tests): inputs,
//! the float64 reference of one output row and the checks of a kernel's output against it.
//!
//! Layout: Q, K, V, O bf16 `[BH, S, 128]` (batch·heads, sequence, head dimension), contiguous;
//! `O[h][i] = Σ_j softmax_j(Q[h][i]·K[h][j] / sqrt(128)) V[h][j]`, over all keys j, or over
//! j <= i when causal.
//!
//! Tolerance of a bf16 output O computed with f32 accumulation and softmax (the Choreo kernel,
//! cuDNN): O is rounded to bf16 once (relative 2^-8 = 0.0039 of |O|), and P = exp(S - m) is
//! rounded to bf16 before P·V (each term relative 2^-8; the row sum l uses the unrounded P), so
//! the weights of O, a convex combination of V's rows, are off by at most 2·2^-8 relative
//! together: |ΔO| <= 2^-8 |O| + 2·2^-8 max|V| plus the f32 roundings and `exp` approximations
//! (far smaller). With |V| <= 1: |ΔO| <= 0.01 + 0.008 |O| ([`ABS_TOL`], [`REL_TOL`]); a wrong
//! mask, scale, slot or row is off by much more (O's values are O(0.1) to O(1)).

use choreo::bf16;

/// The head dimension of the kernels.
pub const HEAD_DIM: usize = 128;
/// Absolute part of the tolerance (see the module documentation).
pub const ABS_TOL: f64 = 0.01;
/// Relative part of the tolerance.
pub const REL_TOL: f64 = 0.008;

/// Floating-point operations of one forward: two products of BH·S²·D multiply-adds (S = Q·Kᵀ
/// and O = P·V), halved when causal (the FlashAttention papers' convention).
pub fn flops(bh: usize, s: usize, causal: bool) -> f64 {
    let full = 4.0 * bh as f64 * (s as f64) * (s as f64) * HEAD_DIM as f64;
    if causal { full / 2.0 } else { full }
}

/// `n` values uniform in `[-amplitude, amplitude)`, rounded to bf16 (xorshift, from `seed`).
pub fn random_values(n: usize, amplitude: f32, seed: u64) -> Vec<bf16> {
    let mut state = seed.max(1);
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
            bf16::from_f32(amplitude * (2.0 * unit - 1.0))
        })
        .collect()
}

/// Q, K and V of `bh` heads of `s` tokens: Q and K in [-2, 2) (scaled scores with a standard
/// deviation of about 1.3: neither a flat nor a one-hot softmax), V in [-1, 1).
pub fn random_qkv(bh: usize, s: usize, seed: u64) -> [Vec<bf16>; 3] {
    let n = bh * s * HEAD_DIM;
    [random_values(n, 2.0, seed), random_values(n, 2.0, seed + 1), random_values(n, 1.0, seed + 2)]
}

/// Row `(h, i)` of O in float64 from the bf16 inputs.
pub fn reference_row(
    (q, k, v): (&[bf16], &[bf16], &[bf16]),
    s: usize,
    (h, i): (usize, usize),
    causal: bool,
) -> [f64; HEAD_DIM] {
    let d = HEAD_DIM;
    let head = h * s * d;
    let row = |x: &[bf16], j: usize| -> Vec<f64> {
        x[head + j * d..head + (j + 1) * d].iter().map(|e| f64::from(e.to_f32())).collect()
    };
    let qi = row(q, i);
    let keys = if causal { i + 1 } else { s };
    let scale = 1.0 / (d as f64).sqrt();
    let scores: Vec<f64> = (0..keys)
        .map(|j| row(k, j).iter().zip(&qi).map(|(a, b)| a * b).sum::<f64>() * scale)
        .collect();
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
    let sum: f64 = weights.iter().sum();
    let mut out = [0.0; HEAD_DIM];
    for (j, w) in weights.iter().enumerate() {
        for (o, x) in out.iter_mut().zip(&v[head + j * d..head + (j + 1) * d]) {
            *o += w * f64::from(x.to_f32());
        }
    }
    out.iter_mut().for_each(|o| *o /= sum);
    out
}

/// Query rows worth checking in `bh` heads of `s` tokens: the first and last rows of the first
/// and last heads, the rows at both sides of every 64-row boundary up to 1024 (consumer halves,
/// tiles, the diagonal), and 16 pseudo-random rows.
pub fn sample_rows(bh: usize, s: usize) -> Vec<(usize, usize)> {
    let mut rows = vec![(0, 0), (0, s - 1), (bh - 1, 0), (bh - 1, s - 1)];
    for b in (64..s.min(1024)).step_by(64) {
        rows.push((b / 64 % bh, b - 1));
        rows.push(((b / 64 + 1) % bh, b));
    }
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ (bh * s) as u64;
    for _ in 0..16 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        rows.push(((state % bh as u64) as usize, ((state >> 20) % s as u64) as usize));
    }
    rows.sort_unstable();
    rows.dedup();
    rows
}

/// Every row of `bh` heads of `s` tokens.
pub fn all_rows(bh: usize, s: usize) -> Vec<(usize, usize)> {
    (0..bh).flat_map(|h| (0..s).map(move |i| (h, i))).collect()
}

/// Checks `rows` of a kernel's output `o` against the float64 reference; the largest error
/// relative to the tolerance (<= 1 when right), or which element is wrong and by how much.
pub fn check_rows(
    what: &str,
    (q, k, v, o): (&[bf16], &[bf16], &[bf16], &[bf16]),
    s: usize,
    rows: &[(usize, usize)],
    causal: bool,
) -> Result<f64, String> {
    let mut worst = 0f64;
    for &(h, i) in rows {
        let want = reference_row((q, k, v), s, (h, i), causal);
        let got = &o[(h * s + i) * HEAD_DIM..(h * s + i + 1) * HEAD_DIM];
        for (c, (g, w)) in got.iter().zip(&want).enumerate() {
            let g = f64::from(g.to_f32());
            let ratio = (g - w).abs() / (ABS_TOL + REL_TOL * w.abs());
            if ratio.is_nan() || ratio > 1.0 {
                return Err(format!(
                    "{what}: O[{h}][{i}][{c}] = {g}, want {w:.6} (tolerance {ABS_TOL} + {REL_TOL}·|O|)"
                ));
            }
            worst = worst.max(ratio);
        }
    }
    Ok(worst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_is_a_softmax_average_and_the_check_can_fail() {
        let (bh, s) = (2, 64);
        let [q, k, v] = random_qkv(bh, s, 5);
        // Causal row 0 sees key 0 alone: O = V[0].
        let row = reference_row((&q, &k, &v), s, (1, 0), true);
        for (c, o) in row.iter().enumerate() {
            assert_eq!(*o, f64::from(v[s * HEAD_DIM + c].to_f32()));
        }
        // Equal keys: a plain average of V's rows.
        let k0 = vec![bf16::from_f32(0.5); bh * s * HEAD_DIM];
        let row = reference_row((&q, &k0, &v), s, (0, 9), false);
        let mean: f64 = (0..s).map(|j| f64::from(v[j * HEAD_DIM + 3].to_f32())).sum::<f64>() / 64.0;
        assert!((row[3] - mean).abs() < 1e-12);
        // The reference's own rounding passes; a non-causal output fails the causal check.
        let rows = all_rows(bh, s);
        let round = |causal: bool| -> Vec<bf16> {
            rows.iter()
                .flat_map(|&r| reference_row((&q, &k, &v), s, r, causal))
                .map(bf16::from_f64)
                .collect()
        };
        let o = round(true);
        assert!(check_rows("causal", (&q, &k, &v, &o), s, &rows, true).unwrap() <= 1.0);
        let o = round(false);
        assert!(check_rows("causal", (&q, &k, &v, &o), s, &rows, true).is_err());
        assert!(sample_rows(bh, s).iter().all(|&(h, i)| h < bh && i < s));
        assert_eq!(flops(2, 1024, true) * 2.0, flops(2, 1024, false));
    }
}
