//! Statistics over repeated trials. Benchmarks report the median (robust against the odd slow
//! trial: a page fault, another process) and the spread as min/max, so a reader can tell a real
//! difference between two rows from noise.

/// The summary of one measured quantity over its trials.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// The median of the trials.
    pub median: f64,
    /// The smallest trial.
    pub min: f64,
    /// The largest trial.
    pub max: f64,
    /// How many trials.
    pub trials: usize,
}

impl Summary {
    /// Summarises `samples`; `None` when there are none or one is not a finite number.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median =
            if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
        Some(Summary { median, min: sorted[0], max: sorted[n - 1], trials: n })
    }

    /// The spread (max − min) relative to the median, e.g. `0.03` for 3 %.
    pub fn relative_spread(&self) -> f64 {
        if self.median == 0.0 { 0.0 } else { (self.max - self.min) / self.median }
    }
}

#[cfg(test)]
mod tests {
    use super::Summary;

    #[test]
    fn median_of_odd_and_even_counts() {
        let odd = Summary::of(&[5.0, 1.0, 3.0]).unwrap();
        assert_eq!((odd.median, odd.min, odd.max, odd.trials), (3.0, 1.0, 5.0, 3));
        let even = Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(even.median, 2.5);
        assert!((even.relative_spread() - 3.0 / 2.5).abs() < 1e-12);
    }

    #[test]
    fn nothing_or_nan_has_no_summary() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
    }
}
