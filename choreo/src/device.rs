//! Devices of both backends, the choice of the default device, the current CUDA device of a
//! thread, and the runtime's internal per-device streams.
//!
//! # Devices and backends
//!
//! A [`Device`] is a CUDA GPU ([`Device::new`], [`Device::cuda`]) or the CPU ([`Device::cpu`]):
//! the same streams, events, buffers and [`crate::Pending`]s work on both (see
//! [`crate::Backend`]). Every stream, event, device buffer and pinned buffer remembers its
//! device; a call that mixes objects of the CPU and of a GPU fails with
//! [`Error::DeviceMismatch`].
//!
//! # The default device
//!
//! Constructors without a device ([`crate::Stream::new`], [`crate::Stream::default_stream`],
//! [`crate::Event::new`], [`crate::DeviceBuffer::zeroed`], [`crate::DeviceTensor::zeros`],
//! [`crate::PinnedHostBuffer::new`], and so every generated wrapper without a stream
//! parameter) use [`Device::default_device`]:
//!
//! - `CHOREO_DEVICE=cpu`: the CPU;
//! - `CHOREO_DEVICE=cuda`: the calling thread's current CUDA device, or the "no GPU" error
//!   ([`Error::NoDevice`], [`Error::InsufficientDriver`] or [`Error::RuntimeNotLinked`]) when
//!   there is no usable GPU;
//! - unset (or empty): the current CUDA device when a CUDA runtime is linked and the driver
//!   reports at least one GPU, else the CPU;
//! - any other value: [`Error::InvalidDeviceSelection`].
//!
//! The variable is read once per process, at the first use of the default device; the choice
//! of backend then holds for the rest of the process.
//!
//! # The current CUDA device
//!
//! CUDA devices follow CUDA's model: every host thread has a *current device* (device 0 until
//! [`Device::set`] changes it), and there is no explicit context object. Nothing needs to be
//! initialised: the first call initialises the runtime lazily. [`crate::init`] does that eagerly
//! and reports an unusable default device as a clear error.
//!
//! Streams, events, device buffers and pinned buffers remember the device they were created
//! on; operations on them make that device current for the duration of the call (and restore
//! the previous one), so objects of different devices can be mixed on one thread. The legacy
//! default stream of a CUDA default device ([`crate::Stream::default_stream`]) and streams from
//! [`crate::Stream::from_raw`] use whatever CUDA device is current when they are used, as in
//! CUDA. The CPU is a single device (ordinal 0) and has no current-device state.

use std::ffi::{OsStr, c_int};
use std::fmt;
use std::sync::{Mutex, OnceLock, PoisonError};

use choreo_sys as sys;

use crate::backend::{Api, Backend, CUDA, cpu_worker_count};
use crate::error::{check, check_deferred, defer_error};
use crate::stream::Stream;
use crate::{Error, Result};

/// The environment variable that chooses the default device: `cpu` or `cuda`.
pub const DEVICE_ENV: &str = "CHOREO_DEVICE";

/// A device: a CUDA GPU, identified by its ordinal, or the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Device {
    backend: Backend,
    /// The CUDA ordinal; 0 for the CPU.
    ordinal: i32,
}

/// Free and total device memory, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Bytes currently free on the device.
    pub free: usize,
    /// Total bytes of device memory.
    pub total: usize,
}

impl Device {
    /// The number of CUDA devices; `Ok(0)` when the driver reports none. Fails when no driver
    /// (or too old a driver) is installed or no CUDA runtime is linked. (The CPU is not
    /// counted: it is always there, see [`Device::cpu`].)
    pub fn count() -> Result<usize> {
        let mut count: c_int = 0;
        // SAFETY: `count` is a valid, writable c_int for the duration of the call.
        let status = unsafe { sys::cudaGetDeviceCount(&mut count) };
        if status == sys::cudaError_t::cudaErrorNoDevice && sys::CUDART_LINKED {
            return Ok(0);
        }
        check(&CUDA, status, "cudaGetDeviceCount")?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    /// The CUDA device with ordinal `ordinal`; an error if there is no such device.
    pub fn new(ordinal: usize) -> Result<Device> {
        let count = Self::count()?;
        if count == 0 {
            return Err(Error::NoDevice);
        }
        match i32::try_from(ordinal) {
            Ok(ordinal_i32) if ordinal < count => Ok(Device::from_cuda_ordinal(ordinal_i32)),
            _ => Err(Error::InvalidArgument(format!(
                "there is no CUDA device {ordinal}: this machine has {count}"
            ))),
        }
    }

    /// The CUDA device with ordinal `ordinal` (the same as [`Device::new`]).
    pub fn cuda(ordinal: usize) -> Result<Device> {
        Device::new(ordinal)
    }

    /// The CPU: the CPU runtime's single device, always available (it is compiled into this
    /// crate). Its streams are ordered queues run by worker threads and its "device" memory is
    /// host memory.
    pub fn cpu() -> Device {
        Device { backend: Backend::Cpu, ordinal: 0 }
    }

    /// The device that constructors without a device use ([`crate::Stream::new`],
    /// [`crate::Stream::default_stream`], [`crate::Event::new`],
    /// [`crate::DeviceTensor::zeros`], [`crate::DeviceBuffer::zeroed`],
    /// [`crate::PinnedHostBuffer::new`], [`crate::init`], and the generated wrappers that take
    /// no stream):
    ///
    /// - `CHOREO_DEVICE=cpu`: the CPU;
    /// - `CHOREO_DEVICE=cuda`: the calling thread's current CUDA device, or the "no GPU" error
    ///   ([`Error::NoDevice`], [`Error::InsufficientDriver`] or [`Error::RuntimeNotLinked`])
    ///   when there is no usable GPU;
    /// - unset (or empty): the current CUDA device when a CUDA runtime is linked and the driver
    ///   reports at least one GPU, else the CPU;
    /// - any other value: [`Error::InvalidDeviceSelection`].
    ///
    /// The variable is read once per process, at the first call; the backend chosen then holds
    /// for the rest of the process (the CUDA device is the current one of each call).
    pub fn default_device() -> Result<Device> {
        static CHOSEN: OnceLock<Result<Backend>> = OnceLock::new();
        let backend = CHOSEN
            .get_or_init(|| {
                let value = std::env::var_os(DEVICE_ENV);
                choose_backend(value.as_deref(), cuda_usable)
            })
            .clone()?;
        match backend {
            Backend::Cpu => Ok(Device::cpu()),
            Backend::Cuda => Device::current(),
        }
    }

    /// The calling thread's current CUDA device.
    pub fn current() -> Result<Device> {
        Ok(Device::from_cuda_ordinal(current_cuda_ordinal()?))
    }

    /// Makes CUDA device `ordinal` the calling thread's current device and returns it.
    pub fn set(ordinal: usize) -> Result<Device> {
        let device = Device::new(ordinal)?;
        device.make_current()?;
        Ok(device)
    }

    /// Makes this device the calling thread's current device (for the CPU, its only device,
    /// this changes nothing).
    pub fn make_current(&self) -> Result<()> {
        let api = self.api();
        // SAFETY: cudaSetDevice takes a plain integer; an invalid ordinal is reported as error.
        check(api, unsafe { (api.set_device)(self.ordinal) }, "cudaSetDevice")
    }

    /// Makes this device current until the returned guard is dropped, which restores the
    /// previously current device.
    pub fn bind(&self) -> Result<DeviceGuard> {
        DeviceGuard::enter(*self)
    }

    /// The backend: CUDA or the CPU.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// `true` for the CPU.
    pub fn is_cpu(&self) -> bool {
        self.backend == Backend::Cpu
    }

    /// The ordinal (0 for the first CUDA device, and for the CPU).
    pub fn ordinal(&self) -> usize {
        // Ordinals come from CUDA or `Device::new` and are never negative.
        usize::try_from(self.ordinal).unwrap_or(0)
    }

    pub(crate) fn from_cuda_ordinal(ordinal: i32) -> Device {
        Device { backend: Backend::Cuda, ordinal }
    }

    /// The function table of the device's backend.
    pub(crate) fn api(&self) -> &'static Api {
        self.backend.api()
    }

    /// The value of a device attribute (`cudaDeviceGetAttribute`). The CPU answers the
    /// attributes its runtime documents (e.g. the multiprocessor count is its worker count,
    /// the compute capability 0.0); others are an error.
    pub fn attribute(&self, attribute: sys::cudaDeviceAttr) -> Result<i32> {
        let api = self.api();
        let mut value: c_int = 0;
        // SAFETY: `value` is a valid, writable c_int; unknown attributes are reported as error.
        let status = unsafe { (api.device_get_attribute)(&mut value, attribute, self.ordinal) };
        check(api, status, "cudaDeviceGetAttribute")?;
        Ok(value)
    }

    /// The device's name, e.g. `"NVIDIA H200"`, or `"CPU (16 worker threads)"`.
    pub fn name(&self) -> Result<String> {
        if self.is_cpu() {
            return Ok(format!("CPU ({} worker threads)", cpu_worker_count()));
        }
        let mut properties = sys::cudaDeviceProp::zeroed();
        // SAFETY: `properties` is a valid, writable cudaDeviceProp whose layout choreo-sys
        // checks against the CUDA 13 headers at compile time.
        let status = unsafe { sys::cudaGetDeviceProperties(&mut properties, self.ordinal) };
        check(&CUDA, status, "cudaGetDeviceProperties")?;
        Ok(properties.name())
    }

    /// The compute capability as `(major, minor)`, e.g. `(9, 0)` for Hopper; `(0, 0)` for the
    /// CPU.
    pub fn compute_capability(&self) -> Result<(u32, u32)> {
        let major = self.attribute(sys::cudaDeviceAttr::cudaDevAttrComputeCapabilityMajor)?;
        let minor = self.attribute(sys::cudaDeviceAttr::cudaDevAttrComputeCapabilityMinor)?;
        Ok((u32::try_from(major).unwrap_or(0), u32::try_from(minor).unwrap_or(0)))
    }

    /// The number of streaming multiprocessors (for the CPU: its worker threads).
    pub fn multiprocessor_count(&self) -> Result<u32> {
        let count = self.attribute(sys::cudaDeviceAttr::cudaDevAttrMultiProcessorCount)?;
        Ok(u32::try_from(count).unwrap_or(0))
    }

    /// Free and total memory of this device.
    pub fn memory_info(&self) -> Result<MemoryInfo> {
        let _guard = self.bind()?;
        let api = self.api();
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: both pointers are valid, writable usize for the duration of the call.
        check(api, unsafe { (api.mem_get_info)(&mut free, &mut total) }, "cudaMemGetInfo")?;
        Ok(MemoryInfo { free, total })
    }

    /// Blocks until all work on this device (all streams) has completed.
    pub fn synchronize(&self) -> Result<()> {
        let _guard = self.bind()?;
        let api = self.api();
        // SAFETY: no arguments; waits for the current device, which the guard selected.
        check(api, unsafe { (api.device_synchronize)() }, "cudaDeviceSynchronize")
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.backend {
            Backend::Cpu => f.write_str("the CPU"),
            Backend::Cuda => write!(f, "CUDA device {}", self.ordinal),
        }
    }
}

/// Whether this process can use a CUDA GPU: `Ok(())` when a runtime is linked and the driver
/// reports at least one device, else the "no GPU" error that says why. Asked once per process.
pub(crate) fn cuda_usable() -> Result<()> {
    static USABLE: OnceLock<Result<()>> = OnceLock::new();
    USABLE
        .get_or_init(|| {
            if !sys::CUDART_LINKED {
                return Err(Error::RuntimeNotLinked);
            }
            driver_can_run(
                crate::error::installed_driver_version(),
                crate::error::linked_runtime_version(),
            )?;
            match Device::count()? {
                0 => Err(Error::NoDevice),
                _ => Ok(()),
            }
        })
        .clone()
}

/// Whether a driver that supports CUDA `driver` (`cudaDriverGetVersion`, 0 without a driver)
/// can run the CUDA runtime `runtime` linked into this program (`cudaRuntimeGetVersion`, the
/// toolkit's `CUDART_VERSION`): it needs a driver of at least the runtime's major version. An
/// older minor version of the same major is accepted (CUDA's minor version compatibility:
/// a 12.8 runtime runs on a 12.4 driver), although the driver then cannot JIT-compile PTX
/// newer than itself; kernels compiled to SASS for the GPU run. The error is
/// [`Error::InsufficientDriver`], which names both versions.
pub(crate) fn driver_can_run(driver: i32, runtime: i32) -> Result<()> {
    if driver <= 0 || driver / 1000 < runtime / 1000 {
        return Err(Error::InsufficientDriver { driver: driver.max(0), runtime });
    }
    Ok(())
}

/// The backend of the default device for the value `value` of `CHOREO_DEVICE` (`None`:
/// unset), where `cuda_usable` says whether a CUDA GPU can be used (see
/// [`Device::default_device`]).
pub(crate) fn choose_backend(
    value: Option<&OsStr>,
    cuda_usable: impl FnOnce() -> Result<()>,
) -> Result<Backend> {
    let text = value.map(|value| value.to_string_lossy().trim().to_ascii_lowercase());
    match text.as_deref() {
        None | Some("") => Ok(if cuda_usable().is_ok() { Backend::Cuda } else { Backend::Cpu }),
        Some("cpu") => Ok(Backend::Cpu),
        Some("cuda") => cuda_usable().map(|()| Backend::Cuda),
        Some(_) => Err(Error::InvalidDeviceSelection {
            value: value.map(|value| value.to_string_lossy().into_owned()).unwrap_or_default(),
        }),
    }
}

/// Initialises the runtime of the default device (see [`Device::default_device`]) and
/// returns the device.
///
/// Optional: everything in the runtime initialises lazily. Useful to fail early with a clear
/// message ("no CUDA-capable device", "CUDA driver is missing or too old…" when
/// `CHOREO_DEVICE=cuda` asks for a GPU that is not there) before doing other work. Without
/// `CHOREO_DEVICE`, a machine without a usable GPU gets the CPU.
pub fn init() -> Result<Device> {
    check_deferred()?;
    let device = Device::default_device()?;
    let _guard = device.bind()?;
    let api = device.api();
    // Creating the primary context happens on the first call that needs it; a free of null
    // is the documented no-op that forces it.
    // SAFETY: cudaFree(null) frees nothing.
    check(api, unsafe { (api.free)(std::ptr::null_mut()) }, "cudaFree")?;
    Ok(device)
}

/// The version of the linked CUDA runtime as `(major, minor)`.
pub fn runtime_version() -> Result<(u32, u32)> {
    if !sys::CUDART_LINKED {
        return Err(Error::RuntimeNotLinked);
    }
    let version = crate::error::linked_runtime_version();
    Ok(split_version(version))
}

/// The newest CUDA version the installed driver supports as `(major, minor)`; `None` when no
/// driver is installed.
pub fn driver_version() -> Result<Option<(u32, u32)>> {
    if !sys::CUDART_LINKED {
        return Err(Error::RuntimeNotLinked);
    }
    let version = crate::error::installed_driver_version();
    Ok((version > 0).then(|| split_version(version)))
}

fn split_version(version: i32) -> (u32, u32) {
    let version = u32::try_from(version).unwrap_or(0);
    (version / 1000, (version % 1000) / 10)
}

/// The calling thread's current CUDA device ordinal.
pub(crate) fn current_cuda_ordinal() -> Result<i32> {
    let mut ordinal: c_int = 0;
    // SAFETY: `ordinal` is a valid, writable c_int for the duration of the call.
    check(&CUDA, unsafe { sys::cudaGetDevice(&mut ordinal) }, "cudaGetDevice")?;
    Ok(ordinal)
}

/// Makes a device current for a scope and restores the previous current device when dropped.
///
/// Returned by [`Device::bind`] and [`crate::Stream::bind_device`]; generated wrappers hold one
/// while they launch kernels, since a launch goes to the current device. For the CPU (a single
/// device) it changes nothing.
#[must_use = "the previous device is restored when the guard is dropped"]
#[derive(Debug)]
pub struct DeviceGuard {
    /// The CUDA device to restore; `None` when the device did not change.
    previous: Option<i32>,
}

impl DeviceGuard {
    pub(crate) fn enter(device: Device) -> Result<DeviceGuard> {
        if device.is_cpu() {
            return Ok(DeviceGuard::none());
        }
        let current = current_cuda_ordinal()?;
        if current == device.ordinal {
            return Ok(DeviceGuard { previous: None });
        }
        // SAFETY: cudaSetDevice takes a plain integer; an invalid ordinal is reported as error.
        check(&CUDA, unsafe { sys::cudaSetDevice(device.ordinal) }, "cudaSetDevice")?;
        Ok(DeviceGuard { previous: Some(current) })
    }

    /// A guard that changes nothing.
    pub(crate) fn none() -> DeviceGuard {
        DeviceGuard { previous: None }
    }
}

impl Drop for DeviceGuard {
    fn drop(&mut self) {
        if let Some(previous) = self.previous {
            // SAFETY: `previous` was the current device a moment ago, so it is valid.
            let status = unsafe { sys::cudaSetDevice(previous) };
            if let Err(error) = check(&CUDA, status, "cudaSetDevice") {
                defer_error("restoring the current device", error);
            }
        }
    }
}

/// The runtime's own streams of one device. They live for the rest of the process.
pub(crate) struct InternalStreams {
    /// Allocations (and the zeroing of [`crate::DeviceBuffer::zeroed`]) happen here. Nothing on
    /// this stream ever waits for user work, so new buffers never inherit false dependencies.
    pub(crate) alloc: Stream,
    /// Frees of device memory happen here, once the memory is idle; the stream never waits
    /// for anything, so the memory pool can hand the memory out again without making the
    /// next allocation wait for unrelated work.
    pub(crate) free: Stream,
    /// Whether the device supports `cudaMallocAsync`/`cudaFreeAsync` (memory pools).
    pub(crate) pools_supported: bool,
}

/// Internal streams by device, created on first use and then leaked (process lifetime).
static INTERNAL_STREAMS: Mutex<Vec<(Device, &'static InternalStreams)>> = Mutex::new(Vec::new());

/// The internal streams of `device`, created on first use.
pub(crate) fn internal_streams(device: Device) -> Result<&'static InternalStreams> {
    let mut table = INTERNAL_STREAMS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, streams)) = table.iter().find(|(known, _)| *known == device) {
        return Ok(streams);
    }
    let pools_supported = match device.backend {
        Backend::Cuda => {
            device.attribute(sys::cudaDeviceAttr::cudaDevAttrMemoryPoolsSupported)? != 0
        }
        // The CPU runtime implements cudaMallocAsync/cudaFreeAsync (in stream order).
        Backend::Cpu => true,
    };
    let streams = InternalStreams {
        alloc: Stream::create(device)?,
        free: Stream::create(device)?,
        pools_supported,
    };
    let streams: &'static InternalStreams = Box::leak(Box::new(streams));
    table.push((device, streams));
    Ok(streams)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usable() -> Result<()> {
        Ok(())
    }

    fn no_gpu() -> Result<()> {
        Err(Error::NoDevice)
    }

    fn not_asked() -> Result<()> {
        panic!("the GPU must not be probed for this value")
    }

    #[test]
    fn choreo_device_chooses_the_backend() {
        let value = |text: &'static str| Some(OsStr::new(text));
        // Unset or empty: CUDA when usable, else the CPU.
        assert_eq!(choose_backend(None, usable), Ok(Backend::Cuda));
        assert_eq!(choose_backend(None, no_gpu), Ok(Backend::Cpu));
        assert_eq!(choose_backend(value(""), no_gpu), Ok(Backend::Cpu));
        assert_eq!(choose_backend(None, || Err(Error::RuntimeNotLinked)), Ok(Backend::Cpu));
        // `cpu` never asks CUDA; case and surrounding blanks do not matter.
        assert_eq!(choose_backend(value("cpu"), not_asked), Ok(Backend::Cpu));
        assert_eq!(choose_backend(value(" CPU\n"), not_asked), Ok(Backend::Cpu));
        // `cuda` is CUDA or the error that says why there is no GPU.
        assert_eq!(choose_backend(value("cuda"), usable), Ok(Backend::Cuda));
        assert_eq!(choose_backend(value("Cuda"), no_gpu), Err(Error::NoDevice));
        assert_eq!(
            choose_backend(value("cuda"), || Err(Error::RuntimeNotLinked)),
            Err(Error::RuntimeNotLinked)
        );
        // Anything else is an error that names the value.
        let error = choose_backend(value("gpu"), not_asked).unwrap_err();
        assert_eq!(error, Error::InvalidDeviceSelection { value: "gpu".into() });
        assert!(error.to_string().contains("CHOREO_DEVICE=\"gpu\""), "{error}");
    }

    #[test]
    fn the_driver_must_be_of_the_runtimes_major_version_or_newer() {
        // A newer driver, the same version, an older minor of the same major: fine.
        assert_eq!(driver_can_run(13000, 12040), Ok(()));
        assert_eq!(driver_can_run(12080, 12080), Ok(()));
        assert_eq!(driver_can_run(12040, 12080), Ok(()));
        // An older major, or no driver at all: the error naming both versions.
        let error = driver_can_run(12080, 13000).unwrap_err();
        assert_eq!(error, Error::InsufficientDriver { driver: 12080, runtime: 13000 });
        let text = error.to_string();
        assert!(text.contains("13.0") && text.contains("12.8"), "{text}");
        assert!(text.contains("install a newer driver"), "{text}");
        let error = driver_can_run(0, 12040).unwrap_err();
        assert_eq!(error, Error::InsufficientDriver { driver: 0, runtime: 12040 });
        assert!(error.to_string().contains("no CUDA driver was found"), "{error}");
    }

    #[test]
    fn devices_describe_themselves() {
        assert_eq!(Device::cpu().to_string(), "the CPU");
        assert_eq!(Device::from_cuda_ordinal(1).to_string(), "CUDA device 1");
        assert!(Device::cpu().is_cpu());
        assert_eq!(Device::cpu().backend(), Backend::Cpu);
        assert_eq!(Device::from_cuda_ordinal(0).backend(), Backend::Cuda);
        assert_ne!(Device::cpu(), Device::from_cuda_ordinal(0));
    }
}
