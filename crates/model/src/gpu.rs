//! The model on an NVIDIA GPU: the view the CUDA backend uploads from. `rinfer-cuda` sits below this crate, so this is where the model's own
//! configuration and weights are handed to it.

use rinfer_cuda::{
    FfnKind, GpuConfig, HostFfnUp, HostLayer, HostLinear, HostMatrix, HostModel, HostNorm, HostQkv,
    Norm, RopeConfig, Window,
};

use crate::config::{Ffn, ModelConfig, NormKind, Positional, RopeStyle};
use crate::forward::Model;
use crate::weights::{FfnUp, Linear, Matrix, NormWeights, Qkv};

impl Model {
    /// The model as the CUDA backend takes it: its configuration and borrowed views of every
    /// weight in its stored format.
    pub fn gpu_view(&self) -> HostModel<'_> {
        let w = &self.weights;
        let layers = w
            .layers
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let name = |role: &str| format!("blk.{i}.{role}.weight");
                HostLayer {
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
                    ffn_up: match &l.ffn_up {
                        FfnUp::Gated { gate, up } => HostFfnUp::Gated {
                            gate: linear(gate, name("ffn_gate")),
                            up: linear(up, name("ffn_up")),
                        },
                        FfnUp::FusedGated(gate_up) => {
                            HostFfnUp::FusedGated(linear(gate_up, name("ffn_up")))
                        }
                        FfnUp::Plain(up) => HostFfnUp::Plain(linear(up, name("ffn_up"))),
                    },
                    ffn_down: linear(&l.ffn_down, name("ffn_down")),
                    post_ffn_norm: l.post_ffn_norm.as_ref().map(norm),
                }
            })
            .collect();
        let lm_head_name = if w.output.is_some() {
            "output.weight"
        } else {
            "token_embd.weight"
        };
        HostModel {
            config: gpu_config(&self.config),
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
        }
    }
}

/// The fields of `c` the GPU forward pass reads.
fn gpu_config(c: &ModelConfig) -> GpuConfig {
    GpuConfig {
        vocab_size: c.vocab_size,
        hidden: c.hidden,
        layers: c.layers,
        heads: c.heads,
        kv_heads: c.kv_heads,
        head_dim: c.head_dim,
        ffn_dim: c.ffn_dim,
        norm: match c.norm {
            NormKind::Rms => Norm::Rms,
            NormKind::Layer => Norm::Layer,
        },
        norm_eps: c.norm_eps,
        ffn: match c.ffn {
            Ffn::SiluGated => FfnKind::SiluGated,
            Ffn::GeluGated => FfnKind::GeluGated,
            Ffn::Gelu => FfnKind::Gelu,
        },
        rope: match c.positional {
            Positional::Rope(r) => Some(RopeConfig {
                neox: r.style == RopeStyle::Neox,
                dims: r.dims,
                base: r.base,
                base_local: r.base_local,
                linear_scale: r.linear_scale,
            }),
            Positional::Learned => None,
        },
        parallel_block: c.parallel_block,
        embedding_scale: c.embedding_scale,
        attention_scale: c.attention_scale,
        attn_softcap: c.attn_softcap,
        final_softcap: c.final_softcap,
        sliding_window: c.sliding_window.map(|w| Window {
            size: w.window,
            pattern: w.pattern,
        }),
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
