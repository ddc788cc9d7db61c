//! Builds the kernels that the guide's Rust examples call and writes a copy of each chapter of
//! the guide into `OUT_DIR/book/` for `src/lib.rs` to include as doc comments, so that every
//! ```` ```rust ```` block of the guide is a doctest.
//!
//! A block whose whole body is an mdBook `{{#include FILE.rs…}}` shows a part of a file that the
//! workspace compiles (and tests) itself — the example app's `build.rs` and `main.rs`, a test of
//! the cudarc feature: its copy is marked `ignore`, since rustdoc does not expand mdBook
//! includes. Every other Rust block must compile (and run, unless it says `no_run`).

use std::path::Path;

/// The `.co` files whose wrappers the examples call, by module name.
const KERNELS: &[&str] = &[
    "../../../example-app/kernels/saxpy.co",
    "../src/examples/streams_async.co",
    "../../../choreo-compiler/tests/fixtures/rust/returns.co",
    "../../../choreo-compiler/tests/fixtures/rust/inout.co",
    "../../../choreo-compiler/tests/fixtures/codegen/launch_async_two_streams.co",
];

fn main() {
    let mut builder = choreo_build::Builder::new();
    for file in KERNELS {
        builder.file(file);
    }
    if let Err(error) = builder.build("kernels") {
        println!("cargo::error={error}");
        return;
    }
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let book = Path::new(&out).join("book");
    std::fs::create_dir_all(&book).expect("OUT_DIR is writable");
    let src = Path::new("../src");
    println!("cargo::rerun-if-changed=../src");
    let mut chapters: Vec<_> = std::fs::read_dir(src)
        .expect("docs/book/src")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|x| x == "md"))
        .collect();
    chapters.sort();
    for chapter in chapters {
        println!("cargo::rerun-if-changed={}", chapter.display());
        let text = std::fs::read_to_string(&chapter).expect("a readable chapter");
        let name = chapter.file_name().expect("a file name");
        std::fs::write(book.join(name), mark_includes(&text)).expect("OUT_DIR is writable");
    }
}

/// `text` with the info string of every Rust block that only includes a `.rs` file set to
/// `rust,ignore`.
fn mark_includes(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let is_rust_fence = line.starts_with("```rust");
        let includes_rs = lines.get(i + 1).is_some_and(|body| {
            let body = body.trim();
            body.starts_with("{{#include ") && body.contains(".rs") && body.ends_with("}}")
        });
        let closes = lines.get(i + 2).is_some_and(|end| end.trim() == "```");
        if is_rust_fence && includes_rs && closes {
            out.push_str("```rust,ignore\n");
        } else {
            out.push_str(line);
            out.push('\n');
        }
        i += 1;
    }
    out
}
