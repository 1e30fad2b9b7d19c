//! Where every weight, buffer and KV-cache layer lives: device addresses in the runtime, host
//! addresses under the emulation.

use crate::error::CudaError;
use crate::host::{HostFfnUp, HostLinear, HostMatrix, HostModel, HostNorm, HostQkv};
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
    /// Norm before the FFN.
    pub ffn_norm: Option<NormAddress>,
    /// Projections into the `[n, 2 ffn]` gate | up buffer.
    pub ffn_up: Vec<LinearAddress>,
    /// FFN down projection.
    pub ffn_down: LinearAddress,
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
            let ffn_up = match &layer.ffn_up {
                HostFfnUp::Gated { gate, up } => vec![p.linear(gate, 0)?, p.linear(up, ffn)?],
                HostFfnUp::FusedGated(gate_up) => vec![p.linear(gate_up, 0)?],
                HostFfnUp::Plain(up) => vec![p.linear(up, 0)?],
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
                ffn_norm: p.optional_norm(&layer.ffn_norm)?,
                ffn_up,
                ffn_down: p.linear(&layer.ffn_down, 0)?,
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
