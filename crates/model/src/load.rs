//! Loading weights into [`Weights`] from any [`TensorStore`]: every tensor checked against the
//! configuration, every tensor in the store accounted for.

use std::collections::HashSet;

use rinfer_formats::GgmlType;

use crate::config::{Ffn, ModelConfig, MoeConfig, NormKind, Positional};
use crate::error::ModelError;
use crate::tensor_store::{StoredTensor, TensorStore};
use crate::weights::{
    DenseFfn, ExpertWeights, FfnUp, FfnWeights, LayerWeights, Linear, Matrix, NormWeights, Qkv,
    Weights,
};

/// Tensor types the CPU kernels can multiply with: those of the kernels' type registry.
fn supported_matrix_type(ty: GgmlType) -> bool {
    rinfer_kernels::Kernels::detected().multiplies(ty)
}

struct Loader<'a> {
    store: &'a dyn TensorStore,
    config: &'a ModelConfig,
    used: HashSet<String>,
}

impl Loader<'_> {
    fn view(&mut self, name: &str) -> Result<Option<StoredTensor>, ModelError> {
        let tensor = self.store.tensor(name)?;
        if tensor.is_some() {
            self.used.insert(name.to_string());
        }
        Ok(tensor)
    }

    fn require(&mut self, name: &str) -> Result<StoredTensor, ModelError> {
        self.view(name)?
            .ok_or_else(|| ModelError::MissingTensor { name: name.into() })
    }

    fn check_shape(tensor: &StoredTensor, expected: &[u64]) -> Result<(), ModelError> {
        if tensor.dims != expected {
            return Err(ModelError::TensorShape {
                name: tensor.name.clone(),
                expected: expected.to_vec(),
                found: tensor.dims.clone(),
            });
        }
        Ok(())
    }

    fn matrix_view(
        &self,
        tensor: StoredTensor,
        rows: usize,
        cols: usize,
    ) -> Result<Matrix, ModelError> {
        Self::check_shape(&tensor, &[cols as u64, rows as u64])?;
        if !supported_matrix_type(tensor.ty) {
            return Err(ModelError::UnsupportedTensorType {
                name: tensor.name,
                ty: tensor.ty.name(),
            });
        }
        Ok(Matrix::new(
            tensor.ty,
            rows,
            cols,
            tensor.source,
            tensor.range,
        ))
    }

    fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<Matrix, ModelError> {
        let view = self.require(name)?;
        self.matrix_view(view, rows, cols)
    }

    fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
        let view = self.require(name)?;
        Self::check_shape(&view, &[len as u64])?;
        to_f32(&view)
    }

    fn optional_vector(&mut self, name: &str, len: usize) -> Result<Option<Vec<f32>>, ModelError> {
        if !self.store.contains(name) {
            return Ok(None);
        }
        self.vector(name, len).map(Some)
    }

    fn norm(&mut self, prefix: &str, len: usize) -> Result<NormWeights, ModelError> {
        let weight = self.vector(&format!("{prefix}.weight"), len)?;
        let bias = match self.config.norm {
            NormKind::Layer => Some(self.vector(&format!("{prefix}.bias"), len)?),
            NormKind::Rms => None,
        };
        Ok(NormWeights { weight, bias })
    }

    fn linear(&mut self, prefix: &str, rows: usize, cols: usize) -> Result<Linear, ModelError> {
        let mut weight = self.matrix(&format!("{prefix}.weight"), rows, cols)?;
        weight.pack()?;
        Ok(Linear {
            weight,
            bias: self.optional_vector(&format!("{prefix}.bias"), rows)?,
        })
    }

    /// The experts `role` (`ffn_gate`, `ffn_up`, `ffn_down`) of layer `p` (`blk.N`): the 3-D
    /// tensor `{p}.{role}_exps`, or the per-expert matrices `{p}.{role}.{e}` of older Mixtral
    /// files.
    fn experts(
        &mut self,
        p: &str,
        role: &str,
        rows: usize,
        cols: usize,
        count: usize,
    ) -> Result<Vec<Linear>, ModelError> {
        let merged = format!("{p}.{role}_exps");
        if self.store.contains(&format!("{merged}.weight"))
            || !self.store.contains(&format!("{p}.{role}.0.weight"))
        {
            return self.merged_experts(&merged, rows, cols, count);
        }
        (0..count)
            .map(|e| self.linear(&format!("{p}.{role}.{e}"), rows, cols))
            .collect()
    }

    /// The experts of the 3-D tensor `{prefix}.weight` `[cols, rows, experts]`, each a matrix
    /// over its own slab of the tensor's bytes, with its row of `{prefix}.bias` if there is one.
    fn merged_experts(
        &mut self,
        prefix: &str,
        rows: usize,
        cols: usize,
        count: usize,
    ) -> Result<Vec<Linear>, ModelError> {
        let tensor = self.require(&format!("{prefix}.weight"))?;
        Self::check_shape(&tensor, &[cols as u64, rows as u64, count as u64])?;
        if !supported_matrix_type(tensor.ty) || !cols.is_multiple_of(tensor.ty.block_size()) {
            return Err(ModelError::UnsupportedTensorType {
                name: tensor.name,
                ty: tensor.ty.name(),
            });
        }
        let biases = match self.store.contains(&format!("{prefix}.bias")) {
            true => {
                let bias = self.require(&format!("{prefix}.bias"))?;
                Self::check_shape(&bias, &[rows as u64, count as u64])?;
                Some(to_f32(&bias)?)
            }
            false => None,
        };
        // Every expert's rows packed at once, into one allocation the experts share.
        let mut stacked = Matrix::new(
            tensor.ty,
            rows * count,
            cols,
            tensor.source.clone(),
            tensor.range.clone(),
        );
        stacked.pack()?;
        let weights = stacked.split_rows(count)?;
        Ok(weights
            .into_iter()
            .enumerate()
            .map(|(e, weight)| Linear {
                weight,
                bias: biases
                    .as_ref()
                    .map(|b| b[e * rows..(e + 1) * rows].to_vec()),
            })
            .collect())
    }

    /// The router and experts of layer `p` (`blk.N`).
    fn expert_weights(&mut self, p: &str, moe: &MoeConfig) -> Result<ExpertWeights, ModelError> {
        let (hidden, f, n) = (self.config.hidden, moe.ffn_dim, moe.count);
        Ok(ExpertWeights {
            router: self.linear(&format!("{p}.ffn_gate_inp"), n, hidden)?,
            gate: self.experts(p, "ffn_gate", f, hidden, n)?,
            up: self.experts(p, "ffn_up", f, hidden, n)?,
            down: self.experts(p, "ffn_down", hidden, f, n)?,
        })
    }

    /// The dense FFN of layer `p` (`blk.N`).
    fn dense_ffn(&mut self, p: &str) -> Result<DenseFfn, ModelError> {
        let c = self.config;
        let hidden = c.hidden;
        let up = match c.ffn {
            Ffn::Gelu => FfnUp::Plain(self.linear(&format!("{p}.ffn_up"), c.ffn_dim, hidden)?),
            Ffn::SiluGated | Ffn::GeluGated | Ffn::ClampedSwiGlu => {
                if self.store.contains(&format!("{p}.ffn_gate.weight")) {
                    FfnUp::Gated {
                        gate: self.linear(&format!("{p}.ffn_gate"), c.ffn_dim, hidden)?,
                        up: self.linear(&format!("{p}.ffn_up"), c.ffn_dim, hidden)?,
                    }
                } else {
                    FfnUp::FusedGated(self.linear(&format!("{p}.ffn_up"), 2 * c.ffn_dim, hidden)?)
                }
            }
        };
        let down = self.linear(&format!("{p}.ffn_down"), hidden, c.ffn_dim)?;
        Ok(DenseFfn { up, down })
    }

    fn layer(&mut self, i: usize) -> Result<LayerWeights, ModelError> {
        let c = self.config;
        let p = format!("blk.{i}");
        let (hidden, q_dim, kv_dim) = (c.hidden, c.q_dim(), c.kv_dim());
        let attn_norm = self.norm(&format!("{p}.attn_norm"), hidden)?;
        let qkv = if self.store.contains(&format!("{p}.attn_qkv.weight")) {
            Qkv::Fused(self.linear(&format!("{p}.attn_qkv"), q_dim + 2 * kv_dim, hidden)?)
        } else {
            Qkv::Separate {
                q: self.linear(&format!("{p}.attn_q"), q_dim, hidden)?,
                k: self.linear(&format!("{p}.attn_k"), kv_dim, hidden)?,
                v: self.linear(&format!("{p}.attn_v"), kv_dim, hidden)?,
            }
        };
        let qk_norm = if c.qk_norm {
            Some((
                self.vector(&format!("{p}.attn_q_norm.weight"), c.head_dim)?,
                self.vector(&format!("{p}.attn_k_norm.weight"), c.head_dim)?,
            ))
        } else {
            None
        };
        let attn_output = self.linear(&format!("{p}.attn_output"), hidden, q_dim)?;
        let post_attn_norm = if c.post_norms {
            Some(self.norm(&format!("{p}.post_attention_norm"), hidden)?)
        } else {
            None
        };
        let attn_sinks = match c.attention_sinks {
            true => Some(self.vector(&format!("{p}.attn_sinks.weight"), c.heads)?),
            false => None,
        };
        let ffn_norm = if c.parallel_block {
            None
        } else {
            Some(self.norm(&format!("{p}.{}", c.ffn_norm_name), hidden)?)
        };
        let ffn = match &c.experts {
            Some(moe) => FfnWeights::Experts(self.expert_weights(&p, moe)?),
            None => FfnWeights::Dense(self.dense_ffn(&p)?),
        };
        let post_ffn_norm = if c.post_norms {
            Some(self.norm(&format!("{p}.post_ffw_norm"), hidden)?)
        } else {
            None
        };
        Ok(LayerWeights {
            attn_norm,
            qkv,
            qk_norm,
            attn_output,
            post_attn_norm,
            attn_sinks,
            ffn_norm,
            ffn,
            post_ffn_norm,
        })
    }
}

/// The number of rows of `token_embd.weight`, which fixes the vocabulary size.
pub(crate) fn vocab_rows(store: &dyn TensorStore) -> Result<usize, ModelError> {
    let embd = store
        .tensor("token_embd.weight")?
        .ok_or_else(|| ModelError::MissingTensor {
            name: "token_embd.weight".into(),
        })?;
    match embd.dims[..] {
        [_, rows] => Ok(rows as usize),
        _ => Err(ModelError::TensorShape {
            name: "token_embd.weight".into(),
            expected: vec![0, 0],
            found: embd.dims.clone(),
        }),
    }
}

/// Builds the weights of the model in `store`, described by `config`.
pub(crate) fn load(store: &dyn TensorStore, config: &ModelConfig) -> Result<Weights, ModelError> {
    let mut l = Loader {
        store,
        config,
        used: HashSet::new(),
    };
    let c = config;
    let mut token_embd = l.matrix("token_embd.weight", c.vocab_size, c.hidden)?;
    let position_embd = match c.positional {
        Positional::Learned => {
            let view = l.require("position_embd.weight")?;
            let rows = view.dims.get(1).copied().unwrap_or(0) as usize;
            Some(l.matrix_view(view, rows, c.hidden)?)
        }
        Positional::Rope(_) => None,
    };
    let rope_freqs = match c.positional {
        Positional::Rope(rope) => l.optional_vector("rope_freqs.weight", rope.dims / 2)?,
        Positional::Learned => None,
    };
    let layers = (0..c.layers)
        .map(|i| l.layer(i))
        .collect::<Result<Vec<_>, _>>()?;
    let output_norm = l.norm("output_norm", c.hidden)?;
    let mut output = match store.contains("output.weight") {
        true => Some(l.matrix("output.weight", c.vocab_size, c.hidden)?),
        false => None,
    };
    // The output head is the largest product of a decode step: pack it like the layers.
    match &mut output {
        Some(output) => output.pack()?,
        None => token_embd.pack()?,
    }
    let output_bias = l.optional_vector("output.bias", c.vocab_size)?;
    if let Some(extra) = store
        .names()
        .into_iter()
        .find(|name| !l.used.contains(name))
    {
        return Err(ModelError::UnexpectedTensor {
            name: extra,
            arch: c.arch.clone(),
        });
    }
    Ok(Weights {
        token_embd,
        position_embd,
        rope_freqs,
        layers,
        output_norm,
        output,
        output_bias,
    })
}

/// A 1-D tensor as f32 values.
fn to_f32(tensor: &StoredTensor) -> Result<Vec<f32>, ModelError> {
    let n = tensor.dims.iter().product::<u64>() as usize;
    let mut out = vec![0.0; n];
    rinfer_kernels::dequantize_row(tensor.ty, tensor.bytes(), &mut out).map_err(|_| {
        ModelError::UnsupportedTensorType {
            name: tensor.name.clone(),
            ty: tensor.ty.name(),
        }
    })?;
    Ok(out)
}
