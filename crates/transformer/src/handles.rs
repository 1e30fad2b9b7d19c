//! The weight handles of a tree and what a [`Mapper`] sees of each weight.
//!
//! The tree is generic over the weight handle ([`Handles`]): an architecture declares it with
//! [`Presence`] handles (which tensors a file must or may hold), the loader maps that to host
//! matrices, and a GPU maps the host tree to device addresses, each with one
//! [`Transformer::map`](crate::Transformer::map). A stage therefore always has the weights it
//! reads; no executor checks.
//! `map` hands every weight's [`Tensor`] (its name and the shape the dimensions imply) to the
//! [`Mapper`], so no backend spells a tensor name or recomputes a shape. [`Linear`] and
//! [`NormWeights`] are the weight groups that stages and the head share.

use std::fmt::Debug;

use crate::params::Norm;
use crate::tensor::{Role, TensorName};

/// The weight handles of one use of the tree: what a matrix, a vector and a layer's stacked
/// experts are (a presence for a declaration, host data for the CPU, addresses for a GPU).
pub trait Handles {
    /// A 2-D weight matrix `[rows, cols]` in its stored block format.
    type Matrix: Clone + Debug;
    /// An f32 vector: a norm's scale or bias, a projection's bias, sink logits, RoPE factors.
    type Vector: Clone + Debug;
    /// One projection of every expert of a layer, with their biases if they have them.
    type Experts: Clone + Debug;
}

/// No weights: the tree's shape alone.
impl Handles for () {
    type Matrix = ();
    type Vector = ();
    type Experts = ();
}

/// Whether a tensor a declaration names must be in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    /// The file must have it.
    Required,
    /// The file may have it (llama.cpp's `TENSOR_NOT_REQUIRED`).
    Optional,
}

/// An architecture's declaration: which tensors a file holds. A field that is `None` names a
/// tensor the architecture does not have; the handle of a stacked-experts field says whether
/// the experts have biases.
impl Handles for Presence {
    type Matrix = Presence;
    type Vector = Presence;
    type Experts = Option<Presence>;
}

/// The shape of a weight as the dimensions imply it (`rows` output features of `cols` inputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `[len]`.
    Vector(usize),
    /// `[rows, cols]`.
    Matrix {
        /// Output features.
        rows: usize,
        /// Input features.
        cols: usize,
    },
    /// `[any, cols]`: a table whose rows the file decides (learned positions).
    Table {
        /// Width of a row.
        cols: usize,
    },
    /// A depthwise convolution kernel, f32 `[channels, taps]` (GGUF `[taps, channels]`): a
    /// [`Handles::Vector`] of `channels · taps` values, each channel's taps together.
    Filter {
        /// Channels.
        channels: usize,
        /// Taps per channel.
        taps: usize,
    },
    /// `count` matrices `[rows, cols]`, one per expert, stacked.
    Experts {
        /// Experts.
        count: usize,
        /// Output features of one expert.
        rows: usize,
        /// Input features.
        cols: usize,
    },
}

/// One weight of the tree as a [`Mapper`] sees it: its name and shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tensor {
    /// The tensor's name (a bias is named by [`TensorName::bias`] of its weight's name).
    pub name: TensorName,
    /// Its shape.
    pub shape: Shape,
}

/// Turns each weight handle of a tree of `A` into one of `B`
/// ([`Transformer::map`](crate::Transformer::map)); the handles are borrowed from the tree for `'t`, so `B`'s may borrow from them.
pub trait Mapper<'t, A: Handles, B: Handles> {
    /// What a failed weight reports.
    type Error;

    /// A matrix the tree has.
    fn matrix(&mut self, t: &Tensor, m: &'t A::Matrix) -> Result<B::Matrix, Self::Error>;

    /// A vector the tree has.
    fn vector(&mut self, t: &Tensor, v: &'t A::Vector) -> Result<B::Vector, Self::Error>;

    /// A layer's stacked experts of one projection (`t.shape` is [`Shape::Experts`]; their
    /// biases are named by `t.name.bias()`).
    fn experts(&mut self, t: &Tensor, e: &'t A::Experts) -> Result<B::Experts, Self::Error>;

    /// A matrix in an optional field: mapped, or dropped when the mapper returns `None`.
    fn optional_matrix(
        &mut self,
        t: &Tensor,
        m: &'t A::Matrix,
    ) -> Result<Option<B::Matrix>, Self::Error> {
        self.matrix(t, m).map(Some)
    }

    /// A vector in an optional field: mapped, or dropped when the mapper returns `None`.
    fn optional_vector(
        &mut self,
        t: &Tensor,
        v: &'t A::Vector,
    ) -> Result<Option<B::Vector>, Self::Error> {
        self.vector(t, v).map(Some)
    }
}

/// A linear layer `y = W·x + b`.
#[derive(Clone, Debug)]
pub struct Linear<H: Handles> {
    /// `[out, in]`.
    pub weight: H::Matrix,
    /// `[out]`.
    pub bias: Option<H::Vector>,
}

/// A normalisation with its weights.
#[derive(Clone, Debug)]
pub struct NormWeights<H: Handles> {
    /// The tensor that holds it (gpt-oss keeps its FFN norm in `post_attention_norm`).
    pub role: Role,
    /// Kind and epsilon.
    pub params: Norm,
    /// Scale, `[width]`.
    pub weight: H::Vector,
    /// Bias, `[width]` (LayerNorm).
    pub bias: Option<H::Vector>,
}
