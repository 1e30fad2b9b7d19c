//! The model on an NVIDIA GPU: the view the CUDA backend uploads from. `rinfer-cuda` sits below
//! this crate, so this is where the model's own configuration and weights are handed to it.

use rinfer_cuda::{
    CudaError, HostFfnUp, HostLayer, HostLinear, HostMatrix, HostModel, HostNorm, HostQkv,
};

use crate::forward::Model;
use crate::weights::{FfnUp, FfnWeights, Linear, Matrix, NormWeights, Qkv};

impl Model {
    /// The model as the CUDA backend takes it: its [`Transformer`](rinfer_cuda::Transformer)
    /// (the same stages the CPU forward pass runs) and borrowed views of every weight in its
    /// stored format.
    ///
    /// # Errors
    /// [`CudaError::Unsupported`] for a mixture-of-experts model, which the CUDA backend does
    /// not run yet.
    pub fn gpu_view(&self) -> Result<HostModel<'_>, CudaError> {
        let w = &self.weights;
        let layers = w
            .layers
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let name = |role: &str| format!("blk.{i}.{role}.weight");
                let FfnWeights::Dense(ffn) = &l.ffn else {
                    return Err(CudaError::Unsupported(format!(
                        "layer {i} is a mixture of experts, which the CUDA backend does not run yet; use --device cpu"
                    )));
                };
                if l.attn_sinks.is_some() {
                    return Err(CudaError::Unsupported(format!(
                        "layer {i} has attention sinks, which the CUDA backend does not run yet; use --device cpu"
                    )));
                }
                Ok(HostLayer {
                    attn_norm: norm(&l.attn_norm),
                    qkv: match &l.qkv {
                        Qkv::Separate { q, k, v } => HostQkv::Separate {
                            q: linear(q, name("attn_q")),
                            k: linear(k, name("attn_k")),
                            v: linear(v, name("attn_v")),
                        },
                        Qkv::Fused(qkv) => HostQkv::Fused(linear(qkv, name("attn_qkv"))),
                    },
                    qk_norm: l
                        .qk_norm
                        .as_ref()
                        .map(|(q, k)| (q.as_slice(), k.as_slice())),
                    attn_output: linear(&l.attn_output, name("attn_output")),
                    post_attn_norm: l.post_attn_norm.as_ref().map(norm),
                    ffn_norm: l.ffn_norm.as_ref().map(norm),
                    ffn_up: match &ffn.up {
                        FfnUp::Gated { gate, up } => HostFfnUp::Gated {
                            gate: linear(gate, name("ffn_gate")),
                            up: linear(up, name("ffn_up")),
                        },
                        FfnUp::FusedGated(gate_up) => {
                            HostFfnUp::FusedGated(linear(gate_up, name("ffn_up")))
                        }
                        FfnUp::Plain(up) => HostFfnUp::Plain(linear(up, name("ffn_up"))),
                    },
                    ffn_down: linear(&ffn.down, name("ffn_down")),
                    post_ffn_norm: l.post_ffn_norm.as_ref().map(norm),
                })
            })
            .collect::<Result<_, _>>()?;
        let lm_head_name = if w.output.is_some() {
            "output.weight"
        } else {
            "token_embd.weight"
        };
        Ok(HostModel {
            config: self.transformer().clone(),
            token_embd: matrix(&w.token_embd, "token_embd.weight".into()),
            position_embd: w
                .position_embd
                .as_ref()
                .map(|m| matrix(m, "position_embd.weight".into())),
            rope_freqs: w.rope_freqs.as_deref(),
            layers,
            output_norm: norm(&w.output_norm),
            lm_head: matrix(w.lm_head(), lm_head_name.into()),
            output_bias: w.output_bias.as_deref(),
        })
    }
}

fn matrix(m: &Matrix, name: String) -> HostMatrix<'_> {
    HostMatrix {
        name,
        ty: m.ty,
        rows: m.rows,
        cols: m.cols,
        data: m.data(),
    }
}

fn linear(l: &Linear, name: String) -> HostLinear<'_> {
    HostLinear {
        weight: matrix(&l.weight, name),
        bias: l.bias.as_deref(),
    }
}

fn norm(n: &NormWeights) -> HostNorm<'_> {
    HostNorm {
        weight: &n.weight,
        bias: n.bias.as_deref(),
    }
}
