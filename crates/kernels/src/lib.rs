//! CPU kernels for rinfer: quantized block formats, dequantization, fused quantized dot
//! products, the parallel matvec (decode) and matmul (prefill) drivers, and the elementwise
//! operations transformers need.
//!
//! Every kernel has one scalar reference; SIMD variants are chosen once at runtime from CPU
//! detection and tested against it. This crate does no file I/O and never allocates in its
//! inner loops.
