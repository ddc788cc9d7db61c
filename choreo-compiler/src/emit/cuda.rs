//! CUDA emission, tier 1: checked program + launch plan → one `.cu` file (design §3, spec
//! Appendix B, runtime-abi §1–§5).
//!
//! # Layout of the generated file
//!
//! 1. Prelude (no `#line` yet, so errors in it point at the `.cu` file): the SM define
//!    `__CHOREO_REQUIRED_GPU_DEVICE_SM__`, `__CHOREO_ENABLE_CUDA_RUNTIME_ENV_CHECK__` (unless the
//!    C++ compiler gets `-DCHOREO_DISABLE_CUDA_RUNTIME_ENV_CHECK`), `#include "choreo.h"`,
//!    `using namespace choreo;` and a small support library (call frames, device-memory guards,
//!    math helpers; all names start with `__choreo`) in a namespace named after a hash of its
//!    text, so generated files link together.
//! 2. The `.co` file in source order. Host C++ text, `__device__` declarations and `__cok__`
//!    blocks are copied verbatim, each preceded by a `#line` directive naming the `.co` file,
//!    so nvcc reports errors in them at their `.co` lines. In [`OutputMode::Library`] the
//!    definition of a host `main` function is renamed (only that one identifier token:
//!    `main` at file scope, outside comments, literals and directives, followed by a
//!    parameter list and a function body) to `__choreo_unused_main`, which keeps the line
//!    structure and lets the file link into another program; a `main` without a `return`
//!    then draws a "missing return" warning from the host compiler.
//! 3. Each `__co__` function is replaced, at its position, by (all lines carry `#line`
//!    directives pointing at the `.co` construct they come from):
//!    - its kernels `static __global__ void __choreo_device_<fn>[k](…)`: one per device-entry
//!      parallel-by, receiving exactly the host values the body uses, in the order parameters,
//!      locals, symbolic dimensions, anonymous extents (spanned data as `T*`, scalars by value,
//!      extents as `unsigned`); virtual indices come from `blockIdx` and `threadIdx.x` (spec
//!      §8.4); element access is row-major `ptr[offset]`;
//!    - `static int __choreo_check_<fn>(frame, extents…, scalars…)`: the entry checks (spec
//!      §19.2) with the spec's messages;
//!    - `static int __choreo_core_<fn>(frame, …)`: the function body on device pointers — host
//!      control flow, host printing, launches with the seed's synchronisation rules, function-
//!      local device buffers (freed on every exit path by guards; after asynchronous launches
//!      the frees are stream-ordered after them), the return value;
//!    - the C++ wrapper `<ret> <fn>(<params>)` with the upstream signature (runtime-abi §2): it
//!      checks the CUDA environment, runs the entry checks, copies host parameters to the device
//!      (only when the function launches kernels), calls the core, copies `&` parameters back
//!      (after every launch finished; once, after the core, which is equivalent because host code
//!      cannot read elements), writes a returned parameter's device data back into the caller's
//!      buffer (spec §7.3 ⚠), builds the returned `spanned_data` with the declared return
//!      shape, frees everything and aborts with the spec's messages on any failure;
//!    - the `extern "C"` entry for Rust (below).
//!
//! Failures inside check and core functions are recorded in the call's frame (the first one
//! wins) and every exit path runs through the frame's cleanup; they never abort or exit.
//!
//! # The `extern "C"` entry (the ABI that `emit::rust` calls)
//!
//! For every `__co__` function `fn` the file defines
//!
//! ```text
//! extern "C" int __choreo_rs_<fn>(<params>, [<ret>,] char* err, size_t err_cap);
//! ```
//!
//! with `<params>` in the `.co` parameter order:
//!
//! | `.co` parameter | C parameters |
//! |---|---|
//! | spanned `T [d0, …, dR-1] x` (host, `&` and `global` alike) | `T* x` — a **device** pointer to `d0·…·dR-1` dense row-major elements — then `uint64_t x__e0, …, x__e<R-1>`, the extents, one per dimension |
//! | scalar `s8 … u64`, `f32`, `f64`, `bool` | `int8_t … uint64_t`, `float`, `double`, `bool` by value |
//! | scalar `f16` / `bf16` | `uint16_t`: the bit pattern (IEEE binary16 / bfloat16), as `half::f16::to_bits` gives it |
//! | `stream s` | `cudaStream_t s` (`0`/null is the legacy default stream) |
//!
//! then, for a spanned return `T [r0, …]`: `T* ret`, a device pointer to a caller-allocated
//! buffer of `r0·…` elements, the declared return shape with symbols bound from the arguments
//! (the returned value is copied into it device-to-device; a returned value whose element
//! count differs from the declared shape is a failed runtime check); for a scalar return:
//! `T* ret` (a host pointer; `uint16_t*` for `f16`/`bf16`) that receives the value; nothing for
//! `void`. Last come `char* err, size_t err_cap`: a buffer that receives a NUL-terminated
//! message (truncated to `err_cap`) when the result is -1; it may be null when `err_cap` is 0.
//!
//! Result: `0` success; a positive `cudaError_t` when a CUDA call failed; `-1` when a runtime
//! check failed (entry checks: parameter extents, symbol consistency, positive bounds, thread
//! counts; checks before launches; return shape) or an internal C++ exception was caught. It
//! never aborts and never calls `exit`. It does not check the CUDA environment.
//!
//! Data movement belongs to the caller: the entry never copies between host and device and
//! never touches host views. The caller copies host data (`T [..] x` and `T [..] &x`) to device
//! buffers it owns before the call and copies `&` data and the returned value back after the
//! device work finished. Work the caller enqueued earlier on the buffers must be ordered before
//! the launch streams and the result stream (for example by making those streams wait for it);
//! the entry adds no wait for it.
//!
//! Device work and synchronisation, exactly as spec §8.5 and the seed rules say:
//! - a launch without `.async` and without a stream is followed by `cudaDeviceSynchronize()`;
//!   one bound to stream `s` by `cudaStreamSynchronize(s)` (only);
//! - `parallel.async` launches on the legacy default stream and `parallel.async<s>` on `s`,
//!   and nothing waits for them — except in a function with `&` parameters, where the launch's
//!   stream is synchronised right after the launch (so that the copy-back sees the result);
//! - the copy of a returned value into `ret` runs on the *result stream*: the function's first
//!   `stream` parameter in parameter order, or the legacy default stream when it has none (the
//!   same stream the Rust wrapper stages data on). It is ordered after every asynchronous
//!   launch of the call (through events);
//! - in a function without asynchronous launches (no `.async`, or `.async` in a function with
//!   `&` parameters) all device work of the call, including the copy into `ret`, has finished
//!   when the entry returns;
//! - in a function with asynchronous launches the work left running is on the launch streams
//!   (its bound stream parameters, and the legacy default stream for unbound launches) and on the
//!   result stream, so waiting for those streams waits for everything, the returned value too;
//! - function-local device buffers are allocated with `cudaMallocAsync` on a private stream
//!   that is waited for at once, and freed with `cudaFreeAsync` — on a private release stream
//!   that waits (through events) for every asynchronous launch of the call, so kernels still
//!   running never see freed memory. Apart from the result stream waiting for the call's
//!   asynchronous launches, no user stream is made to wait for another.
//!
//! Symbols: `__choreo_rs_<fn>` is external and unmangled, so two `.co` files linked into one
//! program must not define `__co__` functions of the same name.

use super::OutputMode;
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::hir::{
    self, AssignOp, BinOp, BufferRef, Capture, CheckKind, Dim, ElemTy, HExpr, HExprKind, Level,
    LocalOrigin, LocalPlace, MathFn, ParamId, ParamKind, Place, ReturnTy, Stmt, StmtKind, Ty, UnOp,
};
use crate::lower::{AfterLaunch, FunctionPlan, Names, Plan};
use crate::source::{FileId, SourceDb, Span};
use crate::target::Arch;
use std::fmt::Write as _;

/// What the CUDA emitter needs to know besides the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CudaOptions {
    /// The target architecture (sets `__CHOREO_REQUIRED_GPU_DEVICE_SM__`).
    pub arch: Arch,
    /// Library (rename `main`) or standalone program.
    pub mode: OutputMode,
    /// Whether to emit the runtime checks of spec §19.2 (entry checks and checks before
    /// launches). The check that a returned value fits the declared return shape is always
    /// emitted, because the copy into the caller's buffer depends on it.
    pub runtime_checks: bool,
}

/// The name of the `extern "C"` entry of a `__co__` function (see the module docs).
pub fn rs_entry_name(function_name: &str) -> String {
    format!("__choreo_rs_{function_name}")
}

/// Writes the `.cu` text of a checked, lowered file. Internal inconsistencies (which a correct
/// `sema` never produces) are reported as `E0801` errors; the text is then not usable.
pub fn emit_cuda(
    db: &SourceDb,
    file: FileId,
    program: &hir::Program,
    plan: &Plan,
    options: &CudaOptions,
    diags: &mut Diagnostics,
) -> String {
    let mut w = Writer::new(db, file);
    w.raw(&prelude(db.file(file).name(), options));
    let mut main_renamer = MainRenamer::default();
    let mut plans = plan.functions.iter();
    for item in &program.items {
        match item {
            hir::Item::Host(span) => {
                let text = db.snippet(*span);
                let text = match options.mode {
                    OutputMode::Library => main_renamer.rename(text),
                    OutputMode::Standalone => text.to_string(),
                };
                w.verbatim(*span, &text);
            }
            hir::Item::Device(span) | hir::Item::Cok { span, .. } => {
                w.verbatim(*span, db.snippet(*span));
            }
            hir::Item::Function(f) => match plans.next() {
                Some(p) => {
                    let mut e = FnEmitter { db, f, plan: p, options, w: &mut w, diags, depth: 0 };
                    e.emit();
                }
                None => diags.push(internal(f.span, "no launch plan for this function")),
            },
        }
    }
    w.finish()
}

fn internal(span: Span, what: &str) -> Diagnostic {
    Diagnostic::error("E0801", span, format!("internal error in code generation: {what}"))
        .with_label("the checked program is not what the code generator expects here")
        .with_note("this is a bug of the Choreo translator; please report it with this file")
}

// ---------------------------------------------------------------------------------------------
// Output with #line bookkeeping
// ---------------------------------------------------------------------------------------------

/// The output text. Tracks which `.co` line nvcc assigns to the next output line, so that a
/// `#line` directive is written only where the numbering would otherwise be wrong.
struct Writer<'a> {
    db: &'a SourceDb,
    file: FileId,
    out: String,
    /// The `.co` line of the next output line, once a `#line` directive is in effect.
    next_line: Option<usize>,
    /// The `.co` line the previous generated line was attributed to. Consecutive lines of one
    /// construct get no new directive (their numbers run on), which keeps the output readable.
    last_source_line: Option<usize>,
    indent: usize,
    /// The file name as a C string literal body.
    quoted_name: String,
}

impl<'a> Writer<'a> {
    fn new(db: &'a SourceDb, file: FileId) -> Writer<'a> {
        let quoted_name = c_escape(db.file(file).name(), false);
        Writer {
            db,
            file,
            out: String::new(),
            next_line: None,
            last_source_line: None,
            indent: 0,
            quoted_name,
        }
    }

    /// 1-based line of a span's start.
    fn line_of(&self, span: Span) -> usize {
        self.db.file(self.file).line_col(span.start as usize).0
    }

    fn raw(&mut self, text: &str) {
        self.out.push_str(text);
    }

    fn ensure_line_start(&mut self) {
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
            if let Some(n) = &mut self.next_line {
                *n += 1;
            }
        }
    }

    fn directive(&mut self, line: usize) {
        self.ensure_line_start();
        if self.next_line != Some(line) {
            let _ = writeln!(self.out, "#line {line} \"{}\"", self.quoted_name);
            self.next_line = Some(line);
        }
    }

    /// Source text copied as it is, numbered from the line of `span`.
    fn verbatim(&mut self, span: Span, text: &str) {
        if text.is_empty() {
            return;
        }
        let line = self.line_of(span);
        self.directive(line);
        self.last_source_line = None;
        self.out.push_str(text);
        let newlines = text.matches('\n').count();
        // A `#line` of the user's own changes the numbering: write a directive next time.
        let renumbers = text.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with('#') && l[1..].trim_start().starts_with("line")
        });
        self.next_line = if renumbers { None } else { self.next_line.map(|n| n + newlines) };
    }

    /// Makes the next generated line start with an exact `#line` (at the start of each
    /// generated function).
    fn resync(&mut self) {
        self.last_source_line = None;
    }

    /// One generated line (may contain `\n`), attributed to the `.co` line of `span`.
    fn line(&mut self, span: Span, text: &str) {
        let line = self.line_of(span);
        if self.last_source_line != Some(line) {
            self.directive(line);
        } else {
            self.ensure_line_start();
        }
        self.last_source_line = Some(line);
        for (i, part) in text.split('\n').enumerate() {
            if i > 0 {
                self.out.push('\n');
            }
            if !part.is_empty() {
                for _ in 0..self.indent {
                    self.out.push_str("  ");
                }
                self.out.push_str(part);
            }
        }
        self.out.push('\n');
        let newlines = text.matches('\n').count() + 1;
        self.next_line = self.next_line.map(|n| n + newlines);
    }

    fn finish(mut self) -> String {
        self.ensure_line_start();
        self.out
    }
}

/// Text made safe for a `//` comment: no line breaks, no backslash (a backslash at the end of
/// the line would continue the comment onto the next line).
fn comment_text(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\r' => ' ',
            '\\' => '/',
            c => c,
        })
        .collect()
}

/// Escapes text for a C string literal; with `printf_format`, `%` becomes `%%`. Non-ASCII and
/// control bytes become octal escapes; `?` is escaped so no trigraph can form.
fn c_escape(text: &str, printf_format: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'%' if printf_format => out.push_str("%%"),
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'?' => out.push_str("\\?"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\r' => out.push_str("\\r"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Prelude
// ---------------------------------------------------------------------------------------------

fn prelude(file_name: &str, options: &CudaOptions) -> String {
    let mut text = String::new();
    let display = file_name.replace(['\n', '\r'], " ");
    let _ = writeln!(text, "// Generated by choreoc from {display}; do not edit.");
    let _ = writeln!(
        text,
        "// Target: {}; {}.",
        options.arch,
        match options.mode {
            OutputMode::Library => "library (a host main() is renamed to __choreo_unused_main)",
            OutputMode::Standalone => "standalone program",
        }
    );
    text.push_str("#ifndef CHOREO_DISABLE_CUDA_RUNTIME_ENV_CHECK\n");
    text.push_str("#define __CHOREO_ENABLE_CUDA_RUNTIME_ENV_CHECK__ 1\n");
    text.push_str("#endif\n");
    let _ = writeln!(text, "#define __CHOREO_REQUIRED_GPU_DEVICE_SM__ {}", options.arch.sm());
    text.push_str("#include \"choreo.h\"\n");
    text.push_str(&SUPPORT.replace("@NS@", &support_namespace()));
    text
}

/// `__choreo_support_<hash of the support library text>` (FNV-1a, 64 bits).
fn support_namespace() -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in SUPPORT.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("__choreo_support_{hash:016x}")
}

/// The support library every generated file carries. `@NS@` becomes [`support_namespace`].
const SUPPORT: &str = r#"#include <cstdarg>
#include <mutex>
using namespace choreo;

// The support library lives in a namespace named after a hash of its text: every generated file
// of the same translator version shares one definition (external linkage, so unused parts draw
// no warnings), and files from versions with a different library never clash.
namespace @NS@ {

// A private stream of the generated code on the current device, created on first use and kept
// for the life of the process. Kind 0 carries only allocations and copies that are
// waited for at once; kind 1 carries frees that wait (through events) for asynchronous launches.
inline cudaError_t __choreo_private_stream(int kind, cudaStream_t* stream) {
  constexpr int max_devices = 64;
  static std::mutex mutex;
  static cudaStream_t streams[2][max_devices] = {};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device < 0 || device >= max_devices) return cudaErrorInvalidDevice;
  std::lock_guard<std::mutex> lock(mutex);
  cudaStream_t& slot = streams[kind][device];
  if (slot == nullptr) {
    err = cudaStreamCreateWithFlags(&slot, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
      slot = nullptr;
      return err;
    }
  }
  *stream = slot;
  return cudaSuccess;
}

// The state of one call of a generated function: where spanned data lives (device memory, or
// host memory for a function without kernels called through its C++ wrapper), the first
// failure (a cudaError_t, or -1 for a failed runtime check with its message) and the streams
// of asynchronous launches that may still run.
class __choreo_frame {
 public:
  __choreo_frame(bool device_data, char* message, std::size_t capacity)
      : device_data_(device_data), message_(message), capacity_(capacity) {
    if (message_ != nullptr && capacity_ > 0) message_[0] = '\0';
  }
  __choreo_frame(const __choreo_frame&) = delete;
  __choreo_frame& operator=(const __choreo_frame&) = delete;

  bool device_data() const { return device_data_; }
  int status() const { return status_; }
  const char* message() const { return message_ != nullptr ? message_ : ""; }

  // Records a CUDA failure (the first failure of the call wins); true on success.
  bool cuda(cudaError_t err) {
    if (err != cudaSuccess && status_ == 0) status_ = static_cast<int>(err);
    return err == cudaSuccess;
  }

  // Records a failed runtime check and its printf-formatted message.
  void check_failed(const char* format, ...) {
    if (status_ != 0) return;
    status_ = -1;
    if (message_ == nullptr || capacity_ == 0) return;
    va_list args;
    va_start(args, format);
    std::vsnprintf(message_, capacity_, format, args);
    va_end(args);
  }

  cudaError_t alloc(void** ptr, std::size_t bytes) {
    *ptr = nullptr;
    if (!device_data_) {
      *ptr = std::malloc(bytes == 0 ? 1 : bytes);
      return *ptr != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
    }
    cudaStream_t stream = nullptr;
    cudaError_t err = __choreo_private_stream(0, &stream);
    if (err == cudaSuccess) err = cudaMallocAsync(ptr, bytes, stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    return err;
  }

  // Frees memory from alloc(): at once when no asynchronous launch of this call may use it,
  // else in stream order after all of them.
  void release(void* ptr) {
    if (ptr == nullptr) return;
    if (!device_data_) {
      std::free(ptr);
      return;
    }
    cudaStream_t stream = nullptr;
    cudaError_t err = __choreo_private_stream(async_streams_.empty() ? 0 : 1, &stream);
    // The release stream waits for the asynchronous launches made since the last join (joined
    // here, at the first free after them, not at every launch: a launch costs no extra CUDA
    // call, and functions without device buffers of their own never join at all).
    if (err == cudaSuccess && unjoined_launches_) {
      for (cudaStream_t launched : async_streams_) {
        err = join(stream, launched);
        if (err != cudaSuccess) break;
      }
      if (err == cudaSuccess) unjoined_launches_ = false;
    }
    if (err == cudaSuccess) err = cudaFreeAsync(ptr, stream);
    cuda(err);
  }

  // After an asynchronous launch on `stream`: later frees of this call wait for it (see
  // release), and wait_async / copy_result know the stream. Makes no CUDA call.
  cudaError_t track_async(cudaStream_t stream) {
    unjoined_launches_ = true;
    if (std::find(async_streams_.begin(), async_streams_.end(), stream) == async_streams_.end()) {
      async_streams_.push_back(stream);
    }
    return cudaSuccess;
  }

  // Blocks until every asynchronous launch of this call has finished.
  cudaError_t wait_async() {
    for (cudaStream_t stream : async_streams_) {
      const cudaError_t err = cudaStreamSynchronize(stream);
      if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
  }

  // Copies the returned value into the caller's buffer, on `stream` and after every
  // asynchronous launch of this call. With `wait` the copy has finished on return; otherwise it
  // is left in stream order (and later frees of this call wait for it).
  cudaError_t copy_result(void* dst, const void* src, std::size_t bytes, bool wait,
                          cudaStream_t stream) {
    if (bytes == 0) return cudaSuccess;
    if (!device_data_) {
      std::memcpy(dst, src, bytes);
      return cudaSuccess;
    }
    for (cudaStream_t other : async_streams_) {
      if (other == stream) continue;
      const cudaError_t err = join(stream, other);
      if (err != cudaSuccess) return err;
    }
    const cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream);
    if (err != cudaSuccess) return err;
    return wait ? cudaStreamSynchronize(stream) : track_async(stream);
  }

  cudaError_t to_device(void* dst, const void* src, std::size_t bytes) {
    return copy_waited(dst, src, bytes, cudaMemcpyHostToDevice);
  }

  cudaError_t to_host(void* dst, const void* src, std::size_t bytes) {
    return copy_waited(dst, src, bytes, cudaMemcpyDeviceToHost);
  }

 private:
  // Makes `waiter` wait for the work enqueued on `stream` so far.
  static cudaError_t join(cudaStream_t waiter, cudaStream_t stream) {
    cudaEvent_t event = nullptr;
    cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (err == cudaSuccess) err = cudaEventRecord(event, stream);
    if (err == cudaSuccess) err = cudaStreamWaitEvent(waiter, event, 0);
    if (event != nullptr) {
      const cudaError_t destroyed = cudaEventDestroy(event);
      if (err == cudaSuccess) err = destroyed;
    }
    return err;
  }

  cudaError_t copy_waited(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0) return cudaSuccess;
    if (!device_data_) {
      std::memcpy(dst, src, bytes);
      return cudaSuccess;
    }
    cudaStream_t stream = nullptr;
    cudaError_t err = __choreo_private_stream(0, &stream);
    if (err == cudaSuccess) err = cudaMemcpyAsync(dst, src, bytes, kind, stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    return err;
  }

  bool device_data_;
  char* message_;
  std::size_t capacity_;
  int status_ = 0;
  std::vector<cudaStream_t> async_streams_;
  // Asynchronous launches happened that the release stream does not wait for yet.
  bool unjoined_launches_ = false;
};

// Memory from __choreo_frame::alloc, released when the guard goes out of scope (every exit path
// of the generated function runs through the end of the guard's scope).
class __choreo_buffer {
 public:
  explicit __choreo_buffer(__choreo_frame& frame) : frame_(frame) {}
  __choreo_buffer(const __choreo_buffer&) = delete;
  __choreo_buffer& operator=(const __choreo_buffer&) = delete;
  ~__choreo_buffer() { frame_.release(ptr); }
  void* ptr = nullptr;

 private:
  __choreo_frame& frame_;
};

// The C++ wrappers abort like upstream: a failed check prints its message, a CUDA failure its
// error.
inline void __choreo_abort_on_failure(const __choreo_frame& frame, int status) {
  if (status == 0) return;
  if (status < 0) choreo::runtime_check(false, frame.message());
  choreo::abend_true(status);
}

inline int __choreo_internal_failure(char* message, std::size_t capacity) {
  if (message != nullptr && capacity > 0) {
    std::snprintf(message, capacity, "internal error: a C++ exception escaped the generated code");
  }
  return -1;
}

inline choreo::f16 __choreo_f16_from_bits(std::uint16_t bits) {
  __half_raw raw;
  raw.x = bits;
  return choreo::f16(raw);
}
inline std::uint16_t __choreo_f16_bits(choreo::f16 value) { return static_cast<__half_raw>(value).x; }
inline choreo::bf16 __choreo_bf16_from_bits(std::uint16_t bits) {
  __nv_bfloat16_raw raw;
  raw.x = bits;
  return choreo::bf16(raw);
}
inline std::uint16_t __choreo_bf16_bits(choreo::bf16 value) {
  return static_cast<__nv_bfloat16_raw>(value).x;
}

// Math built-ins (spec §18) for f32 and f64; f16/bf16 arguments are computed in f32.
#define __CHOREO_MATH1(name, f32_expr, f64_expr)                              \
  __host__ __device__ inline float __choreo_##name(float x) { return f32_expr; } \
  __host__ __device__ inline double __choreo_##name(double x) { return f64_expr; }
#define __CHOREO_MATH2(name, f32_expr, f64_expr)                                       \
  __host__ __device__ inline float __choreo_##name(float x, float y) { return f32_expr; } \
  __host__ __device__ inline double __choreo_##name(double x, double y) { return f64_expr; }
__CHOREO_MATH1(sqrt, sqrtf(x), sqrt(x))
__CHOREO_MATH1(exp, expf(x), exp(x))
__CHOREO_MATH1(exp2, exp2f(x), exp2(x))
__CHOREO_MATH1(expm1, expm1f(x), expm1(x))
__CHOREO_MATH1(log, logf(x), log(x))
__CHOREO_MATH1(log1p, log1pf(x), log1p(x))
__CHOREO_MATH1(sin, sinf(x), sin(x))
__CHOREO_MATH1(cos, cosf(x), cos(x))
__CHOREO_MATH1(tan, tanf(x), tan(x))
__CHOREO_MATH1(asin, asinf(x), asin(x))
__CHOREO_MATH1(acos, acosf(x), acos(x))
__CHOREO_MATH1(atan, atanf(x), atan(x))
__CHOREO_MATH1(sinh, sinhf(x), sinh(x))
__CHOREO_MATH1(cosh, coshf(x), cosh(x))
__CHOREO_MATH1(tanh, tanhf(x), tanh(x))
__CHOREO_MATH1(ceil, ceilf(x), ceil(x))
__CHOREO_MATH1(floor, floorf(x), floor(x))
__CHOREO_MATH1(round, roundf(x), round(x))
__CHOREO_MATH1(fabs, fabsf(x), fabs(x))
__CHOREO_MATH1(sign, static_cast<float>((x > 0.0f) - (x < 0.0f)),
               static_cast<double>((x > 0.0) - (x < 0.0)))
__CHOREO_MATH1(gelu, 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)),
               0.5 * x * (1.0 + erf(x * 0.70710678118654752)))
__CHOREO_MATH1(sigmoid, 1.0f / (1.0f + expf(-x)), 1.0 / (1.0 + exp(-x)))
__CHOREO_MATH1(softplus, fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x))),
               fmax(x, 0.0) + log1p(exp(-fabs(x))))
__CHOREO_MATH2(pow, powf(x, y), pow(x, y))
__CHOREO_MATH2(atan2, atan2f(x, y), atan2(x, y))
__CHOREO_MATH2(max, fmaxf(x, y), fmax(x, y))
__CHOREO_MATH2(min, fminf(x, y), fmin(x, y))
#undef __CHOREO_MATH1
#undef __CHOREO_MATH2
__host__ __device__ inline float __choreo_rsqrt(float x) {
#if defined(__CUDA_ARCH__)
  return rsqrtf(x);
#else
  return 1.0f / sqrtf(x);
#endif
}
__host__ __device__ inline double __choreo_rsqrt(double x) {
#if defined(__CUDA_ARCH__)
  return rsqrt(x);
#else
  return 1.0 / sqrt(x);
#endif
}
__host__ __device__ inline float __choreo_frcp_rn(float x) {
#if defined(__CUDA_ARCH__)
  return __frcp_rn(x);
#else
  return 1.0f / x;
#endif
}
__host__ __device__ inline double __choreo_frcp_rn(double x) {
#if defined(__CUDA_ARCH__)
  return __drcp_rn(x);
#else
  return 1.0 / x;
#endif
}
__host__ __device__ inline float __choreo_fma(float x, float y, float z) { return fmaf(x, y, z); }
__host__ __device__ inline double __choreo_fma(double x, double y, double z) { return fma(x, y, z); }
__host__ __device__ inline bool __choreo_isfinite(float x) {
#if defined(__CUDA_ARCH__)
  return isfinite(x);
#else
  return std::isfinite(x);
#endif
}
__host__ __device__ inline bool __choreo_isfinite(double x) {
#if defined(__CUDA_ARCH__)
  return isfinite(x);
#else
  return std::isfinite(x);
#endif
}
template <typename T>
__host__ __device__ inline T __choreo_imax(T x, T y) { return x > y ? x : y; }
template <typename T>
__host__ __device__ inline T __choreo_imin(T x, T y) { return x < y ? x : y; }
template <typename T>
__host__ __device__ inline T __choreo_isign(T x) { return static_cast<T>((x > 0) - (x < 0)); }
template <typename T>
__host__ __device__ inline T __choreo_alignup(T x, T a) { return (x + a - 1) / a * a; }
template <typename T>
__host__ __device__ inline T __choreo_aligndown(T x, T a) { return x / a * a; }

}  // namespace @NS@
using namespace @NS@;

namespace {

template <typename T>
__global__ void __choreo_fill_kernel(T* data, std::uint64_t count, T value) {
  const std::uint64_t step = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += step) {
    data[i] = value;
  }
}

// Sets `count` elements to `value` (the `{v}` initialiser of a buffer declared in host code).
template <typename T>
cudaError_t __choreo_fill(__choreo_frame& frame, T* data, std::uint64_t count, T value) {
  if (!frame.device_data()) {
    std::fill(data, data + count, value);
    return cudaSuccess;
  }
  if (count == 0) return cudaSuccess;
  cudaStream_t stream = nullptr;
  cudaError_t err = __choreo_private_stream(0, &stream);
  if (err != cudaSuccess) return err;
  const std::uint64_t threads = 256;
  const std::uint64_t blocks = std::min<std::uint64_t>((count + threads - 1) / threads, 1024);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(blocks), 1, 1);
  config.blockDim = dim3(static_cast<unsigned>(threads), 1, 1);
  config.stream = stream;
  err = cudaLaunchKernelEx(&config, __choreo_fill_kernel<T>, data, count, value);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  return err;
}

}  // namespace

// Runs `call` (a cudaError_t expression); on failure records it and leaves the function.
#define __CHOREO_TRY(call)                           \
  do {                                               \
    if (!__frame.cuda(call)) goto __choreo_exit;     \
  } while (0)
// Checks `cond`; on failure records the printf-formatted message and leaves the function.
#define __CHOREO_CHECK(cond, ...)                    \
  do {                                               \
    if (!(cond)) {                                   \
      __frame.check_failed(__VA_ARGS__);             \
      goto __choreo_exit;                            \
    }                                                \
  } while (0)
"#;

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

/// The C++ spelling of an element type (choreo.h aliases; `float`/`double`/`bool` plain).
pub fn cpp_elem(t: ElemTy) -> &'static str {
    match t {
        ElemTy::Bool => "bool",
        ElemTy::S8 => "choreo::s8",
        ElemTy::S16 => "choreo::s16",
        ElemTy::S32 => "choreo::s32",
        ElemTy::S64 => "choreo::s64",
        ElemTy::U8 => "choreo::u8",
        ElemTy::U16 => "choreo::u16",
        ElemTy::U32 => "choreo::u32",
        ElemTy::U64 => "choreo::u64",
        ElemTy::F16 => "choreo::f16",
        ElemTy::Bf16 => "choreo::bf16",
        ElemTy::F32 => "float",
        ElemTy::F64 => "double",
        ElemTy::Tf32 => "choreo::tf32",
        ElemTy::F8E4m3 => "choreo::f8_e4m3",
        ElemTy::F8E5m2 => "choreo::f8_e5m2",
        ElemTy::F8Ue4m3 => "choreo::f8_ue4m3",
        ElemTy::F8Ue8m0 => "choreo::f8_ue8m0",
        ElemTy::F6E2m3 => "choreo::f6_e2m3",
        ElemTy::F6E3m2 => "choreo::f6_e3m2",
        ElemTy::F4E2m1 => "choreo::f4_e2m1",
        ElemTy::S6 => "choreo::s6",
        ElemTy::U6 => "choreo::u6",
        ElemTy::S4 => "choreo::s4",
        ElemTy::U4 => "choreo::u4",
        ElemTy::S2 => "choreo::s2",
        ElemTy::U2 => "choreo::u2",
        ElemTy::U1 => "choreo::u1",
        ElemTy::Bin1 => "choreo::bin1",
    }
}

fn is_half(t: ElemTy) -> bool {
    matches!(t, ElemTy::F16 | ElemTy::Bf16)
}

fn is_narrow_int(t: ElemTy) -> bool {
    t.is_int() && t.int_bits() < 32
}

/// The C++ type of a scalar value type (`BoundedInt` is `int`).
fn scalar_of(ty: &Ty) -> Option<ElemTy> {
    ty.scalar()
}

/// The type both operands of a comparison are converted to (C++ usual arithmetic conversions;
/// halves are compared as `float`).
fn comparison_type(a: ElemTy, b: ElemTy) -> ElemTy {
    if a == ElemTy::F64 || b == ElemTy::F64 {
        return ElemTy::F64;
    }
    if a.is_float() || b.is_float() {
        return ElemTy::F32;
    }
    let promote = |t: ElemTy| if t.int_bits() < 32 { ElemTy::S32 } else { t };
    let (a, b) = (promote(a), promote(b));
    if a == b {
        return a;
    }
    let (wa, wb) = (a.int_bits(), b.int_bits());
    if wa == wb {
        // One is unsigned: the unsigned type wins.
        return if a.is_signed_int() { b } else { a };
    }
    if wa > wb { a } else { b }
}

/// `text` (of type `from`) converted to `to`.
fn conv(text: &str, from: ElemTy, to: ElemTy) -> String {
    if from == to {
        return text.to_string();
    }
    match (from, to) {
        (ElemTy::F16, ElemTy::F32) => format!("__half2float({text})"),
        (ElemTy::Bf16, ElemTy::F32) => format!("__bfloat162float({text})"),
        (ElemTy::F16, ElemTy::Bool) => format!("(__half2float({text}) != 0.0f)"),
        (ElemTy::Bf16, ElemTy::Bool) => format!("(__bfloat162float({text}) != 0.0f)"),
        (ElemTy::F16 | ElemTy::Bf16, _) => conv(&conv(text, from, ElemTy::F32), ElemTy::F32, to),
        (ElemTy::F64, ElemTy::F16) => format!("__double2half({text})"),
        (ElemTy::F64, ElemTy::Bf16) => format!("__double2bfloat16({text})"),
        (ElemTy::F32, ElemTy::F16) => format!("__float2half({text})"),
        (ElemTy::F32, ElemTy::Bf16) => format!("__float2bfloat16({text})"),
        (_, ElemTy::F16 | ElemTy::Bf16) => conv(&conv(text, from, ElemTy::F32), ElemTy::F32, to),
        (_, ElemTy::Bool) => format!("({text} != 0)"),
        (_, _) => format!("static_cast<{}>({text})", cpp_elem(to)),
    }
}

// ---------------------------------------------------------------------------------------------
// Functions
// ---------------------------------------------------------------------------------------------

/// Where code is being emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Region {
    /// The core function (host).
    Host,
    /// A kernel body; the payload is the static threads per block, when known.
    Device(Option<u64>),
}

struct FnEmitter<'a, 'w> {
    db: &'a SourceDb,
    f: &'a hir::Function,
    plan: &'a FunctionPlan,
    options: &'a CudaOptions,
    w: &'w mut Writer<'a>,
    diags: &'w mut Diagnostics,
    /// Nesting depth of inner parallel levels (unique names for their linear indices).
    depth: usize,
}

impl FnEmitter<'_, '_> {
    fn names(&self) -> &Names {
        &self.plan.names
    }

    fn bug(&mut self, span: Span, what: &str) {
        self.diags.push(internal(span, what));
    }

    fn emit(&mut self) {
        let f = self.f;
        self.w.ensure_line_start();
        self.w.line(
            f.span,
            &format!("// ---- __co__ function '{}' ({}) ----", f.name, comment_text(&f.location)),
        );
        let mut trees = Vec::new();
        collect_trees(&f.body, &mut trees);
        trees.sort_by_key(|t| t.kernel_index);
        for tree in trees {
            self.kernel(tree);
        }
        self.check_function();
        self.core_function();
        self.cpp_wrapper();
        self.rs_entry();
    }

    // -- names and small pieces ------------------------------------------------------------

    fn param_name(&self, p: ParamId) -> String {
        self.names().param(p).to_string()
    }

    fn dims_of_buffer(&self, b: BufferRef) -> Vec<Dim> {
        match b {
            BufferRef::Param(p) => self.f.param(p).map(|p| p.dims.clone()).unwrap_or_default(),
            BufferRef::Local(v) => match self.f.local(v).map(|l| &l.ty) {
                Some(Ty::Spanned(t)) => t.dims.clone(),
                _ => Vec::new(),
            },
        }
    }

    fn elem_of_buffer(&self, b: BufferRef) -> Option<ElemTy> {
        match b {
            BufferRef::Param(p) => self.f.param(p).and_then(|p| p.elem),
            BufferRef::Local(v) => match self.f.local(v).map(|l| &l.ty) {
                Some(Ty::Spanned(t)) => Some(t.elem),
                _ => None,
            },
        }
    }

    fn buffer_name(&self, b: BufferRef) -> String {
        match b {
            BufferRef::Param(p) => self.param_name(p),
            BufferRef::Local(v) => self.names().local(v).to_string(),
        }
    }

    /// A dimension as an `int` expression.
    fn dim_int(&mut self, d: &Dim) -> String {
        match d {
            Dim::Const(c) => c.to_string(),
            Dim::Sym(s) => format!("static_cast<int>({})", self.names().sym(*s)),
            Dim::Dynamic { param, dim } => {
                format!("static_cast<int>({})", self.names().extent(*param, *dim))
            }
            Dim::Expr(e) => {
                let t = scalar_of(&e.ty).unwrap_or(ElemTy::S32);
                let text = self.expr(e);
                conv(&text, t, ElemTy::S32)
            }
        }
    }

    /// A dimension as a `std::uint64_t` expression (host sizes).
    fn dim_u64(&mut self, d: &Dim) -> String {
        match d {
            Dim::Const(c) => format!("{c}ull"),
            Dim::Sym(s) => self.names().sym(*s).to_string(),
            Dim::Dynamic { param, dim } => self.names().extent(*param, *dim),
            Dim::Expr(_) => format!("static_cast<std::uint64_t>({})", self.dim_int(d)),
        }
    }

    /// A dimension as an `unsigned` expression (launch geometry).
    fn dim_unsigned(&mut self, d: &Dim) -> String {
        match d {
            Dim::Const(c) => c.to_string(),
            _ => {
                let v = self.dim_u64(d);
                format!("static_cast<unsigned>({v})")
            }
        }
    }

    /// The element count of a shape as a `std::uint64_t` expression.
    fn count_u64(&mut self, dims: &[Dim]) -> String {
        if let Some(n) = dims
            .iter()
            .map(Dim::as_const)
            .try_fold(1u64, |acc, d| d.and_then(|d| acc.checked_mul(d)))
        {
            return format!("{n}ull");
        }
        // Symbols and extents are std::uint64_t in host code: the product is 64-bit.
        let parts: Vec<String> = dims.iter().map(|d| self.dim_u64(d)).collect();
        if parts.len() == 1 { parts[0].clone() } else { format!("({})", parts.join(" * ")) }
    }

    /// A dimension as used in an offset computation (its natural type).
    fn dim_raw(&mut self, d: &Dim) -> String {
        match d {
            Dim::Const(c) => c.to_string(),
            Dim::Sym(s) => self.names().sym(*s).to_string(),
            Dim::Dynamic { param, dim } => self.names().extent(*param, *dim),
            Dim::Expr(_) => self.dim_int(d),
        }
    }

    /// `ptr[offset]` for a row-major element access.
    fn element(&mut self, span: Span, buffer: BufferRef, indices: &[HExpr]) -> String {
        let dims = self.dims_of_buffer(buffer);
        let name = self.buffer_name(buffer);
        if dims.len() != indices.len() {
            self.bug(span, "element access with a wrong number of indices");
            return format!("{name}[0]");
        }
        if indices.is_empty() {
            return format!("{name}[0]");
        }
        let narrow = dims.len() == 1
            || dims
                .iter()
                .map(Dim::as_const)
                .try_fold(1u64, |acc, d| d.and_then(|d| acc.checked_mul(d)))
                .is_some_and(|n| n <= i32::MAX as u64);
        let index = |e: &mut Self, i: &HExpr| {
            let t = scalar_of(&i.ty).unwrap_or(ElemTy::S32);
            let text = e.expr(i);
            if t.is_int() { text } else { conv(&text, t, ElemTy::S32) }
        };
        let first = index(self, &indices[0]);
        let mut offset = if narrow { first } else { format!("static_cast<long long>({first})") };
        for (k, (d, i)) in dims.iter().zip(indices).enumerate().skip(1) {
            let d = self.dim_raw(d);
            let i = index(self, i);
            offset = if k == 1 {
                format!("{offset} * {d} + {i}")
            } else {
                format!("({offset}) * {d} + {i}")
            };
        }
        format!("{name}[{offset}]")
    }

    // -- expressions ------------------------------------------------------------------------

    fn expr(&mut self, e: &HExpr) -> String {
        let ty = scalar_of(&e.ty);
        match &e.kind {
            HExprKind::Int(v) => int_literal(*v, ty.unwrap_or(ElemTy::S32)),
            HExprKind::Float(v) => float_literal(*v, ty.unwrap_or(ElemTy::F64)),
            HExprKind::Bool(b) => {
                let text = if *b { "true" } else { "false" };
                conv(text, ElemTy::Bool, ty.unwrap_or(ElemTy::Bool))
            }
            HExprKind::Var(v) => match self.f.local(*v) {
                Some(l) if matches!(l.place, LocalPlace::Expanded) => {
                    self.bug(e.span, "a tuple name used as a value");
                    "0".to_string()
                }
                Some(_) => self.names().local(*v).to_string(),
                None => {
                    self.bug(e.span, "an unknown local");
                    "0".to_string()
                }
            },
            HExprKind::Param(p) => match self.f.param(*p) {
                Some(param) if param.kind == ParamKind::Stream => {
                    self.bug(e.span, "a stream used as a value");
                    "0".to_string()
                }
                Some(_) => self.param_name(*p),
                None => {
                    self.bug(e.span, "an unknown parameter");
                    "0".to_string()
                }
            },
            HExprKind::SymDim(s) => format!("static_cast<int>({})", self.names().sym(*s)),
            HExprKind::ParamExtent { param, dim } => {
                format!("static_cast<int>({})", self.names().extent(*param, *dim))
            }
            HExprKind::Unary { op, operand } => {
                let ot = scalar_of(&operand.ty).unwrap_or(ElemTy::S32);
                let rt = ty.unwrap_or(ot);
                let inner = self.expr(operand);
                match op {
                    UnOp::Not => format!("(!{})", conv(&inner, ot, ElemTy::Bool)),
                    UnOp::BitNot | UnOp::Neg => {
                        let text = format!("({}{})", op.as_str(), conv(&inner, ot, rt));
                        if is_narrow_int(rt) { conv(&text, ElemTy::S32, rt) } else { text }
                    }
                }
            }
            HExprKind::Binary { op, lhs, rhs } => self.binary(e, *op, lhs, rhs),
            HExprKind::Ternary { cond, then_value, else_value } => {
                let rt = ty.unwrap_or(ElemTy::S32);
                let ct = scalar_of(&cond.ty).unwrap_or(ElemTy::Bool);
                let c = self.expr(cond);
                let c = if is_half(ct) { conv(&c, ct, ElemTy::Bool) } else { c };
                let a = self.converted(then_value, rt);
                let b = self.converted(else_value, rt);
                format!("({c} ? {a} : {b})")
            }
            HExprKind::Cdiv(a, b) => {
                let rt = ty.unwrap_or(ElemTy::S32);
                let a = self.converted(a, rt);
                let b = self.converted(b, rt);
                format!("(({a} + {b} - 1) / {b})")
            }
            HExprKind::At { buffer, indices } => self.element(e.span, *buffer, indices),
            HExprKind::Math { func, args } => self.math(e, *func, args),
            HExprKind::Cast { to, operand, .. } => {
                let from = scalar_of(&operand.ty).unwrap_or(*to);
                let inner = self.expr(operand);
                conv(&inner, from, *to)
            }
            HExprKind::CppCast { cpp_type, operand } => {
                let inner = self.expr(operand);
                format!("(({cpp_type})({inner}))")
            }
            HExprKind::Str(_) | HExprKind::Ituple(_) | HExprKind::Mdspan(_) => {
                self.bug(e.span, "a string, ituple or mdspan used as a value");
                "0".to_string()
            }
            HExprKind::Error => {
                self.bug(e.span, "an expression with an error");
                "0".to_string()
            }
        }
    }

    /// `e` converted to `to`.
    fn converted(&mut self, e: &HExpr, to: ElemTy) -> String {
        let from = scalar_of(&e.ty).unwrap_or(to);
        let text = self.expr(e);
        conv(&text, from, to)
    }

    fn binary(&mut self, e: &HExpr, op: BinOp, lhs: &HExpr, rhs: &HExpr) -> String {
        let lt = scalar_of(&lhs.ty).unwrap_or(ElemTy::S32);
        let rt = scalar_of(&rhs.ty).unwrap_or(ElemTy::S32);
        let s = op.as_str();
        match op {
            BinOp::And | BinOp::Or => {
                let l = self.converted(lhs, ElemTy::Bool);
                let r = self.converted(rhs, ElemTy::Bool);
                format!("({l} {s} {r})")
            }
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                let c = comparison_type(lt, rt);
                let l = self.converted(lhs, c);
                let r = self.converted(rhs, c);
                format!("({l} {s} {r})")
            }
            BinOp::Shl | BinOp::Shr => {
                let res = scalar_of(&e.ty).unwrap_or(lt);
                let l = self.converted(lhs, res);
                let r = self.expr(rhs);
                let text = format!("({l} {s} {r})");
                if is_narrow_int(res) { conv(&text, ElemTy::S32, res) } else { text }
            }
            _ => {
                let res = scalar_of(&e.ty).unwrap_or(lt);
                let l = self.converted(lhs, res);
                let r = self.converted(rhs, res);
                let text = format!("({l} {s} {r})");
                if is_narrow_int(res) { conv(&text, ElemTy::S32, res) } else { text }
            }
        }
    }

    fn math(&mut self, e: &HExpr, func: MathFn, args: &[HExpr]) -> String {
        if args.len() != func.arity() {
            self.bug(e.span, "a math built-in with a wrong number of arguments");
            return "0".to_string();
        }
        let rt = scalar_of(&e.ty).unwrap_or(ElemTy::F32);
        let arg_types: Vec<ElemTy> =
            args.iter().map(|a| scalar_of(&a.ty).unwrap_or(ElemTy::F32)).collect();
        let all_int = arg_types.iter().all(|t| t.is_int());
        let int_form = match func {
            MathFn::Max if all_int && rt.is_int() => Some("__choreo_imax"),
            MathFn::Min if all_int && rt.is_int() => Some("__choreo_imin"),
            MathFn::Sign if all_int && rt.is_int() => Some("__choreo_isign"),
            MathFn::Alignup => Some("__choreo_alignup"),
            MathFn::Aligndown => Some("__choreo_aligndown"),
            _ => None,
        };
        if let Some(helper) = int_form {
            let t = if rt.is_int() { rt } else { ElemTy::S64 };
            let parts: Vec<String> = args.iter().map(|a| self.converted(a, t)).collect();
            let call = format!("::{helper}({})", parts.join(", "));
            return conv(&call, t, rt);
        }
        let compute = if rt == ElemTy::F64 || arg_types.contains(&ElemTy::F64) {
            ElemTy::F64
        } else {
            ElemTy::F32
        };
        let helper = match func {
            MathFn::Sqrt => "sqrt",
            MathFn::Rsqrt => "rsqrt",
            MathFn::Exp => "exp",
            MathFn::Exp2f => "exp2",
            MathFn::Expm1 => "expm1",
            MathFn::Log => "log",
            MathFn::Log1p => "log1p",
            MathFn::Pow => "pow",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Tan => "tan",
            MathFn::Asin => "asin",
            MathFn::Acos => "acos",
            MathFn::Atan => "atan",
            MathFn::Atan2 => "atan2",
            MathFn::Sinh => "sinh",
            MathFn::Cosh => "cosh",
            MathFn::Tanh => "tanh",
            MathFn::Ceil => "ceil",
            MathFn::Floor => "floor",
            MathFn::Round => "round",
            MathFn::Fabs => "fabs",
            MathFn::Sign => "sign",
            MathFn::Isfinite => "isfinite",
            MathFn::Max => "max",
            MathFn::Min => "min",
            MathFn::Fmaf => "fma",
            MathFn::FrcpRn => "frcp_rn",
            MathFn::Gelu => "gelu",
            MathFn::Sigmoid => "sigmoid",
            MathFn::Softplus => "softplus",
            MathFn::Alignup | MathFn::Aligndown => "unreachable",
        };
        let parts: Vec<String> = args.iter().map(|a| self.converted(a, compute)).collect();
        let call = format!("::__choreo_{helper}({})", parts.join(", "));
        let produced = if func == MathFn::Isfinite { ElemTy::Bool } else { compute };
        conv(&call, produced, rt)
    }

    // -- print ------------------------------------------------------------------------------

    fn print(&mut self, span: Span, newline: bool, args: &[HExpr]) -> String {
        let mut format = String::new();
        let mut values: Vec<String> = Vec::new();
        for a in args {
            self.print_arg(a, &mut format, &mut values);
        }
        if newline {
            format.push_str("\\n");
        }
        if format.is_empty() && values.is_empty() {
            // printf("") is legal but draws a warning; print nothing explicitly.
            let _ = span;
            return "(void)0;".to_string();
        }
        let mut text = format!("::printf(\"{format}\"");
        for v in values {
            text.push_str(", ");
            text.push_str(&v);
        }
        text.push_str(");");
        text
    }

    fn print_arg(&mut self, a: &HExpr, format: &mut String, values: &mut Vec<String>) {
        match &a.kind {
            HExprKind::Str(s) => format.push_str(&c_escape(s, true)),
            HExprKind::Ituple(items) => {
                format.push('{');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        format.push_str(", ");
                    }
                    format.push_str("%lld");
                    let v = self.expr(item);
                    values.push(format!("static_cast<long long>({v})"));
                }
                format.push('}');
            }
            HExprKind::Mdspan(dims) => {
                format.push('[');
                for (i, d) in dims.iter().enumerate() {
                    if i > 0 {
                        format.push_str(", ");
                    }
                    format.push_str("%lld");
                    let v = self.dim_raw(d);
                    values.push(format!("static_cast<long long>({v})"));
                }
                format.push(']');
            }
            HExprKind::Var(v)
                if matches!(
                    self.f.local(*v).map(|l| &l.origin),
                    Some(LocalOrigin::Tuple { .. })
                ) =>
            {
                let components = match self.f.local(*v).map(|l| &l.origin) {
                    Some(LocalOrigin::Tuple { components }) => components.clone(),
                    _ => Vec::new(),
                };
                format.push('{');
                for (i, c) in components.iter().enumerate() {
                    if i > 0 {
                        format.push_str(", ");
                    }
                    format.push_str("%lld");
                    values.push(format!("static_cast<long long>({})", self.names().local(*c)));
                }
                format.push('}');
            }
            _ => match &a.ty {
                Ty::BoundedInt => {
                    format.push_str("{%lld}");
                    let v = self.expr(a);
                    values.push(format!("static_cast<long long>({v})"));
                }
                Ty::Scalar(ElemTy::Bool) => {
                    format.push_str("%s");
                    let v = self.expr(a);
                    values.push(format!("({v} ? \"true\" : \"false\")"));
                }
                Ty::Scalar(t) if t.is_float() => {
                    format.push_str("%f");
                    let target = if *t == ElemTy::F64 { ElemTy::F64 } else { ElemTy::F32 };
                    let v = self.converted(a, target);
                    values.push(format!("static_cast<double>({v})"));
                }
                Ty::Scalar(t) if t.is_int() && !t.is_signed_int() => {
                    format.push_str("%llu");
                    let v = self.expr(a);
                    values.push(format!("static_cast<unsigned long long>({v})"));
                }
                Ty::Scalar(t) if t.is_int() => {
                    format.push_str("%lld");
                    let v = self.expr(a);
                    values.push(format!("static_cast<long long>({v})"));
                }
                _ => self.bug(a.span, "a print argument of a type that cannot be printed"),
            },
        }
    }

    // -- statements -------------------------------------------------------------------------

    fn stmts(&mut self, stmts: &[Stmt], region: Region) {
        for s in stmts {
            self.stmt(s, region);
        }
    }

    fn block(&mut self, span: Span, head: &str, body: &[Stmt], region: Region) {
        self.w.line(span, &format!("{head}{{"));
        self.w.indent += 1;
        self.stmts(body, region);
        self.w.indent -= 1;
    }

    fn scalar_decl_type(&mut self, span: Span, ty: &Ty) -> (String, ElemTy) {
        match ty {
            Ty::BoundedInt => ("int".to_string(), ElemTy::S32),
            Ty::Scalar(t) => (cpp_elem(*t).to_string(), *t),
            _ => {
                self.bug(span, "a scalar declaration of a non-scalar type");
                ("int".to_string(), ElemTy::S32)
            }
        }
    }

    fn stmt(&mut self, s: &Stmt, region: Region) {
        let span = s.span;
        let host = region == Region::Host;
        match &s.kind {
            StmtKind::Let { var, init } => {
                let Some(local) = self.f.local(*var) else {
                    return self.bug(span, "an unknown local");
                };
                let name = self.names().local(*var).to_string();
                let (ty_text, t) = self.scalar_decl_type(span, &local.ty.clone());
                let text = match init {
                    Some(e) => {
                        let v = self.converted(e, t);
                        format!("[[maybe_unused]] {ty_text} {name} = {v};")
                    }
                    None => format!("[[maybe_unused]] {ty_text} {name}{{}};"),
                };
                self.w.line(span, &text);
            }
            StmtKind::DeclBuffer { var, init } => {
                if !host {
                    return self.bug(span, "a global buffer declared in device code");
                }
                self.decl_buffer(span, *var, init.as_ref());
            }
            StmtKind::Assign { target, op, value } => {
                let (target_text, tt) = match target {
                    Place::Var(v) => {
                        let t = self.f.local(*v).and_then(|l| scalar_of(&l.ty));
                        (self.names().local(*v).to_string(), t)
                    }
                    Place::Elem { buffer, indices } => {
                        let t = self.elem_of_buffer(*buffer);
                        (self.element(span, *buffer, indices), t)
                    }
                };
                let Some(tt) = tt else {
                    return self.bug(span, "an assignment to something that is not scalar");
                };
                let text = self.assignment(&target_text, tt, *op, value);
                self.w.line(span, &text);
            }
            StmtKind::Block(body) => {
                self.block(span, "", body, region);
                self.w.line(span, "}");
            }
            StmtKind::If { cond, then_body, else_body } => {
                let c = self.condition(cond);
                self.block(span, &format!("if ({c}) "), then_body, region);
                if else_body.is_empty() {
                    self.w.line(span, "}");
                } else {
                    self.block(span, "} else ", else_body, region);
                    self.w.line(span, "}");
                }
            }
            StmtKind::While { cond, body } => {
                let c = self.condition(cond);
                self.block(span, &format!("while ({c}) "), body, region);
                self.w.line(span, "}");
            }
            StmtKind::For { var, start, end, step, reset, body } => {
                let name = self.names().local(*var).to_string();
                let declares = matches!(
                    self.f.local(*var).map(|l| &l.origin),
                    Some(LocalOrigin::RangeLocal { .. })
                );
                let start = self.converted(start, ElemTy::S32);
                let end = self.converted(end, ElemTy::S32);
                let init = if declares {
                    format!("int {name} = {start}")
                } else {
                    format!("{name} = {start}")
                };
                let increment =
                    if *step == 1 { format!("++{name}") } else { format!("{name} += {step}") };
                self.block(
                    span,
                    &format!("for ({init}; {name} < {end}; {increment}) "),
                    body,
                    region,
                );
                self.w.line(span, "}");
                if *reset && !declares {
                    self.w.line(span, &format!("{name} = 0;"));
                }
            }
            StmtKind::Break => self.w.line(span, "break;"),
            StmtKind::Continue => self.w.line(span, "continue;"),
            StmtKind::Print { newline, args } => {
                let text = self.print(span, *newline, args);
                self.w.line(span, &text);
            }
            StmtKind::Return(value) => {
                if !host {
                    return self.bug(span, "a return in device code");
                }
                self.return_stmt(span, value.as_ref());
            }
            StmtKind::Parallel(tree) => {
                if !host {
                    return self.bug(span, "a kernel launch inside a kernel");
                }
                self.launch(tree);
            }
            StmtKind::InnerParallel(inner) => match region {
                Region::Device(threads) => self.inner_parallel(inner, threads),
                Region::Host => self.bug(span, "an inner parallel level in host code"),
            },
            StmtKind::Check(check) => {
                if !host {
                    return self.bug(span, "a host check inside a kernel");
                }
                if self.options.runtime_checks {
                    self.check(check);
                }
            }
            StmtKind::SyncGlobal => {
                if !host {
                    return self.bug(span, "sync.global inside a kernel");
                }
                self.w.line(span, "__CHOREO_TRY(cudaDeviceSynchronize());");
            }
            StmtKind::SyncBlock => {
                if host {
                    return self.bug(span, "a block barrier in host code");
                }
                self.w.line(span, "__syncthreads();");
            }
        }
    }

    fn condition(&mut self, cond: &HExpr) -> String {
        let t = scalar_of(&cond.ty).unwrap_or(ElemTy::Bool);
        let text = self.expr(cond);
        let text = if is_half(t) { conv(&text, t, ElemTy::Bool) } else { text };
        strip_outer_parens(&text).to_string()
    }

    fn assignment(&mut self, target: &str, tt: ElemTy, op: AssignOp, value: &HExpr) -> String {
        let vt = scalar_of(&value.ty).unwrap_or(tt);
        if op == AssignOp::Assign {
            let v = self.converted(value, tt);
            return format!("{target} = {v};");
        }
        let bin = match op {
            AssignOp::Add => "+",
            AssignOp::Sub => "-",
            AssignOp::Mul => "*",
            AssignOp::Div => "/",
            AssignOp::Rem => "%",
            AssignOp::Assign => "=",
        };
        if is_half(tt) || is_half(vt) {
            // Explicit conversions: CUDA's half operators do not mix with other types.
            let p = if tt == ElemTy::F64 || vt == ElemTy::F64 { ElemTy::F64 } else { ElemTy::F32 };
            let l = conv(target, tt, p);
            let v = self.converted(value, p);
            let result = conv(&format!("({l} {bin} {v})"), p, tt);
            return format!("{target} = {result};");
        }
        let v = self.expr(value);
        format!("{target} {} {v};", op.as_str())
    }

    fn decl_buffer(&mut self, span: Span, var: hir::VarId, init: Option<&HExpr>) {
        let Some(local) = self.f.local(var) else {
            return self.bug(span, "an unknown buffer");
        };
        let Ty::Spanned(t) = local.ty.clone() else {
            return self.bug(span, "a buffer declaration of a non-spanned type");
        };
        let name = self.names().local(var).to_string();
        let elem = cpp_elem(t.elem);
        let count = self.count_u64(&t.dims);
        self.w.line(span, &format!("__choreo_buffer {name}__mem(__frame);"));
        self.w.line(
            span,
            &format!(
                "__CHOREO_TRY(__frame.alloc(&{name}__mem.ptr, static_cast<std::size_t>({count}) * sizeof({elem})));"
            ),
        );
        self.w.line(
            span,
            &format!(
                "[[maybe_unused]] {elem}* const {name} = static_cast<{elem}*>({name}__mem.ptr);"
            ),
        );
        if let Some(v) = init {
            let value = self.converted(v, t.elem);
            self.w.line(
                span,
                &format!(
                    "__CHOREO_TRY(::__choreo_fill<{elem}>(__frame, {name}, {count}, {value}));"
                ),
            );
        }
    }

    fn return_stmt(&mut self, span: Span, value: Option<&HExpr>) {
        let Some(value) = value else {
            self.w.line(span, "goto __choreo_exit;");
            return;
        };
        match self.f.ret.clone() {
            ReturnTy::Void => self.bug(span, "a value returned from a void function"),
            ReturnTy::Scalar(t) => {
                let v = self.converted(value, t);
                self.w.line(span, "{");
                self.w.indent += 1;
                self.w.line(span, &format!("*__choreo_ret = {v};"));
                self.w.line(span, "goto __choreo_exit;");
                self.w.indent -= 1;
                self.w.line(span, "}");
            }
            ReturnTy::Spanned { elem, .. } => {
                let (source, dims, param) = match &value.kind {
                    HExprKind::Param(p) => {
                        let dims = self.f.param(*p).map(|p| p.dims.clone()).unwrap_or_default();
                        // The actual extents, not the declared ones.
                        let actual: Vec<Dim> = (0..dims.len() as u32)
                            .map(|d| Dim::Dynamic { param: *p, dim: d })
                            .collect();
                        (self.param_name(*p), actual, Some(*p))
                    }
                    HExprKind::Var(v) => match self.f.local(*v).map(|l| &l.ty) {
                        Some(Ty::Spanned(t)) => {
                            (self.names().local(*v).to_string(), t.dims.clone(), None)
                        }
                        _ => return self.bug(span, "a returned local that is not a buffer"),
                    },
                    _ => return self.bug(span, "a returned value that is not a buffer"),
                };
                let count = self.count_u64(&dims);
                let elem_text = cpp_elem(elem);
                let wait = if self.plan.leaves_async_work { "false" } else { "true" };
                let stream = match self.plan.result_stream {
                    Some(s) => self.param_name(s),
                    None => "nullptr".to_string(),
                };
                let message = c_escape(
                    &format!(
                        "the value returned by '{}' has %llu elements, but its declared return shape has %llu ({})",
                        self.f.name,
                        self.db.location(span)
                    ),
                    false,
                );
                self.w.line(span, "{");
                self.w.indent += 1;
                self.w.line(span, &format!("const std::uint64_t __choreo_count = {count};"));
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_CHECK(__choreo_count == __choreo_ret_count, \"{message}\", static_cast<unsigned long long>(__choreo_count), static_cast<unsigned long long>(__choreo_ret_count));"
                    ),
                );
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_TRY(__frame.copy_result(__choreo_ret, {source}, static_cast<std::size_t>(__choreo_count) * sizeof({elem_text}), {wait}, {stream}));"
                    ),
                );
                if let Some(p) = param {
                    if self.plan.returned_params.contains(&p) {
                        self.w.line(
                            span,
                            &format!(
                                "if (__choreo_returned_param != nullptr) *__choreo_returned_param = {};",
                                p.0
                            ),
                        );
                    }
                }
                self.w.line(span, "goto __choreo_exit;");
                self.w.indent -= 1;
                self.w.line(span, "}");
            }
        }
    }

    /// `__CHOREO_CHECK(...)` for a runtime check.
    fn check(&mut self, check: &hir::Check) {
        let span = check.span;
        let location = self.db.location(span);
        match &check.kind {
            CheckKind::ParamExtent { param, dim, expected } => {
                let e = self.names().extent(*param, *dim);
                let message = c_escape(&check.message, true);
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_CHECK({e} == {expected}u, \"{message} %llu.\", static_cast<unsigned long long>({e}));"
                    ),
                );
            }
            CheckKind::SymbolConsistent { sym, param, dim } => {
                let e = self.names().extent(*param, *dim);
                let s = self.names().sym(*sym).to_string();
                let message = c_escape(&check.message, true);
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_CHECK({e} == {s}, \"{message} (%llu vs. %llu)\", static_cast<unsigned long long>({s}), static_cast<unsigned long long>({e}));"
                    ),
                );
            }
            CheckKind::Positive(value) => {
                let t = scalar_of(&value.ty).unwrap_or(ElemTy::S32);
                let v = self.expr(value);
                let v = if t.is_int() { v } else { conv(&v, t, ElemTy::S64) };
                let message = c_escape(&format!("{} ({location})", check.message), true);
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_CHECK({v} > 0, \"{message}: got %lld\", static_cast<long long>({v}));"
                    ),
                );
            }
            CheckKind::MaxThreads { threads, limit } => {
                let v = self.expr(threads);
                let message = c_escape(&format!("{} ({location})", check.message), true);
                self.w.line(
                    span,
                    &format!(
                        "__CHOREO_CHECK(static_cast<long long>({v}) <= {limit}ll, \"{message}: got %lld\", static_cast<long long>({v}));"
                    ),
                );
            }
        }
    }

    // -- kernels ----------------------------------------------------------------------------

    fn capture_decl(&mut self, span: Span, c: Capture) -> String {
        match c {
            Capture::Param(p) => match self.f.param(p) {
                Some(param) => match (param.kind, param.elem) {
                    (ParamKind::Scalar(t), _) => format!("{} {}", cpp_elem(t), self.param_name(p)),
                    (ParamKind::HostIn | ParamKind::HostInOut | ParamKind::Global, Some(t)) => {
                        format!("{}* {}", cpp_elem(t), self.param_name(p))
                    }
                    _ => {
                        self.bug(span, "a kernel capture of a stream");
                        format!("int {}", self.param_name(p))
                    }
                },
                None => {
                    self.bug(span, "a kernel capture of an unknown parameter");
                    "int __choreo_bad".to_string()
                }
            },
            Capture::Var(v) => {
                let name = self.names().local(v).to_string();
                match self.f.local(v).map(|l| l.ty.clone()) {
                    Some(Ty::Spanned(t)) => format!("{}* {name}", cpp_elem(t.elem)),
                    Some(Ty::BoundedInt) => format!("int {name}"),
                    Some(Ty::Scalar(t)) => format!("{} {name}", cpp_elem(t)),
                    _ => {
                        self.bug(span, "a kernel capture of a local that is not a value");
                        format!("int {name}")
                    }
                }
            }
            Capture::Sym(s) => format!("unsigned {}", self.names().sym(s)),
            Capture::Extent(p, d) => format!("unsigned {}", self.names().extent(p, d)),
        }
    }

    fn capture_arg(&self, c: Capture) -> String {
        match c {
            Capture::Param(p) => self.param_name(p),
            Capture::Var(v) => self.names().local(v).to_string(),
            Capture::Sym(s) => format!("static_cast<unsigned>({})", self.names().sym(s)),
            Capture::Extent(p, d) => {
                format!("static_cast<unsigned>({})", self.names().extent(p, d))
            }
        }
    }

    fn kernel(&mut self, tree: &hir::ParallelTree) {
        let Some(k) = self.plan.kernels.get(tree.kernel_index as usize).cloned() else {
            return self.bug(tree.span, "a kernel without a plan");
        };
        let span = tree.span;
        let params: Vec<String> = k.captures.iter().map(|c| self.capture_decl(span, *c)).collect();
        self.w.resync();
        self.w.line(
            span,
            &format!(
                "// kernel {}: parallel-by at {}",
                tree.kernel_index,
                comment_text(&self.db.location(span))
            ),
        );
        self.w.line(span, &format!("static __global__ void {}({}) {{", k.name, params.join(", ")));
        self.w.indent += 1;
        const AXES: [&str; 3] = ["x", "y", "z"];
        if tree.block.vars.len() > 3 {
            self.bug(span, "a block level with more than three sub-dimensions");
        }
        for (i, v) in tree.block.vars.iter().enumerate().take(3) {
            if let Some(v) = v {
                let name = self.names().local(*v).to_string();
                self.w.line(
                    span,
                    &format!(
                        "[[maybe_unused]] const int {name} = static_cast<int>(blockIdx.{});",
                        AXES[i]
                    ),
                );
            }
        }
        let threads = tree.threads_per_block.as_const();
        self.depth = 0;
        self.stmts(&tree.body, Region::Device(threads));
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    fn inner_parallel(&mut self, inner: &hir::InnerParallel, threads: Option<u64>) {
        let span = inner.span;
        let extents = &inner.binder.extents;
        let total_const = extents
            .iter()
            .map(Dim::as_const)
            .try_fold(1u64, |acc, d| d.and_then(|d| acc.checked_mul(d)));
        let stride_const = inner.stride.as_const();
        // The linear index of this level: threadIdx.x / stride % (product of extents).
        let mut linear = match stride_const {
            Some(1) => "static_cast<int>(threadIdx.x)".to_string(),
            _ => {
                let s = self.dim_raw(&inner.stride.clone());
                format!("static_cast<int>(threadIdx.x / {s})")
            }
        };
        let covers_block = match (stride_const, total_const, threads) {
            (Some(s), Some(t), Some(b)) => s.checked_mul(t) == Some(b),
            _ => false,
        };
        if !covers_block {
            let total: Vec<String> = extents.iter().map(|d| self.dim_int(d)).collect();
            linear = if total.len() == 1 {
                format!("{linear} % {}", total[0])
            } else {
                format!("{linear} % ({})", total.join(" * "))
            };
        }
        self.w.line(
            span,
            &format!(
                "{{  // {} level: parallel-by at {}",
                inner.level.as_str(),
                comment_text(&self.db.location(span))
            ),
        );
        self.w.indent += 1;
        let named: Vec<(usize, hir::VarId)> =
            inner.binder.vars.iter().enumerate().filter_map(|(i, v)| v.map(|v| (i, v))).collect();
        if extents.len() == 1 {
            if let Some((_, v)) = named.first() {
                let name = self.names().local(*v).to_string();
                self.w.line(span, &format!("[[maybe_unused]] const int {name} = {linear};"));
            }
        } else if !named.is_empty() {
            let vid = format!("__choreo_vid{}", self.depth);
            self.w.line(span, &format!("const int {vid} = {linear};"));
            for (i, v) in named {
                let name = self.names().local(v).to_string();
                let below: Vec<String> =
                    extents[i + 1..].iter().map(|d| self.dim_int(&d.clone())).collect();
                let mut value = match below.len() {
                    0 => vid.clone(),
                    1 => format!("{vid} / {}", below[0]),
                    _ => format!("{vid} / ({})", below.join(" * ")),
                };
                if i > 0 {
                    let e = self.dim_int(&extents[i].clone());
                    value = format!("{value} % {e}");
                }
                self.w.line(span, &format!("[[maybe_unused]] const int {name} = {value};"));
            }
        }
        if inner.level == Level::Group4 && !self.options.arch.is_hopper_specific() {
            self.bug(span, "a group-4 level on an architecture without WGMMA");
        }
        self.depth += 1;
        self.stmts(&inner.body, Region::Device(threads));
        self.depth -= 1;
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    fn launch(&mut self, tree: &hir::ParallelTree) {
        let Some(k) = self.plan.kernels.get(tree.kernel_index as usize).cloned() else {
            return self.bug(tree.span, "a launch without a plan");
        };
        let span = tree.span;
        self.w.line(
            span,
            &format!(
                "{{  // launch kernel {} (parallel-by at {})",
                tree.kernel_index,
                comment_text(&self.db.location(span))
            ),
        );
        self.w.indent += 1;
        if self.options.runtime_checks {
            for c in &tree.launch_checks {
                self.check(c);
            }
        }
        let mut grid: Vec<String> = Vec::new();
        for d in tree.block.extents.iter().take(3) {
            grid.push(self.dim_unsigned(d));
        }
        while grid.len() < 3 {
            grid.push("1".to_string());
        }
        let threads = self.dim_unsigned(&tree.threads_per_block.clone());
        let stream = match k.stream {
            Some(s) => self.param_name(s),
            None => "nullptr".to_string(),
        };
        self.w.line(span, "cudaLaunchConfig_t __choreo_launch = {};");
        self.w.line(span, &format!("__choreo_launch.gridDim = dim3({});", grid.join(", ")));
        self.w.line(span, &format!("__choreo_launch.blockDim = dim3({threads}, 1, 1);"));
        self.w.line(span, &format!("__choreo_launch.stream = {stream};"));
        let mut args = vec!["&__choreo_launch".to_string(), k.name.clone()];
        args.extend(k.captures.iter().map(|c| self.capture_arg(*c)));
        self.w.line(span, &format!("__CHOREO_TRY(cudaLaunchKernelEx({}));", args.join(", ")));
        let after = match k.after {
            AfterLaunch::DeviceSync => "__CHOREO_TRY(cudaDeviceSynchronize());".to_string(),
            AfterLaunch::StreamSync(s) => {
                let s = match s {
                    Some(s) => self.param_name(s),
                    None => "nullptr".to_string(),
                };
                format!("__CHOREO_TRY(cudaStreamSynchronize({s}));")
            }
            AfterLaunch::Track => format!("__CHOREO_TRY(__frame.track_async({stream}));"),
        };
        self.w.line(span, &after);
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    // -- host functions ---------------------------------------------------------------------

    /// Parameter declarations of the check function: extents of spanned parameters, scalars.
    fn check_params(&self) -> Vec<String> {
        let mut out = vec!["__choreo_frame& __frame".to_string()];
        for (i, p) in self.f.params.iter().enumerate() {
            let id = ParamId(i as u32);
            match p.kind {
                ParamKind::HostIn | ParamKind::HostInOut | ParamKind::Global => {
                    for d in 0..p.dims.len() as u32 {
                        out.push(format!("std::uint64_t {}", self.names().extent(id, d)));
                    }
                }
                ParamKind::Scalar(t) => {
                    out.push(format!("{} {}", cpp_elem(t), self.param_name(id)))
                }
                ParamKind::Stream => {}
            }
        }
        out
    }

    /// Binds the symbolic dimensions from the extents (check and core functions).
    fn bind_syms(&mut self, span: Span) {
        for (i, s) in self.f.sym_dims.iter().enumerate() {
            let (p, d) = s.bound_from;
            let name = self.names().sym(hir::SymId(i as u32)).to_string();
            let extent = self.names().extent(p, d);
            self.w.line(span, &format!("[[maybe_unused]] const std::uint64_t {name} = {extent};"));
        }
    }

    fn check_function(&mut self) {
        self.w.resync();
        let f = self.f;
        let span = f.span;
        let params = self.check_params();
        self.w
            .line(span, &format!("static int __choreo_check_{}({}) {{", f.name, params.join(", ")));
        self.w.indent += 1;
        self.bind_syms(span);
        if self.options.runtime_checks {
            for c in &f.entry_checks {
                self.check(c);
            }
        }
        self.w.line(span, "goto __choreo_exit;");
        self.w.indent -= 1;
        self.w.line(span, "__choreo_exit:");
        self.w.indent += 1;
        self.w.line(span, "return __frame.status();");
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    fn ret_pointer_type(&self) -> Option<String> {
        match &self.f.ret {
            ReturnTy::Void => None,
            ReturnTy::Scalar(t) | ReturnTy::Spanned { elem: t, .. } => {
                Some(format!("{}*", cpp_elem(*t)))
            }
        }
    }

    fn core_params(&self) -> Vec<String> {
        let mut out = vec!["__choreo_frame& __frame".to_string()];
        for (i, p) in self.f.params.iter().enumerate() {
            let id = ParamId(i as u32);
            let name = self.param_name(id);
            match (p.kind, p.elem) {
                (ParamKind::HostIn | ParamKind::HostInOut | ParamKind::Global, Some(t)) => {
                    out.push(format!("{}* {name}", cpp_elem(t)));
                    for d in 0..p.dims.len() as u32 {
                        out.push(format!("std::uint64_t {}", self.names().extent(id, d)));
                    }
                }
                (ParamKind::Scalar(t), _) => out.push(format!("{} {name}", cpp_elem(t))),
                (ParamKind::Stream, _) => out.push(format!("cudaStream_t {name}")),
                _ => out.push(format!("void* {name}")),
            }
        }
        if let Some(t) = self.ret_pointer_type() {
            out.push(format!("{t} __choreo_ret"));
        }
        if !self.plan.returned_params.is_empty() {
            out.push("int* __choreo_returned_param".to_string());
        }
        out
    }

    fn core_function(&mut self) {
        self.w.resync();
        let f = self.f;
        let span = f.span;
        let params = self.core_params();
        self.w
            .line(span, &format!("static int __choreo_core_{}({}) {{", f.name, params.join(", ")));
        self.w.indent += 1;
        self.bind_syms(span);
        self.preload_kernels(span);
        if let ReturnTy::Spanned { dims, .. } = f.ret.clone() {
            let count = self.count_u64(&dims);
            self.w.line(span, &format!("const std::uint64_t __choreo_ret_count = {count};"));
        }
        self.w.line(span, "{");
        self.w.indent += 1;
        self.stmts(&f.body, Region::Host);
        self.w.line(span, "goto __choreo_exit;");
        self.w.indent -= 1;
        self.w.line(span, "}");
        self.w.indent -= 1;
        self.w.line(span, "__choreo_exit:");
        self.w.indent += 1;
        self.w.line(span, "return __frame.status();");
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    /// Loads every kernel of a function that leaves asynchronous work running before its
    /// first launch. With CUDA's lazy module loading (the default since CUDA 12), the first
    /// launch of a kernel loads it, and loading waits for work already running on the device:
    /// the second `.async` kernel of a call would wait for the first one instead of overlapping
    /// with it on its own stream. Querying a kernel's attributes loads it without launching.
    fn preload_kernels(&mut self, span: Span) {
        let kernels = &self.plan.kernels;
        if kernels.len() < 2 || !kernels.iter().any(|k| k.after == AfterLaunch::Track) {
            return;
        }
        let names: Vec<String> = kernels.iter().map(|k| k.name.clone()).collect();
        self.w.line(
            span,
            "{  // load the kernels before the first launch (lazy loading would serialise them)",
        );
        self.w.indent += 1;
        self.w.line(span, "cudaFuncAttributes __choreo_attributes;");
        for name in names {
            self.w.line(
                span,
                &format!("__CHOREO_TRY(cudaFuncGetAttributes(&__choreo_attributes, {name}));"),
            );
        }
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    fn cpp_return_type(&mut self) -> String {
        match self.f.ret.clone() {
            ReturnTy::Void => "void".to_string(),
            ReturnTy::Scalar(t) => cpp_elem(t).to_string(),
            ReturnTy::Spanned { elem, dims } => {
                format!("choreo::spanned_data<{}, {}>", cpp_elem(elem), dims.len())
            }
        }
    }

    fn cpp_wrapper(&mut self) {
        self.w.resync();
        let f = self.f;
        let span = f.span;
        let device = self.plan.device_data;
        let mut params = Vec::new();
        for (i, p) in f.params.iter().enumerate() {
            let name = self.param_name(ParamId(i as u32));
            params.push(match (p.kind, p.elem) {
                (ParamKind::Scalar(t), _) => format!("{} {name}", cpp_elem(t)),
                (ParamKind::Stream, _) => format!("choreo::stream_t {name}"),
                (_, Some(t)) => {
                    format!("const choreo::spanned_view<{}, {}>& {name}", cpp_elem(t), p.dims.len())
                }
                (_, None) => format!("void* {name}"),
            });
        }
        let ret = self.cpp_return_type();
        self.w.line(
            span,
            &format!("// C++ wrapper (upstream signature): {}", comment_text(&f.co_signature)),
        );
        self.w.line(span, &format!("{ret} {}({}) {{", f.name, params.join(", ")));
        self.w.indent += 1;
        if device {
            self.w.line(span, "#if defined(__CHOREO_ENABLE_CUDA_RUNTIME_ENV_CHECK__)");
            self.w.line(span, "choreo::__choreo_check_cuda_environment__();");
            self.w.line(span, "#endif");
        }
        self.w.line(span, "char __choreo_message[1024] = {};");
        self.w.line(
            span,
            &format!(
                "__choreo_frame __frame({}, __choreo_message, sizeof __choreo_message);",
                if device { "true" } else { "false" }
            ),
        );
        // Entry checks.
        let mut check_args = vec!["__frame".to_string()];
        let mut core_args = vec!["__frame".to_string()];
        for (i, p) in f.params.iter().enumerate() {
            let id = ParamId(i as u32);
            let name = self.param_name(id);
            match p.kind {
                ParamKind::HostIn | ParamKind::HostInOut | ParamKind::Global => {
                    let elem = cpp_elem(p.elem.unwrap_or(ElemTy::U8));
                    let pointer = if device && p.kind != ParamKind::Global {
                        format!("static_cast<{elem}*>({name}__mem.ptr)")
                    } else {
                        format!("{name}.data()")
                    };
                    core_args.push(pointer);
                    for d in 0..p.dims.len() {
                        check_args.push(format!("{name}.shape()[{d}]"));
                        core_args.push(format!("{name}.shape()[{d}]"));
                    }
                }
                ParamKind::Scalar(_) => {
                    check_args.push(name.clone());
                    core_args.push(name);
                }
                ParamKind::Stream => core_args.push(name),
            }
        }
        self.w.line(
            span,
            &format!(
                "::__choreo_abort_on_failure(__frame, __choreo_check_{}({}));",
                f.name,
                check_args.join(", ")
            ),
        );
        // The host side of the return value.
        let mut result_pointer = None;
        match f.ret.clone() {
            ReturnTy::Void => {}
            ReturnTy::Scalar(t) => {
                self.w.line(span, &format!("{} __choreo_result{{}};", cpp_elem(t)));
                result_pointer = Some("&__choreo_result".to_string());
            }
            ReturnTy::Spanned { elem, dims } => {
                // The return shape may use every extent and symbol of the parameters: bind them
                // like the core does (symbols from their first mention, like upstream).
                for (i, p) in f.params.iter().enumerate() {
                    if !p.is_spanned() {
                        continue;
                    }
                    let id = ParamId(i as u32);
                    let pname = self.param_name(id);
                    for d in 0..p.dims.len() as u32 {
                        let extent = self.names().extent(id, d);
                        self.w.line(
                            span,
                            &format!(
                                "[[maybe_unused]] const std::uint64_t {extent} = {pname}.shape()[{d}];"
                            ),
                        );
                    }
                }
                self.bind_syms(span);
                let shape: Vec<String> = dims
                    .iter()
                    .map(|d| match d {
                        Dim::Const(c) => c.to_string(),
                        _ => {
                            let v = self.dim_u64(d);
                            format!("static_cast<std::size_t>({v})")
                        }
                    })
                    .collect();
                let elem_text = cpp_elem(elem);
                self.w.line(
                    span,
                    &format!(
                        "auto __choreo_result = choreo::make_spandata<{elem_text}, {}>({{{}}});",
                        dims.len(),
                        shape.join(", ")
                    ),
                );
                result_pointer = Some(if device {
                    format!("static_cast<{elem_text}*>(__choreo_result__mem.ptr)")
                } else {
                    "__choreo_result.data()".to_string()
                });
            }
        }
        // Device memory lives in this block: its guards free it at the closing brace, and a
        // failed free is reported after it.
        self.w.line(span, "{");
        self.w.indent += 1;
        // Device copies of host parameters (spec §7.4 step 4).
        if device {
            for (i, p) in f.params.iter().enumerate() {
                if !matches!(p.kind, ParamKind::HostIn | ParamKind::HostInOut) {
                    continue;
                }
                let name = self.param_name(ParamId(i as u32));
                self.w.line(span, &format!("__choreo_buffer {name}__mem(__frame);"));
                self.w.line(
                    span,
                    &format!(
                        "choreo::abend_true(__frame.alloc(&{name}__mem.ptr, {name}.bytes()));"
                    ),
                );
                self.w.line(
                    span,
                    &format!(
                        "choreo::abend_true(__frame.to_device({name}__mem.ptr, {name}.data(), {name}.bytes()));"
                    ),
                );
            }
            if matches!(f.ret, ReturnTy::Spanned { .. }) {
                self.w.line(span, "__choreo_buffer __choreo_result__mem(__frame);");
                self.w.line(
                    span,
                    "choreo::abend_true(__frame.alloc(&__choreo_result__mem.ptr, __choreo_result.bytes()));",
                );
            }
        }
        if let Some(pointer) = result_pointer {
            core_args.push(pointer);
        }
        if !self.plan.returned_params.is_empty() {
            self.w.line(span, "int __choreo_returned_param = -1;");
            core_args.push("&__choreo_returned_param".to_string());
        }
        self.w.line(
            span,
            &format!(
                "::__choreo_abort_on_failure(__frame, __choreo_core_{}({}));",
                f.name,
                core_args.join(", ")
            ),
        );
        if device {
            // Every launch of a function with `&` parameters has finished here (the seed rules
            // synchronise them), so the copy-back sees the final data.
            let returns_data =
                matches!(f.ret, ReturnTy::Spanned { .. }) || !self.plan.returned_params.is_empty();
            if self.plan.leaves_async_work && returns_data {
                self.w.line(span, "choreo::abend_true(__frame.wait_async());");
            }
            for (i, p) in f.params.iter().enumerate() {
                if p.kind != ParamKind::HostInOut {
                    continue;
                }
                let name = self.param_name(ParamId(i as u32));
                self.w.line(
                    span,
                    &format!(
                        "choreo::abend_true(__frame.to_host({name}.data(), {name}__mem.ptr, {name}.bytes()));"
                    ),
                );
            }
            for p in self.plan.returned_params.clone() {
                if self.f.param(p).map(|p| p.kind) != Some(ParamKind::HostIn) {
                    continue;
                }
                let name = self.param_name(p);
                self.w.line(
                    span,
                    &format!(
                        "if (__choreo_returned_param == {}) choreo::abend_true(__frame.to_host({name}.data(), {name}__mem.ptr, {name}.bytes()));",
                        p.0
                    ),
                );
            }
            if matches!(f.ret, ReturnTy::Spanned { .. }) {
                self.w.line(
                    span,
                    "choreo::abend_true(__frame.to_host(__choreo_result.data(), __choreo_result__mem.ptr, __choreo_result.bytes()));",
                );
            }
        }
        self.w.indent -= 1;
        self.w.line(span, "}");
        self.w.line(span, "::__choreo_abort_on_failure(__frame, __frame.status());");
        if !matches!(f.ret, ReturnTy::Void) {
            self.w.line(span, "return __choreo_result;");
        }
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    fn rs_entry(&mut self) {
        self.w.resync();
        let f = self.f;
        let span = f.span;
        let mut params = Vec::new();
        let mut check_args = vec!["__frame".to_string()];
        let mut core_args = vec!["__frame".to_string()];
        for (i, p) in f.params.iter().enumerate() {
            let id = ParamId(i as u32);
            let name = self.param_name(id);
            match (p.kind, p.elem) {
                (ParamKind::Scalar(ElemTy::F16), _) => {
                    params.push(format!("std::uint16_t {name}"));
                    check_args.push(format!("::__choreo_f16_from_bits({name})"));
                    core_args.push(format!("::__choreo_f16_from_bits({name})"));
                }
                (ParamKind::Scalar(ElemTy::Bf16), _) => {
                    params.push(format!("std::uint16_t {name}"));
                    check_args.push(format!("::__choreo_bf16_from_bits({name})"));
                    core_args.push(format!("::__choreo_bf16_from_bits({name})"));
                }
                (ParamKind::Scalar(t), _) => {
                    params.push(format!("{} {name}", cpp_elem(t)));
                    check_args.push(name.clone());
                    core_args.push(name);
                }
                (ParamKind::Stream, _) => {
                    params.push(format!("cudaStream_t {name}"));
                    core_args.push(name);
                }
                (_, elem) => {
                    params.push(format!("{}* {name}", cpp_elem(elem.unwrap_or(ElemTy::U8))));
                    core_args.push(name);
                    for d in 0..p.dims.len() as u32 {
                        let e = self.names().extent(id, d);
                        params.push(format!("std::uint64_t {e}"));
                        check_args.push(e.clone());
                        core_args.push(e);
                    }
                }
            }
        }
        let mut scalar_half_ret = None;
        match &f.ret {
            ReturnTy::Void => {}
            ReturnTy::Scalar(t @ (ElemTy::F16 | ElemTy::Bf16)) => {
                params.push("std::uint16_t* __choreo_ret".to_string());
                scalar_half_ret = Some(*t);
                core_args.push("&__choreo_value".to_string());
            }
            ReturnTy::Scalar(t) | ReturnTy::Spanned { elem: t, .. } => {
                params.push(format!("{}* __choreo_ret", cpp_elem(*t)));
                core_args.push("__choreo_ret".to_string());
            }
        }
        if !self.plan.returned_params.is_empty() {
            core_args.push("nullptr".to_string());
        }
        params.push("char* __choreo_err".to_string());
        params.push("std::size_t __choreo_err_cap".to_string());
        self.w.line(
            span,
            &format!(
                "// Entry for the Rust wrapper (see emit/cuda.rs): {}",
                comment_text(&f.co_signature)
            ),
        );
        self.w.line(
            span,
            &format!("extern \"C\" int {}({}) {{", rs_entry_name(&f.name), params.join(", ")),
        );
        self.w.indent += 1;
        self.w.line(span, "try {");
        self.w.indent += 1;
        self.w.line(span, "__choreo_frame __frame(true, __choreo_err, __choreo_err_cap);");
        self.w.line(
            span,
            &format!(
                "if (__choreo_check_{}({}) != 0) return __frame.status();",
                f.name,
                check_args.join(", ")
            ),
        );
        match scalar_half_ret {
            Some(t) => {
                self.w.line(span, &format!("{} __choreo_value{{}};", cpp_elem(t)));
                self.w.line(
                    span,
                    &format!(
                        "const int __choreo_status = __choreo_core_{}({});",
                        f.name,
                        core_args.join(", ")
                    ),
                );
                let bits =
                    if t == ElemTy::F16 { "__choreo_f16_bits" } else { "__choreo_bf16_bits" };
                self.w.line(
                    span,
                    &format!("if (__choreo_status == 0) *__choreo_ret = ::{bits}(__choreo_value);"),
                );
                self.w.line(span, "return __choreo_status;");
            }
            None => {
                self.w.line(
                    span,
                    &format!("return __choreo_core_{}({});", f.name, core_args.join(", ")),
                );
            }
        }
        self.w.indent -= 1;
        self.w.line(span, "} catch (...) {");
        self.w.indent += 1;
        self.w.line(span, "return ::__choreo_internal_failure(__choreo_err, __choreo_err_cap);");
        self.w.indent -= 1;
        self.w.line(span, "}");
        self.w.indent -= 1;
        self.w.line(span, "}");
    }
}

/// `text` without one pair of parentheses that encloses all of it (`(a && b)` → `a && b`,
/// but `(a) + (b)` stays).
fn strip_outer_parens(text: &str) -> &str {
    let Some(inner) = text.strip_prefix('(').and_then(|t| t.strip_suffix(')')) else {
        return text;
    };
    let mut depth = 0i32;
    let mut in_string = false;
    let mut prev = '\0';
    for c in inner.chars() {
        match c {
            '"' if prev != '\\' => in_string = !in_string,
            '(' if !in_string => depth += 1,
            ')' if !in_string => {
                depth -= 1;
                if depth < 0 {
                    return text;
                }
            }
            _ => {}
        }
        prev = c;
    }
    if depth == 0 { inner } else { text }
}

/// The device-entry parallel-bys of a body, in source order.
fn collect_trees<'a>(stmts: &'a [Stmt], out: &mut Vec<&'a hir::ParallelTree>) {
    for s in stmts {
        match &s.kind {
            StmtKind::Parallel(t) => out.push(t),
            StmtKind::Block(b)
            | StmtKind::While { body: b, .. }
            | StmtKind::For { body: b, .. } => collect_trees(b, out),
            StmtKind::If { then_body, else_body, .. } => {
                collect_trees(then_body, out);
                collect_trees(else_body, out);
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Literals
// ---------------------------------------------------------------------------------------------

fn int_literal(v: i128, t: ElemTy) -> String {
    match t {
        ElemTy::S32 => {
            if v == i32::MIN as i128 {
                "(-2147483647 - 1)".to_string()
            } else if v < 0 {
                format!("({v})")
            } else {
                v.to_string()
            }
        }
        ElemTy::S64 => {
            if v == i64::MIN as i128 {
                "(-9223372036854775807ll - 1)".to_string()
            } else if v < 0 {
                format!("({v}ll)")
            } else {
                format!("{v}ll")
            }
        }
        ElemTy::U32 => format!("{v}u"),
        ElemTy::U64 => format!("{v}ull"),
        ElemTy::Bool => (if v != 0 { "true" } else { "false" }).to_string(),
        t if t.is_float() => {
            let text = if v < 0 { format!("({v}ll)") } else { format!("{v}ll") };
            conv(&text, ElemTy::S64, t)
        }
        t => {
            let text = if v < 0 { format!("({v}ll)") } else { format!("{v}ll") };
            format!("static_cast<{}>({text})", cpp_elem(t))
        }
    }
}

fn float_literal(v: f64, t: ElemTy) -> String {
    let as_f32 = t != ElemTy::F64;
    let text = if v.is_nan() {
        if as_f32 { "(0.0f / 0.0f)".to_string() } else { "(0.0 / 0.0)".to_string() }
    } else if v.is_infinite() {
        let inf = if as_f32 { "HUGE_VALF" } else { "HUGE_VAL" };
        if v < 0.0 { format!("(-{inf})") } else { inf.to_string() }
    } else {
        let mut digits = if as_f32 { format!("{:?}", v as f32) } else { format!("{v:?}") };
        if !digits.contains(['.', 'e', 'E']) {
            digits.push_str(".0");
        }
        if as_f32 {
            digits.push('f');
        }
        if digits.starts_with('-') { format!("({digits})") } else { digits }
    };
    match t {
        ElemTy::F32 | ElemTy::F64 => text,
        t => conv(&text, ElemTy::F32, t),
    }
}

// ---------------------------------------------------------------------------------------------
// Library mode: renaming the host main
// ---------------------------------------------------------------------------------------------

/// Renames the definition of a file-scope `main` function in host text. State (brace depth)
/// carries across the host regions of one file.
#[derive(Debug, Default)]
struct MainRenamer {
    /// Open braces: `true` for a linkage block (`extern "C" {`), which does not leave file scope.
    braces: Vec<bool>,
}

/// The name a host `main` definition gets in library mode.
pub const RENAMED_MAIN: &str = "__choreo_unused_main";

impl MainRenamer {
    fn at_file_scope(&self) -> bool {
        self.braces.iter().all(|linkage| *linkage)
    }

    fn rename(&mut self, text: &str) -> String {
        let tokens = scan(text);
        let mut renames: Vec<std::ops::Range<usize>> = Vec::new();
        for (i, tok) in tokens.iter().enumerate() {
            match tok.kind {
                TokKind::Punct if &text[tok.range.clone()] == "{" => {
                    let linkage = i >= 2
                        && tokens[i - 1].kind == TokKind::Literal
                        && text[tokens[i - 1].range.clone()].starts_with('"')
                        && &text[tokens[i - 2].range.clone()] == "extern";
                    self.braces.push(linkage);
                }
                TokKind::Punct if &text[tok.range.clone()] == "}" => {
                    self.braces.pop();
                }
                TokKind::Ident if &text[tok.range.clone()] == "main" && self.at_file_scope() => {
                    let qualified =
                        i >= 1 && matches!(&text[tokens[i - 1].range.clone()], "::" | "." | "->");
                    if !qualified && is_function_definition(text, &tokens, i) {
                        renames.push(tok.range.clone());
                    }
                }
                _ => {}
            }
        }
        let mut out = String::with_capacity(text.len() + renames.len() * 24);
        let mut last = 0;
        for r in renames {
            out.push_str(&text[last..r.start]);
            out.push_str(RENAMED_MAIN);
            last = r.end;
        }
        out.push_str(&text[last..]);
        out
    }
}

/// Whether the identifier at `tokens[i]` is followed by `( … )` and then, before any `;`, `=`
/// or `,` at the same nesting, by `{`: a function definition.
fn is_function_definition(text: &str, tokens: &[Tok], i: usize) -> bool {
    let tok = |j: usize| tokens.get(j).map(|t| &text[t.range.clone()]);
    if tok(i + 1) != Some("(") {
        return false;
    }
    let mut depth = 0usize;
    let mut j = i + 1;
    while let Some(t) = tok(j) {
        match t {
            "(" => depth += 1,
            ")" => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            _ => {}
        }
        j += 1;
    }
    j += 1;
    let mut parens = 0usize;
    while let Some(t) = tok(j) {
        match t {
            "(" | "[" => parens += 1,
            ")" | "]" => parens = parens.saturating_sub(1),
            "{" if parens == 0 => return true,
            ";" | "=" | "," if parens == 0 => return false,
            _ => {}
        }
        j += 1;
    }
    false
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TokKind {
    Ident,
    Literal,
    Punct,
}

#[derive(Debug, Clone)]
struct Tok {
    kind: TokKind,
    range: std::ops::Range<usize>,
}

/// A small C++ tokenizer for host text: skips comments, whitespace and preprocessor lines;
/// yields identifiers, literals (strings incl. raw strings, chars, numbers) and punctuation
/// (`::` and `->` as one token).
fn scan(text: &str) -> Vec<Tok> {
    let b = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                i += 1;
            }
            i = (i + 2).min(b.len());
            continue;
        }
        if c == b'#' && line_start {
            // A directive, through its last continued line.
            while i < b.len() && b[i] != b'\n' {
                if b[i] == b'\\' && b.get(i + 1) == Some(&b'\n') {
                    i += 2;
                    continue;
                }
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    i += 2;
                    while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                        i += 1;
                    }
                    i = (i + 2).min(b.len());
                    continue;
                }
                i += 1;
            }
            continue;
        }
        line_start = false;
        let start = i;
        if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80) {
                i += 1;
            }
            // A string or char literal with an encoding prefix (u8"…", L'x', R"(…)", u8R"…").
            let word = &text[start..i];
            if i < b.len()
                && (b[i] == b'"' || b[i] == b'\'')
                && matches!(word, "u8" | "u" | "U" | "L" | "R" | "u8R" | "uR" | "UR" | "LR")
            {
                i = literal_end(b, i, word.ends_with('R'));
                tokens.push(Tok { kind: TokKind::Literal, range: start..i });
            } else {
                tokens.push(Tok { kind: TokKind::Ident, range: start..i });
            }
            continue;
        }
        if c == b'"' || c == b'\'' {
            i = literal_end(b, i, false);
            tokens.push(Tok { kind: TokKind::Literal, range: start..i });
            continue;
        }
        if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            while i < b.len()
                && (b[i].is_ascii_alphanumeric()
                    || b[i] == b'.'
                    || b[i] == b'\''
                    || ((b[i] == b'+' || b[i] == b'-')
                        && matches!(b[i - 1], b'e' | b'E' | b'p' | b'P')))
            {
                i += 1;
            }
            tokens.push(Tok { kind: TokKind::Literal, range: start..i });
            continue;
        }
        let two = text.get(i..i + 2);
        i += if matches!(two, Some("::") | Some("->")) { 2 } else { 1 };
        tokens.push(Tok { kind: TokKind::Punct, range: start..i });
    }
    tokens
}

/// The end of a string or char literal starting at the quote `b[i]`.
fn literal_end(b: &[u8], mut i: usize, raw: bool) -> usize {
    let quote = b[i];
    if raw && quote == b'"' {
        // R"delim( … )delim"
        let open = i + 1;
        let mut j = open;
        while j < b.len() && b[j] != b'(' && j - open <= 16 {
            j += 1;
        }
        let delim = &b[open..j.min(b.len())];
        let mut k = j + 1;
        while k < b.len() {
            if b[k] == b')'
                && b.get(k + 1..k + 1 + delim.len()) == Some(delim)
                && b.get(k + 1 + delim.len()) == Some(&b'"')
            {
                return k + 2 + delim.len();
            }
            k += 1;
        }
        return b.len();
    }
    i += 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            c if c == quote => return i + 1,
            b'\n' => return i,
            _ => i += 1,
        }
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_printf_formats() {
        assert_eq!(c_escape("100%", true), "100%%");
        assert_eq!(c_escape("a\"b\\c\n", false), "a\\\"b\\\\c\\n");
        assert_eq!(c_escape("é", false), "\\303\\251");
        assert_eq!(c_escape("??=", false), "\\?\\?=");
    }

    #[test]
    fn literals_are_valid_cpp() {
        assert_eq!(int_literal(-5, ElemTy::S32), "(-5)");
        assert_eq!(int_literal(i32::MIN as i128, ElemTy::S32), "(-2147483647 - 1)");
        assert_eq!(int_literal(7, ElemTy::U64), "7ull");
        assert_eq!(float_literal(1.0, ElemTy::F32), "1.0f");
        assert_eq!(float_literal(0.1, ElemTy::F32), "0.1f");
        assert_eq!(float_literal(1e-7, ElemTy::F64), "1e-7");
        assert_eq!(float_literal(-2.5, ElemTy::F64), "(-2.5)");
        assert_eq!(float_literal(f64::INFINITY, ElemTy::F32), "HUGE_VALF");
        assert_eq!(float_literal(1.5, ElemTy::F16), "__float2half(1.5f)");
    }

    #[test]
    fn comments_cannot_break_out() {
        assert_eq!(comment_text("a\nb\\"), "a b/");
    }

    #[test]
    fn outer_parens() {
        assert_eq!(strip_outer_parens("(a && b)"), "a && b");
        assert_eq!(strip_outer_parens("(a) + (b)"), "(a) + (b)");
        assert_eq!(strip_outer_parens("x"), "x");
        assert_eq!(strip_outer_parens("(f(\")\"))"), "f(\")\")");
    }

    #[test]
    fn conversions() {
        assert_eq!(conv("h", ElemTy::F16, ElemTy::F32), "__half2float(h)");
        assert_eq!(conv("x", ElemTy::S32, ElemTy::F16), "__float2half(static_cast<float>(x))");
        assert_eq!(conv("h", ElemTy::F16, ElemTy::Bf16), "__float2bfloat16(__half2float(h))");
        assert_eq!(conv("x", ElemTy::F32, ElemTy::S32), "static_cast<choreo::s32>(x)");
        assert_eq!(comparison_type(ElemTy::S32, ElemTy::U32), ElemTy::U32);
        assert_eq!(comparison_type(ElemTy::S8, ElemTy::U16), ElemTy::S32);
        assert_eq!(comparison_type(ElemTy::F16, ElemTy::S32), ElemTy::F32);
        assert_eq!(comparison_type(ElemTy::S64, ElemTy::U32), ElemTy::S64);
    }

    #[test]
    fn renames_only_the_main_definition() {
        let mut r = MainRenamer::default();
        let text = "// int main() {}\nint main(int argc, char** argv) {\n  return main2();\n}\n";
        assert_eq!(
            r.rename(text),
            "// int main() {}\nint __choreo_unused_main(int argc, char** argv) {\n  return main2();\n}\n"
        );
        let mut r = MainRenamer::default();
        let text = "int main();\nconst char* s = \"main() {\";\nnamespace a { int main() { return 0; } }\n";
        assert_eq!(r.rename(text), text);
        let mut r = MainRenamer::default();
        assert_eq!(
            r.rename("extern \"C\" { int main(void) { return 0; } }"),
            "extern \"C\" { int __choreo_unused_main(void) { return 0; } }"
        );
        let mut r = MainRenamer::default();
        assert_eq!(
            r.rename("auto main() -> int { return 0; }"),
            "auto __choreo_unused_main() -> int { return 0; }"
        );
        let mut r = MainRenamer::default();
        assert_eq!(
            r.rename("#define X int main() {\nstd::string s = R\"(main(){)\";"),
            "#define X int main() {\nstd::string s = R\"(main(){)\";"
        );
    }
}
