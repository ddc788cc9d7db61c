//! The cargo directives that link the static CUDA runtime.

use crate::discover::Toolkit;
use crate::target::Target;

/// The cargo directives (without the `cargo::` prefix) that link the toolkit's static CUDA
/// runtime into the final binary: the search path of its folder, `cudart_static`, and on
/// Linux the system libraries it needs (it loads the driver with `dlopen` and uses POSIX timers
/// and threads): `dl`, `rt`, `pthread`.
///
/// Only choreo-sys prints them: every crate whose code calls the runtime (generated wrappers,
/// kernels built by choreo-build) depends on `choreo` and so on choreo-sys, and the linker
/// then sees `cudart_static` after the kernels that need it.
///
/// ```
/// use choreo_toolkit::{FoundBy, RootFrom, Target, Toolkit, cudart_link_lines};
///
/// let toolkit = Toolkit {
///     nvcc: "/usr/local/cuda/bin/nvcc".into(),
///     root: "/usr/local/cuda".into(),
///     version: 13000,
///     lib_dir: "/usr/local/cuda/lib64".into(),
///     found_by: FoundBy::Root("CUDA_HOME"),
///     root_from: RootFrom::Var("CUDA_HOME"),
/// };
/// let linux = Target {
///     triple: "x86_64-unknown-linux-gnu".into(),
///     os: "linux".into(),
///     arch: "x86_64".into(),
///     cross: false,
/// };
/// assert_eq!(cudart_link_lines(&toolkit, &linux), [
///     "rustc-link-search=native=/usr/local/cuda/lib64",
///     "rustc-link-lib=static=cudart_static",
///     "rustc-link-lib=dylib=dl",
///     "rustc-link-lib=dylib=rt",
///     "rustc-link-lib=dylib=pthread",
/// ]);
/// ```
pub fn cudart_link_lines(toolkit: &Toolkit, target: &Target) -> Vec<String> {
    let mut lines = vec![
        format!("rustc-link-search=native={}", toolkit.lib_dir.display()),
        "rustc-link-lib=static=cudart_static".to_owned(),
    ];
    if target.os == "linux" {
        lines.extend(["dl", "rt", "pthread"].map(|lib| format!("rustc-link-lib=dylib={lib}")));
    }
    lines
}
