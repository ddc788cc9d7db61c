//! A call after a sticky error returns an error, not a panic and not undefined behaviour.
//!
//! A kernel that traps makes the device's runtime unusable for the rest of the process: every
//! later call fails with the same ("sticky") error — on a GPU (the CUDA context) as on the CPU
//! (the CPU runtime records the trap the same way). This binary holds only this test, so the
//! poisoned runtime is its own (cargo and `gpu-bundle/run-all` run every test binary, and
//! run-all every test, in a process of its own). The test runs on the CPU (`..::on_cpu`, in
//! every `cargo test`) and on a GPU (`..::on_gpu`, `#[ignore = "needs a CUDA GPU"]`:
//! `--ignored`); see `choreo_tests::device_tests!`. The two variants poison different runtimes,
//! so they may share a process (`--include-ignored`). Under `SANITIZE`, run-all runs tests
//! named `*sticky_error*` without the sanitizer, whose tools report the deliberate device
//! fault.

use choreo::DeviceTensor;
use choreo_tests::co::kinds;
use choreo_tests::{TestDevice, device_tests, trap};

device_tests!(calls_after_a_sticky_error_fail_with_that_error);
fn calls_after_a_sticky_error_fail_with_that_error(dev: &TestDevice) {
    let stream = dev.stream();
    let x = DeviceTensor::from_host(&stream, [1.0f32; 64].as_slice().into()).unwrap();
    let mut y = DeviceTensor::from_host(&stream, [2.0f32; 64].as_slice().into()).unwrap();
    // Works before the fault.
    kinds::axpy(&x, &mut y, 1.0).unwrap();
    assert_eq!(y.to_host(&stream).unwrap().as_slice(), [3.0; 64]);

    trap(&stream).unwrap();
    let sticky = match stream.synchronize() {
        Err(error) => match error.cuda_code() {
            Some(code) => {
                println!("the trap left error {code}: {error}");
                code
            }
            None => panic!("the trapping kernel failed its stream without a status: {error}"),
        },
        Ok(()) => panic!("the trapping kernel should fail its stream"),
    };

    // Every later call fails with the sticky error (maybe reported late, as `Deferred`, by a
    // destructor that met it first), and keeps failing.
    for attempt in 1..=2 {
        match kinds::axpy(&x, &mut y, 1.0) {
            Err(error) => assert_eq!(
                error.cuda_code(),
                Some(sticky),
                "attempt {attempt}: expected the sticky error {sticky}, got {error}"
            ),
            Ok(()) => panic!("attempt {attempt}: a call after a sticky error succeeded"),
        }
    }
    // Other runtime calls too: allocating, copying.
    let error = DeviceTensor::<f32, 1>::zeros_on_device(dev.device(), [64]).unwrap_err();
    assert_eq!(error.cuda_code(), Some(sticky), "{error}");
    let error = y.to_host(&stream).unwrap_err();
    assert_eq!(error.cuda_code(), Some(sticky), "{error}");
    // The destructors meet the error too and defer it: taken here, so that it does not reach
    // a later test of the process (of the other device, with `--include-ignored`).
    drop((x, y, stream));
    let _ = choreo::take_deferred_error();
}
