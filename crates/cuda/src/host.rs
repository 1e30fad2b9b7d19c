//! The model as the GPU backend receives it: the [`Transformer`] the forward pass runs (the
//! tree the CPU forward pass walks too) with borrowed host views of every weight, in its stored
//! block format ([`HostView`] handles).
//!
//! `rinfer-model` sits above this crate, so it maps its own tree to these handles; the upload
//! maps this tree in turn to device addresses.

use std::borrow::Cow;
use std::marker::PhantomData;

use rinfer_formats::GgmlType;
use rinfer_transformer::{Handles, Transformer};

/// A weight matrix `[rows, cols]`, each row stored in `ty`'s blocks.
#[derive(Clone, Debug)]
pub struct HostMatrix<'a> {
    /// Block format.
    pub ty: GgmlType,
    /// Output features.
    pub rows: usize,
    /// Input features.
    pub cols: usize,
    /// All rows' bytes.
    pub data: &'a [u8],
}

/// One projection of every expert: `experts` matrices of `[rows, cols]` stacked, expert `e`'s
/// bytes at `e * data.len() / experts` (borrowed when the file stores them so, one copy
/// otherwise).
#[derive(Clone, Debug)]
pub struct HostStacked<'a> {
    /// Block format.
    pub ty: GgmlType,
    /// How many experts.
    pub experts: usize,
    /// Output features of one expert.
    pub rows: usize,
    /// Input features.
    pub cols: usize,
    /// Every expert's rows, expert after expert.
    pub data: Cow<'a, [u8]>,
    /// `[experts, rows]`.
    pub bias: Option<Cow<'a, [f32]>>,
}

/// Host views of the weights: matrices and stacked experts in their stored formats, f32
/// vectors, all borrowed from the host model for `'a`.
#[derive(Clone, Copy, Debug)]
pub struct HostView<'a>(PhantomData<&'a ()>);

impl<'a> Handles for HostView<'a> {
    type Matrix = HostMatrix<'a>;
    type Vector = &'a [f32];
    type Experts = HostStacked<'a>;
}

/// A whole model, borrowed from the host.
pub type HostModel<'a> = Transformer<HostView<'a>>;
