//! The `extern "C"` entry of a `__co__` function: the one ABI between the generated device
//! code and the generated Rust wrapper. Lowering builds an [`Entry`] per function; the CUDA
//! emitter defines it and the Rust emitter declares and calls it, both by rendering this one
//! description (neither decides anything about it).
//!
//! ```text
//! extern "C" int <symbol>(<params>);
//! ```
//!
//! Parameters, in order ([`Entry::params`]):
//!
//! | `.co` parameter | C parameters |
//! |---|---|
//! | spanned `T [d0, …, dR-1] x` (host, `&` and `global` alike) | [`AbiParam::Data`]: `T* x`, a **device** pointer to `d0·…·dR-1` dense row-major elements (`const` unless the function writes it; null when the function does not use the data), then [`AbiParam::Extent`] `uint64_t x__e0, …`, one per dimension |
//! | scalar `s8 … u64`, `f32`, `f64`, `bool` | [`AbiParam::Scalar`]: `int8_t … uint64_t`, `float`, `double`, `bool` by value |
//! | scalar `f16` / `bf16` | [`AbiParam::Scalar`]: `uint16_t`, the bit pattern (IEEE binary16 / bfloat16) |
//! | `stream s` | [`AbiParam::Stream`]: `cudaStream_t s` (null is the legacy default stream) |
//!
//! then, for a spanned return `T [r0, …]`, [`AbiParam::ResultData`]: `T* ret`, a device pointer
//! to a caller-allocated buffer of `r0·…` elements (the declared return shape, computed by the
//! caller from [`Entry::result_shape`]; a returned value whose element count differs is a
//! failed runtime check); for a scalar return, [`AbiParam::ResultScalar`]: `T* ret`, a host
//! pointer that receives the value (`uint16_t*` bits for `f16`/`bf16`); nothing for `void`.
//! Then, in functions with run-time bounds checks, [`AbiParam::BoundsRecord`]
//! `__choreo_bounds_record* bounds`: the device address of a zeroed record (layout in
//! [`BOUNDS_RECORD`]; the Rust wrappers pass mapped pinned host memory, the C++ `main` path
//! device memory) where the kernels note the first access that failed its check; the caller
//! reads it when the work is done and fails the call when its flag is set. It is followed by
//! [`AbiParam::BoundsUsed`] `unsigned char* checked`: a host flag, zeroed by the caller, that
//! the entry sets when it launched a kernel whose checks were on (not all of them decided on
//! the host, `KernelPlan::host_proof`, or some never decided there,
//! `KernelPlan::always_checked`); when it stays 0 no kernel can have written the record and the
//! caller need not read it.
//! Last come [`AbiParam::Message`] `char* err` and [`AbiParam::MessageCapacity`]
//! `size_t err_cap`: a buffer that receives a NUL-terminated message (truncated to `err_cap`)
//! when the result is -1; it may be null when `err_cap` is 0.
//!
//! Result: `0` success; a positive `cudaError_t` when a CUDA call failed; `-1` when a runtime
//! check failed or an internal C++ exception was caught. The entry never aborts and never
//! calls `exit`; it does not check the CUDA environment.
//!
//! Data movement belongs to the caller: the entry never copies between host and device. The
//! caller copies host data to device buffers it owns before the call and copies `&` data and
//! the returned value back after the device work finished; work it enqueued earlier on the
//! buffers must be ordered before the function's work streams
//! ([`super::Streams::work`]). When the entry returns, the call's device work is finished
//! unless the function leaves asynchronous work ([`super::FunctionPlan::leaves_async_work`]),
//! in which case it runs on the work streams, the copy into `ret` included (on the result
//! stream, after every launch of the call).

use crate::hir::{self, Dim, ElemTy, ParamId, ParamKind, ReturnTy};

/// The layout of the bounds record, in C (32 bytes, 8-aligned): `flag` is set (to 1) by the first
/// failing check, which then fills in the rest: the access number (`hir::AccessId`), the
/// dimension, the index and the extent.
/// `dim` is `0xffffffff` when `index` is a flat element offset (an access through a view that
/// reinterprets the layout, checked against the buffer's element count).
pub const BOUNDS_RECORD: &str = "struct __choreo_bounds_record { unsigned int flag; unsigned int \
    access; unsigned int dim; unsigned int reserved; long long index; long long extent; };";

/// The entry of one function.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The unmangled C symbol.
    pub symbol: String,
    /// The C parameters, in order.
    pub params: Vec<AbiParam>,
    /// For a spanned return: its declared shape as the caller computes it before the call,
    /// with every host local replaced by its initial value, so that each extent is an
    /// expression over constants, parameters, symbols and parameter extents only; `Err` with
    /// the reason when an extent depends on a value the body computes.
    pub result_shape: Option<Result<Vec<Dim>, String>>,
}

/// One C parameter of an [`Entry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbiParam {
    /// `T*`: the device data of spanned parameter `param`.
    Data {
        /// The parameter.
        param: ParamId,
        /// Its element type.
        elem: ElemTy,
        /// Whether the function writes it (`T*`; else `const T*`).
        writable: bool,
        /// Whether the caller passes the data: always for `global` data; for host data only
        /// when the function uses it (reads, writes or returns it), else the caller passes null
        /// and need not copy the data to the device.
        used: bool,
    },
    /// `uint64_t`: extent `dim` of spanned parameter `param`.
    Extent {
        /// The parameter.
        param: ParamId,
        /// The dimension.
        dim: u32,
    },
    /// A scalar parameter by value (`f16`/`bf16` as their 16-bit pattern).
    Scalar {
        /// The parameter.
        param: ParamId,
        /// Its type.
        ty: ElemTy,
    },
    /// `cudaStream_t`: stream parameter `param`.
    Stream {
        /// The parameter.
        param: ParamId,
    },
    /// `T*`: the device buffer that receives a spanned return value.
    ResultData {
        /// The element type.
        elem: ElemTy,
    },
    /// `T*`: the host location that receives a scalar return value (`f16`/`bf16` as bits).
    ResultScalar {
        /// The type.
        ty: ElemTy,
    },
    /// `char*`: the message buffer.
    Message,
    /// `size_t`: the capacity of the message buffer.
    MessageCapacity,
    /// `__choreo_bounds_record*`: the device address of a record, zeroed by the caller (mapped
    /// pinned host memory in the Rust wrappers), in which the kernels note the first element
    /// access that failed its run-time bounds check (the access was skipped). Only in functions with such checks ([`super::FunctionPlan::guards`]); the
    /// caller reads it when the call's device work has finished.
    BoundsRecord,
    /// `unsigned char*`: a host flag, zeroed by the caller, set by the entry when a kernel ran
    /// with its bounds checks on; the record need not be read while it is 0. Always right
    /// after [`AbiParam::BoundsRecord`].
    BoundsUsed,
}

impl AbiParam {
    /// Whether scalar type `t` crosses the ABI as its 16-bit pattern.
    pub fn as_bits(t: ElemTy) -> bool {
        matches!(t, ElemTy::F16 | ElemTy::Bf16)
    }
}

/// The entry of `f`, named `symbol`; `result_shape` is the function's returned shape with host
/// locals resolved (see [`Entry::result_shape`]).
pub(super) fn entry(
    f: &hir::Function,
    symbol: String,
    result_shape: Option<Result<Vec<Dim>, String>>,
    bounds_record: bool,
) -> Entry {
    let mut params = Vec::new();
    for (i, p) in f.params.iter().enumerate() {
        let id = ParamId(i as u32);
        match (p.kind, p.elem) {
            (ParamKind::Scalar(ty), _) => params.push(AbiParam::Scalar { param: id, ty }),
            (ParamKind::Stream, _) => params.push(AbiParam::Stream { param: id }),
            (ParamKind::HostIn | ParamKind::HostInOut | ParamKind::Global, elem) => {
                params.push(AbiParam::Data {
                    param: id,
                    elem: elem.unwrap_or(ElemTy::U8),
                    writable: p.access.write,
                    used: p.kind == ParamKind::Global || p.access.read || p.access.write,
                });
                params.extend(
                    (0..p.dims.len() as u32).map(|dim| AbiParam::Extent { param: id, dim }),
                );
            }
        }
    }
    match &f.ret {
        ReturnTy::Void => {}
        ReturnTy::Scalar(ty) => params.push(AbiParam::ResultScalar { ty: *ty }),
        ReturnTy::Spanned { elem, .. } => params.push(AbiParam::ResultData { elem: *elem }),
    }
    if bounds_record {
        params.push(AbiParam::BoundsRecord);
        params.push(AbiParam::BoundsUsed);
    }
    params.push(AbiParam::Message);
    params.push(AbiParam::MessageCapacity);
    Entry { symbol, params, result_shape }
}
