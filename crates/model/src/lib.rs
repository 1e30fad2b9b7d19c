//! Transformer inference for rinfer: architectures described by data, neutral weights loaded
//! from GGUF or safetensors, the forward pass, KV caches, tokenizer, sampling and generation.
//!
//! Nothing is implemented here yet. This crate must never read files except through
//! `rinfer-formats`, nor contain SIMD code (that lives in `rinfer-kernels`).
