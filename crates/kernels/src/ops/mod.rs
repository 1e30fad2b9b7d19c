//! Elementwise and row-wise operations of transformer blocks, written to follow ggml's CPU
//! arithmetic (accumulation precision, evaluation order) so logits can be compared closely.
//!
//! Slices passed together must have equal lengths; the functions panic otherwise (a caller bug,
//! not a data error).

mod activation;
mod attention;
mod delta_rule;
mod elementwise;
mod kv_row;
mod norm;
mod recurrent;
mod rope;
mod routing;
mod vector;

pub use activation::{Activation, apply, swiglu_clamped_inplace};
pub use attention::{
    AttentionParams, AttentionShape, KEY_BLOCK, KeyValueRows, QUERY_TILE, attend, attention,
};
pub use delta_rule::{DeltaRun, DeltaToken, delta_rule};
pub use elementwise::{add_inplace, scale, softcap, softmax_inplace, tanh_inplace};
pub use kv_row::{KvRow, KvRowMut, KvRows, KvType, UnknownKvType};
pub use norm::{layer_norm, layer_norm_inplace, rms_norm, rms_norm_inplace, rms_normalize_inplace};
pub use recurrent::{causal_conv, l2_norm_inplace, sigmoid, softplus};
pub use rope::{RopeParams, RopeStyle, Yarn, rope};
pub use routing::{Gating, Router, route};
pub use vector::VectorKernels;

#[cfg(test)]
mod tests;
