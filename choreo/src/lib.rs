//! Safe runtime for Choreo kernels.
