fn main() {
    choreo_build::compile("kernels/*.co");
}
