//! A process that ends while the runtime still holds CPU memory (buffers dropped while copies
//! on their stream run, cached pinned blocks, forgotten `Pending`s) exits cleanly: the exit
//! handler waits for the CPU runtime's work and frees the memory through it, without hanging
//! or crashing. The test runs itself as a child process and checks how that child ends.

use std::process::Command;
use std::time::{Duration, Instant};

use choreo::{Device, DeviceTensor, HostView, Stream};

/// Set in the child's environment.
const CHILD: &str = "CHOREO_CPU_EXIT_TEST_CHILD";

#[test]
fn a_process_holding_cpu_memory_at_exit_ends_cleanly() {
    if std::env::var_os(CHILD).is_some() {
        leave_memory_behind();
        return;
    }
    let started = Instant::now();
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(exe)
        .args(["--exact", "a_process_holding_cpu_memory_at_exit_ends_cleanly", "--nocapture"])
        .env(CHILD, "1")
        .output()
        .expect("the child process runs");
    assert!(output.status.success(), "the child did not exit cleanly: {output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("memory left behind"), "{stdout}");
    assert!(started.elapsed() < Duration::from_secs(60), "the child took {:?}", started.elapsed());
}

/// Starts copies, forgets their `Pending`s and drops the tensors while the copies may still
/// run, then returns: the exit handler takes it from there.
fn leave_memory_behind() {
    let stream = Stream::new_on_device(Device::cpu()).unwrap();
    let data = vec![1u32; 1 << 20];
    for _ in 0..4 {
        let tensor = DeviceTensor::from_host(&stream, HostView::from(data.as_slice())).unwrap();
        std::mem::forget(tensor.to_host_async(&stream).unwrap());
        drop(tensor);
    }
    // A block that goes back to the cache, to be freed at exit.
    drop(choreo::PinnedHostBuffer::<u8>::new_on_device(Device::cpu(), 1 << 16).unwrap());
    println!("memory left behind");
}
