//! The GEMM of `kernels/hopper/gemm.co` (TMA + WGMMA, persistent, warp-specialised; f16 and bf16),
//! called through its generated wrappers `gemm::gemm_f16` and `gemm::gemm_bf16`:
//!
//! - checked against a CPU reference (f32 accumulation of the same 16-bit inputs) on a small
//!   product that the CPU backend runs in a moment, every element; on a CUDA GPU also on
//!   4096³ and 8192³, at whole rows and columns of C;
//! - a shape that is not a multiple of the tile is `Err(Error::RuntimeCheck)` before anything
//!   is launched;
//! - timed with events around each call: the median of a few calls after a warm-up, as TFLOP/s.
//!
//! The kernels are built for sm_90a (Hopper) only. On another GPU the first call returns the
//! CUDA error of the launch (no kernel image for the device); the app says so and skips the
//! GEMM, and its other checks still decide the exit status.

use choreo::{
    Device, DeviceRepr, DeviceTensor, Error, HostTensor, HostView, Pending, Stream, bf16, f16,
};

use crate::{AppError, gemm, random_vec};

// ANCHOR: readme_call
/// C = A · Bᵀ with the Choreo GEMM: upload A and B, multiply on stream `s`, download C.
pub fn multiply_f16(
    s: &Stream,
    a: HostView<'_, f16, 2>,
    b: HostView<'_, f16, 2>,
) -> choreo::Result<HostTensor<f16, 2>> {
    let a = DeviceTensor::from_host(s, a)?;
    let b = DeviceTensor::from_host(s, b)?;
    let mut c = DeviceTensor::zeros_on(s, [a.shape()[0], b.shape()[0]])?;
    gemm::gemm_f16(s, &a, &b, &mut c)?.wait()?; // or `.await` in async code
    c.to_host(s)
}
// ANCHOR_END: readme_call

/// The same for bf16.
pub fn multiply_bf16(
    s: &Stream,
    a: HostView<'_, bf16, 2>,
    b: HostView<'_, bf16, 2>,
) -> choreo::Result<HostTensor<bf16, 2>> {
    let a = DeviceTensor::from_host(s, a)?;
    let b = DeviceTensor::from_host(s, b)?;
    let mut c = DeviceTensor::zeros_on(s, [a.shape()[0], b.shape()[0]])?;
    gemm::gemm_bf16(s, &a, &b, &mut c)?.wait()?;
    c.to_host(s)
}

/// The two element types of the GEMM, with their wrappers.
trait Half: DeviceRepr + Copy {
    /// The name in the report.
    const NAME: &'static str;
    /// The tolerance of one element of C, relative to max(|reference|, √K / 3); see
    /// [`check`].
    const TOLERANCE: f64;
    fn from_f32(value: f32) -> Self;
    fn to_f32(self) -> f32;
    /// Upload, multiply, download ([`multiply_f16`]).
    fn multiply(
        s: &Stream,
        a: HostView<'_, Self, 2>,
        b: HostView<'_, Self, 2>,
    ) -> choreo::Result<HostTensor<Self, 2>>;
    /// The generated wrapper itself, on device tensors.
    fn launch<'a>(
        s: &'a Stream,
        a: &'a DeviceTensor<Self, 2>,
        b: &'a DeviceTensor<Self, 2>,
        c: &'a mut DeviceTensor<Self, 2>,
    ) -> choreo::Result<Pending<'a, ()>>;
}

impl Half for f16 {
    const NAME: &'static str = "f16";
    const TOLERANCE: f64 = 2e-3; // 4 × 2⁻¹¹, four half-units in the last place
    fn from_f32(value: f32) -> Self {
        f16::from_f32(value)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn multiply(
        s: &Stream,
        a: HostView<'_, Self, 2>,
        b: HostView<'_, Self, 2>,
    ) -> choreo::Result<HostTensor<Self, 2>> {
        multiply_f16(s, a, b)
    }
    fn launch<'a>(
        s: &'a Stream,
        a: &'a DeviceTensor<Self, 2>,
        b: &'a DeviceTensor<Self, 2>,
        c: &'a mut DeviceTensor<Self, 2>,
    ) -> choreo::Result<Pending<'a, ()>> {
        gemm::gemm_f16(s, a, b, c)
    }
}

impl Half for bf16 {
    const NAME: &'static str = "bf16";
    const TOLERANCE: f64 = 1.6e-2; // 4 × 2⁻⁸
    fn from_f32(value: f32) -> Self {
        bf16::from_f32(value)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn multiply(
        s: &Stream,
        a: HostView<'_, Self, 2>,
        b: HostView<'_, Self, 2>,
    ) -> choreo::Result<HostTensor<Self, 2>> {
        multiply_bf16(s, a, b)
    }
    fn launch<'a>(
        s: &'a Stream,
        a: &'a DeviceTensor<Self, 2>,
        b: &'a DeviceTensor<Self, 2>,
        c: &'a mut DeviceTensor<Self, 2>,
    ) -> choreo::Result<Pending<'a, ()>> {
        gemm::gemm_bf16(s, a, b, c)
    }
}

/// The product the CPU backend runs too: 2 x 2 tiles of C, 2 k-steps (checked in full).
const SMALL: (usize, usize, usize) = (256, 512, 128);
/// The products run on a CUDA GPU only (checked at whole rows and columns of C).
const LARGE: [usize; 2] = [4096, 8192];
/// Timed calls after the warm-up, on a GPU and on the CPU: the report gives their median.
const RUNS: usize = 5;
const CPU_RUNS: usize = 3;

/// The GEMM section of the app. `Ok` also when the GPU cannot run the kernels (not Hopper):
/// then it prints why and does nothing else.
pub fn run(device: Device, s: &Stream) -> Result<(), AppError> {
    if !check_small::<f16>(s, device)? {
        return Ok(());
    }
    check_small::<bf16>(s, device)?;
    refuse_partial_tiles::<f16>(s)?;
    refuse_partial_tiles::<bf16>(s)?;
    if device.is_cpu() {
        timed::<f16>(s, SMALL, CPU_RUNS)?;
        timed::<bf16>(s, SMALL, CPU_RUNS)?;
    } else {
        for size in LARGE {
            timed::<f16>(s, (size, size, size), RUNS)?;
            timed::<bf16>(s, (size, size, size), RUNS)?;
        }
    }
    Ok(())
}

/// Random inputs in [-1, 1) rounded to `T`, as a `rows` x `cols` matrix.
fn random_matrix<T: Half>(rows: usize, cols: usize, seed: u64) -> HostTensor<T, 2> {
    let values = random_vec(rows * cols, seed).into_iter().map(T::from_f32).collect();
    HostTensor::new(values, [rows, cols]).expect("the shape matches the data")
}

/// `C = A · Bᵀ` on the small shape through [`Half::multiply`], every element checked.
/// `Ok(false)` when the call failed with a CUDA error on a GPU other than Hopper, whose
/// kernels are not built for it (printed; nothing else of the section runs then).
fn check_small<T: Half>(s: &Stream, device: Device) -> Result<bool, AppError> {
    let (m, n, k) = SMALL;
    let a = random_matrix::<T>(m, k, 11);
    let b = random_matrix::<T>(n, k, 12);
    let c = match T::multiply(s, a.view(), b.view()) {
        Ok(c) => c,
        Err(error @ Error::Cuda { .. }) if !device.is_cpu() => {
            let (major, minor) = device.compute_capability()?;
            if (major, minor) == (9, 0) {
                return Err(error.into());
            }
            println!(
                "gemm       not run: kernels/hopper/gemm.co is built for sm_90a (Hopper) only, and this \
                 GPU is sm_{major}{minor}: {error}"
            );
            return Ok(false);
        }
        Err(error) => return Err(error.into()),
    };
    let every = (0..m).flat_map(|i| (0..n).map(move |j| (i, j)));
    let worst = check::<T>(&a, &b, &c, every)?;
    println!(
        "gemm {:<5} {m} x {n} x {k}, all {} elements  max error {worst:.1e} (tolerance {:.1e})  ok",
        T::NAME,
        m * n,
        T::TOLERANCE
    );
    Ok(true)
}

/// Compares `c` with the reference at `points`: each element's f32 sum of the products of the
/// same 16-bit inputs. Returns the largest error, or fails at the first element whose error,
/// relative to max(|reference|, √K / 3), is above [`Half::TOLERANCE`] (or that is NaN).
///
/// The tolerance: C is rounded to the 16-bit type, an error of at most half a unit in the last
/// place (2⁻¹¹ relative for f16, 2⁻⁸ for bf16). The products of two 16-bit values are exact in
/// f32, and the kernel adds them in another order than the reference, in f32 (2⁻²⁴ per
/// addition): even at K = 8192 that is far below the output rounding. An element near zero
/// cannot be held to a relative error of its own, so the error is measured against
/// max(|reference|, √K / 3), √K / 3 being the typical magnitude of an element (each product
/// of two inputs uniform in [-1, 1) has variance 1/9). Four half-units (`TOLERANCE`) leave room
/// for the reference's own rounding to the type and are still far below a wrong element: a
/// missing or misplaced tile is off by the order of √K / 3.
fn check<T: Half>(
    a: &HostTensor<T, 2>,
    b: &HostTensor<T, 2>,
    c: &HostTensor<T, 2>,
    points: impl Iterator<Item = (usize, usize)>,
) -> Result<f64, AppError> {
    let [_, k] = a.shape();
    let [_, n] = c.shape();
    let (fa, fb): (Vec<f32>, Vec<f32>) = (
        a.as_slice().iter().map(|x| x.to_f32()).collect(),
        b.as_slice().iter().map(|x| x.to_f32()).collect(),
    );
    let scale = (k as f64).sqrt() / 3.0;
    let mut worst = 0f64;
    for (i, j) in points {
        let (row, col) = (&fa[i * k..(i + 1) * k], &fb[j * k..(j + 1) * k]);
        let want: f32 = row.iter().zip(col).map(|(x, y)| x * y).sum();
        let got = c.as_slice()[i * n + j].to_f32();
        let error = f64::from((got - want).abs()) / f64::from(want.abs()).max(scale);
        if error.is_nan() || error > T::TOLERANCE {
            return Err(AppError::Failed(format!(
                "gemm {}: C[{i}][{j}] = {got}, want {want} (error {error:.2e} of max(|want|, \
                 √K/3) > {:.1e})",
                T::NAME,
                T::TOLERANCE
            )));
        }
        worst = worst.max(error);
    }
    Ok(worst)
}

/// A shape that is not a multiple of the 128 x 256 x 64 tile (M = 200) is refused by the
/// kernel's `assert` before anything is launched: `Err(Error::RuntimeCheck)`.
fn refuse_partial_tiles<T: Half>(s: &Stream) -> Result<(), AppError> {
    let (m, n, k) = (200, SMALL.1, SMALL.2);
    let a = DeviceTensor::<T, 2>::zeros_on(s, [m, k])?;
    let b = DeviceTensor::<T, 2>::zeros_on(s, [n, k])?;
    let mut c = DeviceTensor::<T, 2>::zeros_on(s, [m, n])?;
    match T::launch(s, &a, &b, &mut c) {
        Err(error @ Error::RuntimeCheck { .. }) => {
            println!("gemm {:<5} {m} x {n} x {k} refused: {error}  ok", T::NAME);
            Ok(())
        }
        Err(error) => Err(error.into()),
        Ok(pending) => {
            pending.wait()?;
            Err(AppError::Failed(format!(
                "gemm {}: {m} x {n} x {k} (M not a multiple of 128) was accepted",
                T::NAME
            )))
        }
    }
}

/// Times `runs` calls (after one warm-up call), each between two events on `s`, and prints
/// the median as TFLOP/s; then checks whole rows and columns of C (every element on shapes
/// up to the small one).
fn timed<T: Half>(
    s: &Stream,
    (m, n, k): (usize, usize, usize),
    runs: usize,
) -> Result<(), AppError> {
    let ha = random_matrix::<T>(m, k, 13);
    let hb = random_matrix::<T>(n, k, 14);
    let a = DeviceTensor::from_host(s, ha.view())?;
    let b = DeviceTensor::from_host(s, hb.view())?;
    let mut c = DeviceTensor::<T, 2>::zeros_on(s, [m, n])?;
    // ANCHOR: timing
    T::launch(s, &a, &b, &mut c)?.wait()?; // warm-up
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = s.record_event()?;
        let pending = T::launch(s, &a, &b, &mut c)?;
        let end = s.record_event()?;
        pending.wait()?;
        end.synchronize()?; // recorded after the call's work, so it may complete later
        times.push(start.elapsed_ms(&end)?);
    }
    times.sort_by(f32::total_cmp);
    let ms = times[times.len() / 2];
    let tflops = 2.0 * (m * n * k) as f64 / (f64::from(ms) * 1e-3) / 1e12;
    // ANCHOR_END: timing
    let hc = c.to_host(s)?;
    let worst = if m * n <= SMALL.0 * SMALL.1 {
        check::<T>(&ha, &hb, &hc, (0..m).flat_map(|i| (0..n).map(move |j| (i, j))))?
    } else {
        check::<T>(&ha, &hb, &hc, sample_points(m, n).into_iter())?
    };
    println!(
        "gemm {:<5} {m} x {n} x {k}  {ms:8.3} ms (median of {runs})  {} TFLOP/s  max error \
         {worst:.1e}  ok",
        T::NAME,
        three_digits(tflops)
    );
    Ok(())
}

/// `x` with three significant digits (`612`, `1.23`, `0.000123`).
pub(crate) fn three_digits(x: f64) -> String {
    let decimals = if x > 0.0 { (2.0 - x.log10().floor()).max(0.0) as usize } else { 0 };
    format!("{x:.decimals$}")
}

/// Whole rows and columns of an `m` x `n` C: the first and last two and two in between (each
/// in another tile of the 128 x 256 grid).
fn sample_points(m: usize, n: usize) -> Vec<(usize, usize)> {
    let pick = |extent: usize| [0, 1, extent / 3 + 5, extent / 2 + 63, extent - 2, extent - 1];
    let rows = pick(m).into_iter().flat_map(|i| (0..n).map(move |j| (i, j)));
    let cols = pick(n).into_iter().flat_map(|j| (0..m).map(move |i| (i, j)));
    rows.chain(cols).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu() -> Stream {
        Stream::new_on_device(Device::cpu()).expect("a CPU stream")
    }

    /// The README's call on the CPU backend (which emulates TMA and WGMMA): every element of
    /// the small product is right, for both types.
    #[test]
    fn multiply_is_right_on_the_cpu() {
        let s = cpu();
        assert!(check_small::<f16>(&s, Device::cpu()).unwrap());
        assert!(check_small::<bf16>(&s, Device::cpu()).unwrap());
    }

    /// Every shape that is not a multiple of the tile, in each dimension, is an
    /// `Error::RuntimeCheck` of the call itself; C is not touched.
    #[test]
    fn partial_tiles_are_a_runtime_check_error() {
        let s = cpu();
        for (m, n, k) in [(200, 256, 64), (128, 300, 64), (128, 256, 100)] {
            let a = DeviceTensor::<f16, 2>::zeros_on(&s, [m, k]).unwrap();
            let b = DeviceTensor::<f16, 2>::zeros_on(&s, [n, k]).unwrap();
            let ones = vec![f16::ONE; m * n];
            let mut c = DeviceTensor::from_host(&s, HostView::new(&ones, [m, n]).unwrap()).unwrap();
            match gemm::gemm_f16(&s, &a, &b, &mut c) {
                Err(Error::RuntimeCheck { function, message }) => {
                    assert_eq!(function, "gemm_f16");
                    assert!(message.contains("multiples of 128, 256, 64"), "{message}");
                }
                Err(other) => panic!("{m} x {n} x {k}: {other}"),
                Ok(_) => panic!("{m} x {n} x {k} was accepted"),
            }
            assert!(c.to_host(&s).unwrap().as_slice().iter().all(|&x| x == f16::ONE));
        }
    }

    /// The reference check finds a wrong element, a NaN, and one off by a tile's worth.
    #[test]
    fn check_catches_wrong_elements() {
        let (m, n, k) = (4, 8, 64);
        let a = random_matrix::<f16>(m, k, 1);
        let b = random_matrix::<f16>(n, k, 2);
        let exact: Vec<f16> = (0..m * n)
            .map(|x| {
                let (i, j) = (x / n, x % n);
                let dot: f32 = (0..k)
                    .map(|l| a.as_slice()[i * k + l].to_f32() * b.as_slice()[j * k + l].to_f32())
                    .sum();
                f16::from_f32(dot)
            })
            .collect();
        let all = || (0..m).flat_map(|i| (0..n).map(move |j| (i, j)));
        let c = HostTensor::new(exact.clone(), [m, n]).unwrap();
        let worst = check::<f16>(&a, &b, &c, all()).unwrap();
        assert!(worst <= 2f64.powi(-11), "{worst}");
        for wrong in [f16::NAN, f16::ZERO, f16::from_f32(exact[5].to_f32() + 0.05)] {
            let mut bad = exact.clone();
            bad[5] = wrong;
            let c = HostTensor::new(bad, [m, n]).unwrap();
            assert!(check::<f16>(&a, &b, &c, all()).is_err(), "{wrong} accepted");
        }
    }

    #[test]
    fn sample_points_cover_the_edges_in_range() {
        let points = sample_points(4096, 8192);
        assert!(points.contains(&(0, 0)) && points.contains(&(4095, 8191)));
        assert!(points.iter().all(|&(i, j)| i < 4096 && j < 8192));
        assert_eq!(points.len(), 6 * 8192 + 6 * 4096);
    }

    #[test]
    fn three_significant_digits() {
        assert_eq!(three_digits(612.4), "612");
        assert_eq!(three_digits(1.234), "1.23");
        assert_eq!(three_digits(0.000_123_4), "0.000123");
    }
}
