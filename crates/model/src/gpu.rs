//! The model on an NVIDIA GPU: the view the CUDA backend uploads from. `rinfer-cuda` sits below
//! this crate, so this is where the model's own configuration and weights are handed to it.

use std::borrow::Cow;

use rinfer_cuda::{
    CudaError, HostExperts, HostFfn, HostFfnUp, HostLayer, HostLinear, HostMatrix, HostModel,
    HostNorm, HostQkv, HostStacked,
};

use crate::forward::Model;
use crate::weights::{ExpertWeights, FfnUp, FfnWeights, Linear, Matrix, NormWeights, Qkv};

impl Model {
    /// The model as the CUDA backend takes it: its [`Transformer`](rinfer_cuda::Transformer)
    /// (the same stages the CPU forward pass runs) and borrowed views of every weight in its
    /// stored format.
    ///
    /// Each projection of a layer's experts is handed over as one stacked tensor: borrowed
    /// when the file stores the experts back to back (one 3-D tensor), copied into one buffer
    /// otherwise.
    ///
    /// # Errors
    /// [`CudaError::Unsupported`] when one projection's experts come in different formats or
    /// shapes.
    pub fn gpu_view(&self) -> Result<HostModel<'_>, CudaError> {
        let w = &self.weights;
        let layers = w
            .layers
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let name = |role: &str| format!("blk.{i}.{role}.weight");
                let ffn = match &l.ffn {
                    FfnWeights::Dense(ffn) => HostFfn::Dense {
                        up: match &ffn.up {
                            FfnUp::Gated { gate, up } => HostFfnUp::Gated {
                                gate: linear(gate, name("ffn_gate")),
                                up: linear(up, name("ffn_up")),
                            },
                            FfnUp::FusedGated(gate_up) => {
                                HostFfnUp::FusedGated(linear(gate_up, name("ffn_up")))
                            }
                            FfnUp::Plain(up) => HostFfnUp::Plain(linear(up, name("ffn_up"))),
                        },
                        down: linear(&ffn.down, name("ffn_down")),
                    },
                    FfnWeights::Experts(experts) => HostFfn::Experts(expert_view(i, experts)?),
                };
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
                    attn_sinks: l.attn_sinks.as_deref(),
                    ffn_norm: l.ffn_norm.as_ref().map(norm),
                    ffn,
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

fn expert_view(layer: usize, w: &ExpertWeights) -> Result<HostExperts<'_>, CudaError> {
    let name = |role: &str| format!("blk.{layer}.{role}_exps.weight");
    Ok(HostExperts {
        router: linear(&w.router, format!("blk.{layer}.ffn_gate_inp.weight")),
        gate: stacked(&w.gate, name("ffn_gate"))?,
        up: stacked(&w.up, name("ffn_up"))?,
        down: stacked(&w.down, name("ffn_down"))?,
    })
}

/// Every expert's matrix of one projection as one tensor, expert after expert.
fn stacked(experts: &[Linear], name: String) -> Result<HostStacked<'_>, CudaError> {
    let Some(first) = experts.first().map(|l| &l.weight) else {
        return Err(CudaError::Unsupported(format!("{name} has no experts")));
    };
    let same = |m: &Matrix| (m.ty, m.rows, m.cols) == (first.ty, first.rows, first.cols);
    if !experts.iter().all(|l| same(&l.weight)) {
        return Err(CudaError::Unsupported(format!(
            "the experts of {name} differ in format or shape"
        )));
    }
    let data = match Matrix::contiguous(experts.iter().map(|l| &l.weight)) {
        Some(bytes) => Cow::Borrowed(bytes),
        None => Cow::Owned(
            experts
                .iter()
                .flat_map(|l| l.weight.data())
                .copied()
                .collect(),
        ),
    };
    let biases: Vec<&[f32]> = experts.iter().filter_map(|l| l.bias.as_deref()).collect();
    let bias = match biases.len() {
        0 => None,
        n if n == experts.len() => Some(Cow::Owned(biases.concat())),
        _ => {
            return Err(CudaError::Unsupported(format!(
                "only some experts of {name} have a bias"
            )));
        }
    };
    Ok(HostStacked {
        name,
        ty: first.ty,
        experts: experts.len(),
        rows: first.rows,
        cols: first.cols,
        data,
        bias,
    })
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
