//! The transformer as data, shared by every backend: what a decoder-only model computes, each
//! layer a list of stages with their parameters and the weights they read, generic over the
//! weight handle, and the roles and names of the tensors that hold those weights.
//!
//! This crate does no arithmetic and no I/O, and knows no backend: an architecture declares a
//! tree here, the loader fills it with host matrices, and each executor (the CPU forward pass,
//! the CUDA step builder) walks it; a GPU maps it once to device addresses.

mod block;
mod params;
mod tensor;

pub use block::{
    Block, FfnUp, Handles, Linear, Mapper, NormWeights, PerLayerInputs, Presence, Qkv, Shape,
    Stage, Tensor, Transformer,
};
pub use params::{
    AttentionParams, Experts, Ffn, Gating, Heads, Norm, NormKind, RopeParams, RopeStyle, Router,
    Yarn,
};
pub use tensor::{Part, Role, TensorName};
