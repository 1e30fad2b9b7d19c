//! Transformer inference for rinfer: architectures described by data, neutral weights loaded
//! from GGUF or safetensors, the forward pass, KV caches, sampling, and the engine that
//! generates (set up once for every front end by [`EngineSetup`]). The tokenizer and chat
//! templates are `rinfer-text`'s, re-exported here.
//!
//! This crate reads model files only through `rinfer-formats`, and holds no SIMD code (that
//! lives in `rinfer-kernels`).

pub mod arch;
mod block;
pub mod chat_template;
mod compute;
pub mod config;
pub mod convert;
pub mod engine;
mod error;
mod forward;
pub mod gpu;
mod hf_checkpoint;
pub mod imatrix;
mod kv_blocks;
pub mod kv_cache;
mod latent;
mod limits;
mod load;
mod loaded;
mod mixer;
mod moe;
pub mod observe;
pub mod quantize;
mod rows;
pub mod sampling;
pub mod scratch;
mod tensor_store;
pub mod weights;

pub use config::ModelConfig;
pub use engine::{
    BLOCK_TOKENS, DEFAULT_CONTEXT, Device, DeviceReport, DeviceRequest, Engine, EngineOptions,
    EngineSettings, EngineSetup, Event, FinishReason, Generation, KvType, NvrtcSearch,
    PrefixCacheStats, Request, SeqId, SetupError, Speculation, SpeculationStats, StopMatcher,
    Timings, TokenLogprob,
};
pub use error::ModelError;
pub use forward::{Logits, Model, SeqBatch};
pub use kv_blocks::KvPoolStats;
pub use kv_cache::{KvCache, StateSnapshot};
pub use limits::{MAX_CONTEXT, MemoryPlan, available_memory_bytes};
pub use loaded::LoadedModel;
pub use rinfer_text::tokenizer;
pub use rinfer_text::{StreamDecoder, Tokenizer, TokenizerError};
pub use sampling::{InvalidSamplingParam, Sampler, SamplingParams};
pub use scratch::Scratch;
