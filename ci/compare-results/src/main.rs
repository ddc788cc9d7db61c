//! `compare-results [--skip-record N]... A B`: compares two files written by generated code under
//! `CHOREO_DUMP_RESULTS=FILE` (every result a C++ wrapper copies back to the host, in call order)
//! element by element. ci/run-e2e's cross-check runs each end-to-end program on the CUDA and on
//! the CPU backend with one file each and compares them with this tool.
//!
//! A file is a sequence of records: a text line `choreo-result KIND MANTISSA COUNT`, then COUNT
//! native-endian 8-byte values. KIND is `i` (i64), `u` (u64) or `f` (f64, converted from the
//! element type, whose MANTISSA bits say how precise it is).
//!
//! The rule (docs/book/src/cpu-backend.md, "Cross-checking the backends"): integers must be equal; floats
//! must agree within `tolerance(MANTISSA) · (max(|a|, |b|) + scale)`, where `scale` is the largest
//! magnitude in the record on either side. NaN equals NaN; infinities must match exactly.
//!
//! `--skip-record N` leaves record N (counted from 0) uncompared but for its kind and length:
//! for a result that legitimately differs from run to run (e.g. which block finished last).
//!
//! Exit status: 0 when the files agree, 1 when they differ, 2 when a file cannot be read or is
//! not a results file.

use std::fmt;
use std::process::ExitCode;

/// The element kind of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Signed,
    Unsigned,
    Float,
}

impl Kind {
    fn letter(self) -> char {
        match self {
            Kind::Signed => 'i',
            Kind::Unsigned => 'u',
            Kind::Float => 'f',
        }
    }
}

/// One result: its kind, the mantissa bits of its element type and its values (as stored).
#[derive(Clone, Debug, PartialEq)]
struct Record {
    kind: Kind,
    mantissa: u32,
    values: Vec<[u8; 8]>,
}

impl Record {
    fn float(&self, i: usize) -> f64 {
        f64::from_ne_bytes(self.values[i])
    }

    fn describe(&self, i: usize) -> String {
        match self.kind {
            Kind::Signed => i64::from_ne_bytes(self.values[i]).to_string(),
            Kind::Unsigned => u64::from_ne_bytes(self.values[i]).to_string(),
            Kind::Float => format!("{:e}", self.float(i)),
        }
    }
}

/// Why a file is not a results file.
#[derive(Debug, PartialEq)]
struct FormatError {
    offset: usize,
    what: String,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.what)
    }
}

fn parse(bytes: &[u8]) -> Result<Vec<Record>, FormatError> {
    let mut records = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let error = |what: String| FormatError { offset: at, what };
        let line_end = bytes[at..]
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| error("a record header without its end of line".into()))?;
        let line = std::str::from_utf8(&bytes[at..at + line_end])
            .map_err(|_| error("a record header that is not text".into()))?;
        let fields: Vec<&str> = line.split(' ').collect();
        let [tag, kind, mantissa, count] = fields[..] else {
            return Err(error(format!(
                "expected `choreo-result KIND MANTISSA COUNT`, found `{line}`"
            )));
        };
        if tag != "choreo-result" {
            return Err(error(format!("expected `choreo-result`, found `{tag}`")));
        }
        let kind = match kind {
            "i" => Kind::Signed,
            "u" => Kind::Unsigned,
            "f" => Kind::Float,
            other => return Err(error(format!("unknown kind `{other}` (expected i, u or f)"))),
        };
        let mantissa: u32 = mantissa
            .parse()
            .ok()
            .filter(|&m| m <= 52)
            .ok_or_else(|| error(format!("bad mantissa width `{mantissa}`")))?;
        let count: usize =
            count.parse().map_err(|_| error(format!("bad element count `{count}`")))?;
        let start = at + line_end + 1;
        let end = count
            .checked_mul(8)
            .and_then(|n| start.checked_add(n))
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| error(format!("{count} values announced, the file ends before")))?;
        let values =
            bytes[start..end].chunks_exact(8).map(|c| c.try_into().expect("8 bytes")).collect();
        records.push(Record { kind, mantissa, values });
        at = end;
    }
    Ok(records)
}

/// The relative tolerance for floats stored with `mantissa` bits.
///
/// Narrow types (f16, bf16, fp8, …) are rounded from f32 on both backends: the two agree or sit
/// one step of the stored type apart (at most 2^-mantissa relative); twice that, for margin.
/// Wider results carry the differences of the arithmetic itself: nvcc contracts `a * b + c`
/// into one FMA where the host compiler does not, CUDA's `expf` and friends are within 2 ulp
/// where the host's are within 1, float atomics add in another order: 64 units of the last
/// place.
fn tolerance(mantissa: u32) -> f64 {
    let ulp = (-f64::from(mantissa)).exp2();
    if mantissa < 16 { 2.0 * ulp } else { 64.0 * ulp }
}

/// One element that differs.
#[derive(Debug, PartialEq)]
struct Difference {
    record: usize,
    element: usize,
    left: String,
    right: String,
    /// |a - b| over the allowed difference (floats that agree within tolerance: ≤ 1).
    ratio: f64,
}

/// What the comparison found.
#[derive(Debug, Default, PartialEq)]
struct Outcome {
    records: usize,
    values: usize,
    /// Values that are not bit-identical.
    unequal: usize,
    /// The largest difference within tolerance.
    largest: Option<Difference>,
    /// A mismatch of the records themselves (number, kind, count).
    structure: Option<String>,
    /// Records whose values were not compared.
    skipped: Vec<usize>,
    /// Differences beyond tolerance (the first few).
    failures: Vec<Difference>,
    failure_count: usize,
}

const FAILURES_SHOWN: usize = 10;

fn compare(left: &[Record], right: &[Record], skip: &[usize]) -> Outcome {
    let mut outcome = Outcome { records: left.len(), ..Outcome::default() };
    if left.len() != right.len() {
        outcome.structure =
            Some(format!("{} records on the left, {} on the right", left.len(), right.len()));
        return outcome;
    }
    for (r, (a, b)) in left.iter().zip(right).enumerate() {
        if a.kind != b.kind || a.mantissa != b.mantissa || a.values.len() != b.values.len() {
            outcome.structure = Some(format!(
                "record {r}: {} {} × {} on the left, {} {} × {} on the right",
                a.kind.letter(),
                a.mantissa,
                a.values.len(),
                b.kind.letter(),
                b.mantissa,
                b.values.len()
            ));
            return outcome;
        }
        if skip.contains(&r) {
            outcome.skipped.push(r);
            continue;
        }
        outcome.values += a.values.len();
        let scale = if a.kind == Kind::Float {
            (0..a.values.len())
                .flat_map(|i| [a.float(i), b.float(i)])
                .filter(|v| v.is_finite())
                .fold(0.0_f64, |m, v| m.max(v.abs()))
        } else {
            0.0
        };
        for i in 0..a.values.len() {
            if a.values[i] == b.values[i] {
                continue;
            }
            outcome.unequal += 1;
            let ratio = match a.kind {
                Kind::Signed | Kind::Unsigned => f64::INFINITY,
                Kind::Float => {
                    let (x, y) = (a.float(i), b.float(i));
                    if x.is_nan() && y.is_nan() {
                        0.0
                    } else if !x.is_finite() || !y.is_finite() {
                        f64::INFINITY
                    } else {
                        let allowed = tolerance(a.mantissa) * (x.abs().max(y.abs()) + scale);
                        (x - y).abs() / allowed
                    }
                }
            };
            let difference = || Difference {
                record: r,
                element: i,
                left: a.describe(i),
                right: b.describe(i),
                ratio,
            };
            if ratio <= 1.0 {
                if outcome.largest.as_ref().is_none_or(|l| ratio > l.ratio) {
                    outcome.largest = Some(difference());
                }
            } else {
                outcome.failure_count += 1;
                if outcome.failures.len() < FAILURES_SHOWN {
                    outcome.failures.push(difference());
                }
            }
        }
    }
    outcome
}

impl Outcome {
    fn agrees(&self) -> bool {
        self.structure.is_none() && self.failure_count == 0
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = |d: &Difference| {
            format!("record {} element {}: {} vs {}", d.record, d.element, d.left, d.right)
        };
        if let Some(structure) = &self.structure {
            return write!(f, "differ: {structure}");
        }
        if self.failure_count > 0 {
            writeln!(
                f,
                "differ: {} of {} values in {} records beyond tolerance",
                self.failure_count, self.values, self.records
            )?;
            for d in &self.failures {
                writeln!(f, "  {} ({:.3e} × the tolerance)", at(d), d.ratio)?;
            }
            if self.failure_count > self.failures.len() {
                writeln!(f, "  … and {} more", self.failure_count - self.failures.len())?;
            }
            return Ok(());
        }
        let skipped = match &self.skipped[..] {
            [] => String::new(),
            [r] => format!("; record {r} not compared"),
            rs => format!(
                "; records {} not compared",
                rs.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            ),
        };
        if self.unequal == 0 {
            return write!(
                f,
                "identical ({} records, {} values{skipped})",
                self.records, self.values
            );
        }
        write!(
            f,
            "within tolerance ({} records, {} values, {} not identical",
            self.records, self.values, self.unequal
        )?;
        if let Some(d) = &self.largest {
            write!(f, "; largest {:.3} of the tolerance at {}", d.ratio, at(d))?;
        }
        write!(f, "{skipped})")
    }
}

fn main() -> ExitCode {
    const USAGE: &str = "usage: compare-results [--skip-record N]... LEFT RIGHT   (files written \
                         under CHOREO_DUMP_RESULTS)";
    let mut args = std::env::args().skip(1);
    let mut files = Vec::new();
    let mut skip = Vec::new();
    while let Some(arg) = args.next() {
        if arg == "--skip-record" {
            match args.next().and_then(|n| n.parse::<usize>().ok()) {
                Some(n) => skip.push(n),
                None => {
                    eprintln!("compare-results: --skip-record needs a record number\n{USAGE}");
                    return ExitCode::from(2);
                }
            }
        } else {
            files.push(arg);
        }
    }
    let [left, right] = &files[..] else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let read = |path: &String| -> Result<Vec<Record>, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        parse(&bytes).map_err(|e| format!("{path}: not a results file: {e}"))
    };
    let (left, right) = match (read(left), read(right)) {
        (Ok(l), Ok(r)) => (l, r),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("compare-results: {e}");
            return ExitCode::from(2);
        }
    };
    let outcome = compare(&left, &right, &skip);
    println!("{}", outcome.to_string().trim_end());
    if outcome.agrees() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(records: &[(char, u32, Vec<[u8; 8]>)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (kind, mantissa, values) in records {
            out.extend(format!("choreo-result {kind} {mantissa} {}\n", values.len()).bytes());
            for v in values {
                out.extend(v);
            }
        }
        out
    }

    fn floats(values: &[f64]) -> Vec<[u8; 8]> {
        values.iter().map(|v| v.to_ne_bytes()).collect()
    }

    fn ints(values: &[i64]) -> Vec<[u8; 8]> {
        values.iter().map(|v| v.to_ne_bytes()).collect()
    }

    fn outcome(left: &[(char, u32, Vec<[u8; 8]>)], right: &[(char, u32, Vec<[u8; 8]>)]) -> Outcome {
        compare(&parse(&file(left)).unwrap(), &parse(&file(right)).unwrap(), &[])
    }

    #[test]
    fn identical_files_are_identical() {
        let records = [('i', 0, ints(&[1, -2, 3])), ('f', 23, floats(&[0.5, f64::NAN]))];
        let o = outcome(&records, &records);
        assert!(o.agrees());
        assert_eq!(o.to_string(), "identical (2 records, 5 values)");
    }

    #[test]
    fn integers_must_be_equal() {
        let o = outcome(&[('i', 0, ints(&[1, 2, 3]))], &[('i', 0, ints(&[1, 2, 4]))]);
        assert!(!o.agrees());
        assert_eq!(o.failure_count, 1);
        assert!(o.to_string().contains("record 0 element 2: 3 vs 4"), "{o}");
    }

    #[test]
    fn f32_results_may_differ_by_a_few_units_of_the_last_place() {
        let one_ulp = 1.0 + (-23f64).exp2();
        let o = outcome(&[('f', 23, floats(&[1.0, 2.0]))], &[('f', 23, floats(&[one_ulp, 2.0]))]);
        assert!(o.agrees(), "{o}");
        assert_eq!(o.unequal, 1);
        assert!(o.to_string().starts_with("within tolerance"), "{o}");
        let far = 1.0 + 1e-4;
        let o = outcome(&[('f', 23, floats(&[1.0, 2.0]))], &[('f', 23, floats(&[far, 2.0]))]);
        assert!(!o.agrees(), "{o}");
    }

    #[test]
    fn narrow_floats_may_differ_by_one_step_of_their_type() {
        // f16: one step at 1.0 is 2^-10.
        let step = 1.0 + (-10f64).exp2();
        let o = outcome(&[('f', 10, floats(&[1.0]))], &[('f', 10, floats(&[step]))]);
        assert!(o.agrees(), "{o}");
        let o = outcome(&[('f', 10, floats(&[1.0]))], &[('f', 10, floats(&[1.0 + 0.01]))]);
        assert!(!o.agrees(), "{o}");
    }

    #[test]
    fn small_values_are_judged_against_the_scale_of_their_record() {
        // A sum that cancels to near zero carries the rounding of its large terms.
        let o =
            outcome(&[('f', 23, floats(&[1000.0, 0.0]))], &[('f', 23, floats(&[1000.0, 1e-5]))]);
        assert!(o.agrees(), "{o}");
    }

    #[test]
    fn infinities_must_match_and_nans_match_nans() {
        let o = outcome(&[('f', 23, floats(&[f64::INFINITY]))], &[('f', 23, floats(&[1e300]))]);
        assert!(!o.agrees());
        let o = outcome(&[('f', 23, floats(&[f64::NAN]))], &[('f', 23, floats(&[-f64::NAN]))]);
        assert!(o.agrees(), "{o}");
    }

    #[test]
    fn records_must_match_in_number_kind_and_length() {
        let o = outcome(&[('i', 0, ints(&[1]))], &[]);
        assert_eq!(o.to_string(), "differ: 1 records on the left, 0 on the right");
        let o = outcome(&[('i', 0, ints(&[1]))], &[('u', 0, ints(&[1]))]);
        assert!(o.to_string().contains("record 0: i 0 × 1 on the left, u 0 × 1"), "{o}");
    }

    #[test]
    fn skipped_records_must_only_match_in_kind_and_length() {
        let left = file(&[('i', 0, ints(&[1])), ('i', 0, ints(&[5]))]);
        let right = file(&[('i', 0, ints(&[1])), ('i', 0, ints(&[6]))]);
        let (left, right) = (parse(&left).unwrap(), parse(&right).unwrap());
        let o = compare(&left, &right, &[1]);
        assert!(o.agrees(), "{o}");
        assert_eq!(o.to_string(), "identical (2 records, 1 values; record 1 not compared)");
        let shorter = parse(&file(&[('i', 0, ints(&[1])), ('i', 0, vec![])])).unwrap();
        assert!(!compare(&left, &shorter, &[1]).agrees());
    }

    #[test]
    fn malformed_files_are_reported_with_their_offset() {
        assert_eq!(parse(b"").unwrap(), vec![]);
        let e = parse(b"choreo-result f 23 2\n12345678").unwrap_err();
        assert_eq!(e.to_string(), "at byte 0: 2 values announced, the file ends before");
        let mut two = file(&[('i', 0, ints(&[7]))]);
        two.extend(b"junk\n");
        let e = parse(&two).unwrap_err();
        assert_eq!(e.offset, 28);
        assert!(e.what.contains("found `junk`"), "{e}");
        assert!(parse(b"choreo-result x 0 0\n").unwrap_err().what.contains("unknown kind"));
    }
}
