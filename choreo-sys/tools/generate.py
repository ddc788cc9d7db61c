#!/usr/bin/env python3
"""Regenerate choreo-sys/src/generated.rs from a CUDA toolkit's driver_types.h.

Usage: choreo-sys/tools/generate.py [TOOLKIT_ROOT]   (default: the output of ci/install-cuda)
       choreo-sys/tools/generate.py --device-prop-only DEST TOOLKIT_ROOT

The first form writes src/generated.rs from a CUDA 13 toolkit. The second writes only
`struct cudaDeviceProp` and its layout assertions to DEST: src/generated_cuda12.rs comes from a
CUDA 12 toolkit this way (CUDA 12's struct has another layout, filled by
`cudaGetDeviceProperties_v2`; the enums are CUDA 13's in both builds, see the crate docs).

What is generated, and why it is generated rather than typed by hand:
- every enumerator of `enum cudaError` and `enum cudaDeviceAttr` as associated consts of the
  `cudaError_t` / `cudaDeviceAttr` newtypes (they are long, and a typo in a value is silent);
- `struct cudaDeviceProp`, field by field, plus compile-time assertions of its size, alignment and
  every field offset, measured by compiling a C program against the same header with the host C
  compiler. A layout mismatch then fails the Rust build instead of corrupting memory at run time.

The script needs python3 and a C compiler (`cc`); it is not run by the build.
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CRATE = os.path.dirname(HERE)
REPO = os.path.dirname(CRATE)


def toolkit_root():
    if len(sys.argv) > 1:
        return sys.argv[-1]
    return subprocess.check_output([os.path.join(REPO, "ci", "install-cuda")], text=True).strip()


def block(text, header):
    start = text.index(header + "\n{")
    end = text.index("};", start)
    return text[start + len(header) + 2 : end]


def clean_doc(raw):
    """Turn a Doxygen comment body into rustdoc lines that render and never become doctests."""
    raw = raw.replace("\\deprecated", "**Deprecated.**")
    raw = re.sub(r"\\p\s+(\w+)", r"`\1`", raw)
    raw = re.sub(r"\\ref\s+", "", raw)
    raw = re.sub(r"::(\w+)(\(\))?", r"`\1\2`", raw)
    raw = re.sub(r"(?<![`\w])(__\w+__)", r"`\1`", raw)
    raw = raw.replace("[", "\\[").replace("]", "\\]").replace("<", "&lt;").replace(">", "&gt;")
    raw = re.sub(r"(https?://[^\s)]+)", r"<\1>", raw)
    lines = []
    for line in raw.splitlines():
        line = line.strip().lstrip("*").strip()
        if line.startswith("/"):
            line = line.lstrip("/").strip()
        if line.endswith("*/"):
            line = line[:-2].strip()
        lines.append(line)
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def parse_enum(body):
    """Yield (name, value, doc lines) for each enumerator, docs either before (/** */) or after (/**< */)."""
    items = []
    pending_doc = []
    value = -1
    pos = 0
    token = re.compile(
        r"/\*\*<(?P<after>.*?)\*/|/\*\*(?P<before>.*?)\*/|/\*(?P<plain>.*?)\*/"
        r"|(?P<name>cuda\w+)\s*(?:=\s*(?P<value>-?(?:0x[0-9a-fA-F]+|\d+)))?\s*,?",
        re.S,
    )
    while True:
        m = token.search(body, pos)
        if not m:
            break
        pos = m.end()
        if m.group("after") is not None:
            if items:
                items[-1][2].extend(clean_doc(m.group("after")))
        elif m.group("before") is not None:
            pending_doc = clean_doc(m.group("before"))
        elif m.group("plain") is not None:
            pass
        else:
            value = int(m.group("value"), 0) if m.group("value") else value + 1
            items.append((m.group("name"), value, pending_doc))
            pending_doc = []
    return items


C_TO_RUST = {
    "char": "c_char",
    "int": "c_int",
    "unsigned int": "c_uint",
    "size_t": "usize",
    "cudaUUID_t": "cudaUUID_t",
}


def parse_struct(body):
    fields = []
    pat = re.compile(
        r"^\s*(unsigned int|char|int|size_t|cudaUUID_t)\s+(\w+)(?:\[(\d+)\])?;\s*(?:/\*\*<(.*?)\*/)?\s*$"
    )
    for line in body.splitlines():
        if not line.strip():
            continue
        m = pat.match(line)
        if not m:
            sys.exit(f"generate.py: cannot parse cudaDeviceProp line: {line!r}")
        ctype, name, count, doc = m.groups()
        fields.append((ctype, name, int(count) if count else None, clean_doc(doc or "")))
    return fields


def measure_layout(root, fields):
    src = ["#include <stdio.h>", "#include <stddef.h>", "#include <driver_types.h>", "int main(void) {"]
    src.append('printf("size %zu\\n", sizeof(struct cudaDeviceProp));')
    src.append('printf("align %zu\\n", _Alignof(struct cudaDeviceProp));')
    for _, name, _, _ in fields:
        src.append(f'printf("{name} %zu\\n", offsetof(struct cudaDeviceProp, {name}));')
    src.append('printf("uuid_size %zu\\n", sizeof(cudaUUID_t));')
    src.append("return 0; }")
    with tempfile.TemporaryDirectory() as tmp:
        c = os.path.join(tmp, "layout.c")
        exe = os.path.join(tmp, "layout")
        with open(c, "w") as f:
            f.write("\n".join(src))
        subprocess.check_call(["cc", "-std=c11", "-I", os.path.join(root, "include"), c, "-o", exe])
        out = subprocess.check_output([exe], text=True)
    return dict((k, int(v)) for k, v in (line.split() for line in out.splitlines()))


def doc(lines, indent):
    return "".join(f"{indent}///{(' ' + l) if l else ''}\n" for l in lines)


def main():
    root = toolkit_root()
    with open(os.path.join(root, "include", "driver_types.h")) as f:
        text = f.read()
    with open(os.path.join(root, "include", "cuda_runtime_api.h")) as f:
        version = re.search(r"#define CUDART_VERSION\s+(\d+)", f.read()).group(1)

    errors = parse_enum(block(text, "enum __device_builtin__ cudaError"))
    attrs = parse_enum(block(text, "enum __device_builtin__ cudaDeviceAttr"))
    fields = parse_struct(block(text, "struct __device_builtin__ cudaDeviceProp"))
    layout = measure_layout(root, fields)

    out = []
    w = out.append
    w("// @generated by choreo-sys/tools/generate.py from the CUDA " + version + " headers\n")
    w("// (driver_types.h). Do not edit by hand: rerun the script when the pinned toolkit changes.\n\n")
    if len(sys.argv) > 1 and sys.argv[1] == "--device-prop-only":
        w("use core::ffi::{c_char, c_int, c_uint};\n\n")
        w("use crate::cudaUUID_t;\n\n")
        device_prop(w, version, fields, layout)
        write(os.path.join(os.getcwd(), sys.argv[2]), out)
        return
    w("use core::ffi::{CStr, c_char, c_int, c_uint};\n\n")
    w("use crate::{cudaDeviceAttr, cudaError_t, cudaUUID_t};\n\n")
    w(f"/// `CUDART_VERSION` of the headers these bindings were generated from.\n")
    w(f"pub const CUDART_VERSION: c_int = {version};\n\n")

    w("impl cudaError_t {\n")
    for name, value, d in errors:
        w(doc(d or [f"`{name}`."], "    "))
        w(f"    pub const {name}: Self = Self({value});\n")
    w("\n    /// The enumerator name of this code in `driver_types.h`, or `None` for a value that the\n")
    w("    /// header does not define. Works without the CUDA runtime (unlike `cudaGetErrorName`).\n")
    w("    pub const fn name(self) -> Option<&'static str> {\n        match self.0 {\n")
    seen = set()
    for name, value, _ in errors:
        if value in seen:
            continue
        seen.add(value)
        w(f'            {value} => Some("{name}"),\n')
    w("            _ => None,\n        }\n    }\n}\n\n")

    w("/// [`cudaError_t::name`] as a static C string (for the stub `cudaGetErrorName`).\n")
    w("pub(crate) const fn error_name_cstr(code: i32) -> Option<&'static CStr> {\n    match code {\n")
    seen = set()
    for name, value, _ in errors:
        if value in seen:
            continue
        seen.add(value)
        w(f'        {value} => Some(c"{name}"),\n')
    w("        _ => None,\n    }\n}\n\n")

    w("/// Every enumerator of `enum cudaError`, in header order (for tests and tools).\n")
    w(f"pub const ALL_ERRORS: [cudaError_t; {len(errors)}] = [\n")
    for name, _, _ in errors:
        w(f"    cudaError_t::{name},\n")
    w("];\n\n")

    w("/// Every enumerator of `enum cudaDeviceAttr`, in header order (for tests and tools).\n")
    w(f"pub const ALL_DEVICE_ATTRS: [cudaDeviceAttr; {len(attrs)}] = [\n")
    for name, _, _ in attrs:
        w(f"    cudaDeviceAttr::{name},\n")
    w("];\n\n")

    w("impl cudaDeviceAttr {\n")
    for name, value, d in attrs:
        w(doc(d or [f"`{name}`."], "    "))
        w(f"    pub const {name}: Self = Self({value});\n")
    w("}\n\n")

    device_prop(w, version, fields, layout)
    write(os.path.join(CRATE, "src", "generated.rs"), out)
    print(f"{len(errors)} errors, {len(attrs)} attributes, {len(fields)} fields", file=sys.stderr)


def device_prop(w, version, fields, layout):
    w("/// CUDA device properties (`struct cudaDeviceProp` of `driver_types.h`), filled by\n")
    w("/// [`cudaGetDeviceProperties`](crate::cudaGetDeviceProperties).\n///\n")
    w(f"/// Layout checked at compile time against the C compiler's layout of the CUDA {version} header\n")
    w(f"/// (size {layout['size']} bytes, alignment {layout['align']}).\n")
    w("#[repr(C)]\n#[derive(Copy, Clone)]\npub struct cudaDeviceProp {\n")
    for ctype, name, count, d in fields:
        rty = C_TO_RUST[ctype]
        if count:
            rty = f"[{rty}; {count}]"
        w(doc(d or [f"`{name}`."], "    "))
        w(f"    pub {name}: {rty},\n")
    w("}\n\n")

    w("// Layout of `struct cudaDeviceProp` as measured with the C compiler (see the module docs).\n")
    w("const _: () = {\n    use core::mem::{align_of, offset_of, size_of};\n")
    w(f"    assert!(size_of::<cudaUUID_t>() == {layout['uuid_size']});\n")
    w(f"    assert!(size_of::<cudaDeviceProp>() == {layout['size']});\n")
    w(f"    assert!(align_of::<cudaDeviceProp>() == {layout['align']});\n")
    for _, name, _, _ in fields:
        w(f"    assert!(offset_of!(cudaDeviceProp, {name}) == {layout[name]});\n")
    w("};\n")


def write(dest, out):
    with open(dest, "w") as f:
        f.write("".join(out))
    # Format like the rest of the crate, so `cargo fmt` leaves the generated file alone.
    subprocess.check_call(["rustfmt", "--edition", "2024", "--config-path", REPO, dest])
    print(f"wrote {dest}", file=sys.stderr)


if __name__ == "__main__":
    main()
