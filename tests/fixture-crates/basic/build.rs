use choreo_build::UnwrapOrExit as _;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(kernels_built)");
    let report = choreo_build::Builder::new()
        .files("kernels/*.co")
        .cuda_files("cuda/*.cu")
        .build("kernels")
        .unwrap_or_exit();
    // The CUDA kernels (and the hand-written .cu) were compiled: not a CPU-only build.
    if report.library.is_some() && report.stub.is_none() {
        println!("cargo::rustc-cfg=kernels_built");
    }
    // For the test: what this run did. The test deletes it before each build, so its presence
    // also shows that the build script ran.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("build-report.txt");
    if let Err(error) = std::fs::write(path, report.to_string()) {
        println!("cargo::error=cannot write build-report.txt: {error}");
    }
}
