use choreo_build::UnwrapOrExit as _;

fn main() {
    let report =
        choreo_build::Builder::new().files("kernels/*.co").build("kernels").unwrap_or_exit();
    // For the test: what this run did (see basic/build.rs).
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("build-report.txt");
    if let Err(error) = std::fs::write(path, report.to_string()) {
        println!("cargo::error=cannot write build-report.txt: {error}");
    }
}
