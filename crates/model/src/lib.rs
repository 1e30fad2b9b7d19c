//! Transformer inference for rinfer: architectures described by data, neutral weights loaded
//! from GGUF or safetensors, the forward pass, KV caches, tokenizer, sampling and generation.
//!
//! This crate reads model files only through `rinfer-formats` (a tokenizer.json aside), and holds no SIMD code (that
//! lives in `rinfer-kernels`).

pub mod arch;
pub mod chat_template;
mod compute;
pub mod config;
mod error;
mod forward;
pub mod generate;
pub mod gpu;
pub mod kv_cache;
mod load_gguf;
mod loaded;
pub mod sampling;
pub mod scratch;
pub mod tokenizer;
pub mod weights;

pub use config::ModelConfig;
pub use error::ModelError;
pub use forward::{Logits, Model};
pub use generate::{FinishReason, GenerateRequest, Generation, Timings, generate};
pub use kv_cache::KvCache;
pub use loaded::LoadedModel;
pub use sampling::{Sampler, SamplingParams};
pub use scratch::Scratch;
pub use tokenizer::{StreamDecoder, Tokenizer, TokenizerError};
