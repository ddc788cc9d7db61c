//! Block-scaled MMA (filled in below).
