//! Why a toolkit cannot be used.

use std::fmt;
use std::path::PathBuf;

/// A setting or a toolkit that discovery cannot use. Not finding any nvcc is no error: it is
/// [`StubReason::NotFound`](crate::StubReason::NotFound).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// An environment variable has a value that discovery cannot use.
    InvalidEnv {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
    /// `NVCC` names an nvcc that does not exist (an explicit setting is never passed over).
    NvccNotFound {
        /// The setting, e.g. `NVCC`.
        origin: &'static str,
        /// The path it names.
        path: PathBuf,
    },
    /// The CUDA toolkit that was found cannot be used (no version header, no `cudart_static`
    /// for the target); the message says what to install.
    Toolkit {
        /// The toolkit root.
        root: PathBuf,
        /// What is missing and how to get it.
        message: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidEnv { var, value, expected } => {
                write!(f, "{var}={value:?} is not valid: expected {expected}")
            }
            Error::NvccNotFound { origin, path } => write!(
                f,
                "{origin} names {}, which does not exist; point it at nvcc, or unset it to \
                 search CUDA_HOME, CUDA_PATH, PATH and the ci/install-cuda cache",
                path.display()
            ),
            Error::Toolkit { root, message } => {
                write!(f, "the CUDA toolkit at {} cannot be used: {message}", root.display())
            }
        }
    }
}

impl std::error::Error for Error {}
