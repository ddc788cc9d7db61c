//! Devices, the current device of a thread, and the runtime's internal per-device streams.
//!
//! # Device selection
//!
//! The runtime follows CUDA's model: every host thread has a *current device* (device 0 until
//! [`Device::set`] changes it), and there is no explicit context object. Nothing needs to be
//! initialised: the first call initialises CUDA lazily. [`crate::init`] does that eagerly and
//! reports a missing GPU or driver as a clear error.
//!
//! Streams, events, device buffers and pinned buffers remember the device that was current
//! when they were created; operations on them make that device current for the duration of the
//! call (and restore the previous one), so objects of different devices can be mixed on one
//! thread. The legacy default stream ([`crate::Stream::default_stream`]) and streams from
//! [`crate::Stream::from_raw`] use whatever device is current when they are used, as in CUDA.

use std::ffi::c_int;
use std::sync::{Mutex, PoisonError};

use choreo_sys as sys;

use crate::error::{check, check_deferred, defer_error};
use crate::stream::Stream;
use crate::{Error, Result};

/// A CUDA device, identified by its ordinal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Device {
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
    /// (or too old a driver) is installed or no CUDA runtime is linked.
    pub fn count() -> Result<usize> {
        let mut count: c_int = 0;
        // SAFETY: `count` is a valid, writable c_int for the duration of the call.
        let status = unsafe { sys::cudaGetDeviceCount(&mut count) };
        if status == sys::cudaError_t::cudaErrorNoDevice && sys::CUDART_LINKED {
            return Ok(0);
        }
        check(status, "cudaGetDeviceCount")?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    /// The device with ordinal `ordinal`; an error if there is no such device.
    pub fn new(ordinal: usize) -> Result<Device> {
        let count = Self::count()?;
        if count == 0 {
            return Err(Error::NoDevice);
        }
        match i32::try_from(ordinal) {
            Ok(ordinal_i32) if ordinal < count => Ok(Device { ordinal: ordinal_i32 }),
            _ => Err(Error::InvalidArgument(format!(
                "there is no CUDA device {ordinal}: this machine has {count}"
            ))),
        }
    }

    /// The calling thread's current device.
    pub fn current() -> Result<Device> {
        Ok(Device { ordinal: current_ordinal()? })
    }

    /// Makes device `ordinal` the calling thread's current device and returns it.
    pub fn set(ordinal: usize) -> Result<Device> {
        let device = Device::new(ordinal)?;
        device.make_current()?;
        Ok(device)
    }

    /// Makes this device the calling thread's current device.
    pub fn make_current(&self) -> Result<()> {
        // SAFETY: cudaSetDevice takes a plain integer; an invalid ordinal is reported as error.
        check(unsafe { sys::cudaSetDevice(self.ordinal) }, "cudaSetDevice")
    }

    /// Makes this device current until the returned guard is dropped, which restores the
    /// previously current device.
    pub fn bind(&self) -> Result<DeviceGuard> {
        DeviceGuard::enter(self.ordinal)
    }

    /// The ordinal (0 for the first device).
    pub fn ordinal(&self) -> usize {
        // Ordinals come from CUDA or `Device::new` and are never negative.
        usize::try_from(self.ordinal).unwrap_or(0)
    }

    pub(crate) fn from_raw_ordinal(ordinal: i32) -> Device {
        Device { ordinal }
    }

    pub(crate) fn raw_ordinal(&self) -> i32 {
        self.ordinal
    }

    /// The value of a device attribute (`cudaDeviceGetAttribute`).
    pub fn attribute(&self, attribute: sys::cudaDeviceAttr) -> Result<i32> {
        let mut value: c_int = 0;
        // SAFETY: `value` is a valid, writable c_int; unknown attributes are reported as error.
        let status = unsafe { sys::cudaDeviceGetAttribute(&mut value, attribute, self.ordinal) };
        check(status, "cudaDeviceGetAttribute")?;
        Ok(value)
    }

    /// The device's name, e.g. `"NVIDIA H200"`.
    pub fn name(&self) -> Result<String> {
        let mut properties = sys::cudaDeviceProp::zeroed();
        // SAFETY: `properties` is a valid, writable cudaDeviceProp whose layout choreo-sys
        // checks against the CUDA 13 headers at compile time.
        let status = unsafe { sys::cudaGetDeviceProperties(&mut properties, self.ordinal) };
        check(status, "cudaGetDeviceProperties")?;
        Ok(properties.name())
    }

    /// The compute capability as `(major, minor)`, e.g. `(9, 0)` for Hopper.
    pub fn compute_capability(&self) -> Result<(u32, u32)> {
        let major = self.attribute(sys::cudaDeviceAttr::cudaDevAttrComputeCapabilityMajor)?;
        let minor = self.attribute(sys::cudaDeviceAttr::cudaDevAttrComputeCapabilityMinor)?;
        Ok((u32::try_from(major).unwrap_or(0), u32::try_from(minor).unwrap_or(0)))
    }

    /// The number of streaming multiprocessors.
    pub fn multiprocessor_count(&self) -> Result<u32> {
        let count = self.attribute(sys::cudaDeviceAttr::cudaDevAttrMultiProcessorCount)?;
        Ok(u32::try_from(count).unwrap_or(0))
    }

    /// Free and total memory of this device.
    pub fn memory_info(&self) -> Result<MemoryInfo> {
        let _guard = self.bind()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: both pointers are valid, writable usize for the duration of the call.
        check(unsafe { sys::cudaMemGetInfo(&mut free, &mut total) }, "cudaMemGetInfo")?;
        Ok(MemoryInfo { free, total })
    }

    /// Blocks until all work on this device (all streams) has completed.
    pub fn synchronize(&self) -> Result<()> {
        let _guard = self.bind()?;
        // SAFETY: no arguments; waits for the current device, which the guard selected.
        check(unsafe { sys::cudaDeviceSynchronize() }, "cudaDeviceSynchronize")
    }
}

/// Initialises CUDA for the calling thread's current device and returns it.
///
/// Optional: everything in the runtime initialises lazily. Useful to fail early with a clear
/// message ("no CUDA-capable device", "CUDA driver is missing or too old…") before doing other
/// work, or to let a program fall back when [`Error::is_no_gpu`] is true.
pub fn init() -> Result<Device> {
    check_deferred()?;
    if Device::count()? == 0 {
        return Err(Error::NoDevice);
    }
    let device = Device::current()?;
    // Creating the primary context happens on the first call that needs it; a free of null
    // is the documented no-op that forces it.
    // SAFETY: cudaFree(null) frees nothing.
    check(unsafe { sys::cudaFree(std::ptr::null_mut()) }, "cudaFree")?;
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

/// The calling thread's current device ordinal.
pub(crate) fn current_ordinal() -> Result<i32> {
    let mut ordinal: c_int = 0;
    // SAFETY: `ordinal` is a valid, writable c_int for the duration of the call.
    check(unsafe { sys::cudaGetDevice(&mut ordinal) }, "cudaGetDevice")?;
    Ok(ordinal)
}

/// Makes a device current for a scope and restores the previous current device when dropped.
///
/// Returned by [`Device::bind`] and [`crate::Stream::bind_device`]; generated wrappers hold one
/// while they launch kernels, since a launch goes to the current device.
#[must_use = "the previous device is restored when the guard is dropped"]
#[derive(Debug)]
pub struct DeviceGuard {
    /// The device to restore; `None` when the device did not change.
    previous: Option<i32>,
}

impl DeviceGuard {
    pub(crate) fn enter(ordinal: i32) -> Result<DeviceGuard> {
        let current = current_ordinal()?;
        if current == ordinal {
            return Ok(DeviceGuard { previous: None });
        }
        // SAFETY: cudaSetDevice takes a plain integer; an invalid ordinal is reported as error.
        check(unsafe { sys::cudaSetDevice(ordinal) }, "cudaSetDevice")?;
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
            if let Err(error) = check(status, "cudaSetDevice") {
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

/// Internal streams by device ordinal, created on first use and then leaked (process lifetime).
static INTERNAL_STREAMS: Mutex<Vec<Option<&'static InternalStreams>>> = Mutex::new(Vec::new());

/// The internal streams of device `ordinal`, created on first use.
pub(crate) fn internal_streams(ordinal: i32) -> Result<&'static InternalStreams> {
    let index = usize::try_from(ordinal)
        .map_err(|_| Error::InvalidArgument(format!("invalid device ordinal {ordinal}")))?;
    let mut table = INTERNAL_STREAMS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(Some(streams)) = table.get(index) {
        return Ok(streams);
    }
    let device = Device::from_raw_ordinal(ordinal);
    let pools = device.attribute(sys::cudaDeviceAttr::cudaDevAttrMemoryPoolsSupported)?;
    let streams = InternalStreams {
        alloc: Stream::new_on(ordinal)?,
        free: Stream::new_on(ordinal)?,
        pools_supported: pools != 0,
    };
    let streams: &'static InternalStreams = Box::leak(Box::new(streams));
    if table.len() <= index {
        table.resize(index + 1, None);
    }
    table[index] = Some(streams);
    Ok(streams)
}
