//! The error type of a build, and how it reaches cargo.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why [`Builder::build`](crate::Builder::build) failed.
///
/// `Display` gives the whole story (rendered diagnostics, nvcc's output, what to install);
/// [`Error::report_to_cargo`] prints it the way a build script should and is what
/// [`UnwrapOrExit::unwrap_or_exit`](crate::UnwrapOrExit::unwrap_or_exit) and
/// [`compile`](crate::compile) use. `Debug` shows the same text as `Display`, so that
/// `fn main() -> Result<(), Box<dyn std::error::Error>>` build scripts print something readable.
#[non_exhaustive]
pub enum Error {
    /// A glob pattern is malformed.
    InvalidPattern {
        /// The pattern as given.
        pattern: String,
        /// What is wrong with it.
        message: String,
    },
    /// A glob pattern (of `.co` or of `.cu` files) matched no file, or no input of either kind
    /// was given at all (`pattern` is `None`).
    NoInputs {
        /// The pattern that matched nothing.
        pattern: Option<String>,
    },
    /// The name given to [`Builder::build`](crate::Builder::build) cannot name a library and a
    /// Rust file.
    InvalidName {
        /// The name as given.
        name: String,
    },
    /// A `.co` file's stem does not make a Rust module name.
    InvalidModuleName {
        /// The `.co` file.
        file: PathBuf,
        /// The module name derived from its stem.
        module: String,
    },
    /// Two `.co` files would become Rust modules of the same name.
    DuplicateModule {
        /// The module name.
        module: String,
        /// The first file.
        first: PathBuf,
        /// The second file.
        second: PathBuf,
    },
    /// The architecture is not one the compiler supports.
    InvalidArch {
        /// Where the value came from: `Builder::arch` or `CHOREO_CUDA_ARCH`.
        origin: &'static str,
        /// The compiler's message (it lists the supported architectures).
        message: String,
    },
    /// An environment variable has a value this crate cannot use.
    InvalidEnv {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
    /// A variable that cargo sets for build scripts is missing (not running in a build script?).
    MissingEnv {
        /// The variable.
        var: &'static str,
    },
    /// Reading or writing a file failed.
    Io {
        /// What was being done, e.g. `"read"`.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A `.co` file is not valid UTF-8.
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// One or more `.co` files have errors; their diagnostics are rendered.
    Diagnostics(Vec<FileDiagnostics>),
    /// `NVCC` (or another explicit setting) names an nvcc that does not exist.
    NvccNotFound {
        /// The setting, e.g. `NVCC`.
        origin: &'static str,
        /// The path it names.
        path: PathBuf,
    },
    /// The CUDA toolkit that was found cannot be used (no headers, no `cudart_static` for the
    /// target); the message says what to install.
    Toolkit {
        /// The toolkit root.
        root: PathBuf,
        /// What is missing and how to get it.
        message: String,
    },
    /// A program could not be started.
    Spawn {
        /// The program.
        program: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// nvcc failed on one or more `.cu` files (generated or hand-written).
    Nvcc(Vec<NvccFailure>),
    /// The host C++ compiler failed on the CPU version (`.cpp`) of one or more `.co` files
    /// (`cu_file` of each failure is the generated `.cpp`).
    CxxCompile(Vec<NvccFailure>),
    /// No C++ compiler was found for the CPU version of the kernels.
    CxxNotFound {
        /// `cc`'s message.
        message: String,
    },
    /// `CHOREO_NVCC=require` and no usable nvcc was found.
    NvccRequired {
        /// Why none could be used.
        reason: String,
    },
    /// Making the hidden symbols of a CPU object local with `objcopy` failed.
    Objcopy {
        /// The object.
        object: PathBuf,
        /// The command line (empty when objcopy did not run).
        command: String,
        /// What went wrong (objcopy's exit status and standard error).
        message: String,
    },
    /// Two objects of the build define the same symbol, so linking both would fail: host code
    /// of a `.co` file with external linkage that the CPU object could not keep to itself (no
    /// `objcopy`, or default visibility asked for), or two files defining one name.
    DuplicateSymbols(Vec<DuplicateSymbol>),
    /// Creating the static library failed.
    Archive {
        /// The command line.
        command: String,
        /// Its exit status, as text.
        status: String,
        /// Its standard error.
        stderr: String,
    },
}

/// The diagnostics of one `.co` file that has errors.
#[derive(Debug, Clone)]
pub struct FileDiagnostics {
    /// The `.co` file.
    pub file: PathBuf,
    /// Number of errors.
    pub errors: usize,
    /// Number of warnings.
    pub warnings: usize,
    /// All its diagnostics, rendered like rustc (codespan, no colour).
    pub rendered: String,
}

/// A symbol that two objects of a build define.
#[derive(Debug, Clone)]
pub struct DuplicateSymbol {
    /// The symbol (as the linker sees it: C++ names mangled).
    pub symbol: String,
    /// The `.co` (or hand-written `.cu`) file of the first object, and its backend (`CUDA`,
    /// `CPU`).
    pub first: (PathBuf, &'static str),
    /// The same for the second object.
    pub second: (PathBuf, &'static str),
    /// Why the CPU object still exports it: no `objcopy` was found.
    pub no_objcopy: bool,
}

impl DuplicateSymbol {
    /// `<file>: <symbol> is defined by both the CUDA and the CPU object of this file`, or the
    /// same naming two files.
    pub(crate) fn describe(&self) -> String {
        let (first, first_backend) = &self.first;
        let (second, second_backend) = &self.second;
        if first == second {
            format!(
                "{}: `{}` is defined by both the {first_backend} and the {second_backend} \
                 object of this file",
                first.display(),
                self.symbol
            )
        } else {
            format!(
                "{}: `{}` is defined by its {second_backend} object and by the \
                 {first_backend} object of {}",
                second.display(),
                self.symbol,
                first.display()
            )
        }
    }
}

/// One failed nvcc run.
#[derive(Debug, Clone)]
pub struct NvccFailure {
    /// The file the user wrote, as given: the `.co` file the `.cu` was generated from, or the
    /// hand-written `.cu` ([`Builder::cuda_file`](crate::Builder::cuda_file)).
    pub source_file: PathBuf,
    /// The `.cu` file nvcc compiled: the generated one, or the hand-written one (absolute).
    pub cu_file: PathBuf,
    /// Whether `cu_file` is a hand-written file rather than generated from `source_file`.
    pub hand_written: bool,
    /// The command line.
    pub command: String,
    /// nvcc's exit status, as text.
    pub status: String,
    /// nvcc's standard error and output (for generated files its messages name `.co` lines
    /// through the generated `#line` directives, or `.cu` lines of generated code).
    pub output: String,
}

impl Error {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io { action, path: path.into(), source }
    }

    /// One line per failing input, for `cargo::error=` (no newlines; `file: what`).
    pub fn summary_lines(&self) -> Vec<String> {
        match self {
            Error::Diagnostics(files) => files
                .iter()
                .map(|f| format!("{}: {}", f.file.display(), plural(f.errors, "error")))
                .collect(),
            Error::CxxCompile(failures) => failures
                .iter()
                .map(|f| {
                    format!(
                        "{}: the C++ compiler failed on the generated {} ({})",
                        f.source_file.display(),
                        f.cu_file.display(),
                        f.status
                    )
                })
                .collect(),
            Error::DuplicateSymbols(symbols) => symbols.iter().map(|s| s.describe()).collect(),
            Error::Nvcc(failures) => failures
                .iter()
                .map(|f| {
                    if f.hand_written {
                        format!("{}: nvcc failed ({})", f.source_file.display(), f.status)
                    } else {
                        format!(
                            "{}: nvcc failed on the generated {} ({})",
                            f.source_file.display(),
                            f.cu_file.display(),
                            f.status
                        )
                    }
                })
                .collect(),
            other => vec![one_line(&other.headline())],
        }
    }

    /// Prints the error the way a build script should: the full text (rendered diagnostics,
    /// nvcc's output) to stderr, which cargo shows when the build fails, and one
    /// `cargo::error=` line per failing file (or one for the whole error).
    pub fn report_to_cargo(&self) {
        eprintln!("{self}");
        for line in self.summary_lines() {
            println!("cargo::error={line}");
        }
    }

    /// The first line of the message.
    fn headline(&self) -> String {
        match self {
            Error::InvalidPattern { pattern, message } => {
                format!("invalid glob pattern `{pattern}`: {message}")
            }
            Error::NoInputs { pattern: Some(pattern) } => {
                format!("the pattern `{pattern}` matches no file")
            }
            Error::NoInputs { pattern: None } => {
                "no .co or .cu files were given (use Builder::file, Builder::files, \
                 Builder::cuda_file or Builder::cuda_files)"
                    .to_owned()
            }
            Error::InvalidName { name } => format!(
                "`{name}` cannot name the kernels' output: use letters, digits and `_`, not \
                 starting with a digit"
            ),
            Error::InvalidModuleName { file, module } => format!(
                "{}: the file name does not make a Rust module name (`{module}`); rename the \
                 file so its stem is an identifier (letters, digits, `_`, `-`), not a keyword",
                file.display()
            ),
            Error::DuplicateModule { module, first, second } => format!(
                "{} and {} would both become the Rust module `{module}`; rename one of them",
                first.display(),
                second.display()
            ),
            Error::InvalidArch { origin, message } => format!("{origin}: {message}"),
            Error::InvalidEnv { var, value, expected } => {
                format!("{var}={value:?} is not valid: expected {expected}")
            }
            Error::MissingEnv { var } => format!(
                "the environment variable {var} is not set: choreo-build runs in build scripts \
                 (cargo sets it); outside one, set it (or Builder::out_dir for OUT_DIR)"
            ),
            Error::Io { action, path, source } => {
                format!("cannot {action} {}: {source}", path.display())
            }
            Error::NotUtf8 { path, offset } => {
                format!("{}: not valid UTF-8 (invalid byte at offset {offset})", path.display())
            }
            Error::Diagnostics(files) => {
                let errors: usize = files.iter().map(|f| f.errors).sum();
                format!("{} in {}", plural(errors, "error"), plural(files.len(), ".co file"))
            }
            Error::NvccNotFound { origin, path } => format!(
                "{origin} names {}, which does not exist; point it at nvcc, or unset it to \
                 search CUDA_HOME, CUDA_PATH, PATH and the ci/install-cuda cache",
                path.display()
            ),
            Error::Toolkit { root, message } => {
                format!("the CUDA toolkit at {} cannot be used: {message}", root.display())
            }
            Error::Spawn { program, source } => {
                format!("cannot run {}: {source}", program.display())
            }
            Error::Nvcc(failures) => {
                let noun = if failures.iter().all(|f| f.hand_written) {
                    "hand-written .cu file"
                } else if failures.iter().any(|f| f.hand_written) {
                    ".cu file"
                } else {
                    "generated .cu file"
                };
                format!("nvcc failed on {}", plural(failures.len(), noun))
            }
            Error::Archive { command, status, .. } => {
                format!("creating the static library failed ({status}): {command}")
            }
            Error::Objcopy { object, message, .. } => format!(
                "cannot make the hidden symbols of the CPU object {} local: {}",
                object.display(),
                one_line(message)
            ),
            Error::DuplicateSymbols(symbols) => format!(
                "{} defined by two objects of the kernels library: linking them would fail",
                if symbols.len() == 1 {
                    "a symbol is".to_owned()
                } else {
                    format!("{} symbols are", symbols.len())
                }
            ),
            Error::CxxCompile(failures) => format!(
                "the C++ compiler failed on the CPU version of {}",
                plural(failures.len(), ".co file")
            ),
            Error::CxxNotFound { message } => format!(
                "no C++ compiler for the CPU version of the kernels: {message}; install one \
                 (g++ or clang++) or set CXX"
            ),
            Error::NvccRequired { reason } => format!(
                "CHOREO_NVCC=require, but the kernels cannot be compiled for CUDA: {reason}"
            ),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "choreo-build: {}", self.headline())?;
        match self {
            Error::Diagnostics(files) => {
                for file in files {
                    write!(f, "\n\n{}", file.rendered.trim_end())?;
                }
            }
            Error::Nvcc(failures) | Error::CxxCompile(failures) => {
                for failure in failures {
                    write!(f, "\n\n{}", failure.cu_file.display())?;
                    if !failure.hand_written {
                        write!(f, " (generated from {})", failure.source_file.display())?;
                    }
                    write!(
                        f,
                        ": {}\ncommand: {}\n{}",
                        failure.status,
                        failure.command,
                        failure.output.trim_end()
                    )?;
                }
            }
            Error::Archive { stderr, .. } if !stderr.trim().is_empty() => {
                write!(f, "\n{}", stderr.trim_end())?;
            }
            Error::Objcopy { command, .. } if !command.is_empty() => {
                write!(f, "\ncommand: {command}")?;
            }
            Error::DuplicateSymbols(symbols) => {
                for symbol in symbols {
                    write!(f, "\n  {}", symbol.describe())?;
                }
                write!(
                    f,
                    "\nhelp: host code of a .co file (functions, globals, __device__ helpers) \
                     is compiled once for CUDA and once for the CPU, and a program links both \
                     objects; give such definitions internal linkage: `static`, `inline`, or an \
                     unnamed namespace"
                )?;
                if symbols.iter().any(|s| s.no_objcopy) {
                    write!(
                        f,
                        "\nnote: choreo-build keeps the CPU object's copies local with objcopy, \
                         which was not found: install binutils (or LLVM's llvm-objcopy), or \
                         set OBJCOPY"
                    )?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// A toolkit that discovery cannot use becomes the variant of the same name and fields.
impl From<choreo_toolkit::Error> for Error {
    fn from(error: choreo_toolkit::Error) -> Error {
        match error {
            choreo_toolkit::Error::InvalidEnv { var, value, expected } => {
                Error::InvalidEnv { var, value, expected }
            }
            choreo_toolkit::Error::NvccNotFound { origin, path } => {
                Error::NvccNotFound { origin, path }
            }
            choreo_toolkit::Error::Toolkit { root, message } => Error::Toolkit { root, message },
            other => Error::Toolkit { root: PathBuf::new(), message: other.to_string() },
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::Spawn { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// `3 errors`, `1 error`.
pub(crate) fn plural(count: usize, noun: &str) -> String {
    if count == 1 { format!("1 {noun}") } else { format!("{count} {noun}s") }
}

/// Text made safe for a single `cargo::` line.
pub(crate) fn one_line(text: &str) -> String {
    text.split(['\n', '\r'])
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnostics_error_has_one_summary_line_per_file_and_the_rendered_text() {
        let error = Error::Diagnostics(vec![
            FileDiagnostics {
                file: "src/a.co".into(),
                errors: 2,
                warnings: 0,
                rendered: "error[E0301]: x\n  ┌─ src/a.co:2:7\n".into(),
            },
            FileDiagnostics {
                file: "src/b.co".into(),
                errors: 1,
                warnings: 1,
                rendered: "error[E0401]: y\n".into(),
            },
        ]);
        assert_eq!(error.summary_lines(), ["src/a.co: 2 errors", "src/b.co: 1 error"]);
        let text = error.to_string();
        assert!(text.starts_with("choreo-build: 3 errors in 2 .co files"), "{text}");
        assert!(text.contains("src/a.co:2:7"), "{text}");
        assert!(text.contains("error[E0401]: y"), "{text}");
        assert_eq!(format!("{error:?}"), text);
    }

    #[test]
    fn nvcc_failure_shows_nvcc_output_and_names_both_files() {
        let error = Error::Nvcc(vec![NvccFailure {
            source_file: "k/scale.co".into(),
            cu_file: "/out/choreo/kernels/scale.cu".into(),
            hand_written: false,
            command: "nvcc -c scale.cu".into(),
            status: "exit status: 1".into(),
            output: "k/scale.co(12): error: identifier \"q\" is undefined\n".into(),
        }]);
        let lines = error.summary_lines();
        assert_eq!(lines.len(), 1);
        assert!(lines[0].starts_with("k/scale.co: nvcc failed on the generated"), "{lines:?}");
        let text = error.to_string();
        assert!(text.contains("k/scale.co(12): error: identifier"), "{text}");
        assert!(text.contains("command: nvcc -c scale.cu"), "{text}");
    }

    #[test]
    fn nvcc_failure_of_a_hand_written_file_names_it_and_not_a_co_file() {
        let failure = NvccFailure {
            source_file: "cuda/util.cu".into(),
            cu_file: "/pkg/cuda/util.cu".into(),
            hand_written: true,
            command: "nvcc -c /pkg/cuda/util.cu".into(),
            status: "exit status: 2".into(),
            output: "/pkg/cuda/util.cu(3): error: expected a \";\"\n".into(),
        };
        let error = Error::Nvcc(vec![failure.clone()]);
        assert_eq!(error.summary_lines(), ["cuda/util.cu: nvcc failed (exit status: 2)"]);
        let text = error.to_string();
        assert!(text.starts_with("choreo-build: nvcc failed on 1 hand-written .cu file"), "{text}");
        assert!(text.contains("/pkg/cuda/util.cu: exit status: 2"), "{text}");
        assert!(text.contains("util.cu(3): error: expected"), "{text}");
        assert!(!text.contains("generated"), "{text}");
        // Mixed with a generated file: the headline counts both.
        let generated = NvccFailure {
            source_file: "k/scale.co".into(),
            cu_file: "/out/scale.cu".into(),
            hand_written: false,
            ..failure.clone()
        };
        let text = Error::Nvcc(vec![generated.clone()]).to_string();
        assert!(text.starts_with("choreo-build: nvcc failed on 1 generated .cu file"), "{text}");
        let text = Error::Nvcc(vec![generated, failure]).to_string();
        assert!(text.starts_with("choreo-build: nvcc failed on 2 .cu files"), "{text}");
    }

    #[test]
    fn other_errors_give_a_single_line_summary() {
        let error = Error::Toolkit {
            root: "/cuda".into(),
            message: "no libcudart_static.a in\n/cuda/targets/sbsa-linux/lib".into(),
        };
        let lines = error.summary_lines();
        assert_eq!(lines.len(), 1);
        assert!(!lines[0].contains('\n'));
        assert!(lines[0].contains("sbsa-linux"), "{lines:?}");
    }
}
