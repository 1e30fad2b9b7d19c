//! Model files for rinfer: GGUF (read and write) and safetensors with Hugging Face
//! `config.json`, memory-mapped, with zero-copy tensor views and tensor type descriptors.
//!
//! This crate does no math: it turns bytes into validated views and back. Every input is treated
//! as hostile; nothing here panics or allocates in proportion to a count a file claims before
//! checking that count against the file's size.

pub mod dtype;
mod error;
pub mod gguf;
pub mod hf_config;
mod mmap;
pub mod safetensors;

pub use dtype::{GgmlType, QK_K};
pub use error::GgufError;
pub use hf_config::{HfConfig, HfError, HfModelDir};
pub use safetensors::{SafetensorView, SafetensorsError, SafetensorsModel};
