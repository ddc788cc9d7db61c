//! C identifiers and symbols of the generated code: one unique, safe identifier per parameter,
//! symbol and local of a function, and the names of every function the backends define for it.

use crate::hir;
use crate::target::Target;
use std::collections::HashSet;

/// C++ identifiers, indexed like the function's tables.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Names {
    /// One per parameter.
    pub params: Vec<String>,
    /// One per symbolic dimension.
    pub syms: Vec<String>,
    /// One per local.
    pub locals: Vec<String>,
}

impl Names {
    /// The identifier of a parameter.
    pub fn param(&self, id: hir::ParamId) -> &str {
        self.params.get(id.index()).map_or("__choreo_bad_param", String::as_str)
    }

    /// The identifier of a symbolic dimension.
    pub fn sym(&self, id: hir::SymId) -> &str {
        self.syms.get(id.index()).map_or("__choreo_bad_sym", String::as_str)
    }

    /// The identifier of a local.
    pub fn local(&self, id: hir::VarId) -> &str {
        self.locals.get(id.index()).map_or("__choreo_bad_local", String::as_str)
    }

    /// The identifier of extent `dim` of spanned parameter `id` (`x__e0`, …).
    pub fn extent(&self, id: hir::ParamId, dim: u32) -> String {
        format!("{}__e{dim}", self.param(id))
    }
}

/// Where a file's external symbols live (design §3): the parts that its `extern "C"` entries
/// and its renamed host `main` are mangled with, so that two files, libraries or crates linked
/// into one program may define `__co__` functions of the same name. `choreo-build` uses
/// (package name, package version, library name, module name); a standalone compilation the
/// file stem. Every other symbol of a generated file has internal linkage (`static`, an
/// anonymous namespace) or is an identical inline definition (the support library).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SymbolScope {
    parts: Vec<String>,
}

impl SymbolScope {
    /// A scope of `parts`, outermost first; each part is made a C identifier fragment
    /// (characters other than ASCII letters, digits and `_` become `_`).
    pub fn new<I, S>(parts: I) -> SymbolScope
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let parts = parts
            .into_iter()
            .map(|p| {
                p.as_ref()
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
                    .collect()
            })
            .collect();
        SymbolScope { parts }
    }

    /// The scope of a file compiled on its own: its stem (`kernels/scale.co` → `scale`).
    pub fn for_file_name(name: &str) -> SymbolScope {
        let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
        let stem = base.split('.').next().unwrap_or(base);
        SymbolScope::new([stem])
    }

    /// The parts, length-prefixed and concatenated (`["seed", "foo"]` → `4seed3foo`): an
    /// unambiguous C identifier fragment (two different part lists never give the same text).
    fn mangled(&self, last: Option<&str>) -> String {
        let mut out = String::new();
        for part in self.parts.iter().map(String::as_str).chain(last) {
            out.push_str(&part.len().to_string());
            out.push_str(part);
        }
        out
    }

    /// The `extern "C"` entry symbol of the `__co__` function `function` in this scope, for
    /// `target`: the CPU and CUDA builds of one file are linked into one program, so their
    /// entries differ (`__choreo_rs_…` / `__choreo_cpu_rs_…`).
    pub fn entry_symbol(&self, function: &str, target: Target) -> String {
        format!("__choreo_{}rs_{}", backend_prefix(target), self.mangled(Some(function)))
    }

    /// The name a host `main` definition gets in a library build for `target` (unique per
    /// scope and backend, so the files of one program never define it twice).
    pub fn renamed_main(&self, target: Target) -> String {
        format!("__choreo_unused_{}main_{}", backend_prefix(target), self.mangled(None))
    }
}

/// The symbols the backends define for one `__co__` function `f` (runtime-abi §4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbols {
    /// The C++ wrapper with the upstream signature: the function's own name (internal linkage).
    pub wrapper: String,
    /// The entry checks: `__choreo_check_<f>`.
    pub check: String,
    /// The body on device pointers: `__choreo_core_<f>`.
    pub core: String,
    /// The `extern "C"` entry that the Rust wrapper calls, the one external symbol of the
    /// function: `__choreo_rs_<mangled scope and f>` (e.g. `__choreo_rs_4seed3foo`).
    pub entry: String,
    /// One per kernel, by [`hir::KernelId`]: `__choreo_device_<f>`, with the kernel's number
    /// appended when the function has several.
    pub kernels: Vec<String>,
}

impl Symbols {
    /// The symbols of `f` in `scope`.
    pub fn of(f: &hir::Function, scope: &SymbolScope, target: Target) -> Symbols {
        let name = &f.name;
        let kernels = (0..f.kernel_count)
            .map(|k| {
                if f.kernel_count > 1 {
                    format!("__choreo_device_{name}{k}")
                } else {
                    format!("__choreo_device_{name}")
                }
            })
            .collect();
        Symbols {
            wrapper: name.clone(),
            check: format!("__choreo_check_{name}"),
            core: format!("__choreo_core_{name}"),
            entry: scope.entry_symbol(name, target),
            kernels,
        }
    }
}

/// What tells the symbols of the two backends apart: nothing for CUDA (the names of earlier
/// versions), `cpu_` for the CPU.
fn backend_prefix(target: Target) -> &'static str {
    match target {
        Target::Cuda(_) => "",
        Target::Cpu => "cpu_",
    }
}

/// C++ keywords and the unqualified names generated code refers to; a user name equal to one
/// of these gets a trailing `_`.
const RESERVED: &[&str] = &[
    // C++ keywords and alternative tokens
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char8_t",
    "char16_t",
    "char32_t",
    "class",
    "compl",
    "concept",
    "const",
    "consteval",
    "constexpr",
    "constinit",
    "const_cast",
    "continue",
    "co_await",
    "co_return",
    "co_yield",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "final",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "import",
    "inline",
    "int",
    "long",
    "module",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "override",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "requires",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
    // names used unqualified by generated code, and common macros
    "choreo",
    "std",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "dim3",
    "uint3",
    "size_t",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "printf",
    "main",
    "NULL",
    "INFINITY",
    "NAN",
    "HUGE_VAL",
    "HUGE_VALF",
    "assert",
    "cudaStream_t",
    "cudaError_t",
    "cudaSuccess",
    "cudaLaunchConfig_t",
    "EOF",
    "errno",
];

/// Whether `name` can be the name of the generated C++ function (and the suffix of its kernel
/// and entry names).
pub(crate) fn is_valid_function_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !RESERVED.contains(&name)
        && !name.starts_with("__choreo")
}

/// A user name made safe: ASCII identifier characters only, no `__` (all generated names
/// contain `__`), not reserved, no leading `_` followed by an upper-case letter.
fn sanitize(name: &str) -> String {
    let mut out: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'v');
    }
    while out.contains("__") {
        out = out.replace("__", "_");
    }
    if out.starts_with('_') {
        out.insert(0, 'u');
    }
    if RESERVED.contains(&out.as_str()) || out.ends_with('_') {
        out.push('v');
    }
    out
}

/// Gives every parameter, symbol and local of `f` a unique C++ identifier: parameters keep
/// their names where possible, then symbols, then locals in declaration order; a repeated name
/// gets `_2`, `_3`, ….
pub(crate) fn assign_names(f: &hir::Function) -> Names {
    let mut taken: HashSet<String> = HashSet::new();
    let mut unique = |name: &str| -> String {
        let base = sanitize(name);
        let mut candidate = base.clone();
        let mut n = 2;
        while taken.contains(&candidate) {
            candidate = format!("{base}_{n}");
            n += 1;
        }
        taken.insert(candidate.clone());
        candidate
    };
    let params = f.params.iter().map(|p| unique(&p.name)).collect();
    let syms = f.sym_dims.iter().map(|s| unique(&s.name)).collect();
    let locals = f.locals.iter().map(|l| unique(&l.name)).collect();
    Names { params, syms, locals }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_keeps_plain_names_and_fixes_dangerous_ones() {
        assert_eq!(sanitize("acc"), "acc");
        assert_eq!(sanitize("new"), "newv");
        assert_eq!(sanitize("a__b"), "a_b");
        assert_eq!(sanitize("_Foo"), "u_Foo");
        assert_eq!(sanitize("x_"), "x_v");
        assert_eq!(sanitize("threadIdx"), "threadIdxv");
        assert!(!sanitize("__choreo_frame").contains("__"));
    }

    #[test]
    fn scopes_mangle_unambiguously() {
        let scope = SymbolScope::new(["my-app", "0.1.0", "kernels", "seed"]);
        assert_eq!(scope.mangled(Some("foo")), "6my_app50_1_07kernels4seed3foo");
        // Different splits of the same characters stay apart.
        assert_ne!(
            SymbolScope::new(["ab", "c"]).mangled(None),
            SymbolScope::new(["a", "bc"]).mangled(None)
        );
        assert_eq!(
            SymbolScope::for_file_name("k/scale.co").renamed_main(Target::default()),
            "__choreo_unused_main_5scale"
        );
        assert_eq!(SymbolScope::for_file_name("a.b.co"), SymbolScope::new(["a"]));
    }

    #[test]
    fn function_names_must_be_cpp_identifiers() {
        assert!(is_valid_function_name("scale"));
        assert!(!is_valid_function_name("delete"));
        assert!(!is_valid_function_name("__choreo_core"));
        assert!(!is_valid_function_name("main"));
    }
}
