//! Builds `co/*.co` as library `co_kernels` (module per file stem): the library and module
//! names of choreo-tests' kernels, so only the crate tells the symbols apart.

use choreo_build::UnwrapOrExit as _;

fn main() {
    choreo_build::Builder::new().files("co/*.co").build("co_kernels").unwrap_or_exit();
}
