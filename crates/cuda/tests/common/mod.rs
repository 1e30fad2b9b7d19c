//! A synthetic model for the host-side tests: llama-shaped, with Q8_0 matrices of zero bytes.

use std::borrow::Cow;

use rinfer_cuda::{HostMatrix, HostModel, HostStacked, HostView, Transformer};
use rinfer_formats::GgmlType;
use rinfer_transformer::{
    AttentionParams, Block, Experts, Ffn, FfnUp, GateUpDown, Gating, Heads, Linear, Norm, NormKind,
    NormWeights, Qkv, Role, RopeParams, RopeStyle, Router, Stage,
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

/// Bytes of a `[rows, cols]` matrix of `ty`.
pub fn matrix_bytes(ty: GgmlType, rows: usize, cols: usize) -> usize {
    rows * cols / ty.block_size() * ty.type_size()
}

pub fn matrix(s: &Storage, ty: GgmlType, rows: usize, cols: usize) -> HostMatrix<'_> {
    HostMatrix {
        ty,
        rows,
        cols,
        data: &s.bytes[..matrix_bytes(ty, rows, cols)],
    }
}

fn linear(s: &Storage, rows: usize, cols: usize) -> Linear<HostView<'_>> {
    Linear {
        weight: matrix(s, GgmlType::Q8_0, rows, cols),
        bias: None,
    }
}

pub fn norm(s: &Storage, role: Role) -> NormWeights<HostView<'_>> {
    NormWeights {
        role,
        params: Norm {
            kind: NormKind::Rms,
            eps: 1e-6,
        },
        weight: &s.ones[..HIDDEN],
        bias: None,
    }
}

/// A tied-embedding, llama-shaped model of [`LAYERS`] blocks: layers 0 and 1 slide over a
/// window of 16, layer 2 is global.
pub fn model(s: &Storage) -> HostModel<'_> {
    let block = |layer: usize| Block {
        heads: Heads {
            heads: HEADS,
            kv_heads: KV_HEADS,
            head_dim: HEAD_DIM,
        },
        stages: vec![
            Stage::AttentionNorm(norm(s, Role::AttnNorm)),
            Stage::Qkv(Qkv::Separate {
                q: linear(s, HEADS * HEAD_DIM, HIDDEN),
                k: linear(s, KV_HEADS * HEAD_DIM, HIDDEN),
                v: linear(s, KV_HEADS * HEAD_DIM, HIDDEN),
            }),
            Stage::Rope(RopeParams {
                n_rot: HEAD_DIM,
                freq_base: 10_000.0,
                freq_scale: 1.0,
                style: RopeStyle::Norm,
                yarn: None,
                factors: true,
            }),
            Stage::Attention {
                params: AttentionParams {
                    scale: 1.0 / (HEAD_DIM as f32).sqrt(),
                    softcap: None,
                    window: (layer % 3 < 2).then_some(16),
                    sinks: false,
                },
                sinks: None,
            },
            Stage::AttentionOutput(linear(s, HIDDEN, HEADS * HEAD_DIM)),
            Stage::AttentionResidual,
            Stage::FfnNorm(norm(s, Role::FfnNorm)),
            Stage::Ffn {
                ffn: Ffn::SiluGated,
                up: FfnUp::Gated {
                    gate: linear(s, FFN, HIDDEN),
                    up: linear(s, FFN, HIDDEN),
                },
                down: linear(s, HIDDEN, FFN),
            },
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
        token_embd: matrix(s, GgmlType::Q8_0, VOCAB, HIDDEN),
        position_embd: None,
        token_types: None,
        embedding_norm: None,
        causal: true,
        rope_freqs: None,
        per_layer_inputs: None,
        blocks: (0..LAYERS).map(block).collect(),
        output_norm: Some(norm(s, Role::OutputNorm)),
        output: None,
        output_bias: None,
        final_softcap: None,
        classifier: None,
    }
}

fn stacked(s: &Storage, rows: usize, cols: usize) -> HostStacked<'_> {
    HostStacked {
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
    let stages = &mut model.blocks[MOE_LAYER].stages;
    let ffn = stages
        .iter()
        .position(|stage| matches!(stage, Stage::Ffn { .. }))
        .expect("a dense FFN");
    stages[ffn] = Stage::Router {
        router: Router {
            experts: EXPERTS,
            used: USED,
            gating: Gating::SoftmaxTopK,
            scale: 1.0,
        },
        scores: linear(s, EXPERTS, HIDDEN),
        selection_bias: None,
    };
    stages.insert(
        ffn + 1,
        Stage::Experts {
            experts: Experts {
                ffn: Ffn::SiluGated,
                ffn_dim: EXPERT_FFN,
            },
            weights: GateUpDown {
                gate: stacked(s, EXPERT_FFN, HIDDEN),
                up: stacked(s, EXPERT_FFN, HIDDEN),
                down: stacked(s, HIDDEN, EXPERT_FFN),
            },
        },
    );
    model
}
