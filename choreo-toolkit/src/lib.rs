//! Finding the CUDA toolkit, written once for choreo: `choreo-build` (compiling kernels),
//! `choreo-sys`'s build script (linking the CUDA runtime) and `choreoc build` (compiling a
//! whole program) all use this crate, so they agree on which toolkit a build uses.
//!
//! ```no_run
//! use choreo_toolkit::{Discovery, Env, Target, cudart_link_lines, discover_runtime};
//!
//! // In a build script:
//! let env = Env::process();
//! let target = Target::from_env(&env);
//! match discover_runtime(&env, &target) {
//!     Ok(Discovery::Found(toolkit)) => {
//!         for line in cudart_link_lines(&toolkit, &target) {
//!             println!("cargo::{line}");
//!         }
//!     }
//!     Ok(Discovery::Stub(reason)) => println!("cargo::warning=no CUDA runtime: {reason}"),
//!     Err(error) => println!("cargo::warning={error}"),
//! }
//! for var in env.read_vars() {
//!     println!("cargo::rerun-if-env-changed={var}");
//! }
//! ```
//!
//! # nvcc
//!
//! The first of:
//!
//! 1. `NVCC`: a path, or a bare program name looked up on `PATH`. It may be a wrapper such as
//!    sccache outside the toolkit. One that does not exist is an error
//!    ([`Error::NvccNotFound`]), not a reason to look further.
//! 2. `CUDA_HOME`, then `CUDA_PATH`: `<root>/bin/nvcc`.
//! 3. `nvcc` on `PATH`.
//! 4. The pip wheels of `python3`: `<site-packages>/nvidia/cu13/bin/nvcc`.
//! 5. The folder `ci/install-cuda` installs into: `$CHOREO_CUDA_CACHE`, else
//!    `${XDG_CACHE_HOME:-$HOME/.cache}/choreo/cuda-13.0`, then `nvidia/cu13/bin/nvcc`.
//! 6. The folder `CHOREO_CUDA_MAJOR=12 ci/install-cuda` installs CUDA 12.4 into:
//!    `$CHOREO_CUDA12_CACHE`, else `${XDG_CACHE_HOME:-$HOME/.cache}/choreo/cuda-12.4`, then
//!    `toolkit/bin/nvcc`.
//!
//! None of them: [`StubReason::NotFound`], listing what was searched and how to install CUDA.
//!
//! # The toolkit root
//!
//! Headers, the version and the runtime all come from one root ([`Toolkit::root`],
//! [`RootFrom`]); `NVCC` only names the compiler to run:
//!
//! 1. `CUDA_HOME`, then `CUDA_PATH`, when set, whatever nvcc is (an sccache or ccache wrapper
//!    such as `NVCC=/usr/local/bin/nvcc-wrapper` works with `CUDA_HOME` naming the toolkit);
//! 2. else the folder above the `bin` of nvcc's real location (links resolved, so
//!    `/usr/local/bin/nvcc` → `/usr/local/cuda-13.0/bin/nvcc` gives `/usr/local/cuda-13.0`);
//! 3. else, when `NVCC` names a program outside any toolkit (that folder has no
//!    `cuda_runtime_api.h`), the root of the first toolkit the later search steps find: every
//!    `nvcc` on `PATH` (wrappers are passed over), the pip wheels, the `ci/install-cuda` caches.
//!    None: an error ([`Error::Toolkit`]) that says to set `CUDA_HOME`.
//!
//! The CUDA version is `CUDART_VERSION` of `include/cuda_runtime_api.h` (or
//! `targets/<arch>-linux/include`). `libcudart_static.a` must exist for the cargo target: for
//! a native build in `lib64`, `lib`, `targets/<arch>-linux/lib` or `lib/<multiarch>`; for a
//! cross build (`TARGET` ≠ `HOST`) in `targets/<arch>-linux/lib` (`sbsa-linux` for aarch64). A
//! root without them is an error ([`Error::Toolkit`]) that says what to install.
//!
//! # Stub mode and versions
//!
//! [`find`] is the search alone. [`discover_runtime`] (choreo-sys) adds the switches
//! `CHOREO_SYS_NO_CUDART` and `DOCS_RS` and accepts only CUDA 12.4 to 13.x
//! ([`supported_version`]), the versions whose runtime ABI choreo-sys binds (it selects the
//! CUDA 12 or 13 `cudaDeviceProp` layout and `cudaGetDeviceProperties` symbol at build time):
//! another version is [`StubReason::UnsupportedVersion`], whose text names the version found,
//! the ones supported and that the build is a stub build. [`discover`] (choreo-build) adds `CHOREO_NVCC=skip` in front. Whenever
//! [`discover`] finds a toolkit, [`discover_runtime`] finds the same one in the same
//! environment, so kernels are never compiled without a runtime to link them against.
//!
//! # The environment
//!
//! Discovery reads the environment through [`Env`]: the process environment, or a fixed one
//! in tests (which also says what `python3` would answer, so nothing is spawned).
//! [`Env::read_vars`] lists the variables read, [`ENV_VARS`] all that discovery may read.

mod discover;
mod env;
mod error;
mod link;
mod target;

pub use discover::{
    Discovery, ENV_VARS, FoundBy, INSTALL_HINT, MAX_CUDA_MAJOR, MIN_CUDA_VERSION, RootFrom,
    StubReason, Toolkit, cudart_version, discover, discover_runtime, find, supported_version,
};
pub use env::Env;
pub use error::Error;
pub use link::cudart_link_lines;
pub use target::Target;
