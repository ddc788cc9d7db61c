//! A call after a sticky CUDA error returns an error, not a panic and not undefined behaviour.
//!
//! A kernel that traps makes the CUDA context unusable for the rest of the process: every
//! later CUDA call fails with the same ("sticky") error. This binary holds only this test, so
//! the poisoned context is its own (cargo and `gpu-bundle/run-all` run every test binary, and
//! run-all every test, in a process of its own). Under `SANITIZE`, run-all runs tests named
//! `*sticky_error*` without the sanitizer, whose tools report the deliberate device fault.

use choreo::{DeviceTensor, Error, Stream};
use choreo_tests::co::kinds;
use choreo_tests::{CO_KERNELS_BUILT, KERNELS_BUILT, trap};

#[test]
#[ignore = "needs a CUDA GPU"]
fn calls_after_a_sticky_error_fail_with_that_error() {
    if !CO_KERNELS_BUILT || !KERNELS_BUILT {
        panic!("the test kernels were not compiled (stub build: no nvcc when built)");
    }
    if let Err(error) = choreo::init() {
        panic!("this test needs a CUDA GPU: {error}");
    }
    let stream = Stream::new().unwrap();
    let x = DeviceTensor::from_host(&stream, [1.0f32; 64].as_slice().into()).unwrap();
    let mut y = DeviceTensor::from_host(&stream, [2.0f32; 64].as_slice().into()).unwrap();
    // Works before the fault.
    kinds::axpy(&x, &mut y, 1.0).unwrap();
    assert_eq!(y.to_host(&stream).unwrap().as_slice(), [3.0; 64]);

    trap(&stream).unwrap();
    let sticky = match stream.synchronize() {
        Err(Error::Cuda { code, name, .. }) => {
            println!("the trap left CUDA error {code} ({name})");
            code
        }
        other => panic!("the trapping kernel should fail its stream, got {other:?}"),
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
    let error = DeviceTensor::<f32, 1>::zeros([64]).unwrap_err();
    assert_eq!(error.cuda_code(), Some(sticky), "{error}");
    let error = y.to_host(&stream).unwrap_err();
    assert_eq!(error.cuda_code(), Some(sticky), "{error}");
}
