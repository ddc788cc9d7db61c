//! WGMMA instructions outside the library's N list (spec-tier3 §5.3 table G): `wgmma.cuh`
//! has `Mma<Op, N>` for N ∈ [`LIBRARY_N`]; every other legal N (8..256 in steps of 8 for the
//! 16-bit, tf32 and fp8 types; the spec's list for s8/u8) gets the same explicit
//! specialisation here, written into the generated file only for the (operation, N) pairs
//! that the program uses, so that nvcc never sees the hundreds of unused ones. The text is
//! what `wgmma_gen.py` writes for a library N: the accumulator register list `{%0, …,
//! %R-1}` (R = N/2 f32/s32 registers, N/4 packed f16 ones), then the descriptors, the
//! scale-d predicate and the immediates, numbered after the R accumulator operands.

use crate::target::mma::MmaConfig;

/// The N of the WGMMA library's instructions (`wgmma.cuh`).
pub(crate) const LIBRARY_N: [u64; 10] = [8, 16, 24, 32, 48, 64, 96, 128, 192, 256];

/// One operation of the library: its PTX type triple, atom K, accumulator C++ type and
/// register constraint, accumulator elements per register and its immediates.
struct OpInfo {
    ptx: String,
    k: u64,
    acc: &'static str,
    con: &'static str,
    per: u64,
    /// Immediates: 16-bit types take scale-a/b and the transposes, tf32/fp8 scale-a/b only,
    /// integers none.
    form: Form,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    T16,
    Scale,
    Int,
}

/// The operation of a library tag (`F32F16F16`), as in `wgmma_gen.py`'s table.
fn op_info(tag: &str) -> Option<OpInfo> {
    let lower = |s: &str| s.to_ascii_lowercase();
    let (d, rest) = if let Some(r) = tag.strip_prefix("F32") {
        ("f32", r)
    } else if let Some(r) = tag.strip_prefix("F16") {
        ("f16", r)
    } else if let Some(r) = tag.strip_prefix("S32") {
        ("s32", r)
    } else {
        return None;
    };
    let (a, b) = ["F16", "BF16", "TF32", "E4M3", "E5M2", "S8", "U8"].iter().find_map(|a| {
        let b = rest.strip_prefix(a)?;
        ["F16", "BF16", "TF32", "E4M3", "E5M2", "S8", "U8"].contains(&b).then_some((*a, b))
    })?;
    let (k, form) = match a {
        "F16" | "BF16" => (16, Form::T16),
        "TF32" => (8, Form::Scale),
        "E4M3" | "E5M2" => (32, Form::Scale),
        _ => (32, Form::Int),
    };
    let (acc, con, per) = match d {
        "f32" => ("float", "+f", 1),
        "f16" => ("std::uint32_t", "+r", 2),
        _ => ("std::int32_t", "+r", 1),
    };
    Some(OpInfo { ptx: format!("{d}.{}.{}", lower(a), lower(b)), k, acc, con, per, form })
}

/// The tag of a configuration in the library's spelling, without the namespace.
pub(super) fn tag_of(c: &MmaConfig) -> String {
    use crate::target::mma::MmaType;
    let name = |t: MmaType| match t {
        MmaType::F16 => "F16",
        MmaType::Bf16 => "BF16",
        MmaType::Tf32 => "TF32",
        MmaType::F32 => "F32",
        MmaType::S8 => "S8",
        MmaType::U8 => "U8",
        MmaType::S32 => "S32",
        MmaType::E4m3 => "E4M3",
        MmaType::E5m2 => "E5M2",
        MmaType::F64 | MmaType::Other => "?",
    };
    format!("{}{}{}", name(c.c), name(c.a), name(c.b))
}

/// The text of every instruction [`specialisation`] and [`sparse_specialisation`] can write
/// for the library's operations (those of `wgmma.cuh`, table G's), for the hash of the WGMMA
/// namespace: a file whose instructions another translator wrote must not share it.
pub(super) fn every_instruction() -> Vec<String> {
    let lib = include_str!("wgmma.cuh");
    // `template <> struct Mma<TAG, 8>`: one per operation.
    let tags = lib.split("template <> struct Mma<").skip(1).filter_map(|rest| {
        let (args, _) = rest.split_once('>')?;
        args.strip_suffix(", 8")
    });
    let mut out = Vec::new();
    for tag in tags {
        for n in (8..=256).step_by(8) {
            out.extend(specialisation(tag, n));
            out.extend(sparse_specialisation(tag, n));
        }
    }
    out
}

/// `{%from, …, %to-1}`.
fn reg_list(from: u64, to: u64) -> String {
    let regs: Vec<String> = (from..to).map(|i| format!("%{i}")).collect();
    format!("{{{}}}", regs.join(", "))
}

/// The explicit specialisation `Mma<tag, n>` (inside `namespace CHOREO_WGMMA_NS`), or `None`
/// for an unknown tag or an N that is no multiple of 8 (sema never lets either through).
pub(super) fn specialisation(tag: &str, n: u64) -> Option<String> {
    let op = op_info(tag)?;
    if n == 0 || n % 8 != 0 || n > 256 {
        return None;
    }
    let r = n / 2 / op.per;
    let k = op.k;
    let ins = format!("wgmma.mma_async.sync.aligned.m64n{n}k{k}.{}", op.ptx);
    let regs = reg_list(0, r);
    let outs: Vec<String> = (0..r).map(|i| format!("\"{}\"(d[{i}])", op.con)).collect();
    let outs = outs.join(", ");
    let acc = op.acc;
    let mut s = String::new();
    s.push_str(&format!("template <> struct Mma<{tag}, {n}> {{\n"));
    s.push_str(&format!("  static constexpr int kN = {n}, kK = {k}, kRegs = {r};\n"));
    s.push_str(&format!("  using Acc = {acc};\n"));
    // SS: d, desc-a, desc-b, scale-d[, imm-scale-a, imm-scale-b[, imm-trans-a, imm-trans-b]].
    let (tail, extra) = match op.form {
        Form::T16 => (format!(", p, 1, 1, %{}, %{};", r + 3, r + 4), ", \"n\"(TA), \"n\"(TB)"),
        Form::Scale => (", p, 1, 1;".to_string(), ""),
        Form::Int => (", p;".to_string(), ""),
    };
    s.push_str("  template <int TA = 0, int TB = 0>\n");
    s.push_str(&format!(
        "  CHOREO_WGMMA_DEVICE static void ss(Acc (&d)[{r}], std::uint64_t da, std::uint64_t db, \
         int scale_d) {{\n"
    ));
    if op.form != Form::T16 {
        s.push_str(
            "    static_assert(TA == 0 && TB == 0, \"only 16-bit WGMMA operands may be MN-major\");\n",
        );
    }
    s.push_str("#if CHOREO_WGMMA_SM90A\n");
    s.push_str(&format!(
        "    asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{}, 0;\\n\"\n                 \
         \"{ins} {regs}, %{r}, %{}{tail}\\n}}\\n\"\n                 : {outs}\n                 \
         : \"l\"(da), \"l\"(db), \"r\"(scale_d){extra});\n",
        r + 2,
        r + 1
    ));
    s.push_str("#else\n");
    s.push_str(&format!("    detail::ss_fallback<{tag}, {n}, TA, TB>(d, da, db, scale_d);\n"));
    s.push_str("#endif\n  }\n");
    // RS: d, {a0..a3}, desc-b, scale-d[, imm-scale-a, imm-scale-b[, imm-trans-b]].
    let (tail, extra) = match op.form {
        Form::T16 => (format!(", p, 1, 1, %{};", r + 6), ", \"n\"(TB)"),
        Form::Scale => (", p, 1, 1;".to_string(), ""),
        Form::Int => (", p;".to_string(), ""),
    };
    s.push_str("  template <int TB = 0>\n");
    s.push_str(&format!(
        "  CHOREO_WGMMA_DEVICE static void rs(Acc (&d)[{r}], const std::uint32_t (&a)[4], \
         std::uint64_t db, int scale_d) {{\n"
    ));
    if op.form != Form::T16 {
        s.push_str("    static_assert(TB == 0, \"only 16-bit WGMMA operands may be MN-major\");\n");
    }
    s.push_str("#if CHOREO_WGMMA_SM90A\n");
    s.push_str(&format!(
        "    asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{}, 0;\\n\"\n                 \
         \"{ins} {regs}, {}, %{}{tail}\\n}}\\n\"\n                 : {outs}\n                 \
         : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db), \"r\"(scale_d){extra});\n",
        r + 5,
        reg_list(r, r + 4),
        r + 4
    ));
    s.push_str("#else\n");
    s.push_str(&format!("    detail::rs_fallback<{tag}, {n}, TB>(d, a, db, scale_d);\n"));
    s.push_str("#endif\n  }\n};\n");
    Some(s)
}

/// The sparse instruction `SpMma<tag, n>` (`wgmma.mma_async.sp`, both operands K-major;
/// `wgmma_sp.cuh`): `ss` (SS mode) and `rs` (A's 4 registers instead of its descriptor, no
/// imm-trans-a; for the 8-bit tags the 4 registers of a dense k32 RS atom); logical K twice the dense tag's, the metadata register and
/// the sparsity selector 0 after B's descriptor. `None` as for [`specialisation`], and for the
/// integer and tf32 tags (no sparse WGMMA of theirs is selected).
pub(super) fn sparse_specialisation(tag: &str, n: u64) -> Option<String> {
    let op = op_info(tag)?;
    if n == 0 || n % 8 != 0 || n > 256 || op.form == Form::Int || op.ptx.contains("tf32") {
        return None;
    }
    let r = n / 2 / op.per;
    let k = 2 * op.k;
    let ins = format!("wgmma.mma_async.sp.sync.aligned.m64n{n}k{k}.{}", op.ptx);
    let regs = reg_list(0, r);
    let outs: Vec<String> = (0..r).map(|i| format!("\"{}\"(d[{i}])", op.con)).collect();
    let outs = outs.join(", ");
    // d, desc-a, desc-b, sp-meta, sp-sel, scale-d, imm-scale-a, imm-scale-b[, imm-trans-a,
    // imm-trans-b].
    let tail = if op.form == Form::T16 { ", p, 1, 1, 0, 0;" } else { ", p, 1, 1;" };
    let acc = op.acc;
    let mut s = String::new();
    s.push_str(&format!("template <> struct SpMma<{tag}, {n}> {{\n"));
    s.push_str(&format!("  static constexpr int kN = {n}, kK = {k}, kRegs = {r};\n"));
    s.push_str(&format!("  using Acc = {acc};\n"));
    s.push_str(&format!(
        "  CHOREO_WGMMA_DEVICE static void ss(Acc (&d)[{r}], std::uint64_t da, std::uint64_t db, \
         std::uint32_t e, int scale_d) {{\n"
    ));
    s.push_str("#if CHOREO_WGMMA_SM90A\n");
    s.push_str(&format!(
        "    asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{}, 0;\\n\"\n                 \
         \"{ins} {regs}, %{r}, %{}, %{}, 0{tail}\\n}}\\n\"\n                 : {outs}\n                 \
         : \"l\"(da), \"l\"(db), \"r\"(e), \"r\"(scale_d));\n",
        r + 3,
        r + 1,
        r + 2
    ));
    s.push_str("#else\n");
    s.push_str("    (void)d, (void)da, (void)db, (void)e, (void)scale_d;\n");
    s.push_str("    detail::sp_unavailable();\n");
    s.push_str("#endif\n  }\n");
    // RS: d, {a0, a1, a2, a3}, desc-b, sp-meta, sp-sel, scale-d, imm-scale-a, imm-scale-b
    // and, for the 16-bit types, imm-trans-b (no imm-trans-a; the 8-bit types have none).
    let rs_tail = if op.form == Form::T16 { ", p, 1, 1, 0;" } else { ", p, 1, 1;" };
    let pad = " ".repeat(17);
    s.push_str(&format!(
        "  CHOREO_WGMMA_DEVICE static void rs(Acc (&d)[{r}], const std::uint32_t (&a)[4], \
         std::uint64_t db, std::uint32_t e, int scale_d) {{\n"
    ));
    s.push_str("#if CHOREO_WGMMA_SM90A\n");
    s.push_str(&format!(
        "    asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{}, 0;\\n\"\n                 \
         \"{ins} {regs}, {}, %{}, %{}, 0{rs_tail}\\n}}\\n\"\n                 : {outs}\n\
         {pad}: \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db), \"r\"(e), \
         \"r\"(scale_d));\n",
        r + 6,
        reg_list(r, r + 4),
        r + 4,
        r + 5
    ));
    s.push_str("#else\n");
    s.push_str("    (void)d, (void)a, (void)db, (void)e, (void)scale_d;\n");
    s.push_str("    detail::sp_unavailable();\n");
    s.push_str("#endif\n  }\n");
    s.push_str("};\n");
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_library_text_for_a_library_n() {
        // For a library N the generator writes what wgmma_gen.py wrote, with its register
        // macros expanded.
        let lib = include_str!("wgmma.cuh");
        for (tag, n) in [
            ("F32F16F16", 64),
            ("F16F16F16", 8),
            ("F32TF32TF32", 16),
            ("S32S8U8", 24),
            ("F16E5M2E4M3", 256),
        ] {
            let ours = specialisation(tag, n).expect("known op");
            let op = op_info(tag).expect("known op");
            let r = n / 2 / op.per;
            let start =
                lib.find(&format!("template <> struct Mma<{tag}, {n}> {{")).expect("in lib");
            let end = start + lib[start..].find("\n};\n").expect("end") + 4;
            let outs: Vec<String> = (0..r).map(|i| format!("\"{}\"(d[{i}])", op.con)).collect();
            let theirs = lib[start..end]
                .replace(&format!("\" CHOREO_WGMMA_REGS_{r} \""), &reg_list(0, r))
                .replace(&format!("CHOREO_WGMMA_OPS_{r}(\"{}\", d)", op.con), &outs.join(", "));
            assert_eq!(ours, theirs, "{tag} {n}");
        }
    }

    #[test]
    fn every_legal_n_has_its_register_count() {
        for n in (8..=256).step_by(8) {
            let f32 = specialisation("F32BF16BF16", n).expect("bf16");
            assert!(f32.contains(&format!("kRegs = {}", n / 2)));
            assert!(f32.contains(&format!("m64n{n}k16.f32.bf16.bf16")));
            let f16 = specialisation("F16E4M3E5M2", n).expect("fp8");
            assert!(f16.contains(&format!("kRegs = {}", n / 4)));
            assert!(f16.contains(&format!("%{}, 0;", n / 4 + 2)));
        }
        assert!(specialisation("F32F16F16", 12).is_none());
        let sp = sparse_specialisation("F32F16F16", 64).expect("sparse f16");
        assert!(sp.contains("wgmma.mma_async.sp.sync.aligned.m64n64k32.f32.f16.f16 {%0,"));
        assert!(sp.contains("%32, %33, %34, 0, p, 1, 1, 0, 0;") && sp.contains("p, %35, 0;"));
        // RS: the 4 A registers after the 32 accumulator ones, then B, the metadata, selector
        // 0, the scale-d predicate (%38) and only imm-trans-b.
        assert!(sp.contains(
            "m64n64k32.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, \
             %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, \
             %30, %31}, {%32, %33, %34, %35}, %36, %37, 0, p, 1, 1, 0;"
        ));
        assert!(sp.contains("setp.ne.b32 p, %38, 0;"));
        let rs = sparse_specialisation("F16F16F16", 8).expect("sparse f16 acc");
        assert!(rs.contains("k32.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, %6, %7, 0, p, 1, 1, 0;"));
        let sp = sparse_specialisation("F16E4M3E4M3", 256).expect("sparse fp8");
        assert!(
            sp.contains("m64n256k64.f16.e4m3.e4m3") && sp.contains("%64, %65, %66, 0, p, 1, 1;")
        );
        // RS of an 8-bit type: no transpose immediate at all.
        assert!(sp.contains("{%64, %65, %66, %67}, %68, %69, 0, p, 1, 1;\\n"));
        assert!(sp.contains("setp.ne.b32 p, %70, 0;"));
        assert!(sparse_specialisation("S32S8S8", 64).is_none());
        assert!(specialisation("X", 8).is_none());
    }

    #[test]
    fn every_instruction_has_the_dense_and_sparse_ones_of_every_n() {
        let all = every_instruction();
        // 16 operations (wgmma_gen.py), 32 N each; sparse for the 3 16-bit and 8 fp8 ones.
        assert_eq!(all.len(), 16 * 32 + 11 * 32);
        for (tag, n) in [("F32F16F16", 40), ("F16E4M3E5M2", 256), ("S32U8S8", 8)] {
            assert!(all.contains(&specialisation(tag, n).expect("dense")), "{tag} {n}");
        }
        for (tag, n) in [("F32BF16BF16", 136), ("F32F16F16", 8)] {
            assert!(all.contains(&sparse_specialisation(tag, n).expect("sparse")), "{tag} {n}");
        }
    }
}
