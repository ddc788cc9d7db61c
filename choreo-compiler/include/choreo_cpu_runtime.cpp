// choreo_cpu_runtime.cpp: the CPU runtime of choreo's CPU backend (issue 13). Compiled once per
// program (C++17, -pthread) next to the generated code, which includes choreo_cpu.h. It
// implements the C API declared there (a mirror of the CUDA runtime functions, prefixed
// `choreo_cpu_`), streams (one worker thread each), events, "device" memory (host memory), the
// block pool that runs kernels, and the fibres that run the threads of kernels with barriers.
// ARCHITECTURE.md ("The CPU runtime") describes the design; docs/cpu-backend-interface.md the
// contract.
//
// User errors never abort: they are error codes, sticky ones for failed kernels as in CUDA.
#define CHOREO_CPU_RUNTIME_IMPLEMENTATION 1
#if defined(__APPLE__) && !defined(_XOPEN_SOURCE)
// macOS offers ucontext (the fibre switch there) only under _XOPEN_SOURCE; _DARWIN_C_SOURCE
// keeps the rest of its API visible. Before any header.
#define _XOPEN_SOURCE 700
#define _DARWIN_C_SOURCE 1
#endif
#include "choreo_cpu.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

// Fibres switch with a few lines of assembly where the ABI is known (x86-64 SysV, AArch64, ELF);
// elsewhere, or with CHOREO_CPU_UCONTEXT defined (how the tests cover it), through ucontext.
#if defined(__ELF__) && (defined(__x86_64__) || defined(__aarch64__)) && \
    !defined(CHOREO_CPU_UCONTEXT)
#define CHOREO_CPU_ASM_CONTEXT 1
#else
#include <ucontext.h>
#endif

// AddressSanitizer must be told about stack switches (else exceptions thrown on a fibre's stack
// make it report errors that are not there).
#if defined(__SANITIZE_ADDRESS__)
#define CHOREO_CPU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHOREO_CPU_ASAN 1
#endif
#endif
#if defined(CHOREO_CPU_ASAN)
extern "C" void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom,
                                               std::size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old,
                                                std::size_t* size_old);
#endif

namespace {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// Errors.
// ---------------------------------------------------------------------------------------------

// The sticky error of the process (a failed kernel), as in CUDA: every later call returns it.
std::atomic<int> g_sticky{0};
// The last error of a call on this host thread (cudaGetLastError / cudaPeekAtLastError).
thread_local int t_last_error = 0;

int result(int err) {
  if (err != cudaSuccess) t_last_error = err;
  return err;
}

void set_sticky(int err) {
  int expected = 0;
  g_sticky.compare_exchange_strong(expected, err);
}

// Runs an API call's body: a sticky error comes first; allocation failures inside the runtime
// (std::bad_alloc, thread creation) become error codes instead of escaping through the C API.
template <class F>
int api(F body) {
  const int sticky = g_sticky.load();
  if (sticky != 0) return result(sticky);
  try {
    return result(body());
  } catch (const std::bad_alloc&) {
    return result(cudaErrorMemoryAllocation);
  } catch (const std::system_error&) {
    return result(cudaErrorMemoryAllocation);
  } catch (...) {
    return result(cudaErrorUnknown);
  }
}

unsigned env_unsigned(const char* name, unsigned long long max, unsigned long long fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return static_cast<unsigned>(fallback);
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || v == 0) return static_cast<unsigned>(fallback);
  return static_cast<unsigned>(std::min(v, max));
}

unsigned worker_count() {
  static const unsigned n = [] {
    const unsigned hw = std::thread::hardware_concurrency();
    return env_unsigned("CHOREO_CPU_THREADS", 4096, hw == 0 ? 1 : hw);
  }();
  return n;
}

// ---------------------------------------------------------------------------------------------
// Streams and events.
// ---------------------------------------------------------------------------------------------

struct StreamState;

// A point in a stream's queue: done when the stream has completed operation `seq`.
struct Dep {
  std::shared_ptr<StreamState> stream;
  std::uint64_t seq;
};

struct Op {
  std::uint64_t seq;
  std::vector<Dep> deps;
  std::function<void()> run;
};

struct StreamState {
  bool legacy = false;
  bool blocking = true;
  bool stop = false;
  std::deque<Op> queue;
  std::uint64_t enqueued = 0;   // the seq of the last operation enqueued
  std::uint64_t completed = 0;  // the seq of the last operation completed
};

// One lock and one condition variable for every stream's queue: operations are coarse (a
// kernel, a copy), and one lock makes the cross-stream ordering rules simple to get right.
struct Streams {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::shared_ptr<StreamState>> all;  // every stream with a worker, legacy included
  std::shared_ptr<StreamState> legacy;
  std::set<const void*> live_streams;
  std::set<const void*> live_events;
};

Streams& streams() {
  // Never destroyed: detached workers may still use it while the process exits.
  static Streams* s = new Streams;
  return *s;
}

// With s.mu held: whether `event` is an event this runtime created and has not destroyed.
bool live_event(const Streams& s, cudaEvent_t event) {
  return event != nullptr && s.live_events.count(event) != 0;
}

bool satisfied(const Op& op) {
  for (const Dep& d : op.deps) {
    if (d.stream->completed < d.seq) return false;
  }
  return true;
}

void worker_main(std::shared_ptr<StreamState> self) {
  Streams& s = streams();
  std::unique_lock<std::mutex> lock(s.mu);
  for (;;) {
    if (!self->queue.empty() && satisfied(self->queue.front())) {
      Op op = std::move(self->queue.front());
      self->queue.pop_front();
      lock.unlock();
      try {
        if (op.run) op.run();
        op.run = nullptr;  // captured state goes before the completion is visible
      } catch (...) {
        // A host function that threw (kernels catch their own): the process must not end here,
        // so it is a failure of the device, reported like a failed kernel.
        std::fflush(stdout);
        std::fprintf(stderr, "choreo cpu runtime: an exception escaped a stream operation (a "
                             "host function?)\n");
        set_sticky(cudaErrorLaunchFailure);
        op.run = nullptr;
      }
      op.deps.clear();
      lock.lock();
      self->completed = op.seq;
      s.cv.notify_all();
      continue;
    }
    if (self->queue.empty() && self->stop) break;
    s.cv.wait(lock);
  }
  // A destroyed stream leaves the device once its work is done.
  s.all.erase(std::remove(s.all.begin(), s.all.end(), self), s.all.end());
}

std::shared_ptr<StreamState> start_stream(bool blocking, bool legacy) {
  auto state = std::make_shared<StreamState>();
  state->blocking = blocking;
  state->legacy = legacy;
  std::thread(worker_main, state).detach();
  return state;
}

}  // namespace

struct choreo_cpu_stream {
  std::shared_ptr<StreamState> state;
};

namespace {

struct EventState {
  unsigned flags = 0;
  bool recorded = false;
  std::shared_ptr<StreamState> stream;
  std::uint64_t seq = 0;
  std::uint64_t generation = 0;
  bool timed = false;
  Clock::time_point time;
};

}  // namespace

struct choreo_cpu_event {
  std::shared_ptr<EventState> state;
};

namespace {

// With s.mu held: the state of `handle` (nullptr: the legacy stream, started on first use), or
// nullptr for an unknown handle.
std::shared_ptr<StreamState> resolve_locked(cudaStream_t handle) {
  Streams& s = streams();
  // nullptr, cudaStreamLegacy (0x1) and cudaStreamPerThread (0x2): the legacy stream.
  if (reinterpret_cast<std::uintptr_t>(handle) <= 2) {
    if (!s.legacy) {
      s.legacy = start_stream(true, true);
      s.all.push_back(s.legacy);
    }
    return s.legacy;
  }
  if (s.live_streams.count(handle) == 0) return nullptr;
  return handle->state;
}

// With s.mu held: enqueues `run` on `stream` after `deps` and the legacy default stream's
// ordering rules; returns its seq.
std::uint64_t enqueue_locked(const std::shared_ptr<StreamState>& stream, std::vector<Dep> deps,
                             std::function<void()> run) {
  Streams& s = streams();
  if (stream->legacy) {
    // The legacy stream waits for all earlier work of every blocking stream.
    for (const auto& other : s.all) {
      if (other != stream && other->blocking && other->enqueued > other->completed) {
        deps.push_back(Dep{other, other->enqueued});
      }
    }
  } else if (stream->blocking && s.legacy && s.legacy->enqueued > s.legacy->completed) {
    // A blocking stream waits for earlier work of the legacy stream.
    deps.push_back(Dep{s.legacy, s.legacy->enqueued});
  }
  Op op;
  op.seq = stream->enqueued + 1;
  op.deps = std::move(deps);
  op.run = std::move(run);
  stream->queue.push_back(std::move(op));
  stream->enqueued += 1;
  s.cv.notify_all();
  return stream->enqueued;
}

int enqueue(cudaStream_t handle, std::function<void()> run, std::uint64_t* seq = nullptr,
            std::shared_ptr<StreamState>* which = nullptr) {
  Streams& s = streams();
  std::lock_guard<std::mutex> lock(s.mu);
  std::shared_ptr<StreamState> stream = resolve_locked(handle);
  if (!stream) return cudaErrorInvalidResourceHandle;
  const std::uint64_t n = enqueue_locked(stream, {}, std::move(run));
  if (seq != nullptr) *seq = n;
  if (which != nullptr) *which = stream;
  return cudaSuccess;
}

void wait_for(const std::shared_ptr<StreamState>& stream, std::uint64_t seq) {
  Streams& s = streams();
  std::unique_lock<std::mutex> lock(s.mu);
  s.cv.wait(lock, [&] { return stream->completed >= seq; });
}

int synchronize_device() {
  Streams& s = streams();
  std::unique_lock<std::mutex> lock(s.mu);
  std::vector<Dep> targets;
  for (const auto& stream : s.all) targets.push_back(Dep{stream, stream->enqueued});
  s.cv.wait(lock, [&] {
    for (const Dep& d : targets) {
      if (d.stream->completed < d.seq) return false;
    }
    return true;
  });
  return g_sticky.load();
}

// ---------------------------------------------------------------------------------------------
// Memory.
// ---------------------------------------------------------------------------------------------

struct Memory {
  std::mutex mu;
  std::unordered_map<void*, std::size_t> device;
  std::unordered_map<void*, std::size_t> host;
  std::size_t device_bytes = 0;
};

Memory& memory() {
  static Memory* m = new Memory;
  return *m;
}

constexpr std::size_t kAlignment = 256;  // cudaMalloc's alignment

void* aligned(std::size_t bytes) {
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
}

int allocate(void** ptr, std::size_t bytes, bool device) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  if (bytes > (std::size_t{1} << 48)) return cudaErrorMemoryAllocation;
  void* p = aligned(bytes);
  if (p == nullptr) return cudaErrorMemoryAllocation;
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mu);
  try {
    (device ? m.device : m.host).emplace(p, bytes);
  } catch (...) {
    std::free(p);
    return cudaErrorMemoryAllocation;
  }
  if (device) m.device_bytes += bytes;
  *ptr = p;
  return cudaSuccess;
}

bool known(void* ptr, bool device) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mu);
  return (device ? m.device : m.host).count(ptr) != 0;
}

void release(void* ptr, bool device) {
  Memory& m = memory();
  {
    std::lock_guard<std::mutex> lock(m.mu);
    auto& table = device ? m.device : m.host;
    auto it = table.find(ptr);
    if (it == table.end()) return;
    if (device) m.device_bytes -= it->second;
    table.erase(it);
  }
  std::free(ptr);
}

std::size_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::size_t{16} << 30;
  return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Kernels: blocks, fibres, barriers.
// ---------------------------------------------------------------------------------------------

namespace choreo {
namespace cpu {
namespace detail {

// Thrown by trap(), assertions and barrier misuse; caught by the block runner (fibre mode: in
// the fibre's entry), which records the sticky error and abandons the block.
struct KernelFailure {
  int code;
};
// Thrown into fibres left waiting when their block is abandoned, to unwind their stacks.
struct Abandon {};

struct Grid;
struct Scheduler;
struct Fibre;

struct Waiters {
  std::vector<Fibre*> fibres;
};

struct Warp {
  unsigned long long slots[32] = {};  // the values offered to a shuffle or vote
  unsigned lanes = 0;    // the lanes that exist (a partial last warp has fewer)
  unsigned exited = 0;
  unsigned arrived = 0;
  unsigned wanted = 0;   // the union of the masks of the lanes waiting
  Waiters waiters;
};

struct NamedBarrier {
  unsigned arrived = 0;
  unsigned count = 0;
  Waiters waiters;
};

struct Block {
  Grid* grid = nullptr;
  Scheduler* sched = nullptr;  // fibre mode
  uint3 index{};
  unsigned long long linear = 0;
  unsigned threads = 0;
  unsigned live = 0;  // threads that have not exited
  unsigned sync_arrived = 0;
  Waiters sync_waiters;
  // __syncthreads_count/_and/_or: the predicates of the threads at the barrier of generation
  // sync_generation, in the slot of its parity (a slot is cleared one barrier later, once all
  // have read it), and how many threads took part.
  unsigned long long sync_generation = 0;
  unsigned sync_count[2] = {0, 0};
  unsigned sync_taking[2] = {0, 0};
  std::vector<Warp> warps;
  NamedBarrier named[16];
  // Threads waiting for an mbarrier phase of this block (all mbarriers share the list: a
  // completed phase wakes every waiter, and each checks its own barrier again).
  Waiters mbar_waiters;
  std::string prints;
  unsigned char* smem = nullptr;  // fibre mode: its shared memory
};

}  // namespace detail
}  // namespace cpu
}  // namespace choreo

namespace {

using choreo::cpu::Thread;
using choreo::cpu::detail::Abandon;
using choreo::cpu::detail::Block;
using choreo::cpu::detail::KernelFailure;

// The host stand-in: what `__choreo_thr` gives outside kernels (printf prints at once, barriers
// do nothing).
Thread make_host_thread() {
  Thread t{};
  t.blockDim = dim3(1, 1, 1);
  t.gridDim = dim3(1, 1, 1);
  return t;
}
const Thread g_host_thread = make_host_thread();
thread_local const Thread* t_current = nullptr;

std::string kernel_name(const char* pretty) {
  // __PRETTY_FUNCTION__ of kernel_name<Kernel>: "... [with auto Kernel = k]" (GCC) or
  // "... [Kernel = &k]" (clang).
  std::string text = pretty == nullptr ? "" : pretty;
  const std::size_t at = text.find("Kernel = ");
  if (at == std::string::npos) return text.empty() ? "kernel" : text;
  std::size_t begin = at + 9;
  if (begin < text.size() && text[begin] == '&') ++begin;
  std::size_t end = text.find_first_of(";]", begin);
  if (end == std::string::npos) end = text.size();
  return text.substr(begin, end - begin);
}

std::string dims(unsigned x, unsigned y, unsigned z) {
  return "(" + std::to_string(x) + ", " + std::to_string(y) + ", " + std::to_string(z) + ")";
}

}  // namespace

namespace choreo {
namespace cpu {
namespace detail {

struct Grid {
  choreo_cpu_launch_desc desc;
  std::string name;
  unsigned long long blocks = 0;
  unsigned threads = 0;  // per block
  // What the pool hands out: blocks, or whole clusters of `cluster` blocks (a cluster's blocks
  // run together as fibres of one scheduler, so that they can wait for each other).
  unsigned long long units = 0;
  unsigned cluster = 1;
  std::atomic<unsigned long long> next{0};
  std::atomic<unsigned long long> done{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::condition_variable cv;
  int error = 0;
  std::string message;
  std::map<unsigned long long, std::string> prints;

  void fail(int code, const std::string& text) {
    std::lock_guard<std::mutex> lock(mu);
    if (error == 0) {
      error = code;
      message = text;
    }
    failed.store(true);
  }

  std::string where(const Block& b) const {
    return "kernel " + name + " (grid " + dims(desc.grid[0], desc.grid[1], desc.grid[2]) +
           ", block " + dims(desc.block[0], desc.block[1], desc.block[2]) + "), block " +
           dims(b.index.x, b.index.y, b.index.z);
  }
};

// ---- Contexts ---------------------------------------------------------------------------------

struct Context {
#if defined(CHOREO_CPU_ASM_CONTEXT)
  void* sp = nullptr;
#else
  ucontext_t uc;
#endif
};

}  // namespace detail
}  // namespace cpu
}  // namespace choreo

#if defined(CHOREO_CPU_ASM_CONTEXT)
// choreo_cpu_ctx_switch(void** save_sp, void* load_sp): saves the callee-saved registers on the
// current stack, stores the stack pointer in *save_sp, switches to load_sp and restores what was
// saved there. Not the floating-point control words (MXCSR, the x87 control word, FPCR on
// AArch64 is cheap and kept): on x86-64 saving and restoring them costs more than the rest of the
// switch together (measured), so all fibres of an OS thread share its floating-point modes; only
// a kernel that changes its rounding mode between barriers would notice. A new context's
// stack is prepared (ctx_init) to "return" into choreo_cpu_ctx_start, which calls fn(arg).
extern "C" void choreo_cpu_ctx_switch(void** save_sp, void* load_sp);
extern "C" void choreo_cpu_ctx_start();
#if defined(__x86_64__)
asm(R"(
  .text
  .globl choreo_cpu_ctx_switch
  .hidden choreo_cpu_ctx_switch
  .type choreo_cpu_ctx_switch, @function
  .p2align 4
choreo_cpu_ctx_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size choreo_cpu_ctx_switch, .-choreo_cpu_ctx_switch

  .globl choreo_cpu_ctx_start
  .hidden choreo_cpu_ctx_start
  .type choreo_cpu_ctx_start, @function
  .p2align 4
choreo_cpu_ctx_start:
  .cfi_startproc
  .cfi_undefined rip
  movq %r12, %rdi
  callq *%r13
  ud2
  .cfi_endproc
  .size choreo_cpu_ctx_start, .-choreo_cpu_ctx_start
)");
#elif defined(__aarch64__)
asm(R"(
  .text
  .globl choreo_cpu_ctx_switch
  .hidden choreo_cpu_ctx_switch
  .type choreo_cpu_ctx_switch, %function
  .p2align 4
choreo_cpu_ctx_switch:
  sub sp, sp, #176
  stp x19, x20, [sp, #0]
  stp x21, x22, [sp, #16]
  stp x23, x24, [sp, #32]
  stp x25, x26, [sp, #48]
  stp x27, x28, [sp, #64]
  stp x29, x30, [sp, #80]
  stp d8, d9, [sp, #96]
  stp d10, d11, [sp, #112]
  stp d12, d13, [sp, #128]
  stp d14, d15, [sp, #144]
  mrs x9, fpcr
  str x9, [sp, #160]
  mov x9, sp
  str x9, [x0]
  mov sp, x1
  ldp x19, x20, [sp, #0]
  ldp x21, x22, [sp, #16]
  ldp x23, x24, [sp, #32]
  ldp x25, x26, [sp, #48]
  ldp x27, x28, [sp, #64]
  ldp x29, x30, [sp, #80]
  ldp d8, d9, [sp, #96]
  ldp d10, d11, [sp, #112]
  ldp d12, d13, [sp, #128]
  ldp d14, d15, [sp, #144]
  ldr x9, [sp, #160]
  msr fpcr, x9
  add sp, sp, #176
  ret
  .size choreo_cpu_ctx_switch, .-choreo_cpu_ctx_switch

  .globl choreo_cpu_ctx_start
  .hidden choreo_cpu_ctx_start
  .type choreo_cpu_ctx_start, %function
  .p2align 4
choreo_cpu_ctx_start:
  .cfi_startproc
  .cfi_undefined x30
  mov x0, x19
  blr x20
  brk #0
  .cfi_endproc
  .size choreo_cpu_ctx_start, .-choreo_cpu_ctx_start
)");
#endif
#endif

namespace {

using choreo::cpu::detail::Context;

#if defined(CHOREO_CPU_ASM_CONTEXT)
void ctx_init(Context* c, unsigned char* stack, std::size_t size, void (*fn)(void*), void* arg) {
  std::uintptr_t top = reinterpret_cast<std::uintptr_t>(stack + size) & ~std::uintptr_t{15};
#if defined(__x86_64__)
  // After the switch's pops and `ret`, %rsp must be 16-byte aligned at choreo_cpu_ctx_start so
  // that its call gives fn the ABI's alignment.
  top -= 16;
  auto* slot = reinterpret_cast<std::uint64_t*>(top);
  slot[-1] = reinterpret_cast<std::uint64_t>(&choreo_cpu_ctx_start);  // return address
  slot[-2] = 0;                                                         // rbp
  slot[-3] = 0;                                                         // rbx
  slot[-4] = reinterpret_cast<std::uint64_t>(arg);                      // r12
  slot[-5] = reinterpret_cast<std::uint64_t>(fn);                       // r13
  slot[-6] = 0;                                                         // r14
  slot[-7] = 0;                                                         // r15
  c->sp = &slot[-7];
#else
  auto* frame = reinterpret_cast<std::uint64_t*>(top - 176);
  std::memset(frame, 0, 176);
  std::uint64_t fpcr = 0;
  asm volatile("mrs %0, fpcr" : "=r"(fpcr));
  frame[0] = reinterpret_cast<std::uint64_t>(arg);                       // x19
  frame[1] = reinterpret_cast<std::uint64_t>(fn);                        // x20
  frame[11] = reinterpret_cast<std::uint64_t>(&choreo_cpu_ctx_start);    // x30
  frame[20] = fpcr;
  c->sp = frame;
#endif
}
void ctx_swap(Context* from, Context* to) { choreo_cpu_ctx_switch(&from->sp, to->sp); }
#else
// The portable fallback: ucontext (makecontext passes only ints, so the entry takes its
// function and argument from a thread-local).
thread_local void (*t_start_fn)(void*) = nullptr;
thread_local void* t_start_arg = nullptr;
void ctx_trampoline() {
  void (*fn)(void*) = t_start_fn;
  void* arg = t_start_arg;
  fn(arg);
}
void ctx_init(Context* c, unsigned char* stack, std::size_t size, void (*fn)(void*), void* arg) {
  getcontext(&c->uc);
  c->uc.uc_stack.ss_sp = stack;
  c->uc.uc_stack.ss_size = size;
  c->uc.uc_link = nullptr;
  makecontext(&c->uc, ctx_trampoline, 0);
  t_start_fn = fn;
  t_start_arg = arg;
}
void ctx_swap(Context* from, Context* to) { swapcontext(&from->uc, &to->uc); }
#endif

// ---- Stacks -----------------------------------------------------------------------------------

std::size_t page_size() {
  static const std::size_t page = [] {
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<std::size_t>(p) : std::size_t{4096};
  }();
  return page;
}

std::size_t stack_size() {
  static const std::size_t size = [] {
    const std::size_t page = page_size();
    const std::size_t bytes = env_unsigned("CHOREO_CPU_STACK", 1ull << 30, 64 * 1024);
    return std::max<std::size_t>((bytes + page - 1) / page * page, 4 * page);
  }();
  return size;
}

// Fibre stacks of one OS thread, reused across blocks. The first ones get a guard page below
// (an overflow faults instead of corrupting a neighbour); each costs the kernel two memory
// mappings, and Linux allows about 65530, so past kGuardedStacks (a cooperative grid of many
// blocks has a fibre per thread of the grid) stacks come from unguarded slabs of kSlabStacks.
// The unguarded stacks have a canary at their bottom instead, checked whenever their fibre
// yields, so an overflow there is reported instead of passing silently. (Not the guarded ones:
// touching the bottom page of every stack costs a TLB entry per fibre.)
constexpr std::uint64_t kCanary = 0x63686f72656f5f31ull;  // "choreo_1"
constexpr unsigned kGuardedStacks = 8192;
constexpr std::size_t kSlabStacks = 64;
std::atomic<unsigned> g_guarded_stacks{0};

void* map_memory(std::size_t bytes) {
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#if defined(MAP_NORESERVE)
  flags |= MAP_NORESERVE;
#endif
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
  return base == MAP_FAILED ? nullptr : base;
}

struct StackPool {
  std::vector<unsigned char*> free;
  std::vector<unsigned char*> guarded;  // every guarded stack of this pool
  std::vector<unsigned char*> slabs;    // every slab of this pool

  StackPool() = default;
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;
  ~StackPool() {
    for (unsigned char* s : guarded) munmap(s - page_size(), stack_size() + page_size());
    for (unsigned char* slab : slabs) munmap(slab, stack_size() * kSlabStacks);
    g_guarded_stacks.fetch_sub(static_cast<unsigned>(guarded.size()));
  }

  // A stack, and whether it has a canary to check (unguarded); nullptr when none can be mapped.
  unsigned char* take(bool* canary) {
    unsigned char* s = nullptr;
    if (!free.empty()) {
      s = free.back();
      free.pop_back();
    } else {
      s = fresh();
    }
    *canary = s != nullptr && !is_guarded(s);
    if (*canary) std::memcpy(s, &kCanary, sizeof kCanary);
    return s;
  }

  void give(unsigned char* s) {
    // Cannot fail: every stack's slot was reserved when the stack was made.
    free.push_back(s);
  }

 private:
  bool is_guarded(const unsigned char* s) const {
    for (const unsigned char* slab : slabs) {
      if (s >= slab && s < slab + stack_size() * kSlabStacks) return false;
    }
    return true;
  }

  unsigned char* fresh() {
    // Room in the free list for every stack this pool owns, reserved up front so that give()
    // never allocates.
    try {
      free.reserve(guarded.size() + slabs.size() * kSlabStacks + kSlabStacks);
      guarded.reserve(guarded.size() + 1);
      slabs.reserve(slabs.size() + 1);
    } catch (...) {
      return nullptr;
    }
    if (g_guarded_stacks.fetch_add(1) < kGuardedStacks) {
      const std::size_t page = page_size();
      void* base = map_memory(stack_size() + page);
      if (base != nullptr && mprotect(base, page, PROT_NONE) == 0) {
        unsigned char* s = static_cast<unsigned char*>(base) + page;
        guarded.push_back(s);
        return s;
      }
      if (base != nullptr) munmap(base, stack_size() + page);
      g_guarded_stacks.fetch_sub(1);
      return nullptr;
    }
    g_guarded_stacks.fetch_sub(1);
    void* base = map_memory(stack_size() * kSlabStacks);
    if (base == nullptr) return nullptr;
    unsigned char* slab = static_cast<unsigned char*>(base);
    slabs.push_back(slab);
    for (std::size_t i = 1; i < kSlabStacks; ++i) free.push_back(slab + i * stack_size());
    return slab;
  }
};
thread_local StackPool t_stacks;

// ---- Shared memory arena ------------------------------------------------------------------------

struct Arena {
  unsigned char* data = nullptr;
  std::size_t size = 0;
  ~Arena() { std::free(data); }
  unsigned char* get(std::size_t bytes) {
    if (bytes <= size && data != nullptr) return data;
    std::free(data);
    size = (std::max<std::size_t>(bytes, 1) + 127) / 128 * 128;
    data = static_cast<unsigned char*>(std::aligned_alloc(128, size));
    if (data == nullptr) size = 0;
    return data;
  }
};
thread_local Arena t_arena;

}  // namespace

// ---- Fibres and their scheduler ----------------------------------------------------------------

namespace choreo {
namespace cpu {
namespace detail {

struct Fibre {
  Thread thread{};
  Context context;
  void* fake = nullptr;  // AddressSanitizer's fake stack of this fibre
  bool canary = false;   // the stack is unguarded: check its canary
  unsigned char* stack = nullptr;
  enum State { kNew, kReady, kWaiting, kDone } state = kNew;
  const char* waiting_at = nullptr;
  Scheduler* sched = nullptr;
};

// Runs fibres (the threads of one block, or of the whole grid for a cooperative launch) on the
// calling OS thread, round robin; a barrier switches back here.
struct Scheduler {
  Grid* grid = nullptr;
  Context main;
  // The scheduler's own stack, for AddressSanitizer's switch annotations.
  const void* main_bottom = nullptr;
  std::size_t main_size = 0;
  void* main_fake = nullptr;
  std::vector<Fibre> fibres;  // the first `count` are this run's (the vector is reused)
  std::size_t count = 0;
  std::deque<Fibre*> ready;
  bool abandon = false;
  bool cooperative = false;
  bool cluster = false;         // the fibres are one cluster's blocks' threads
  unsigned long long live = 0;  // every fibre not done (the grid and cluster barriers' count)
  unsigned long long grid_arrived = 0;
  Waiters grid_waiters;
  unsigned long long cluster_arrived = 0;
  Waiters cluster_waiters;
  Fibre* current = nullptr;
  std::vector<Block*> blocks;  // the blocks whose threads these fibres are, in rank order
};

}  // namespace detail
}  // namespace cpu
}  // namespace choreo

namespace {

using choreo::cpu::detail::Fibre;
using choreo::cpu::detail::Grid;
using choreo::cpu::detail::Scheduler;
using choreo::cpu::detail::Waiters;

void make_ready(Scheduler* sched, Waiters& w) {
  for (Fibre* f : w.fibres) {
    f->state = Fibre::kReady;
    f->waiting_at = nullptr;
    sched->ready.push_back(f);
  }
  w.fibres.clear();
}

Fibre* current_fibre(const Thread* t) { return static_cast<Fibre*>(t->fibre_); }

// The switches between the scheduler and a fibre (with AddressSanitizer's annotations).
void switch_to_fibre(Scheduler& sched, Fibre* f) {
#if defined(CHOREO_CPU_ASAN)
  __sanitizer_start_switch_fiber(&sched.main_fake, f->stack, stack_size());
#endif
  ctx_swap(&sched.main, &f->context);
#if defined(CHOREO_CPU_ASAN)
  __sanitizer_finish_switch_fiber(sched.main_fake, nullptr, nullptr);
#endif
}
void switch_to_scheduler(Fibre* f, bool exiting) {
  Scheduler* sched = f->sched;
#if defined(CHOREO_CPU_ASAN)
  __sanitizer_start_switch_fiber(exiting ? nullptr : &f->fake, sched->main_bottom,
                                 sched->main_size);
#else
  (void)exiting;
#endif
  ctx_swap(&f->context, &sched->main);
#if defined(CHOREO_CPU_ASAN)
  __sanitizer_finish_switch_fiber(f->fake, &sched->main_bottom, &sched->main_size);
#endif
}

// Leaves the running fibre (already marked waiting or done) for the scheduler; back when released.
void yield_to_scheduler(Fibre* f) {
  switch_to_scheduler(f, false);
  if (f->sched->abandon && f->state != Fibre::kDone) throw Abandon{};
}

void wait_here(Fibre* f, Waiters& w, const char* what) {
  w.fibres.push_back(f);
  f->state = Fibre::kWaiting;
  f->waiting_at = what;
  yield_to_scheduler(f);
}

[[noreturn]] void fail_block(const Thread* t, int code, const std::string& why) {
  Block* b = t->block_;
  b->grid->fail(code, b->grid->where(*b) + ", thread " +
                          dims(t->threadIdx.x, t->threadIdx.y, t->threadIdx.z) + ": " + why);
  throw KernelFailure{code};
}

// Completes the block barrier (every live thread has arrived).
void release_block_barrier(Block* b, Scheduler* sched) {
  const unsigned parity = static_cast<unsigned>(b->sync_generation & 1u);
  b->sync_taking[parity] = b->sync_arrived;
  b->sync_count[parity ^ 1u] = 0;
  b->sync_generation += 1;
  b->sync_arrived = 0;
  make_ready(sched, b->sync_waiters);
}

// The cluster barrier's share of a thread's exit: exited threads count as arrived.
void cluster_thread_exited(Scheduler* sched) {
  if (sched->cluster_arrived > 0 && sched->cluster_arrived >= sched->live) {
    sched->cluster_arrived = 0;
    make_ready(sched, sched->cluster_waiters);
  }
}

// Barrier bookkeeping when a thread exits: exited threads count as arrived at __syncthreads and
// at __syncwarp, and leave the grid barrier's count.
void thread_exited(Fibre* f) {
  Block* b = f->thread.block_;
  Scheduler* sched = f->sched;
  b->live -= 1;
  if (b->sync_arrived > 0 && b->sync_arrived >= b->live) release_block_barrier(b, sched);
  choreo::cpu::detail::Warp& w = b->warps[f->thread.linear_ / 32];
  w.exited |= 1u << (f->thread.linear_ % 32);
  if (w.arrived != 0 && ((w.arrived | w.exited) & w.wanted & w.lanes) == (w.wanted & w.lanes)) {
    w.arrived = 0;
    w.wanted = 0;
    make_ready(sched, w.waiters);
  }
  sched->live -= 1;
  if (sched->grid_arrived > 0 && sched->grid_arrived >= sched->live) {
    sched->grid_arrived = 0;
    make_ready(sched, sched->grid_waiters);
  }
  cluster_thread_exited(sched);
}

void fibre_entry(void* arg) {
  Fibre* f = static_cast<Fibre*>(arg);
  Scheduler* sched = f->sched;
  Grid* grid = sched->grid;
#if defined(CHOREO_CPU_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &sched->main_bottom, &sched->main_size);
#endif
  try {
    grid->desc.run_thread(grid->desc.args, &f->thread);
  } catch (const KernelFailure&) {
    sched->abandon = true;  // the failure is recorded where it was thrown
  } catch (const Abandon&) {
  } catch (const std::bad_alloc&) {
    grid->fail(cudaErrorMemoryAllocation, grid->where(*f->thread.block_) + ": out of memory");
    sched->abandon = true;
  } catch (...) {
    grid->fail(cudaErrorLaunchFailure,
               grid->where(*f->thread.block_) + ": a C++ exception escaped the kernel");
    sched->abandon = true;
  }
  f->state = Fibre::kDone;
  if (!sched->abandon) thread_exited(f);
  // Never resumed: the scheduler returns the stack to the pool.
  switch_to_scheduler(f, true);
}

void init_block(Block& b, Grid& g, unsigned long long linear) {
  const unsigned gx = g.desc.grid[0];
  const unsigned gy = g.desc.grid[1];
  b.grid = &g;
  b.linear = linear;
  b.index = uint3{static_cast<unsigned>(linear % gx), static_cast<unsigned>(linear / gx % gy),
                  static_cast<unsigned>(linear / gx / gy)};
  b.threads = g.threads;
  b.live = g.threads;
}

void init_thread(Thread& t, Block& b, unsigned char* smem) {
  const Grid& g = *b.grid;
  t.blockIdx = b.index;
  t.blockDim = dim3(g.desc.block[0], g.desc.block[1], g.desc.block[2]);
  t.gridDim = dim3(g.desc.grid[0], g.desc.grid[1], g.desc.grid[2]);
  t.smem = smem;
  t.block_ = &b;
  t.fibre_ = nullptr;
  t.mirror_ = (g.desc.flags & choreo::cpu::kDeviceThread) != 0;
}

void describe_deadlock(Scheduler& sched, const std::vector<Block*>& blocks) {
  Grid& g = *sched.grid;
  std::string text;
  unsigned shown = 0;
  for (Block* bp : blocks) {
    Block& b = *bp;
    // Where this block's threads wait, with the first waiting thread at each barrier.
    std::map<std::string, std::pair<unsigned, const Fibre*>> at;
    for (std::size_t i = 0; i < sched.count; ++i) {
      const Fibre& f = sched.fibres[i];
      if (f.thread.block_ == &b && f.state == Fibre::kWaiting) {
        auto& entry = at[f.waiting_at];
        if (entry.first++ == 0) entry.second = &f;
      }
    }
    if (at.empty() || shown++ >= 4) continue;
    text += "\n  " + g.where(b) + " (" + std::to_string(b.threads - b.live) + " of " +
            std::to_string(b.threads) + " threads exited):";
    for (const auto& entry : at) {
      const Thread& t = entry.second.second->thread;
      text += " " + std::to_string(entry.second.first) + " wait at " + entry.first +
              " (first: thread " + dims(t.threadIdx.x, t.threadIdx.y, t.threadIdx.z) + ");";
    }
  }
  g.fail(cudaErrorLaunchFailure,
         "deadlock: every live thread waits at a barrier that cannot complete" + text);
}

thread_local std::vector<Fibre> t_fibres;

// Runs the given blocks' threads as fibres on this OS thread until all are done.
void run_fibres(Grid& g, const std::vector<Block*>& blocks, unsigned char* smem_base,
                std::size_t smem_stride, bool cooperative, bool cluster = false) {
  Scheduler sched;
  sched.grid = &g;
  sched.cooperative = cooperative;
  sched.cluster = cluster;
  const std::size_t count = blocks.size() * g.threads;
  sched.count = count;
  // The fibres' records are reused from block to block (every field is set below).
  sched.fibres.swap(t_fibres);
  if (sched.fibres.size() < count) sched.fibres.resize(count);
  struct GiveBack {
    Scheduler& sched;
    ~GiveBack() { sched.fibres.swap(t_fibres); }
  } give_back{sched};
  sched.live = count;
  sched.blocks = blocks;
  std::size_t i = 0;
  for (std::size_t bi = 0; bi < blocks.size(); ++bi) {
    Block& b = *blocks[bi];
    b.sched = &sched;
    b.smem = smem_base + bi * smem_stride;
    b.warps.resize((g.threads + 31) / 32);
    for (std::size_t w = 0; w < b.warps.size(); ++w) {
      const unsigned n = std::min<unsigned>(32, g.threads - static_cast<unsigned>(w) * 32);
      b.warps[w].lanes = n == 32 ? 0xffffffffu : ((1u << n) - 1);
    }
    unsigned t = 0;
    for (unsigned z = 0; z < g.desc.block[2]; ++z) {
      for (unsigned y = 0; y < g.desc.block[1]; ++y) {
        for (unsigned x = 0; x < g.desc.block[0]; ++x, ++t, ++i) {
          Fibre& f = sched.fibres[i];
          init_thread(f.thread, b, smem_base + bi * smem_stride);
          f.thread.threadIdx = uint3{x, y, z};
          f.thread.linear_ = t;
          f.thread.fibre_ = &f;
          f.stack = nullptr;
          f.state = Fibre::kReady;
          f.waiting_at = nullptr;
          f.sched = &sched;
          f.fake = nullptr;
          f.canary = false;
          sched.ready.push_back(&f);
        }
      }
    }
  }
  const Thread* saved = t_current;
  unsigned long long done = 0;
  while (done < count) {
    if (sched.ready.empty()) {
      // Every live fibre waits and nothing can release it.
      describe_deadlock(sched, blocks);
      sched.abandon = true;
      for (std::size_t i = 0; i < count; ++i) {
        Fibre& f = sched.fibres[i];
        if (f.state == Fibre::kWaiting) {
          f.state = Fibre::kReady;
          sched.ready.push_back(&f);
        }
      }
      continue;
    }
    Fibre* f = sched.ready.front();
    sched.ready.pop_front();
    if (f->stack == nullptr) {
      if (sched.abandon) {  // never started: nothing to unwind
        f->state = Fibre::kDone;
        ++done;
        continue;
      }
      f->stack = t_stacks.take(&f->canary);
      if (f->stack == nullptr) {
        g.fail(cudaErrorLaunchOutOfResources,
               g.where(*f->thread.block_) + ": cannot map a fibre stack");
        sched.abandon = true;
        f->state = Fibre::kDone;
        ++done;
        continue;
      }
      ctx_init(&f->context, f->stack, stack_size(), fibre_entry, f);
    }
    sched.current = f;
    f->state = Fibre::kReady;
    t_current = &f->thread;
    switch_to_fibre(sched, f);
    t_current = saved;
    sched.current = nullptr;
    std::uint64_t canary = kCanary;
    if (f->canary) std::memcpy(&canary, f->stack, sizeof canary);
    if (canary != kCanary) {
      g.fail(cudaErrorLaunchFailure,
             g.where(*f->thread.block_) + ": a fibre overflowed its stack of " +
                 std::to_string(stack_size()) + " bytes (set CHOREO_CPU_STACK to more)");
      sched.abandon = true;
      std::memcpy(f->stack, &kCanary, sizeof kCanary);
    }
    if (f->state == Fibre::kDone) {
      t_stacks.give(f->stack);
      f->stack = nullptr;
      ++done;
    }
  }
}

// Runs block `linear` of `g` on this OS thread.
void run_block(Grid& g, unsigned long long linear) {
  if (g.failed.load(std::memory_order_relaxed)) return;  // a trap stops the whole launch
  unsigned char* smem = t_arena.get(g.desc.smem_bytes);
  if (smem == nullptr) {
    g.fail(cudaErrorMemoryAllocation, "cannot allocate shared memory");
    return;
  }
  // On the stack: a loop-mode block allocates nothing.
  Block b;
  init_block(b, g, linear);
  const Thread* saved = t_current;
  try {
    if ((g.desc.flags & choreo::cpu::kFibres) != 0) {
      run_fibres(g, std::vector<Block*>{&b}, smem, 0, false);
    } else {
      Thread t{};
      init_thread(t, b, smem);
      t_current = &t;
      g.desc.run_block(g.desc.args, &t);
    }
  } catch (const KernelFailure&) {
  } catch (const std::bad_alloc&) {
    g.fail(cudaErrorMemoryAllocation, g.where(b) + ": out of memory");
  } catch (...) {
    g.fail(cudaErrorLaunchFailure, g.where(b) + ": a C++ exception escaped the kernel");
  }
  t_current = saved;
  if (!b.prints.empty()) {
    std::lock_guard<std::mutex> lock(g.mu);
    try {
      g.prints[linear] = std::move(b.prints);
    } catch (...) {
    }
  }
}

// Cluster `unit` of a cluster launch (blocks [unit * C, unit * C + C) of the linear block order,
// consecutive along x as in CUDA): its blocks' threads are fibres of one scheduler on this OS
// thread, so the cluster barrier is a barrier like the others.
void run_cluster(Grid& g, unsigned long long unit) {
  if (g.failed.load(std::memory_order_relaxed)) return;
  const std::size_t smem_stride = (g.desc.smem_bytes + 127) / 128 * 128;
  std::vector<std::unique_ptr<Block>> owned;
  std::vector<Block*> blocks;
  const Thread* saved = t_current;
  try {
    unsigned char* smem = t_arena.get(smem_stride * g.cluster);
    if (smem == nullptr) throw std::bad_alloc();
    owned.reserve(g.cluster);
    blocks.reserve(g.cluster);
    for (unsigned i = 0; i < g.cluster; ++i) {
      owned.push_back(std::make_unique<Block>());
      blocks.push_back(owned.back().get());
      init_block(*owned.back(), g, unit * g.cluster + i);
    }
    run_fibres(g, blocks, smem, smem_stride, false, true);
  } catch (const std::bad_alloc&) {
    g.fail(cudaErrorMemoryAllocation, "kernel " + g.name + ": out of memory");
  }
  t_current = saved;
  std::lock_guard<std::mutex> lock(g.mu);
  for (auto& b : owned) {
    if (!b->prints.empty()) {
      try {
        g.prints[b->linear] = std::move(b->prints);
      } catch (...) {
      }
    }
  }
}

// What the pool runs for unit `u` of `g`: a block, or a cluster of blocks.
void run_unit(Grid& g, unsigned long long u) {
  if (g.cluster > 1) {
    run_cluster(g, u);
  } else {
    run_block(g, u);
  }
}

// A cooperative launch: every block's threads are fibres of one scheduler, so the grid barrier
// is a barrier like the others.
void run_cooperative(Grid& g) {
  const std::size_t smem_stride = (g.desc.smem_bytes + 127) / 128 * 128;
  std::vector<std::unique_ptr<Block>> owned;
  std::vector<Block*> blocks;
  try {
    unsigned char* smem = t_arena.get(smem_stride * g.blocks);
    if (smem == nullptr) throw std::bad_alloc();
    owned.reserve(g.blocks);
    blocks.reserve(g.blocks);
    for (unsigned long long i = 0; i < g.blocks; ++i) {
      owned.push_back(std::make_unique<Block>());
      blocks.push_back(owned.back().get());
      init_block(*owned.back(), g, i);
    }
    run_fibres(g, blocks, smem, smem_stride, true);
  } catch (const std::bad_alloc&) {
    g.fail(cudaErrorMemoryAllocation, "kernel " + g.name + ": out of memory");
  }
  for (auto& b : owned) {
    if (!b->prints.empty()) g.prints[b->linear] = std::move(b->prints);
  }
}

// ---- The pool ---------------------------------------------------------------------------------

struct Pool {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Grid>> active;
};

Pool& pool() {
  static Pool* p = new Pool;
  return *p;
}

// Takes and runs blocks of `g` until none is left to take. Blocks are taken a run at a time
// (about an eighth of a worker's share, at most 64): two shared counters per block cost more
// than a small block's work, while runs that small still balance the load.
void drain(Grid& g) {
  const unsigned long long share = g.units / (8ull * worker_count());
  const unsigned long long run = share < 1 ? 1 : (share > 64 ? 64 : share);
  for (;;) {
    const unsigned long long first = g.next.fetch_add(run);
    if (first >= g.units) return;
    const unsigned long long end = first + run < g.units ? first + run : g.units;
    for (unsigned long long b = first; b < end; ++b) run_unit(g, b);
    if (g.done.fetch_add(end - first) + (end - first) == g.units) {
      std::lock_guard<std::mutex> lock(g.mu);
      g.cv.notify_all();
    }
  }
}

void pool_main() {
  Pool& p = pool();
  for (;;) {
    std::shared_ptr<Grid> g;
    {
      std::unique_lock<std::mutex> lock(p.mu);
      p.cv.wait(lock, [&] { return !p.active.empty(); });
      g = p.active.front();
      if (g->next.load() >= g->units) {
        p.active.pop_front();
        continue;
      }
      // Spread the pool over the active grids: the next worker starts with another one.
      p.active.pop_front();
      p.active.push_back(g);
    }
    drain(*g);
  }
}

void start_pool() {
  static std::once_flag once;
  std::call_once(once, [] {
    const unsigned extra = worker_count() - 1;  // the stream's worker is the last one
    for (unsigned i = 0; i < extra; ++i) {
      try {
        std::thread(pool_main).detach();
      } catch (...) {
        break;  // fewer workers: slower, still correct
      }
    }
  });
}

void execute(const std::shared_ptr<Grid>& g) {
  if (g_sticky.load() != 0) return;  // the device is unusable after a failed kernel, as in CUDA
  if ((g->desc.flags & choreo::cpu::kCooperative) != 0) {
    run_cooperative(*g);
  } else {
    start_pool();
    Pool& p = pool();
    if (g->units > 1) {
      std::lock_guard<std::mutex> lock(p.mu);
      p.active.push_back(g);
      p.cv.notify_all();
    }
    drain(*g);
    {
      std::unique_lock<std::mutex> lock(g->mu);
      g->cv.wait(lock, [&] { return g->done.load() >= g->units; });
    }
    if (g->units > 1) {
      std::lock_guard<std::mutex> lock(p.mu);
      p.active.erase(std::remove(p.active.begin(), p.active.end(), g), p.active.end());
    }
  }
  // Device printf output, in block order, when the kernel completes.
  if (!g->prints.empty()) {
    for (const auto& entry : g->prints) {
      std::fwrite(entry.second.data(), 1, entry.second.size(), stdout);
    }
    std::fflush(stdout);
  }
  if (g->error != 0) {
    std::fflush(stdout);
    std::fprintf(stderr, "choreo cpu runtime: %s\n", g->message.c_str());
    std::fflush(stderr);
    set_sticky(g->error);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Thread's members.
// ---------------------------------------------------------------------------------------------

namespace choreo {
namespace cpu {

namespace {
// The block barrier; returns how many of the threads that took part had a true predicate, and
// how many took part.
std::pair<unsigned, unsigned> block_barrier(const Thread* t, bool predicate) {
  Block* b = t->block_;
  if (b == nullptr) return {predicate ? 1u : 0u, 1u};  // host stand-in
  Fibre* f = current_fibre(t);
  if (f == nullptr) {
    if (b->threads > 1) {
      fail_block(t, cudaErrorLaunchFailure,
                 "__syncthreads in a kernel launched without kFibres (its threads run one "
                 "after the other)");
    }
    return {predicate ? 1u : 0u, 1u};
  }
  if (f->sched->abandon) throw Abandon{};
  const unsigned parity = static_cast<unsigned>(b->sync_generation & 1u);
  b->sync_count[parity] += predicate ? 1u : 0u;
  b->sync_arrived += 1;
  if (b->sync_arrived >= b->live) {
    release_block_barrier(b, f->sched);
  } else {
    wait_here(f, b->sync_waiters, "__syncthreads");
  }
  return {b->sync_count[parity], b->sync_taking[parity]};
}
}  // namespace

void Thread::sync_threads() const { block_barrier(this, false); }

int Thread::sync_threads_count(int predicate) const {
  return static_cast<int>(block_barrier(this, predicate != 0).first);
}
int Thread::sync_threads_and(int predicate) const {
  const auto r = block_barrier(this, predicate != 0);
  return r.first == r.second ? 1 : 0;
}
int Thread::sync_threads_or(int predicate) const {
  return block_barrier(this, predicate != 0).first != 0 ? 1 : 0;
}

void Thread::sync_warp(unsigned mask) const {
  Block* b = block_;
  if (b == nullptr) return;
  const unsigned lane_bit = 1u << (linear_ % 32);
  Fibre* f = current_fibre(this);
  detail::Warp* w = f != nullptr ? &b->warps[linear_ / 32] : nullptr;
  const unsigned lanes =
      w != nullptr ? w->lanes
                   : (b->threads - linear_ / 32 * 32 >= 32
                          ? 0xffffffffu
                          : ((1u << (b->threads - linear_ / 32 * 32)) - 1));
  mask = (mask | lane_bit) & lanes;
  if (f == nullptr) {
    if (mask != lane_bit) {
      fail_block(this, cudaErrorLaunchFailure,
                 "__syncwarp in a kernel launched without kFibres (its threads run one after "
                 "the other)");
    }
    return;
  }
  if (f->sched->abandon) throw Abandon{};
  w->arrived |= lane_bit;
  w->wanted |= mask;
  if (((w->arrived | w->exited) & w->wanted) == w->wanted) {
    w->arrived = 0;
    w->wanted = 0;
    make_ready(f->sched, w->waiters);
    return;
  }
  wait_here(f, w->waiters, "__syncwarp");
}

namespace {
void named_barrier(const Thread* t, unsigned id, unsigned count, bool wait) {
  Block* b = t->block_;
  if (b == nullptr) return;
  if (id >= 16) {
    fail_block(t, cudaErrorLaunchFailure,
               "named barrier id " + std::to_string(id) + " out of range 0..15");
  }
  if (count == 0) count = b->threads;
  // PTX wants a multiple of the warp size (a whole small block is fine too) within the block;
  // anything else would hang or misbehave on a GPU.
  if (count > b->threads || (count % 32 != 0 && count != b->threads)) {
    fail_block(t, cudaErrorLaunchFailure,
               "named barrier " + std::to_string(id) + ": thread count " + std::to_string(count) +
                   " is not a multiple of 32 within the block's " + std::to_string(b->threads));
  }
  Fibre* f = current_fibre(t);
  if (f == nullptr) {
    if (count > 1) {
      fail_block(t, cudaErrorLaunchFailure,
                 "named barrier in a kernel launched without kFibres (its threads run one "
                 "after the other)");
    }
    return;
  }
  if (f->sched->abandon) throw Abandon{};
  detail::NamedBarrier& nb = b->named[id];
  nb.arrived += 1;
  if (nb.arrived >= count) {
    nb.arrived = 0;
    make_ready(f->sched, nb.waiters);
    return;
  }
  static const char* const names[16] = {
      "bar.sync 0",  "bar.sync 1",  "bar.sync 2",  "bar.sync 3", "bar.sync 4",  "bar.sync 5",
      "bar.sync 6",  "bar.sync 7",  "bar.sync 8",  "bar.sync 9", "bar.sync 10", "bar.sync 11",
      "bar.sync 12", "bar.sync 13", "bar.sync 14", "bar.sync 15"};
  if (wait) wait_here(f, nb.waiters, names[id]);
}
}  // namespace

void Thread::bar_sync(unsigned id, unsigned count) const { named_barrier(this, id, count, true); }
void Thread::bar_arrive(unsigned id, unsigned count) const {
  named_barrier(this, id, count, false);
}

// ---- mbarriers (PTX mbarrier.*; what shared events and TMA completion are built on) ----------
//
// The 8 bytes of an mbarrier hold its whole state, so that shared memory that is reused or
// re-initialised behaves as on the GPU: bit 63 the current phase's parity, bits 42..62 the
// expected arrival count, bits 21..41 the arrivals still pending in this phase, bits 0..20 the
// transaction bytes still pending (two's complement: a copy may complete before its bytes
// are expected, as on the GPU). A phase completes when no arrival and no byte is pending;
// the next phase then expects `count` arrivals again.

namespace {
constexpr unsigned long long kMbarField = (1ull << 21) - 1;
struct MbarState {
  unsigned parity;
  unsigned count;
  unsigned pending;
  long long tx;
};
MbarState mbar_load(const void* bar) {
  unsigned long long w;
  std::memcpy(&w, bar, sizeof w);
  long long tx = static_cast<long long>(w & kMbarField);
  if (tx & (1ll << 20)) tx -= 1ll << 21;
  return MbarState{static_cast<unsigned>(w >> 63), static_cast<unsigned>((w >> 42) & kMbarField),
                   static_cast<unsigned>((w >> 21) & kMbarField), tx};
}
void mbar_store(void* bar, const MbarState& s) {
  const unsigned long long w = (static_cast<unsigned long long>(s.parity & 1u) << 63) |
                               (static_cast<unsigned long long>(s.count) << 42) |
                               (static_cast<unsigned long long>(s.pending) << 21) |
                               (static_cast<unsigned long long>(s.tx) & kMbarField);
  std::memcpy(bar, &w, sizeof w);
}
// Applies `arrivals` arrivals and `tx` completed bytes (negative: expected bytes) to `bar`,
// completing the phase when nothing is pending.
void mbar_update(const Thread* t, void* bar, unsigned arrivals, long long tx, const char* what) {
  MbarState s = mbar_load(bar);
  if (s.count == 0) {
    fail_block(t, cudaErrorLaunchFailure,
               std::string(what) + " on an mbarrier that was never initialised");
  }
  if (arrivals > s.pending) {
    fail_block(t, cudaErrorLaunchFailure,
               std::string(what) + ": more arrivals than the mbarrier's count (" +
                   std::to_string(s.count) + ") in one phase");
  }
  s.pending -= arrivals;
  s.tx -= tx;
  if (s.tx >= (1ll << 20) || s.tx < -(1ll << 20)) {
    fail_block(t, cudaErrorLaunchFailure,
               std::string(what) + ": an mbarrier's pending transaction bytes left [-2^20, 2^20)");
  }
  if (s.pending == 0 && s.tx == 0) {
    s.parity ^= 1u;
    s.pending = s.count;
    Block* b = t->block_;
    if (b != nullptr && b->sched != nullptr) {
      // In a cluster the barrier may be another block's (a remote arrive, a multicast):
      // every block's waiters check theirs again.
      if (b->sched->cluster) {
        for (Block* other : b->sched->blocks) make_ready(b->sched, other->mbar_waiters);
      } else {
        make_ready(b->sched, b->mbar_waiters);
      }
    }
  }
  mbar_store(bar, s);
}
}  // namespace

void Thread::mbar_init(void* bar, unsigned count) const {
  if (count == 0 || count > kMbarField) {
    fail_block(this, cudaErrorLaunchFailure,
               "mbarrier initialised with count " + std::to_string(count) +
                   " (it must be in [1, 2^21))");
  }
  mbar_store(bar, MbarState{0, count, count, 0});
}
void Thread::mbar_arrive(void* bar, unsigned expect_bytes) const {
  // The bytes are expected before the arrival counts (mbarrier.arrive.expect_tx).
  if (expect_bytes != 0) mbar_update(this, bar, 0, -static_cast<long long>(expect_bytes), "expect_tx");
  mbar_update(this, bar, 1, 0, "mbarrier arrive");
}
void Thread::mbar_expect_tx(void* bar, unsigned bytes) const {
  mbar_update(this, bar, 0, -static_cast<long long>(bytes), "mbarrier expect_tx");
}
void Thread::mbar_complete_tx(void* bar, unsigned bytes) const {
  mbar_update(this, bar, 0, static_cast<long long>(bytes), "complete_tx");
}
void Thread::mbar_wait(const void* bar, unsigned parity) const {
  for (;;) {
    const MbarState s = mbar_load(bar);
    if (s.count == 0) {
      fail_block(this, cudaErrorLaunchFailure, "wait on an mbarrier that was never initialised");
    }
    // The phase of parity `parity` has completed once the current phase has the other parity.
    if (s.parity != (parity & 1u)) return;
    Fibre* f = current_fibre(this);
    if (block_ == nullptr || f == nullptr) {
      fail_block(this, cudaErrorLaunchFailure,
                 "mbarrier wait that cannot complete in a kernel launched without kFibres (its "
                 "threads run one after the other)");
    }
    if (f->sched->abandon) throw Abandon{};
    wait_here(f, block_->mbar_waiters, "an mbarrier wait (shared event or TMA)");
  }
}

void Thread::cluster_sync() const {
  Block* b = block_;
  if (b == nullptr) return;
  Fibre* f = current_fibre(this);
  if (f == nullptr || !f->sched->cluster) {
    // A launch without clusters: each block is a cluster of one.
    sync_threads();
    return;
  }
  Scheduler* sched = f->sched;
  if (sched->abandon) throw Abandon{};
  sched->cluster_arrived += 1;
  if (sched->cluster_arrived >= sched->live) {
    sched->cluster_arrived = 0;
    make_ready(sched, sched->cluster_waiters);
    return;
  }
  wait_here(f, sched->cluster_waiters, "cluster barrier");
}

unsigned Thread::cluster_rank() const {
  Block* b = block_;
  if (b == nullptr || b->grid->cluster <= 1) return 0;
  return blockIdx.x % b->grid->cluster;
}

unsigned Thread::cluster_size() const {
  Block* b = block_;
  if (b == nullptr || b->grid->cluster <= 1) return 1;
  return b->grid->cluster;
}

void* Thread::cluster_map(const void* p, unsigned rank) const {
  Block* b = block_;
  if (b == nullptr) return const_cast<void*>(p);
  Fibre* f = current_fibre(this);
  const std::size_t size = b->grid->desc.smem_bytes;
  const unsigned char* q = static_cast<const unsigned char*>(p);
  if (smem == nullptr || q < smem || q >= smem + size) {
    fail_block(this, cudaErrorLaunchFailure,
               "a cluster address (mapa) of memory outside the block's shared memory");
  }
  const std::size_t offset = static_cast<std::size_t>(q - smem);
  if (f == nullptr || !f->sched->cluster) {
    if (rank != 0) {
      fail_block(this, cudaErrorLaunchFailure,
                 "a cluster address (mapa) of rank " + std::to_string(rank) +
                     " in a launch without clusters");
    }
    return const_cast<unsigned char*>(q);
  }
  const std::vector<Block*>& blocks = f->sched->blocks;
  if (rank >= blocks.size() || blocks[rank]->smem == nullptr) {
    fail_block(this, cudaErrorLaunchFailure,
               "a cluster address (mapa) of rank " + std::to_string(rank) + " in a cluster of " +
                   std::to_string(blocks.size()) + " blocks");
  }
  return blocks[rank]->smem + offset;
}

void Thread::grid_sync() const {
  Block* b = block_;
  if (b == nullptr) return;
  Fibre* f = current_fibre(this);
  if (f == nullptr || !f->sched->cooperative) {
    if (b->grid->blocks * b->threads == 1) return;
    fail_block(this, cudaErrorLaunchFailure,
               "grid sync outside a cooperative launch (kCooperative)");
  }
  Scheduler* sched = f->sched;
  if (sched->abandon) throw Abandon{};
  sched->grid_arrived += 1;
  if (sched->grid_arrived >= sched->live) {
    sched->grid_arrived = 0;
    make_ready(sched, sched->grid_waiters);
    return;
  }
  wait_here(f, sched->grid_waiters, "grid sync");
}

namespace {
// The warp state of a thread: its block's, in fibre mode; a private one otherwise (loop mode
// and the host, where only a thread's own lane can take part).
detail::Warp* warp_of(const Thread* t) {
  Fibre* f = current_fibre(t);
  if (f != nullptr) return &t->block_->warps[t->linear_ / 32];
  thread_local detail::Warp solo;
  return &solo;
}
}  // namespace

unsigned long long Thread::warp_exchange(unsigned mask, unsigned long long value,
                                         unsigned source) const {
  detail::Warp* w = warp_of(this);
  const unsigned lane = linear_ % 32;
  w->slots[lane] = value;
  sync_warp(mask);
  const unsigned taking = (mask | (1u << lane)) & ~w->exited;
  const unsigned long long result =
      (source < 32 && (taking >> source & 1u) != 0) ? w->slots[source] : value;
  sync_warp(mask);  // nobody offers the next value before everyone has read this one
  return result;
}

unsigned Thread::warp_ballot(unsigned mask, bool predicate) const {
  detail::Warp* w = warp_of(this);
  const unsigned lane = linear_ % 32;
  w->slots[lane] = predicate ? 1u : 0u;
  sync_warp(mask);
  const unsigned taking = (mask | (1u << lane)) & ~w->exited;
  unsigned bits = 0;
  for (unsigned l = 0; l < 32; ++l) {
    if ((taking >> l & 1u) != 0 && w->slots[l] != 0) bits |= 1u << l;
  }
  sync_warp(mask);
  return bits;
}

unsigned Thread::warp_active() const {
  if (block_ == nullptr || current_fibre(this) == nullptr) return 1u << (linear_ % 32);
  const detail::Warp& w = block_->warps[linear_ / 32];
  return w.lanes & ~w.exited;
}

void Thread::yield() const {
  Fibre* f = current_fibre(this);
  if (f == nullptr) return;
  Scheduler* sched = f->sched;
  if (sched->abandon) throw Abandon{};
  f->state = Fibre::kReady;
  sched->ready.push_back(f);
  yield_to_scheduler(f);
}

int Thread::printf(const char* format, ...) const {
  va_list args;
  va_start(args, format);
  if (block_ == nullptr) {
    const int n = std::vprintf(format, args);
    va_end(args);
    return n;
  }
  char small[256];
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(small, sizeof small, format, copy);
  va_end(copy);
  if (n < 0) {
    va_end(args);
    return n;
  }
  try {
    if (static_cast<std::size_t>(n) < sizeof small) {
      block_->prints.append(small, static_cast<std::size_t>(n));
    } else {
      std::string big(static_cast<std::size_t>(n) + 1, '\0');
      std::vsnprintf(&big[0], big.size(), format, args);
      big.resize(static_cast<std::size_t>(n));
      block_->prints += big;
    }
  } catch (...) {
    va_end(args);
    return -1;  // printf reports failures by its result
  }
  va_end(args);
  return n;
}

void Thread::trap() const {
  if (block_ == nullptr) {
    // Host code has no kernel to stop; like choreo's host-side aborts.
    std::fflush(stdout);
    std::fprintf(stderr, "choreo cpu runtime: __trap() outside a kernel\n");
    std::abort();
  }
  fail_block(this, cudaErrorLaunchFailure, "__trap()");
}

void Thread::assert_fail() const {
  if (block_ == nullptr) {
    std::fflush(stdout);
    std::fprintf(stderr, "choreo cpu runtime: device assertion failed outside a kernel\n");
    std::abort();
  }
  fail_block(this, cudaErrorAssert, "device assertion failed");
}

}  // namespace cpu
}  // namespace choreo

// ---------------------------------------------------------------------------------------------
// The C API.
// ---------------------------------------------------------------------------------------------

extern "C" {

const choreo::cpu::Thread* choreo_cpu_current_thread(void) {
  const Thread* t = t_current;
  return t != nullptr ? t : &g_host_thread;
}

unsigned choreo_cpu_worker_count(void) { return worker_count(); }

int choreo_cpu_launch(const choreo_cpu_launch_desc* desc) {
  if (desc == nullptr) return result(cudaErrorInvalidValue);
  // The runtime owns the arguments from here: destroyed once, also on every failure.
  struct Owner {
    void* args;
    void (*destroy)(void*);
    ~Owner() {
      if (args != nullptr && destroy != nullptr) destroy(args);
    }
  } owner{desc->args, desc->destroy_args};
  return api([&]() -> int {
    if (desc->args == nullptr) return cudaErrorMemoryAllocation;
    unsigned long long blocks = 1;
    unsigned long long threads = 1;
    for (int i = 0; i < 3; ++i) {
      if (desc->grid[i] == 0 || desc->block[i] == 0) return cudaErrorInvalidConfiguration;
      blocks *= desc->grid[i];
      threads *= desc->block[i];
    }
    if (threads > 1024 || desc->block[2] > 64 || desc->grid[1] > 65535 ||
        desc->grid[2] > 65535) {
      return cudaErrorInvalidConfiguration;
    }
    if (desc->smem_bytes > 227u * 1024u) return cudaErrorInvalidValue;
    const unsigned cluster = desc->cluster == 0 ? 1 : desc->cluster;
    if (cluster > 1) {
      // As CUDA: at most 16 blocks (8 portably), whole clusters along x, no cooperative launch.
      if (cluster > 16 || desc->grid[0] % cluster != 0 ||
          (desc->flags & choreo::cpu::kCooperative) != 0) {
        return cudaErrorInvalidConfiguration;
      }
    }
    if (desc->run_block == nullptr || desc->run_thread == nullptr) {
      return cudaErrorInvalidDeviceFunction;
    }
    auto grid = std::make_shared<Grid>();
    grid->desc = *desc;
    if ((grid->desc.flags & choreo::cpu::kCooperative) != 0 || cluster > 1) {
      grid->desc.flags |= choreo::cpu::kFibres;
    }
    grid->name = kernel_name(desc->name);
    grid->blocks = blocks;
    grid->cluster = cluster;
    grid->units = blocks / cluster;
    grid->threads = static_cast<unsigned>(threads);
    // The grid owns the arguments now; they go with the last reference to it.
    void* owned = owner.args;
    owner.args = nullptr;  // (the shared_ptr destroys them also when it cannot be created)
    std::shared_ptr<void> args(owned, owner.destroy);
    const int err = enqueue(desc->stream, [grid, args] { execute(grid); });
    return err;
  });
}

int choreo_cpu_cudaGetDeviceCount(int* count) {
  return api([&]() -> int {
    if (count == nullptr) return cudaErrorInvalidValue;
    *count = 1;
    return cudaSuccess;
  });
}

int choreo_cpu_cudaGetDevice(int* device) {
  return api([&]() -> int {
    if (device == nullptr) return cudaErrorInvalidValue;
    *device = 0;
    return cudaSuccess;
  });
}

int choreo_cpu_cudaSetDevice(int device) {
  return api([&]() -> int { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; });
}

int choreo_cpu_cudaDeviceGetAttribute(int* value, int attr, int device) {
  return api([&]() -> int {
    if (value == nullptr) return cudaErrorInvalidValue;
    if (device != 0) return cudaErrorInvalidDevice;
    switch (attr) {
      case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
      case cudaDevAttrMaxBlockDimX: *value = 1024; break;
      case cudaDevAttrMaxBlockDimY: *value = 1024; break;
      case cudaDevAttrMaxBlockDimZ: *value = 64; break;
      case cudaDevAttrMaxGridDimX: *value = 2147483647; break;
      case cudaDevAttrMaxGridDimY: *value = 65535; break;
      case cudaDevAttrMaxGridDimZ: *value = 65535; break;
      case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 * 1024; break;
      case cudaDevAttrTotalConstantMemory: *value = 64 * 1024; break;
      case cudaDevAttrWarpSize: *value = 32; break;
      case cudaDevAttrMaxRegistersPerBlock: *value = 65536; break;
      case cudaDevAttrClockRate: *value = 1000000; break;
      case cudaDevAttrMultiProcessorCount: *value = static_cast<int>(worker_count()); break;
      case cudaDevAttrIntegrated: *value = 1; break;
      case cudaDevAttrConcurrentKernels: *value = 1; break;
      case cudaDevAttrL2CacheSize: *value = 0; break;
      case cudaDevAttrMaxThreadsPerMultiProcessor: *value = 2048; break;
      case cudaDevAttrUnifiedAddressing: *value = 1; break;
      case cudaDevAttrComputeCapabilityMajor: *value = 0; break;
      case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
      case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = 228 * 1024; break;
      case cudaDevAttrMaxRegistersPerMultiprocessor: *value = 65536; break;
      case cudaDevAttrManagedMemory: *value = 1; break;
      case cudaDevAttrCooperativeLaunch: *value = 1; break;
      case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 227 * 1024; break;
      default: return cudaErrorInvalidValue;
    }
    return cudaSuccess;
  });
}

int choreo_cpu_cudaDeviceSynchronize(void) {
  return api([&]() -> int { return synchronize_device(); });
}

int choreo_cpu_cudaRuntimeGetVersion(int* version) {
  return api([&]() -> int {
    if (version == nullptr) return cudaErrorInvalidValue;
    *version = CHOREO_CPU_CUDART_VERSION;
    return cudaSuccess;
  });
}

int choreo_cpu_cudaDriverGetVersion(int* version) {
  return choreo_cpu_cudaRuntimeGetVersion(version);
}

int choreo_cpu_cudaMalloc(void** ptr, std::size_t size) {
  return api([&]() -> int { return allocate(ptr, size, true); });
}

int choreo_cpu_cudaFree(void* ptr) {
  return api([&]() -> int {
    if (ptr == nullptr) return cudaSuccess;
    if (!known(ptr, true)) return cudaErrorInvalidValue;
    const int err = synchronize_device();  // cudaFree waits for the device, as in CUDA
    release(ptr, true);
    return err;
  });
}

int choreo_cpu_cudaMallocAsync(void** ptr, std::size_t size, cudaStream_t stream) {
  return api([&]() -> int {
    {
      Streams& s = streams();
      std::lock_guard<std::mutex> lock(s.mu);
      if (!resolve_locked(stream)) return cudaErrorInvalidResourceHandle;
    }
    // Allocated at once: memory available earlier than in stream order is still correct.
    return allocate(ptr, size, true);
  });
}

int choreo_cpu_cudaFreeAsync(void* ptr, cudaStream_t stream) {
  return api([&]() -> int {
    if (ptr == nullptr) return cudaSuccess;
    if (!known(ptr, true)) return cudaErrorInvalidValue;
    return enqueue(stream, [ptr] { release(ptr, true); });
  });
}

namespace {
int check_copy(void* dst, const void* src, std::size_t count, int kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
    return cudaErrorInvalidMemcpyDirection;
  }
  if (count != 0 && (dst == nullptr || src == nullptr)) return cudaErrorInvalidValue;
  return cudaSuccess;
}
}  // namespace

int choreo_cpu_cudaMemcpy(void* dst, const void* src, std::size_t count, int kind) {
  return api([&]() -> int {
    int err = check_copy(dst, src, count, kind);
    if (err != cudaSuccess || count == 0) return err;
    std::uint64_t seq = 0;
    std::shared_ptr<StreamState> stream;
    // Ordered on the legacy stream and synchronous, as cudaMemcpy is.
    err = enqueue(nullptr, [dst, src, count] { std::memmove(dst, src, count); }, &seq, &stream);
    if (err != cudaSuccess) return err;
    wait_for(stream, seq);
    return g_sticky.load();
  });
}

int choreo_cpu_cudaMemcpyAsync(void* dst, const void* src, std::size_t count, int kind,
                               cudaStream_t stream) {
  return api([&]() -> int {
    const int err = check_copy(dst, src, count, kind);
    if (err != cudaSuccess) return err;
    if (count == 0) return cudaSuccess;
    return enqueue(stream, [dst, src, count] { std::memmove(dst, src, count); });
  });
}

int choreo_cpu_cudaMemsetAsync(void* ptr, int value, std::size_t count, cudaStream_t stream) {
  return api([&]() -> int {
    if (count == 0) return cudaSuccess;
    if (ptr == nullptr) return cudaErrorInvalidValue;
    return enqueue(stream, [ptr, value, count] { std::memset(ptr, value, count); });
  });
}

int choreo_cpu_cudaMemset(void* ptr, int value, std::size_t count) {
  return choreo_cpu_cudaMemsetAsync(ptr, value, count, nullptr);
}

int choreo_cpu_cudaMallocHost(void** ptr, std::size_t size) {
  return api([&]() -> int { return allocate(ptr, size, false); });
}

int choreo_cpu_cudaHostAlloc(void** ptr, std::size_t size, unsigned flags) {
  return api([&]() -> int {
    if ((flags & ~0xfu) != 0) return cudaErrorInvalidValue;
    return allocate(ptr, size, false);
  });
}

int choreo_cpu_cudaFreeHost(void* ptr) {
  return api([&]() -> int {
    if (ptr == nullptr) return cudaSuccess;
    if (!known(ptr, false)) return cudaErrorInvalidValue;
    const int err = synchronize_device();
    release(ptr, false);
    return err;
  });
}

int choreo_cpu_cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  return api([&]() -> int {
    if (free_bytes == nullptr || total_bytes == nullptr) return cudaErrorInvalidValue;
    const std::size_t total = physical_memory();
    Memory& m = memory();
    std::lock_guard<std::mutex> lock(m.mu);
    *total_bytes = total;
    *free_bytes = m.device_bytes >= total ? 0 : total - m.device_bytes;
    return cudaSuccess;
  });
}

int choreo_cpu_cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  return api([&]() -> int {
    if (stream == nullptr || (flags & ~cudaStreamNonBlocking) != 0) return cudaErrorInvalidValue;
    auto handle = std::make_unique<choreo_cpu_stream>();
    Streams& s = streams();
    std::lock_guard<std::mutex> lock(s.mu);
    s.all.reserve(s.all.size() + 1);
    s.live_streams.insert(handle.get());
    try {
      handle->state = start_stream((flags & cudaStreamNonBlocking) == 0, false);
    } catch (...) {
      s.live_streams.erase(handle.get());
      throw;
    }
    s.all.push_back(handle->state);
    *stream = handle.release();
    return cudaSuccess;
  });
}

int choreo_cpu_cudaStreamCreate(cudaStream_t* stream) {
  return choreo_cpu_cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

int choreo_cpu_cudaStreamDestroy(cudaStream_t stream) {
  return api([&]() -> int {
    Streams& s = streams();
    std::lock_guard<std::mutex> lock(s.mu);
    if (stream == nullptr || s.live_streams.count(stream) == 0) {
      return cudaErrorInvalidResourceHandle;
    }
    s.live_streams.erase(stream);
    // Returns at once; the worker finishes the stream's work, then leaves (as in CUDA).
    stream->state->stop = true;
    s.cv.notify_all();
    delete stream;
    return cudaSuccess;
  });
}

int choreo_cpu_cudaStreamSynchronize(cudaStream_t stream) {
  return api([&]() -> int {
    Streams& s = streams();
    std::unique_lock<std::mutex> lock(s.mu);
    std::shared_ptr<StreamState> state = resolve_locked(stream);
    if (!state) return cudaErrorInvalidResourceHandle;
    std::vector<Dep> targets{Dep{state, state->enqueued}};
    if (state->legacy) {
      // The legacy stream's work includes, implicitly, all earlier work of blocking streams.
      for (const auto& other : s.all) {
        if (other->blocking) targets.push_back(Dep{other, other->enqueued});
      }
    }
    s.cv.wait(lock, [&] {
      for (const Dep& d : targets) {
        if (d.stream->completed < d.seq) return false;
      }
      return true;
    });
    return g_sticky.load();
  });
}

int choreo_cpu_cudaStreamQuery(cudaStream_t stream) {
  return api([&]() -> int {
    Streams& s = streams();
    std::lock_guard<std::mutex> lock(s.mu);
    std::shared_ptr<StreamState> state = resolve_locked(stream);
    if (!state) return cudaErrorInvalidResourceHandle;
    return state->completed >= state->enqueued ? cudaSuccess : cudaErrorNotReady;
  });
}

int choreo_cpu_cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  return api([&]() -> int {
    if (flags != 0) return cudaErrorInvalidValue;
    Streams& s = streams();
    std::lock_guard<std::mutex> lock(s.mu);
    if (!live_event(s, event)) {
      return cudaErrorInvalidResourceHandle;
    }
    std::shared_ptr<StreamState> state = resolve_locked(stream);
    if (!state) return cudaErrorInvalidResourceHandle;
    const EventState& e = *event->state;
    if (!e.recorded) return cudaSuccess;  // an event never recorded is complete
    enqueue_locked(state, {Dep{e.stream, e.seq}}, nullptr);
    return cudaSuccess;
  });
}

int choreo_cpu_cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  return api([&]() -> int {
    if (event == nullptr || (flags & ~0x7u) != 0) return cudaErrorInvalidValue;
    auto handle = std::make_unique<choreo_cpu_event>();
    handle->state = std::make_shared<EventState>();
    handle->state->flags = flags;
    Streams& s = streams();
    std::lock_guard<std::mutex> lock(s.mu);
    s.live_events.insert(handle.get());
    *event = handle.release();
    return cudaSuccess;
  });
}

int choreo_cpu_cudaEventCreate(cudaEvent_t* event) {
  return choreo_cpu_cudaEventCreateWithFlags(event, cudaEventDefault);
}

int choreo_cpu_cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  return api([&]() -> int {
    Streams& s = streams();
    std::lock_guard<std::mutex> lock(s.mu);
    if (!live_event(s, event)) {
      return cudaErrorInvalidResourceHandle;
    }
    std::shared_ptr<StreamState> state = resolve_locked(stream);
    if (!state) return cudaErrorInvalidResourceHandle;
    std::shared_ptr<EventState> e = event->state;
    const std::uint64_t generation = e->generation + 1;
    if (!state->legacy && !state->blocking && state->completed == state->enqueued) {
      // A non-blocking stream with nothing queued or running reaches the record at once, as a
      // GPU does: the event is complete now (a worker would complete it a thread wake-up
      // later, and a query right after a synchronous call would find its stream still busy).
      e->generation = generation;
      e->recorded = true;
      e->time = Clock::now();
      e->timed = true;
      e->stream = state;
      e->seq = state->completed;
      return cudaSuccess;
    }
    // The time is taken when the stream reaches the record (a later record supersedes it).
    const std::uint64_t seq = enqueue_locked(state, {}, [e, generation] {
      const Clock::time_point now = Clock::now();
      Streams& st = streams();
      std::lock_guard<std::mutex> inner(st.mu);
      if (e->generation == generation) {
        e->time = now;
        e->timed = true;
      }
    });
    e->generation = generation;
    e->recorded = true;
    e->timed = false;
    e->stream = state;
    e->seq = seq;
    return cudaSuccess;
  });
}

int choreo_cpu_cudaEventSynchronize(cudaEvent_t event) {
  return api([&]() -> int {
    Streams& s = streams();
    std::unique_lock<std::mutex> lock(s.mu);
    if (!live_event(s, event)) {
      return cudaErrorInvalidResourceHandle;
    }
    std::shared_ptr<EventState> e = event->state;
    if (!e->recorded) return cudaSuccess;
    s.cv.wait(lock, [&] { return e->stream->completed >= e->seq; });
    return g_sticky.load();
  });
}

int choreo_cpu_cudaEventQuery(cudaEvent_t event) {
  return api([&]() -> int {
    Streams& s = streams();
    std::lock_guard<std::mutex> lock(s.mu);
    if (!live_event(s, event)) {
      return cudaErrorInvalidResourceHandle;
    }
    const EventState& e = *event->state;
    if (!e.recorded) return cudaSuccess;
    return e.stream->completed >= e.seq ? cudaSuccess : cudaErrorNotReady;
  });
}

int choreo_cpu_cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  return api([&]() -> int {
    if (ms == nullptr) return cudaErrorInvalidValue;
    Streams& s = streams();
    std::lock_guard<std::mutex> lock(s.mu);
    if (!live_event(s, start) || !live_event(s, end)) {
      return cudaErrorInvalidResourceHandle;
    }
    const EventState& a = *start->state;
    const EventState& b = *end->state;
    if (((a.flags | b.flags) & cudaEventDisableTiming) != 0) {
      return cudaErrorInvalidResourceHandle;
    }
    if (!a.recorded || !b.recorded) return cudaErrorInvalidResourceHandle;
    if (a.stream->completed < a.seq || b.stream->completed < b.seq) return cudaErrorNotReady;
    if (!a.timed || !b.timed) return cudaErrorNotReady;
    *ms = std::chrono::duration<float, std::milli>(b.time - a.time).count();
    return cudaSuccess;
  });
}

int choreo_cpu_cudaEventDestroy(cudaEvent_t event) {
  return api([&]() -> int {
    Streams& s = streams();
    std::lock_guard<std::mutex> lock(s.mu);
    if (!live_event(s, event)) {
      return cudaErrorInvalidResourceHandle;
    }
    s.live_events.erase(event);
    delete event;  // a pending record keeps its state alive
    return cudaSuccess;
  });
}

int choreo_cpu_cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  return api([&]() -> int {
    if (fn == nullptr) return cudaErrorInvalidValue;
    return enqueue(stream, [fn, user_data] { fn(user_data); });
  });
}

int choreo_cpu_cudaGetLastError(void) {
  const int sticky = g_sticky.load();
  const int last = t_last_error;
  t_last_error = 0;
  return sticky != 0 ? sticky : last;
}

int choreo_cpu_cudaPeekAtLastError(void) {
  const int sticky = g_sticky.load();
  return sticky != 0 ? sticky : t_last_error;
}

const char* choreo_cpu_cudaGetErrorName(int error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorAssert: return "cudaErrorAssert";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorCooperativeLaunchTooLarge: return "cudaErrorCooperativeLaunchTooLarge";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorUnknown: return "cudaErrorUnknown";
    default: return "cudaErrorUnknown";
  }
}

const char* choreo_cpu_cudaGetErrorString(int error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorAssert: return "device-side assert triggered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorCooperativeLaunchTooLarge:
      return "too many blocks in cooperative launch";
    case cudaErrorNotSupported: return "operation not supported";
    default: return "unknown error";
  }
}

}  // extern "C"
