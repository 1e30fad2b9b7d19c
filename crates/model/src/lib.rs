//! Transformer inference for rinfer: architectures described by data, neutral weights loaded
//! from GGUF or safetensors, the forward pass, KV caches, tokenizer, sampling and generation.
//!
//! This crate reads model files only through `rinfer-formats` (a tokenizer.json aside), and holds no SIMD code (that
//! lives in `rinfer-kernels`).

pub mod arch;
mod block;
pub mod chat_template;
mod compute;
pub mod config;
mod error;
mod forward;
pub mod generate;
pub mod gpu;
mod hf_checkpoint;
pub mod kv_cache;
mod load;
mod loaded;
pub mod sampling;
pub mod scratch;
mod tensor_store;
pub mod tokenizer;
pub mod weights;

pub use config::ModelConfig;
pub use error::ModelError;
pub use forward::{Logits, Model, SeqBatch};
pub use generate::{FinishReason, GenerateRequest, Generation, StopMatcher, Timings, generate};
pub use kv_cache::KvCache;
pub use loaded::LoadedModel;
pub use sampling::{Sampler, SamplingParams};
pub use scratch::Scratch;
pub use tokenizer::{StreamDecoder, Tokenizer, TokenizerError};
