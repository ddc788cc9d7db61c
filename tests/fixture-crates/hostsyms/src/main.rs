//! Runs, on the CPU, kernels whose `.co` file defines host functions, a `__device__` helper and
//! globals with external linkage (`kernels/host-syms.co`), next to another file
//! (`kernels/other.co`). The wrappers reference the CUDA and the CPU entries of each file, so a
//! build with nvcc links both objects of each: it links only because the CPU objects keep those
//! symbols to themselves. The test runs it with `CHOREO_DEVICE=cpu`, which needs no GPU.

choreo::include_kernels!();

fn main() {
    let mut v = [2.0f32; 16];
    for _ in 0..2 {
        // SAFETY: the `__cpp__` text and `sq` touch only the file's own globals and `v`'s
        // elements, one per thread.
        unsafe { host_syms::squares((&mut v[..]).into(), 0.5) }.expect("squares");
    }
    println!("squares: {}", v[0]);
    // SAFETY: the `__cpp__` text reads one global of the file.
    let calls = unsafe { host_syms::calls_so_far() }.expect("calls_so_far");
    println!("calls: {calls}");
    let mut w = [3.0f32; 4];
    // SAFETY: `cube` reads one element per thread.
    unsafe { other::cubes((&mut w[..]).into()) }.expect("cubes");
    println!("cubes: {}", w[0]);
}
