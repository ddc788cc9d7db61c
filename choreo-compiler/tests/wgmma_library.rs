//! The WGMMA device library (`src/emit/cuda/wgmma.cuh`, tier 3 §10.3):
//!
//! - `cpu_path`: `tests/wgmma/cpu.cpp`, built with the host C++ compiler under `__CHOREO_CPU__`:
//!   descriptor encoding and decoding, K-step offsets, the WGMMA_ACC layout, conversions, and
//!   SS products of the CPU path (swizzle 128/64/32 B, K- and MN-major, every type family)
//!   against a naive GEMM;
//! - `cuda_path_compiles_for_sm90a`: `tests/wgmma/all.cu`, which instantiates every wrapper
//!   (every type triple and N, SS and RS, the transposes), compiled by nvcc for sm_90a: ptxas
//!   validates every instruction. Nothing runs on a GPU here.
//!
//! nvcc is found as the header tests find it (and provisioned by `ci/install-cuda` when
//! missing); without it the CUDA test fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use choreo_toolkit::{Discovery, Env, Target, Toolkit};

mod common;

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn library_dir() -> PathBuf {
    manifest_dir().join("src").join("emit").join("cuda")
}

fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("wgmma_library");
    std::fs::create_dir_all(&dir).expect("create the output folder");
    dir
}

#[test]
fn cpu_path() {
    let exe = out_dir().join("wgmma_cpu");
    let mut command = Command::new(common::cxx::cxx());
    command
        .args(["-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-D__CHOREO_CPU__"])
        .arg("-I")
        .arg(library_dir())
        .arg(manifest_dir().join("tests").join("wgmma").join("cpu.cpp"))
        .arg("-o")
        .arg(&exe);
    let output = command.output().expect("run the C++ compiler");
    assert!(
        output.status.success(),
        "cpu.cpp does not compile:\n{}",
        common::cxx::describe(&output)
    );
    let output =
        common::cxx::run_with_timeout(Command::new(&exe), std::time::Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        output.status.success() && String::from_utf8_lossy(&output.stdout).trim_end() == "ok",
        "{}",
        common::cxx::describe(&output)
    );
}

fn find_toolkit() -> Toolkit {
    let discover = |env: &Env| match choreo_toolkit::find(env, &Target::host()) {
        Ok(Discovery::Found(toolkit)) => Some(toolkit),
        Ok(Discovery::Stub(_)) => None,
        Err(error) => panic!("{error}"),
    };
    if let Some(toolkit) = discover(&Env::process()) {
        return toolkit;
    }
    let script = manifest_dir().join("..").join("ci").join("install-cuda");
    let output = Command::new(&script).output().expect("run ci/install-cuda");
    assert!(output.status.success(), "ci/install-cuda failed: {}", common::cxx::describe(&output));
    let root = String::from_utf8_lossy(&output.stdout).trim().to_string();
    discover(&Env::process().with_var("CUDA_HOME", &root))
        .unwrap_or_else(|| panic!("ci/install-cuda printed {root}, which has no bin/nvcc"))
}

#[test]
fn cuda_path_compiles_for_sm90a() {
    let toolkit = find_toolkit();
    let object = out_dir().join("wgmma_all.o");
    let output = Command::new(&toolkit.nvcc)
        .args(["-std=c++17", "-gencode", "arch=compute_90a,code=sm_90a", "-c"])
        .args(["-Xcompiler", "-Wall,-Wextra"])
        .arg("-I")
        .arg(library_dir())
        .arg(manifest_dir().join("tests").join("wgmma").join("all.cu"))
        .arg("-o")
        .arg(&object)
        .output()
        .expect("run nvcc");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "nvcc failed on all.cu:\n{log}");
    let ours: Vec<&str> =
        log.lines().filter(|l| l.contains("warning") && l.contains("wgmma.cuh")).collect();
    assert!(ours.is_empty(), "nvcc warned about wgmma.cuh:\n{log}");
    assert!(std::fs::metadata(&object).is_ok_and(|m| m.len() > 0), "no object written");
}

/// The generated wrappers cover every (operation, N) pair the generator lists, once each.
#[test]
fn generated_section_is_complete() {
    let text = std::fs::read_to_string(library_dir().join("wgmma.cuh")).expect("read wgmma.cuh");
    let ops = [
        "F16F16F16",
        "F32F16F16",
        "F32BF16BF16",
        "F32TF32TF32",
        "F32E4M3E4M3",
        "F32E4M3E5M2",
        "F32E5M2E4M3",
        "F32E5M2E5M2",
        "F16E4M3E4M3",
        "F16E4M3E5M2",
        "F16E5M2E4M3",
        "F16E5M2E5M2",
        "S32S8S8",
        "S32S8U8",
        "S32U8S8",
        "S32U8U8",
    ];
    for op in ops {
        assert!(text.contains(&format!("struct {op} {{}};")), "no tag {op}");
        for n in [8, 16, 24, 32, 48, 64, 96, 128, 192, 256] {
            let head = format!("template <> struct Mma<{op}, {n}> {{");
            assert_eq!(text.matches(&head).count(), 1, "{head}");
        }
    }
}

/// Every legal N outside the library's list (spec-tier3 §5.3 table G) that the translator
/// writes per program (`emit::cuda::wgmma_instruction`), for one operation of each generator
/// form (16-bit with transposes and f32 or packed f16 accumulators, tf32, fp8 to f32 and to f16,
/// 8-bit integers), SS and RS, compiled by nvcc for sm_90a: ptxas validates every instruction
/// string and operand list.
#[test]
fn every_legal_n_compiles_for_sm90a() {
    use choreo_compiler::emit::cuda::wgmma_instruction;
    let library = [8, 16, 24, 32, 48, 64, 96, 128, 192, 256];
    let int_n = |n: u64| n == 8 || n == 16 || n == 24 || ((32..=224).contains(&n) && n % 16 == 0);
    let ops: [(&str, u64, bool); 6] = [
        ("F32F16F16", 8, false),
        ("F16F16F16", 8, false),
        ("F32TF32TF32", 16, false),
        ("F16E4M3E5M2", 8, false),
        ("F32E5M2E4M3", 8, false),
        ("S32U8S8", 8, true),
    ];
    let mut cu = String::from("#include \"wgmma.cuh\"\nnamespace CHOREO_WGMMA_NS {\n");
    let mut calls = String::new();
    let mut count = 0;
    for (tag, lo, int) in ops {
        for n in (lo..=256).step_by(8) {
            if library.contains(&n) || (int && !int_n(n)) {
                continue;
            }
            cu.push_str(&wgmma_instruction(tag, n).unwrap_or_else(|| panic!("{tag} {n}")));
            calls.push_str(&format!(
                "  {{ using M = CHOREO_WGMMA_NS::Mma<CHOREO_WGMMA_NS::{tag}, {n}>; \
                 M::Acc d[M::kRegs] = {{}}; M::ss<0, 0>(d, da, db, s); M::rs<0>(d, a, db, 1); \
                 for (int i = 0; i < M::kRegs; ++i) out[i] += static_cast<std::uint32_t>(d[i]); }}\n"
            ));
            count += 1;
        }
    }
    assert!(count > 100, "{count} instructions");
    cu.push_str("}  // namespace CHOREO_WGMMA_NS\n");
    cu.push_str(
        "__global__ void every_n(std::uint64_t da, std::uint64_t db, int s, std::uint32_t* out) {\n\
         const std::uint32_t a[4] = {out[0], out[1], out[2], out[3]};\n",
    );
    cu.push_str(&calls);
    cu.push_str("}\n");
    compile_generated("wgmma_every_n", &cu, "every N");
}

/// Compiles the generated `cu` (written as `<name>.cu` in the test's output folder) for sm_90a
/// against the library, failing with nvcc's log on an error (`what`: what it holds).
fn compile_generated(name: &str, cu: &str, what: &str) {
    let source = out_dir().join(format!("{name}.cu"));
    std::fs::write(&source, cu).expect("write the .cu");
    let toolkit = find_toolkit();
    let output = Command::new(&toolkit.nvcc)
        .args(["-std=c++17", "-gencode", "arch=compute_90a,code=sm_90a", "-c"])
        .arg("-I")
        .arg(library_dir())
        .arg(&source)
        .arg("-o")
        .arg(out_dir().join(format!("{name}.o")))
        .output()
        .expect("run nvcc");
    assert!(output.status.success(), "nvcc failed on {what}:\n{}", common::cxx::describe(&output));
}

/// Every sparse instruction of the 16-bit operations and of two 8-bit ones (`SpMma<tag, N>::ss`
/// and `::rs`, the latter for A in registers) for every N of table G's `.sp` row, compiled by
/// nvcc for sm_90a: ptxas validates the operand order of both forms (the 8-bit RS one without
/// any transpose immediate). Nothing runs on a GPU here.
#[test]
fn every_sparse_n_compiles_for_sm90a() {
    use choreo_compiler::emit::cuda::wgmma_sparse_instruction;
    let mut cu = String::from(
        "#include \"wgmma.cuh\"\nnamespace CHOREO_WGMMA_NS {\ntemplate <class Op, int N> struct \
         SpMma;\nnamespace detail {\nCHOREO_WGMMA_DEVICE void sp_unavailable() {}\n}\n",
    );
    let mut calls = String::new();
    for tag in ["F32F16F16", "F16F16F16", "F32BF16BF16", "F32E4M3E4M3", "F16E5M2E4M3"] {
        for n in [8, 16, 32, 64, 96, 128, 192, 256] {
            let text = wgmma_sparse_instruction(tag, n).unwrap_or_else(|| panic!("{tag} {n}"));
            assert!(text.contains("static void rs("), "{tag} {n}: no RS form");
            cu.push_str(&text);
            calls.push_str(&format!(
                "  {{ using M = CHOREO_WGMMA_NS::SpMma<CHOREO_WGMMA_NS::{tag}, {n}>; \
                 M::Acc d[M::kRegs] = {{}}; M::ss(d, da, db, e, s); M::rs(d, a, db, e, 1); \
                 for (int i = 0; i < M::kRegs; ++i) out[i] += static_cast<std::uint32_t>(d[i]); }}\n"
            ));
        }
    }
    assert!(wgmma_sparse_instruction("S32S8S8", 64).is_none());
    cu.push_str("}  // namespace CHOREO_WGMMA_NS\n");
    cu.push_str(
        "__global__ void every_sparse_n(std::uint64_t da, std::uint64_t db, std::uint32_t e, int s, \
         std::uint32_t* out) {\n const std::uint32_t a[4] = {out[0], out[1], out[2], out[3]};\n",
    );
    cu.push_str(&calls);
    cu.push_str("}\n");
    compile_generated("wgmma_every_sparse_n", &cu, "the sparse instructions");
}
