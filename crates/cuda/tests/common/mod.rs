//! A synthetic model for the host-side tests: llama-shaped, with Q8_0 matrices of zero bytes.

use std::borrow::Cow;

use rinfer_cuda::{
    HostExperts, HostFfn, HostFfnUp, HostLayer, HostLinear, HostMatrix, HostModel, HostNorm,
    HostQkv, HostStacked, Transformer,
};
use rinfer_formats::GgmlType;
use rinfer_kernels::block::{
    AttentionParams, Block, Experts, Ffn, Gating, Norm, NormKind, RopeParams, RopeStyle, Router,
    Stage,
};

pub const HIDDEN: usize = 64;
pub const HEADS: usize = 2;
pub const KV_HEADS: usize = 1;
pub const HEAD_DIM: usize = 32;
pub const FFN: usize = 128;
pub const VOCAB: usize = 100;
pub const LAYERS: usize = 3;
/// Experts of the mixture-of-experts layer of [`moe_model`].
pub const EXPERTS: usize = 4;
/// Experts each token runs there.
pub const USED: usize = 2;
/// Inner width of one expert.
pub const EXPERT_FFN: usize = 32;
/// The layer [`moe_model`] turns into experts.
pub const MOE_LAYER: usize = 1;

/// Owned bytes the views borrow.
pub struct Storage {
    pub bytes: Vec<u8>,
    pub ones: Vec<f32>,
}

impl Storage {
    pub fn new() -> Self {
        Self {
            bytes: vec![0; 1 << 20],
            ones: vec![1.0; 4096],
        }
    }
}

/// A llama-shaped block: layers 0 and 1 slide over a window of 16, layer 2 is global.
pub fn config() -> Transformer {
    let norm = Norm {
        kind: NormKind::Rms,
        eps: 1e-6,
    };
    let block = |layer: usize| Block {
        stages: vec![
            Stage::AttentionNorm(norm),
            Stage::Qkv,
            Stage::Rope(RopeParams {
                n_rot: HEAD_DIM,
                freq_base: 10_000.0,
                freq_scale: 1.0,
                style: RopeStyle::Norm,
                yarn: None,
            }),
            Stage::Attention(AttentionParams {
                scale: 1.0 / (HEAD_DIM as f32).sqrt(),
                softcap: None,
                window: (layer % 3 < 2).then_some(16),
                sinks: false,
            }),
            Stage::AttentionOutput,
            Stage::AttentionResidual,
            Stage::FfnNorm(norm),
            Stage::Ffn(Ffn::SiluGated),
            Stage::FfnResidual,
        ],
    };
    Transformer {
        vocab_size: VOCAB,
        hidden: HIDDEN,
        heads: HEADS,
        kv_heads: KV_HEADS,
        head_dim: HEAD_DIM,
        ffn_dim: FFN,
        embedding_scale: None,
        blocks: (0..LAYERS).map(block).collect(),
        output_norm: norm,
        final_softcap: None,
    }
}

/// Bytes of a `[rows, cols]` matrix of `ty`.
pub fn matrix_bytes(ty: GgmlType, rows: usize, cols: usize) -> usize {
    rows * cols / ty.block_size() * ty.type_size()
}

pub fn matrix<'a>(
    s: &'a Storage,
    name: &str,
    ty: GgmlType,
    rows: usize,
    cols: usize,
) -> HostMatrix<'a> {
    HostMatrix {
        name: name.into(),
        ty,
        rows,
        cols,
        data: &s.bytes[..matrix_bytes(ty, rows, cols)],
    }
}

fn linear<'a>(s: &'a Storage, name: &str, rows: usize, cols: usize) -> HostLinear<'a> {
    HostLinear {
        weight: matrix(s, name, GgmlType::Q8_0, rows, cols),
        bias: None,
    }
}

pub fn norm(s: &Storage) -> HostNorm<'_> {
    HostNorm {
        weight: &s.ones[..HIDDEN],
        bias: None,
    }
}

/// A tied-embedding model of [`LAYERS`] blocks.
pub fn model(s: &Storage) -> HostModel<'_> {
    let layer = || HostLayer {
        attn_norm: norm(s),
        qkv: HostQkv::Separate {
            q: linear(s, "attn_q", HEADS * HEAD_DIM, HIDDEN),
            k: linear(s, "attn_k", KV_HEADS * HEAD_DIM, HIDDEN),
            v: linear(s, "attn_v", KV_HEADS * HEAD_DIM, HIDDEN),
        },
        qk_norm: None,
        attn_output: linear(s, "attn_output", HIDDEN, HEADS * HEAD_DIM),
        post_attn_norm: None,
        attn_sinks: None,
        ffn_norm: Some(norm(s)),
        ffn: HostFfn::Dense {
            up: HostFfnUp::Gated {
                gate: linear(s, "ffn_gate", FFN, HIDDEN),
                up: linear(s, "ffn_up", FFN, HIDDEN),
            },
            down: linear(s, "ffn_down", HIDDEN, FFN),
        },
        post_ffn_norm: None,
    };
    let embd = matrix(s, "token_embd", GgmlType::Q8_0, VOCAB, HIDDEN);
    HostModel {
        config: config(),
        token_embd: embd.clone(),
        position_embd: None,
        rope_freqs: None,
        layers: (0..LAYERS).map(|_| layer()).collect(),
        output_norm: norm(s),
        lm_head: embd,
        output_bias: None,
    }
}

fn stacked<'a>(s: &'a Storage, name: &str, rows: usize, cols: usize) -> HostStacked<'a> {
    HostStacked {
        name: name.into(),
        ty: GgmlType::Q8_0,
        experts: EXPERTS,
        rows,
        cols,
        data: Cow::Borrowed(&s.bytes[..EXPERTS * matrix_bytes(GgmlType::Q8_0, rows, cols)]),
        bias: None,
    }
}

/// [`model`] with layer [`MOE_LAYER`] a mixture of [`EXPERTS`] experts, [`USED`] per token.
pub fn moe_model(s: &Storage) -> HostModel<'_> {
    let mut model = model(s);
    model.layers[MOE_LAYER].ffn = HostFfn::Experts(HostExperts {
        router: linear(s, "ffn_gate_inp", EXPERTS, HIDDEN),
        gate: stacked(s, "ffn_gate_exps", EXPERT_FFN, HIDDEN),
        up: stacked(s, "ffn_up_exps", EXPERT_FFN, HIDDEN),
        down: stacked(s, "ffn_down_exps", HIDDEN, EXPERT_FFN),
    });
    for stage in &mut model.config.blocks[MOE_LAYER].stages {
        if let Stage::Ffn(_) = stage {
            *stage = Stage::Router(Router {
                experts: EXPERTS,
                used: USED,
                gating: Gating::SoftmaxTopK,
            });
        }
    }
    let stages = &mut model.config.blocks[MOE_LAYER].stages;
    let at = stages.len() - 1;
    stages.insert(
        at,
        Stage::Experts(Experts {
            ffn: Ffn::SiluGated,
            ffn_dim: EXPERT_FFN,
        }),
    );
    model
}
