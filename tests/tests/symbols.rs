//! Generated code defines one external symbol per `__co__` function, its `extern "C"` entry,
//! mangled with the package, version, library and module it belongs to (everything else has
//! internal linkage). So functions of the same name in two files of one crate
//! (`co/affine.co`, `co/affine_shift.co`) and in another crate with the same library and
//! module names (`choreo-test-twin`'s `co/affine.co`) link into one binary, and each call
//! runs its own kernel. (Before, the linker kept one of the same-named entries and the other
//! wrappers called it with the wrong arguments, from safe code.)
//!
//! The CPU entries are mangled the same way (with the backend in the symbol). The test runs
//! on the CPU (`..::on_cpu`, in every `cargo test`) and on a GPU (`..::on_gpu`,
//! `#[ignore = "needs a CUDA GPU"]`: `--ignored`); see `choreo_tests::device_tests!`. That the
//! three link together is checked by every build of this test binary.

use choreo::DeviceTensor;
use choreo_tests::co::{affine, affine_shift};
use choreo_tests::{TestDevice, device_tests};

device_tests!(same_named_functions_of_two_files_and_two_crates_each_run_their_own_kernel);
fn same_named_functions_of_two_files_and_two_crates_each_run_their_own_kernel(dev: &TestDevice) {
    let stream = dev.stream();
    let n = 1000;

    let ints: Vec<i32> = (0..n).collect();
    let mut x = DeviceTensor::from_host(&stream, ints.as_slice().into()).expect("upload");
    affine::affine(&mut x, 3).expect("co/affine.co: x * 3");
    affine_shift::affine(&mut x, 5, &stream).expect("co/affine_shift.co: x + 5");
    let got = x.to_host(&stream).expect("download").into_vec();
    let want: Vec<i32> = ints.iter().map(|v| v * 3 + 5).collect();
    assert_eq!(got, want, "each `affine` of this crate ran its own kernel");

    let floats: Vec<f32> = (0..n).map(|v| v as f32).collect();
    let mut y = DeviceTensor::from_host(&stream, floats.as_slice().into()).expect("upload");
    choreo_test_twin::kernels::affine::affine(&mut y, 2.0, 0.5).expect("the twin crate's affine");
    let got = y.to_host(&stream).expect("download").into_vec();
    let want: Vec<f32> = floats.iter().map(|v| 2.0 * v + 0.5).collect();
    assert_eq!(got, want, "the other crate's `affine` ran its own kernel");
}
