//! The transformer as data, shared by every backend: what a decoder-only model computes, each
//! layer a list of stages with their parameters and the weights they read, generic over the
//! weight handle, and the roles and names of the tensors that hold those weights.
//!
//! This crate does no arithmetic and no I/O, and knows no backend: an architecture declares a
//! tree here, the loader fills it with host matrices, and each executor (the CPU forward pass,
//! the CUDA step builder) walks it; a GPU maps it once to device addresses.

mod block;
mod handles;
mod params;
mod place;
mod stage;
mod tensor;
mod tree;

pub use block::Block;
pub use handles::{Handles, Linear, Mapper, NormWeights, Presence, Shape, Tensor};
pub use params::{
    AttentionParams, DeltaNet, Experts, Ffn, Gating, Heads, Mla, Norm, NormKind, Recurrence,
    RopeParams, RopeStyle, Router, ShortConv, Yarn,
};
pub use stage::{DeltaNetWeights, FfnUp, GateUpDown, LatentQ, Qkv, Stage};
pub use tensor::{Part, Role, TensorName};
pub use tree::{Classifier, PerLayerInputs, Transformer};
