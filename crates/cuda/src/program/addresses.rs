//! Where every weight, buffer and KV-cache layer lives: device addresses in the runtime, host
//! addresses under the emulation.

use crate::error::CudaError;
use crate::host::{
    HostExperts, HostFfn, HostFfnUp, HostLinear, HostMatrix, HostModel, HostNorm, HostQkv,
    HostStacked,
};
use crate::kernels::GpuType;

/// A weight matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatrixAddress {
    /// Its bytes.
    pub ptr: u64,
    /// Its format.
    pub ty: GpuType,
    /// Output features.
    pub rows: usize,
    /// Input features.
    pub cols: usize,
    /// Bytes per row.
    pub row_bytes: i64,
}

/// A projection and the column its output starts at in the destination buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinearAddress {
    /// The matrix.
    pub matrix: MatrixAddress,
    /// Its bias, `[rows]` f32.
    pub bias: Option<u64>,
    /// First output column in the destination rows.
    pub out_offset: usize,
}

/// One projection of every expert, stacked: expert `e`'s rows at `ptr + e * expert_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackedAddress {
    /// Expert 0's rows.
    pub ptr: u64,
    /// Its format.
    pub ty: GpuType,
    /// Output features of one expert.
    pub rows: usize,
    /// Input features.
    pub cols: usize,
    /// Bytes per row.
    pub row_bytes: i64,
    /// Bytes per expert.
    pub expert_bytes: i64,
    /// Biases `[experts, rows]` f32.
    pub bias: Option<u64>,
}

/// A mixture-of-experts block's weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpertAddresses {
    /// The router `[experts, hidden]`.
    pub router: LinearAddress,
    /// Gate projections.
    pub gate: StackedAddress,
    /// Up projections.
    pub up: StackedAddress,
    /// Down projections.
    pub down: StackedAddress,
}

/// A layer's feed-forward weights.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FfnAddresses {
    /// One FFN every token runs.
    Dense {
        /// Projections into the `[n, 2 ffn]` gate | up buffer.
        up: Vec<LinearAddress>,
        /// Down projection.
        down: LinearAddress,
    },
    /// Routed experts.
    Experts(ExpertAddresses),
}

/// A norm's scale and bias, f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NormAddress {
    /// Scale.
    pub weight: u64,
    /// Bias (LayerNorm).
    pub bias: Option<u64>,
}

/// One decoder block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerAddresses {
    /// Norm before attention.
    pub attn_norm: NormAddress,
    /// Projections into the `[n, q_dim + 2 kv_dim]` qkv buffer.
    pub qkv: Vec<LinearAddress>,
    /// Per-head q and k norm scales.
    pub qk_norm: Option<(u64, u64)>,
    /// Attention output projection.
    pub attn_output: LinearAddress,
    /// Norm of the attention output.
    pub post_attn_norm: Option<NormAddress>,
    /// Per-head attention sink logits `[heads]`.
    pub attn_sinks: Option<u64>,
    /// Norm before the FFN.
    pub ffn_norm: Option<NormAddress>,
    /// The FFN, dense or experts.
    pub ffn: FfnAddresses,
    /// Norm of the FFN output.
    pub post_ffn_norm: Option<NormAddress>,
}

/// All weights.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightAddresses {
    /// Token embedding.
    pub token_embd: MatrixAddress,
    /// Learned positions.
    pub position_embd: Option<MatrixAddress>,
    /// RoPE frequency divisors.
    pub rope_freqs: Option<u64>,
    /// The blocks.
    pub layers: Vec<LayerAddresses>,
    /// Final norm.
    pub output_norm: NormAddress,
    /// LM head (the token embedding's address when tied).
    pub lm_head: MatrixAddress,
    /// LM head bias.
    pub output_bias: Option<u64>,
}

impl WeightAddresses {
    /// Places every weight of `model` (validated by an [`UploadPlan`](crate::UploadPlan))
    /// with `place_bytes` (matrices) and `place_floats` (norms, biases), which return the
    /// address the data now has: an upload in the runtime, the host address under emulation.
    /// A tied LM head is placed once.
    pub fn place(
        model: &HostModel<'_>,
        place_bytes: impl FnMut(&[u8]) -> Result<u64, CudaError>,
        place_floats: impl FnMut(&[f32]) -> Result<u64, CudaError>,
    ) -> Result<Self, CudaError> {
        let c = &model.config;
        let (q_dim, kv_dim, ffn) = (c.q_dim(), c.kv_dim(), c.ffn_dim);
        let mut p = Placer {
            bytes: place_bytes,
            floats: place_floats,
        };
        let mut layers = Vec::with_capacity(model.layers.len());
        for layer in &model.layers {
            let qkv = match &layer.qkv {
                HostQkv::Separate { q, k, v } => vec![
                    p.linear(q, 0)?,
                    p.linear(k, q_dim)?,
                    p.linear(v, q_dim + kv_dim)?,
                ],
                HostQkv::Fused(qkv) => vec![p.linear(qkv, 0)?],
            };
            let ffn = match &layer.ffn {
                HostFfn::Dense { up, down } => FfnAddresses::Dense {
                    up: match up {
                        HostFfnUp::Gated { gate, up } => {
                            vec![p.linear(gate, 0)?, p.linear(up, ffn)?]
                        }
                        HostFfnUp::FusedGated(gate_up) => vec![p.linear(gate_up, 0)?],
                        HostFfnUp::Plain(up) => vec![p.linear(up, 0)?],
                    },
                    down: p.linear(down, 0)?,
                },
                HostFfn::Experts(experts) => FfnAddresses::Experts(p.experts(experts)?),
            };
            layers.push(LayerAddresses {
                attn_norm: p.norm(&layer.attn_norm)?,
                qkv,
                qk_norm: match layer.qk_norm {
                    Some((q, k)) => Some(((p.floats)(q)?, (p.floats)(k)?)),
                    None => None,
                },
                attn_output: p.linear(&layer.attn_output, 0)?,
                post_attn_norm: p.optional_norm(&layer.post_attn_norm)?,
                attn_sinks: layer.attn_sinks.map(&mut p.floats).transpose()?,
                ffn_norm: p.optional_norm(&layer.ffn_norm)?,
                ffn,
                post_ffn_norm: p.optional_norm(&layer.post_ffn_norm)?,
            });
        }
        let token_embd = p.matrix(&model.token_embd)?;
        let lm_head = if std::ptr::eq(model.lm_head.data, model.token_embd.data) {
            token_embd
        } else {
            p.matrix(&model.lm_head)?
        };
        Ok(Self {
            token_embd,
            position_embd: match &model.position_embd {
                Some(m) => Some(p.matrix(m)?),
                None => None,
            },
            rope_freqs: model.rope_freqs.map(&mut p.floats).transpose()?,
            layers,
            output_norm: p.norm(&model.output_norm)?,
            lm_head,
            output_bias: model.output_bias.map(&mut p.floats).transpose()?,
        })
    }
}

/// The two placement functions of [`WeightAddresses::place`].
struct Placer<B, F> {
    bytes: B,
    floats: F,
}

impl<B, F> Placer<B, F>
where
    B: FnMut(&[u8]) -> Result<u64, CudaError>,
    F: FnMut(&[f32]) -> Result<u64, CudaError>,
{
    fn matrix(&mut self, m: &HostMatrix<'_>) -> Result<MatrixAddress, CudaError> {
        let ty = GpuType::of(m.ty).ok_or_else(|| CudaError::UnsupportedType {
            tensor: m.name.clone(),
            ty: m.ty.name(),
        })?;
        Ok(MatrixAddress {
            ptr: (self.bytes)(m.data)?,
            ty,
            rows: m.rows,
            cols: m.cols,
            row_bytes: (m.data.len() / m.rows.max(1)) as i64,
        })
    }

    fn linear(
        &mut self,
        l: &HostLinear<'_>,
        out_offset: usize,
    ) -> Result<LinearAddress, CudaError> {
        Ok(LinearAddress {
            matrix: self.matrix(&l.weight)?,
            bias: l.bias.map(&mut self.floats).transpose()?,
            out_offset,
        })
    }

    fn stacked(&mut self, m: &HostStacked<'_>) -> Result<StackedAddress, CudaError> {
        let ty = GpuType::of(m.ty).ok_or_else(|| CudaError::UnsupportedType {
            tensor: m.name.clone(),
            ty: m.ty.name(),
        })?;
        let expert_bytes = m.data.len() / m.experts.max(1);
        Ok(StackedAddress {
            ptr: (self.bytes)(&m.data)?,
            ty,
            rows: m.rows,
            cols: m.cols,
            row_bytes: (expert_bytes / m.rows.max(1)) as i64,
            expert_bytes: expert_bytes as i64,
            bias: m.bias.as_deref().map(&mut self.floats).transpose()?,
        })
    }

    fn experts(&mut self, e: &HostExperts<'_>) -> Result<ExpertAddresses, CudaError> {
        Ok(ExpertAddresses {
            router: self.linear(&e.router, 0)?,
            gate: self.stacked(&e.gate)?,
            up: self.stacked(&e.up)?,
            down: self.stacked(&e.down)?,
        })
    }

    fn norm(&mut self, n: &HostNorm<'_>) -> Result<NormAddress, CudaError> {
        Ok(NormAddress {
            weight: (self.floats)(n.weight)?,
            bias: n.bias.map(&mut self.floats).transpose()?,
        })
    }

    fn optional_norm(
        &mut self,
        n: &Option<HostNorm<'_>>,
    ) -> Result<Option<NormAddress>, CudaError> {
        n.as_ref().map(|n| self.norm(n)).transpose()
    }
}

/// The activation buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkAddresses {
    /// Residual stream `[n, hidden]`.
    pub x: u64,
    /// Normed input / FFN output `[n, hidden]`.
    pub h: u64,
    /// q | k | v `[n, q_dim + 2 kv_dim]`.
    pub qkv: u64,
    /// Attention output `[n, q_dim]`.
    pub attn: u64,
    /// Attention projection `[n, hidden]`.
    pub out: u64,
    /// gate | up `[n, 2 ffn]`.
    pub gate_up: u64,
    /// Logits `[rows, vocab]`.
    pub logits: u64,
    /// Decode-attention partials.
    pub partials: u64,
    /// Router scores `[n, experts]`.
    pub router: u64,
    /// Each row's experts `[n, used]` (i32).
    pub expert_ids: u64,
    /// Their weights `[n, used]`.
    pub expert_weights: u64,
    /// How many slots each expert received `[experts]` (i32).
    pub expert_counts: u64,
    /// Each expert's slots `[experts, n]` (i32).
    pub expert_lists: u64,
    /// Every routed expert's gate | up `[n · used, 2 expert_ffn]`.
    pub expert_gate_up: u64,
    /// Every routed expert's output `[n · used, hidden]`.
    pub expert_out: u64,
    /// Token ids `[n]` (i32).
    pub tokens: u64,
    /// Positions `[n]` (i32).
    pub positions: u64,
    /// The argmax `[1]` (i32).
    pub argmax: u64,
}

/// The KV cache of one sequence: per layer its keys, values and slot count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheAddresses {
    /// `(keys, values, slots)` per layer, `[slots, kv_dim]` f32 each.
    pub layers: Vec<(u64, u64, usize)>,
}
