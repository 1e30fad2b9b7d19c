//! Where [`Transformer::map`](crate::Transformer::map) is in the tree: the widths the model's
//! dimensions give, the layer (none for the embeddings and the head) and that layer's heads,
//! and the mapping of each kind of weight there (a vector, a matrix with its bias, a norm,
//! stacked experts) with its [`TensorName`] and the [`Shape`] those widths imply.

use crate::handles::{Handles, Linear, Mapper, NormWeights, Shape, Tensor};
use crate::params::{Heads, Mla};
use crate::tensor::{Role, TensorName};

/// The model-wide widths that shape a layer's weights.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Widths {
    /// Width of the residual stream.
    pub hidden: usize,
    /// Inner width of the dense feed-forward block.
    pub ffn_dim: usize,
    /// Query heads as the model states them (latent attention's head count).
    pub heads: usize,
    /// Values per layer of the per-layer inputs, 0 without them.
    pub per_layer_input: usize,
}

/// A place in the tree: the widths, the layer and what of its block shapes its stages' weights.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Place {
    /// The model's widths.
    pub widths: Widths,
    /// The layer; `None` for the embeddings and the head.
    pub layer: Option<usize>,
    /// The layer's heads (the model's for the head).
    pub heads: Heads,
    /// The experts the layer's router chooses among, 0 without one.
    pub experts: usize,
    /// The layer's latent attention, if it has one.
    pub mla: Option<Mla>,
}

impl Place {
    /// The tensor of `role` here.
    pub fn name(&self, role: Role) -> TensorName {
        match self.layer {
            Some(layer) => TensorName::layer(role, layer),
            None => TensorName::model(role),
        }
    }

    /// A vector of `len` values.
    pub fn vector<'t, H: Handles, B: Handles, M: Mapper<'t, H, B>>(
        &self,
        role: Role,
        len: usize,
        v: &'t H::Vector,
        m: &mut M,
    ) -> Result<B::Vector, M::Error> {
        let t = Tensor {
            name: self.name(role),
            shape: Shape::Vector(len),
        };
        m.vector(&t, v)
    }

    /// A convolution kernel of `channels` rows of `taps` values.
    pub fn filter<'t, H: Handles, B: Handles, M: Mapper<'t, H, B>>(
        &self,
        role: Role,
        (channels, taps): (usize, usize),
        v: &'t H::Vector,
        m: &mut M,
    ) -> Result<B::Vector, M::Error> {
        let t = Tensor {
            name: self.name(role),
            shape: Shape::Filter { channels, taps },
        };
        m.vector(&t, v)
    }

    /// A bias of `len` values beside the weight `weight`.
    pub fn bias<'t, H: Handles, B: Handles, M: Mapper<'t, H, B>>(
        weight: TensorName,
        len: usize,
        bias: &'t Option<H::Vector>,
        m: &mut M,
    ) -> Result<Option<B::Vector>, M::Error> {
        let Some(bias) = bias else {
            return Ok(None);
        };
        let t = Tensor {
            name: weight.bias(),
            shape: Shape::Vector(len),
        };
        m.optional_vector(&t, bias)
    }

    /// A norm of `len` values, with its bias if it has one.
    pub fn norm<'t, H: Handles, B: Handles, M: Mapper<'t, H, B>>(
        &self,
        n: &'t NormWeights<H>,
        len: usize,
        m: &mut M,
    ) -> Result<NormWeights<B>, M::Error> {
        Ok(NormWeights {
            role: n.role,
            params: n.params,
            weight: self.vector(n.role, len, &n.weight, m)?,
            bias: Self::bias(self.name(n.role), len, &n.bias, m)?,
        })
    }

    /// A linear layer `[rows, cols]`, with its bias if it has one.
    pub fn linear<'t, H: Handles, B: Handles, M: Mapper<'t, H, B>>(
        &self,
        role: Role,
        (rows, cols): (usize, usize),
        l: &'t Linear<H>,
        m: &mut M,
    ) -> Result<Linear<B>, M::Error> {
        let name = self.name(role);
        let t = Tensor {
            name,
            shape: Shape::Matrix { rows, cols },
        };
        Ok(Linear {
            weight: m.matrix(&t, &l.weight)?,
            bias: Self::bias(name, rows, &l.bias, m)?,
        })
    }

    /// A linear layer the file may lack: `None` when the mapper drops its weight.
    pub fn optional_linear<'t, H: Handles, B: Handles, M: Mapper<'t, H, B>>(
        &self,
        role: Role,
        (rows, cols): (usize, usize),
        l: &'t Linear<H>,
        m: &mut M,
    ) -> Result<Option<Linear<B>>, M::Error> {
        let name = self.name(role);
        let t = Tensor {
            name,
            shape: Shape::Matrix { rows, cols },
        };
        let Some(weight) = m.optional_matrix(&t, &l.weight)? else {
            return Ok(None);
        };
        Ok(Some(Linear {
            weight,
            bias: Self::bias(name, rows, &l.bias, m)?,
        }))
    }

    /// `count` stacked matrices `[rows, cols]`.
    pub fn experts<'t, H: Handles, B: Handles, M: Mapper<'t, H, B>>(
        &self,
        role: Role,
        (count, rows, cols): (usize, usize, usize),
        e: &'t H::Experts,
        m: &mut M,
    ) -> Result<B::Experts, M::Error> {
        let t = Tensor {
            name: self.name(role),
            shape: Shape::Experts { count, rows, cols },
        };
        m.experts(&t, e)
    }
}
