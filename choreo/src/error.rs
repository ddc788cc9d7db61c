//! The runtime's error type, the mapping from CUDA status codes, and the deferred-error slot.

use std::ffi::CStr;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use choreo_sys as sys;

use crate::backend::{Api, Backend};
use crate::device::Device;

/// `Result` with [`Error`] as the error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the runtime and in generated kernel wrappers.
///
/// CUDA failures (and those of the CPU runtime, [`Error::CpuRuntime`], whose codes are CUDA's)
/// carry the status code, its name and description, and the runtime call that returned it. The three "no GPU here" situations have their own variants so that programs can
/// tell them apart from real failures (see [`Error::is_no_gpu`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A CUDA runtime call failed.
    Cuda {
        /// The `cudaError_t` value.
        code: i32,
        /// The enumerator name, e.g. `cudaErrorMemoryAllocation`.
        name: String,
        /// The runtime's description of the error.
        message: String,
        /// The runtime function that returned the error, e.g. `cudaMallocAsync`.
        call: &'static str,
    },
    /// A call of the CPU runtime (the CPU backend) failed. The codes are CUDA's
    /// (`cudaErrorLaunchFailure` for a kernel that trapped, `cudaErrorAssert` for a failed
    /// device assertion, …), and as on CUDA such a kernel fault is *sticky*: every later call
    /// of the CPU runtime fails with it.
    CpuRuntime {
        /// The status, numbered like CUDA's `cudaError_t`.
        code: i32,
        /// The CUDA enumerator name of the status, e.g. `cudaErrorLaunchFailure`.
        name: String,
        /// The CPU runtime's description of the error.
        message: String,
        /// The runtime function that returned it, by its CUDA name, e.g. `cudaStreamSynchronize`.
        call: &'static str,
    },
    /// The CUDA driver works but reports no CUDA-capable device (also: `CHOREO_DEVICE=cuda` on
    /// a machine without a usable GPU).
    NoDevice,
    /// One call was given objects of two devices that cannot work together: a stream, event,
    /// buffer or pinned buffer of the CPU and one of a CUDA GPU (e.g. a copy from a CPU tensor
    /// on a CUDA stream, or a CUDA stream waiting for a CPU event). Nothing was enqueued.
    DeviceMismatch {
        /// The object on the other device, e.g. ``"`x`"`` or `"the event"`.
        what: String,
        /// Its device.
        found: Device,
        /// The device the call runs on (that of its stream).
        expected: Device,
    },
    /// The work cannot run on this backend: e.g. a kernel wrapper whose kernels were built for
    /// CUDA only, called with streams and tensors of the CPU. Nothing was launched.
    UnsupportedBackend {
        /// The backend of the call's streams and tensors.
        backend: Backend,
        /// What cannot run there.
        what: &'static str,
    },
    /// `CHOREO_DEVICE` has a value other than `cpu` or `cuda`.
    InvalidDeviceSelection {
        /// The value found.
        value: String,
    },
    /// No CUDA driver is installed, or it is older than the runtime linked into this program.
    InsufficientDriver {
        /// CUDA version supported by the installed driver (`1000 * major + 10 * minor`), 0 when
        /// no driver was found.
        driver: i32,
        /// Version of the linked CUDA runtime, in the same encoding.
        runtime: i32,
    },
    /// `choreo-sys` was built without a CUDA toolkit, so no CUDA runtime is linked.
    RuntimeNotLinked,
    /// A kernel wrapper was called, but its kernels were not compiled (stub build: nvcc was not
    /// available when the crate that contains the kernels was built).
    NotBuilt {
        /// The wrapper that was called, e.g. `"seed::matmul"`.
        function: &'static str,
    },
    /// An argument's extent disagrees with the extent the kernel's signature requires.
    Shape {
        /// The parameter whose shape is wrong.
        param: &'static str,
        /// The zero-based dimension that disagrees.
        dim: usize,
        /// The extent that was required.
        expected: usize,
        /// The extent that was passed.
        got: usize,
    },
    /// A buffer or slice has the wrong number of elements.
    Length {
        /// The number of elements that was required.
        expected: usize,
        /// The number of elements that was passed.
        got: usize,
    },
    /// An argument is invalid for a reason that the message describes.
    InvalidArgument(String),
    /// A runtime check of a generated kernel wrapper failed (spec §19.2: parameter extents,
    /// symbol consistency, positive bounds, thread counts, the returned shape), before the
    /// check's launch; `message` is the check's own text with its `.co` location.
    RuntimeCheck {
        /// The `__co__` function whose check failed.
        function: &'static str,
        /// What the check says, e.g. `The 1st bound item of parallelby is invalid (k.co:3:17): got 0`.
        message: String,
    },
    /// An element access of a generated kernel failed its run-time bounds check: the access was
    /// skipped (no memory outside the argument was touched) and the call's results are not
    /// delivered. The first failing access of the call is reported.
    OutOfBounds {
        /// The `__co__` function whose kernel made the access.
        function: &'static str,
        /// The buffer accessed (a parameter or a buffer of the function).
        param: &'static str,
        /// The zero-based dimension whose index was out of range; `None` when the access went
        /// through a view that reinterprets the layout (`span_as`, explicit strides) and
        /// `index` is the element's offset in the whole buffer.
        dim: Option<usize>,
        /// The index (or the element offset).
        index: i64,
        /// The extent of that dimension (or the buffer's element count).
        extent: i64,
        /// Where the access is written, `file:line:col` of the `.co` file.
        location: &'static str,
    },
    /// A host allocation of this many bytes failed or would overflow.
    OutOfHostMemory {
        /// The size that was requested.
        bytes: usize,
    },
    /// An error that occurred where it could not be returned (in a destructor or on a
    /// background path) and is reported by a later call; see [`take_deferred_error`].
    Deferred {
        /// What was being done when the error occurred, e.g. `"dropping a DeviceBuffer"`.
        during: &'static str,
        /// The error itself.
        source: Box<Error>,
    },
}

impl Error {
    /// `true` when the error says that no GPU can be used in this process at all: no device,
    /// no (or too old a) driver, or no CUDA runtime linked. Programs that can run without a
    /// GPU use this to fall back; everything else is a real failure.
    pub fn is_no_gpu(&self) -> bool {
        match self {
            Error::NoDevice | Error::InsufficientDriver { .. } | Error::RuntimeNotLinked => true,
            Error::Deferred { source, .. } => source.is_no_gpu(),
            _ => false,
        }
    }

    /// The CUDA status code, if this error came from a CUDA call (or from the CPU runtime,
    /// whose codes are CUDA's).
    pub fn cuda_code(&self) -> Option<i32> {
        match self {
            Error::Cuda { code, .. } | Error::CpuRuntime { code, .. } => Some(*code),
            Error::NoDevice => Some(sys::cudaError_t::cudaErrorNoDevice.0),
            Error::InsufficientDriver { .. } => {
                Some(sys::cudaError_t::cudaErrorInsufficientDriver.0)
            }
            Error::Deferred { source, .. } => source.cuda_code(),
            _ => None,
        }
    }
}

/// Formats a CUDA version number (`1000 * major + 10 * minor`) as `major.minor`.
fn cuda_version_text(version: i32) -> String {
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Cuda { code, name, message, call } => {
                write!(f, "CUDA error {code} ({name}) in {call}: {message}")
            }
            Error::CpuRuntime { code, name, message, call } => {
                write!(f, "CPU runtime error {code} ({name}) in {call}: {message}")
            }
            Error::DeviceMismatch { what, found, expected } => write!(
                f,
                "device mismatch: {what} is on {found}, but the call runs on {expected}; objects \
                 of the CPU and of a CUDA GPU cannot be used in one call (copy the data through \
                 the host); nothing was enqueued"
            ),
            Error::UnsupportedBackend { backend, what } => write!(
                f,
                "{what} cannot run on the {backend}: it was not built for that backend (choose \
                 another device, e.g. with CHOREO_DEVICE); nothing was launched"
            ),
            Error::InvalidDeviceSelection { value } => write!(
                f,
                "CHOREO_DEVICE={value:?} is not a device: use `cpu` or `cuda`, or leave it unset \
                 to use a CUDA GPU when there is one and the CPU otherwise"
            ),
            Error::NoDevice => f.write_str(
                "no CUDA-capable device is available (the CUDA driver reports no GPU; check \
                 CUDA_VISIBLE_DEVICES and nvidia-smi)",
            ),
            Error::InsufficientDriver { driver, runtime } => {
                write!(
                    f,
                    "CUDA driver is missing or too old for CUDA runtime {}",
                    cuda_version_text(*runtime)
                )?;
                if *driver == 0 {
                    f.write_str(
                        " (no CUDA driver was found; is this a machine with an NVIDIA GPU?)",
                    )
                } else {
                    write!(
                        f,
                        " (the installed driver supports CUDA {}; install a newer driver)",
                        cuda_version_text(*driver)
                    )
                }
            }
            Error::RuntimeNotLinked => f.write_str(
                "CUDA runtime not linked: choreo-sys was built without a CUDA toolkit \
                 (install one, or set CUDA_HOME, and rebuild)",
            ),
            Error::NotBuilt { function } => write!(
                f,
                "kernels not built: `{function}` comes from a stub build (nvcc was not found when \
                 its crate was compiled); install the CUDA toolkit or set NVCC and rebuild"
            ),
            Error::Shape { param, dim, expected, got } => write!(
                f,
                "shape mismatch for `{param}`: dimension {dim} has extent {got}, expected {expected}"
            ),
            Error::Length { expected, got } => {
                write!(f, "length mismatch: expected {expected} elements, got {got}")
            }
            Error::InvalidArgument(message) => write!(f, "invalid argument: {message}"),
            Error::RuntimeCheck { function, message } => {
                write!(f, "runtime check failed in `{function}`: {message}")
            }
            Error::OutOfBounds { function, param, dim: Some(dim), index, extent, location } => {
                write!(
                    f,
                    "element access out of bounds in `{function}`: index {index} of dimension \
                     {dim} of `{param}` (extent {extent}) at {location}; the access was skipped"
                )
            }
            Error::OutOfBounds { function, param, dim: None, index, extent, location } => write!(
                f,
                "element access out of bounds in `{function}`: element {index} of `{param}` \
                 ({extent} elements, reached through a reshaping view) at {location}; the access \
                 was skipped"
            ),
            Error::OutOfHostMemory { bytes } => {
                write!(f, "out of host memory: could not allocate {bytes} bytes")
            }
            Error::Deferred { during, source } => {
                write!(f, "error while {during} (reported late): {source}")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Deferred { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// Reads a static C string returned by `cudaGetErrorName`/`cudaGetErrorString` (of either
/// backend).
fn static_c_text(text: *const std::ffi::c_char) -> String {
    if text.is_null() {
        return String::new();
    }
    // SAFETY: cudart, choreo-sys' stub build and the CPU runtime return pointers to static,
    // NUL-terminated strings from these functions; null was excluded above.
    unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
}

/// The CUDA runtime version linked into this program (`1000 * major + 10 * minor`).
pub(crate) fn linked_runtime_version() -> i32 {
    let mut version = 0;
    // SAFETY: `version` is a valid, writable c_int for the duration of the call.
    let status = unsafe { sys::cudaRuntimeGetVersion(&mut version) };
    if status.is_success() && version > 0 { version } else { sys::CUDART_VERSION }
}

/// The CUDA version supported by the installed driver, 0 when there is none.
pub(crate) fn installed_driver_version() -> i32 {
    let mut version = 0;
    // SAFETY: `version` is a valid, writable c_int for the duration of the call.
    let status = unsafe { sys::cudaDriverGetVersion(&mut version) };
    if status.is_success() { version } else { 0 }
}

/// Converts a failed status of `api`'s runtime into an [`Error`]; `call` names the function.
pub(crate) fn error_from_status(api: &Api, status: sys::cudaError_t, call: &'static str) -> Error {
    let text = |function: unsafe extern "C" fn(sys::cudaError_t) -> *const std::ffi::c_char| {
        // SAFETY: cudaGetErrorName/cudaGetErrorString (and the CPU runtime's copies) accept
        // any status value and return static strings (or null, which `static_c_text` handles).
        static_c_text(unsafe { function(status) })
    };
    match api.backend {
        Backend::Cpu => Error::CpuRuntime {
            code: status.0,
            name: text(api.get_error_name),
            message: text(api.get_error_string),
            call,
        },
        Backend::Cuda => {
            if !sys::CUDART_LINKED {
                return Error::RuntimeNotLinked;
            }
            if status == sys::cudaError_t::cudaErrorInsufficientDriver {
                return Error::InsufficientDriver {
                    driver: installed_driver_version(),
                    runtime: linked_runtime_version(),
                };
            }
            if status == sys::cudaError_t::cudaErrorNoDevice {
                return Error::NoDevice;
            }
            Error::Cuda {
                code: status.0,
                name: text(api.get_error_name),
                message: text(api.get_error_string),
                call,
            }
        }
    }
}

/// `Ok(())` for `cudaSuccess`, otherwise the [`Error`] for `status` returned by `call` of
/// `api`'s runtime.
pub(crate) fn check(api: &Api, status: sys::cudaError_t, call: &'static str) -> Result<()> {
    if status.is_success() { Ok(()) } else { Err(error_from_status(api, status, call)) }
}

/// `Ok(())` for `cudaSuccess`, otherwise the [`Error`] for `status`, naming `call` (the CUDA
/// function or generated entry point that returned it). For generated wrappers and hand-written
/// launchers that call `extern "C"` entry points returning a `cudaError_t`.
pub fn check_cuda(status: sys::cudaError_t, call: &'static str) -> Result<()> {
    check(&crate::backend::CUDA, status, call)
}

/// [`check_cuda`] for a status of `backend`'s runtime: the CPU runtime's statuses have CUDA's
/// numbers but become [`Error::CpuRuntime`], with the CPU runtime's descriptions. For generated
/// wrappers and hand-written launchers that call `extern "C"` entries of either backend.
pub fn check_status(backend: Backend, status: sys::cudaError_t, call: &'static str) -> Result<()> {
    check(backend.api(), status, call)
}

/// Deferred errors of this process: the first one that nobody has taken yet, and how many
/// more occurred after it (those are usually consequences of the first).
struct DeferredSlot {
    first: Option<Error>,
    dropped: usize,
}

static DEFERRED: Mutex<DeferredSlot> = Mutex::new(DeferredSlot { first: None, dropped: 0 });

/// Set (under the lock) while `DEFERRED` holds an error: every kernel call checks for deferred
/// errors, and the common "none" answer then costs an atomic load instead of a lock.
static HAS_DEFERRED: AtomicBool = AtomicBool::new(false);

/// Records an error that cannot be returned where it happened (e.g. in `Drop`). The first such
/// error is kept until it is taken; later ones only increase a count, since they are usually
/// consequences of the first.
pub(crate) fn defer_error(during: &'static str, error: Error) {
    let mut slot = DEFERRED.lock().unwrap_or_else(PoisonError::into_inner);
    if slot.first.is_none() {
        slot.first = Some(Error::Deferred { during, source: Box::new(error) });
        HAS_DEFERRED.store(true, Ordering::Release);
    } else {
        slot.dropped = slot.dropped.saturating_add(1);
    }
}

/// Takes the error that a destructor or background path of the runtime could not return, if
/// there is one, and clears the slot.
///
/// Errors from `Drop` (freeing device memory, destroying a stream or event) cannot be returned
/// to the caller, so the runtime keeps the first of them in a per-process slot. Every runtime
/// call that creates or enqueues work (allocations, copies, stream and event creation, the
/// buffer access calls of generated wrappers) returns it, as an [`Error::Deferred`], before
/// doing anything else; this function lets a program check for it explicitly, e.g. at
/// shutdown. Calls that only wait or query (`wait`, `synchronize`, `query`) do not consume it.
pub fn take_deferred_error() -> Option<Error> {
    // An error deferred by another thread right now is seen by the next check.
    if !HAS_DEFERRED.load(Ordering::Acquire) {
        return None;
    }
    let mut slot = DEFERRED.lock().unwrap_or_else(PoisonError::into_inner);
    slot.dropped = 0;
    HAS_DEFERRED.store(false, Ordering::Release);
    slot.first.take()
}

/// Returns the deferred error, if any, as `Err` (see [`take_deferred_error`]).
pub(crate) fn check_deferred() -> Result<()> {
    match take_deferred_error() {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// Unit tests that use the runtime hold this for reading; the test of the deferred-error slot
/// holds it for writing, so that no runtime call of another test takes (or adds to) the errors
/// it defers.
#[cfg(test)]
pub(crate) static DEFERRED_SLOT_USERS: std::sync::RwLock<()> = std::sync::RwLock::new(());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_versions_are_formatted_as_major_minor() {
        assert_eq!(cuda_version_text(13000), "13.0");
        assert_eq!(cuda_version_text(12040), "12.4");
        assert_eq!(cuda_version_text(11080), "11.8");
    }

    #[test]
    fn deferred_errors_keep_the_first_and_are_taken_once() {
        // The slot is process-wide: no other unit test runs the runtime meanwhile.
        let _exclusive = DEFERRED_SLOT_USERS.write().unwrap_or_else(PoisonError::into_inner);
        let _ = take_deferred_error();
        defer_error("dropping a DeviceBuffer", Error::InvalidArgument("first".into()));
        defer_error("dropping a Stream", Error::InvalidArgument("second".into()));
        let taken = take_deferred_error().expect("a deferred error was recorded");
        match &taken {
            Error::Deferred { during, source } => {
                assert_eq!(*during, "dropping a DeviceBuffer");
                assert_eq!(**source, Error::InvalidArgument("first".into()));
            }
            other => panic!("unexpected error {other:?}"),
        }
        assert!(taken.to_string().contains("dropping a DeviceBuffer"));
        assert!(taken.to_string().contains("first"));
        assert_eq!(take_deferred_error(), None);
        assert_eq!(check_deferred(), Ok(()));
    }
}
