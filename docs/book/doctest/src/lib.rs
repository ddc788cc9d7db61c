//! The Rust examples of the user guide (`docs/book/src/*.md`), compiled and run as doctests:
//! `cargo test -p choreo-book-doctest --doc`. The chapters are included as the docs of the
//! modules below (copies made by `build.rs`, see there for the blocks that are only shown);
//! the kernels that the examples call are this crate's, one module per `.co` file:
//! `saxpy`, `streams_async`, `returns`, `inout`, `launch_async_two_streams`.
//!
//! The examples reach them with hidden lines (`# use choreo_book_doctest::…;`), which mdBook
//! does not show either.

choreo::include_kernels!();

/// Includes one chapter of the guide (its copy in `OUT_DIR/book/`) as a module's docs.
macro_rules! chapter {
    ($module:ident, $file:literal) => {
        #[cfg(doctest)]
        #[doc = include_str!(concat!(env!("OUT_DIR"), "/book/", $file))]
        mod $module {}
    };
}

chapter!(introduction, "introduction.md");
chapter!(getting_started, "getting-started.md");
chapter!(mapping, "mapping.md");
chapter!(streams, "streams.md");
chapter!(errors, "errors.md");
chapter!(build_config, "build-config.md");
chapter!(cpu_backend, "cpu-backend.md");
chapter!(interop, "interop.md");
chapter!(language, "language.md");
chapter!(tma, "tma.md");
chapter!(gemm, "gemm.md");
