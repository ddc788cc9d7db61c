//! Raw FFI bindings to the CUDA runtime API subset used by choreo.
