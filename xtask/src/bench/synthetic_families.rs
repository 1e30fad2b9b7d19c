//! The architecture families a synthetic model can have, as data: each family's GGUF
//! architecture name, its `<arch>.*` metadata and, per layer, the tensors llama.cpp's loader
//! for that architecture requires (names and GGUF dims, innermost first), as
//! `../shared/fixtures/README.md` § "New architectures" lists them for the 2026 families.
//!
//! The encoders of embedding models are BERT (bge's layout: learned positions, separate
//! q/k/v, every projection with a bias, a GELU FFN) and nomic-bert (nomic-embed-text's: rotary
//! positions, one fused `attn_qkv`, a SwiGLU FFN, no biases), as llama.cpp's `bert` and
//! `nomic-bert` loaders read them: post-norm, with token types and a LayerNorm of the
//! embeddings, a LayerNorm after each residual add and no output head.
//! Types are not chosen here: the Q4_K_M mix derives them from the names and dims alone, as
//! llama.cpp's quantizer does.

use rinfer_formats::gguf::{MetadataValue, ValueType};

pub use gemma4::{
    Gemma4Layers, model_tensors as gemma4_model_tensors, rope_freqs as gemma4_rope_freqs,
};

mod gemma4;

/// A synthetic model's family and dimensions.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// The name of the model's file in the models cache.
    pub file_name: &'static str,
    /// What the layers are made of.
    pub family: Family,
    /// Decoder blocks.
    pub layers: usize,
    /// Embedding width.
    pub hidden: usize,
    /// Feed-forward width (of the dense blocks).
    pub ffn: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (of the attention layers).
    pub kv_heads: usize,
    /// Width of an attention head.
    pub head_dim: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Trained context length.
    pub context: usize,
    /// RoPE's base frequency.
    pub rope_base: f32,
    /// RMS norm epsilon.
    pub norm_eps: f32,
}

/// The experts of a mixture-of-experts feed-forward block.
#[derive(Clone, Copy, Debug)]
pub struct Experts {
    /// Experts per layer.
    pub count: usize,
    /// Experts the router picks per token.
    pub used: usize,
    /// Feed-forward width of one expert.
    pub ffn: usize,
}

/// Qwen3.5's gated delta-net layers (linear attention with a short convolution).
#[derive(Clone, Copy, Debug)]
pub struct DeltaNet {
    /// Every this many layers one is full attention (the last of each group); the others are
    /// delta-net layers.
    pub full_attention_interval: usize,
    /// Query/key heads of a delta-net layer.
    pub qk_heads: usize,
    /// Value heads of a delta-net layer.
    pub v_heads: usize,
    /// Width of a delta-net head (keys and values alike): the state is `state × state`.
    pub state: usize,
    /// Taps of the causal convolution.
    pub conv_kernel: usize,
    /// Rotated dimensions of a full-attention head.
    pub rope_dims: usize,
}

/// LFM2's mix of short-convolution layers and attention layers.
#[derive(Clone, Copy, Debug)]
pub struct ShortConv {
    /// The layers that run attention; all others run the short convolution.
    pub attention_layers: &'static [usize],
    /// Taps of the convolution (`shortconv.l_cache`).
    pub taps: usize,
}

/// DeepSeek-V2's multi-head latent attention and its shared experts.
#[derive(Clone, Copy, Debug)]
pub struct LatentAttention {
    /// Rank of the query compression; `None` projects queries directly (V2-Lite).
    pub q_lora: Option<usize>,
    /// Rank of the compressed key/value latent.
    pub kv_lora: usize,
    /// Non-rotated part of a query/key head.
    pub nope: usize,
    /// Rotated part of a query/key head.
    pub rope: usize,
    /// Width of a value head.
    pub v_head: usize,
    /// Shared experts every token runs beside the routed ones.
    pub shared_experts: usize,
    /// Leading layers with a dense feed-forward block instead of experts.
    pub leading_dense: usize,
}

/// GLM-4.5's attention and routing beside its experts: NeoX RoPE over the leading dimensions
/// of each head, dense leading layers, sigmoid routing with a selection bias and shared
/// experts.
#[derive(Clone, Copy, Debug)]
pub struct GlmMoe {
    /// Rotated dimensions of a head.
    pub rope_dims: usize,
    /// Leading layers with a dense feed-forward block instead of experts.
    pub leading_dense: usize,
    /// Shared experts every token runs beside the routed ones.
    pub shared_experts: usize,
}

/// What a synthetic model's layers are made of.
#[derive(Clone, Copy, Debug)]
pub enum Family {
    /// Llama: grouped-query attention and a SwiGLU feed-forward block.
    Llama,
    /// Qwen3-MoE: Llama's attention with q/k norms, softmax-routed experts.
    Qwen3Moe(Experts),
    /// Qwen3.5: gated delta-net layers with gated full attention every few layers.
    Qwen35(DeltaNet),
    /// Qwen3.5-MoE: Qwen3.5's layers, softmax-routed experts beside one gated shared expert
    /// as wide as a routed one.
    Qwen35Moe(DeltaNet, Experts),
    /// GLM-4.5: biased q/k/v, sigmoid-routed and shared experts after dense leading layers.
    Glm4Moe(GlmMoe, Experts),
    /// Gemma 4: sliding-window and full attention of different head sizes, per-layer inputs,
    /// KV caches shared by the last layers.
    Gemma4(Gemma4Layers),
    /// LFM2: short convolutions with a few attention layers.
    Lfm2(ShortConv),
    /// DeepSeek-V2: latent attention, softmax-routed and shared experts.
    DeepSeek2(LatentAttention, Experts),
    /// BERT as bge has it: an encoder with learned positions, biases and a GELU FFN.
    Bert,
    /// nomic-bert: an encoder with rotary positions, a fused `attn_qkv` and a SwiGLU FFN.
    NomicBert,
}

impl Family {
    /// The GGUF architecture name.
    pub fn arch(&self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Qwen3Moe(_) => "qwen3moe",
            Family::Qwen35(_) => "qwen35",
            Family::Qwen35Moe(..) => "qwen35moe",
            Family::Glm4Moe(..) => "glm4moe",
            Family::Gemma4(_) => "gemma4",
            Family::Lfm2(_) => "lfm2",
            Family::DeepSeek2(..) => "deepseek2",
            Family::Bert => "bert",
            Family::NomicBert => "nomic-bert",
        }
    }

    /// Whether the model is an encoder for embeddings (no LM head, a WordPiece vocabulary).
    pub fn is_encoder(&self) -> bool {
        matches!(self, Family::Bert | Family::NomicBert)
    }

    /// The routed experts, if the family has them.
    pub fn experts(&self) -> Option<Experts> {
        match *self {
            Family::Qwen3Moe(e)
            | Family::DeepSeek2(_, e)
            | Family::Qwen35Moe(_, e)
            | Family::Glm4Moe(_, e) => Some(e),
            _ => None,
        }
    }

    /// Whether the output projection is the token embedding (no `output.weight`).
    pub fn tied_embeddings(&self) -> bool {
        matches!(
            self,
            Family::Qwen35(_) | Family::Qwen35Moe(..) | Family::Lfm2(_) | Family::Gemma4(_)
        )
    }

    /// The name of the norm before the output projection.
    pub fn output_norm(&self) -> &'static str {
        match self {
            Family::Lfm2(_) => "token_embd_norm.weight",
            _ => "output_norm.weight",
        }
    }
}

/// A metadata key relative to `<arch>.` and its value.
pub(super) type ArchKey = (&'static str, MetadataValue);

/// The `<arch>.*` metadata of `s`, keys relative to the architecture prefix.
pub fn arch_metadata(s: &Shape) -> Vec<ArchKey> {
    use MetadataValue::{Bool, F32, I32, U32};
    let u32 = |n: usize| U32(n as u32);
    let array = |element, items| MetadataValue::Array { element, items };
    let mut keys = vec![
        ("context_length", u32(s.context)),
        ("embedding_length", u32(s.hidden)),
        ("block_count", u32(s.layers)),
        ("feed_forward_length", u32(s.ffn)),
        ("rope.freq_base", F32(s.rope_base)),
        ("attention.head_count", u32(s.heads)),
        ("attention.layer_norm_rms_epsilon", F32(s.norm_eps)),
    ];
    let head_dims = [
        ("attention.key_length", u32(s.head_dim)),
        ("attention.value_length", u32(s.head_dim)),
    ];
    match s.family {
        Family::Llama => keys.extend([
            ("attention.head_count_kv", u32(s.kv_heads)),
            ("rope.dimension_count", u32(s.head_dim)),
            ("vocab_size", u32(s.vocab)),
        ]),
        Family::Qwen3Moe(e) => keys.extend(
            [
                ("attention.head_count_kv", u32(s.kv_heads)),
                ("rope.dimension_count", u32(s.head_dim)),
                ("vocab_size", u32(s.vocab)),
            ]
            .into_iter()
            .chain(head_dims)
            .chain(expert_keys(e)),
        ),
        Family::Gemma4(g) => return gemma4::arch_metadata(s, g),
        Family::Glm4Moe(m, e) => keys.extend(
            [
                ("attention.head_count_kv", u32(s.kv_heads)),
                ("rope.dimension_count", u32(m.rope_dims)),
                ("leading_dense_block_count", u32(m.leading_dense)),
                ("expert_shared_count", u32(m.shared_experts)),
                ("expert_weights_scale", F32(1.0)),
                ("expert_weights_norm", Bool(true)),
                ("expert_gating_func", u32(EXPERT_GATING_SIGMOID)),
                ("vocab_size", u32(s.vocab)),
            ]
            .into_iter()
            .chain(head_dims)
            .chain(expert_keys(e)),
        ),
        Family::Qwen35(d) | Family::Qwen35Moe(d, _) => {
            // Text gives every section the same position: only their sum (the rotated pairs)
            // matters; split as Qwen3.5's `mrope_section` is.
            let pairs = d.rope_dims / 2;
            let first = pairs.div_ceil(3);
            let second = (pairs - first).div_ceil(2);
            let sections = [first, second, pairs - first - second, 0];
            keys.extend(head_dims);
            keys.extend([
                ("attention.head_count_kv", u32(s.kv_heads)),
                ("rope.dimension_count", u32(d.rope_dims)),
                (
                    "rope.dimension_sections",
                    array(
                        ValueType::I32,
                        sections.iter().map(|&n| I32(n as i32)).collect(),
                    ),
                ),
                ("ssm.conv_kernel", u32(d.conv_kernel)),
                ("ssm.state_size", u32(d.state)),
                ("ssm.group_count", u32(d.qk_heads)),
                ("ssm.time_step_rank", u32(d.v_heads)),
                ("ssm.inner_size", u32(d.v_heads * d.state)),
                (
                    "attention.recurrent_layers",
                    array(
                        ValueType::Bool,
                        (0..s.layers)
                            .map(|i| Bool(!is_full_attention(d, i)))
                            .collect(),
                    ),
                ),
                ("full_attention_interval", u32(d.full_attention_interval)),
            ]);
            if let Family::Qwen35Moe(_, e) = s.family {
                keys.extend(expert_keys(e));
                keys.push(("expert_shared_feed_forward_length", u32(e.ffn)));
            }
        }
        Family::Lfm2(c) => keys.extend([
            (
                "attention.head_count_kv",
                array(
                    ValueType::I32,
                    (0..s.layers)
                        .map(|i| {
                            I32(if c.attention_layers.contains(&i) {
                                s.kv_heads as i32
                            } else {
                                0
                            })
                        })
                        .collect(),
                ),
            ),
            ("shortconv.l_cache", u32(c.taps)),
        ]),
        Family::Bert | Family::NomicBert => return encoder_metadata(s),
        Family::DeepSeek2(m, e) => {
            keys.extend([
                ("attention.head_count_kv", u32(1)),
                ("attention.kv_lora_rank", u32(m.kv_lora)),
                ("attention.key_length", u32(m.kv_lora + m.rope)),
                ("attention.value_length", u32(m.kv_lora)),
                ("attention.key_length_mla", u32(m.nope + m.rope)),
                ("attention.value_length_mla", u32(m.v_head)),
                ("rope.dimension_count", u32(m.rope)),
                ("leading_dense_block_count", u32(m.leading_dense)),
                ("expert_shared_count", u32(m.shared_experts)),
                ("expert_weights_scale", F32(1.0)),
                ("expert_weights_norm", Bool(false)),
                ("expert_gating_func", u32(1)),
                ("vocab_size", u32(s.vocab)),
            ]);
            if let Some(q_lora) = m.q_lora {
                keys.push(("attention.q_lora_rank", u32(q_lora)));
            }
            keys.extend(expert_keys(e));
        }
    }
    keys
}

/// llama.cpp's `expert_gating_func` for sigmoid routing.
const EXPERT_GATING_SIGMOID: usize = 2;

fn expert_keys(e: Experts) -> [ArchKey; 3] {
    [
        ("expert_count", MetadataValue::U32(e.count as u32)),
        ("expert_used_count", MetadataValue::U32(e.used as u32)),
        (
            "expert_feed_forward_length",
            MetadataValue::U32(e.ffn as u32),
        ),
    ]
}

/// Whether layer `i` of a Qwen3.5 model is a full-attention layer (llama.cpp's rule for
/// `full_attention_interval`).
fn is_full_attention(d: DeltaNet, i: usize) -> bool {
    (i + 1).is_multiple_of(d.full_attention_interval)
}

/// A tensor: its name (after `blk.N.` for a layer's) and its GGUF dims.
pub(super) type LayerTensor = (&'static str, Vec<u64>);

/// The tensors of layer `i` of `s`, in file order.
pub fn layer_tensors(s: &Shape, i: usize) -> Vec<LayerTensor> {
    let (e, ffn) = (s.hidden as u64, s.ffn as u64);
    let (hd, heads, kv) = (s.head_dim as u64, s.heads as u64, s.kv_heads as u64);
    let attention = |q_rows: u64| {
        vec![
            ("attn_q.weight", vec![e, q_rows]),
            ("attn_k.weight", vec![e, kv * hd]),
            ("attn_v.weight", vec![e, kv * hd]),
            ("attn_output.weight", vec![heads * hd, e]),
        ]
    };
    let qk_norms = || {
        vec![
            ("attn_q_norm.weight", vec![hd]),
            ("attn_k_norm.weight", vec![hd]),
        ]
    };
    let dense_ffn = |width: u64| {
        vec![
            ("ffn_gate.weight", vec![e, width]),
            ("ffn_up.weight", vec![e, width]),
            ("ffn_down.weight", vec![width, e]),
        ]
    };
    let shared_experts = |width: u64| {
        vec![
            ("ffn_gate_shexp.weight", vec![e, width]),
            ("ffn_up_shexp.weight", vec![e, width]),
            ("ffn_down_shexp.weight", vec![width, e]),
        ]
    };
    let routed = |x: Experts| {
        let (n, w) = (x.count as u64, x.ffn as u64);
        vec![
            ("ffn_gate_inp.weight", vec![e, n]),
            ("ffn_gate_exps.weight", vec![e, w, n]),
            ("ffn_up_exps.weight", vec![e, w, n]),
            ("ffn_down_exps.weight", vec![w, e, n]),
        ]
    };
    let mut list = vec![("attn_norm.weight", vec![e])];
    match s.family {
        Family::Llama => {
            list.extend(attention(heads * hd));
            list.push(("ffn_norm.weight", vec![e]));
            list.extend(dense_ffn(ffn));
        }
        Family::Qwen3Moe(x) => {
            list.extend(attention(heads * hd));
            list.push(("ffn_norm.weight", vec![e]));
            list.extend(qk_norms());
            list.extend(routed(x));
        }
        Family::Qwen35(d) | Family::Qwen35Moe(d, _) => {
            list.push(("post_attention_norm.weight", vec![e]));
            if is_full_attention(d, i) {
                // Each query head is followed by its output gate.
                list.extend(attention(2 * heads * hd));
                list.extend(qk_norms());
            } else {
                let (hk, hv, st) = (d.qk_heads as u64, d.v_heads as u64, d.state as u64);
                let conv_channels = 2 * hk * st + hv * st;
                list.extend([
                    ("attn_qkv.weight", vec![e, conv_channels]),
                    ("attn_gate.weight", vec![e, hv * st]),
                    (
                        "ssm_conv1d.weight",
                        vec![d.conv_kernel as u64, conv_channels],
                    ),
                    ("ssm_dt.bias", vec![hv]),
                    ("ssm_a", vec![hv]),
                    ("ssm_beta.weight", vec![e, hv]),
                    ("ssm_alpha.weight", vec![e, hv]),
                    ("ssm_norm.weight", vec![st]),
                    ("ssm_out.weight", vec![hv * st, e]),
                ]);
            }
            match s.family {
                Family::Qwen35Moe(_, x) => {
                    list.extend(routed(x));
                    list.push(("ffn_gate_inp_shexp.weight", vec![e]));
                    list.extend(shared_experts(x.ffn as u64));
                }
                _ => list.extend(dense_ffn(ffn)),
            }
        }
        Family::Glm4Moe(m, x) => {
            list.extend([
                ("attn_q.weight", vec![e, heads * hd]),
                ("attn_q.bias", vec![heads * hd]),
                ("attn_k.weight", vec![e, kv * hd]),
                ("attn_k.bias", vec![kv * hd]),
                ("attn_v.weight", vec![e, kv * hd]),
                ("attn_v.bias", vec![kv * hd]),
                ("attn_output.weight", vec![heads * hd, e]),
                ("post_attention_norm.weight", vec![e]),
            ]);
            if i < m.leading_dense {
                list.extend(dense_ffn(ffn));
            } else {
                list.extend(routed(x));
                list.push(("exp_probs_b.bias", vec![x.count as u64]));
                list.extend(shared_experts((x.ffn * m.shared_experts) as u64));
            }
        }
        Family::Gemma4(g) => return gemma4::layer_tensors(s, g, i),
        Family::Lfm2(c) => {
            if c.attention_layers.contains(&i) {
                list.extend(attention(heads * hd));
                list.extend(qk_norms());
            } else {
                list.extend([
                    ("shortconv.conv.weight", vec![c.taps as u64, e]),
                    ("shortconv.in_proj.weight", vec![e, 3 * e]),
                    ("shortconv.out_proj.weight", vec![e, e]),
                ]);
            }
            list.push(("ffn_norm.weight", vec![e]));
            list.extend(dense_ffn(ffn));
        }
        Family::DeepSeek2(m, x) => {
            let (kv_lora, nope, rope, v_head) = (
                m.kv_lora as u64,
                m.nope as u64,
                m.rope as u64,
                m.v_head as u64,
            );
            let q_rows = heads * (nope + rope);
            match m.q_lora {
                Some(q_lora) => list.extend([
                    ("attn_q_a.weight", vec![e, q_lora as u64]),
                    ("attn_q_a_norm.weight", vec![q_lora as u64]),
                    ("attn_q_b.weight", vec![q_lora as u64, q_rows]),
                ]),
                None => list.push(("attn_q.weight", vec![e, q_rows])),
            }
            list.extend([
                ("attn_kv_a_mqa.weight", vec![e, kv_lora + rope]),
                ("attn_kv_a_norm.weight", vec![kv_lora]),
                ("attn_k_b.weight", vec![nope, kv_lora, heads]),
                ("attn_v_b.weight", vec![kv_lora, v_head, heads]),
                ("attn_output.weight", vec![heads * v_head, e]),
                ("ffn_norm.weight", vec![e]),
            ]);
            if i < m.leading_dense {
                list.extend(dense_ffn(ffn));
            } else {
                list.extend(routed(x));
                list.extend(shared_experts((x.ffn * m.shared_experts) as u64));
            }
        }
        Family::Bert | Family::NomicBert => return encoder_layer_tensors(s),
    }
    list
}

/// llama.cpp's pooling types (`<arch>.pooling_type`).
const POOLING_MEAN: u32 = 1;
const POOLING_CLS: u32 = 2;

/// The `<arch>.*` metadata of the encoder `s`: bge pools the `[CLS]` token, nomic the mean.
fn encoder_metadata(s: &Shape) -> Vec<ArchKey> {
    use MetadataValue::{Bool, F32, U32};
    let u32 = |n: usize| U32(n as u32);
    let mut keys = vec![
        ("context_length", u32(s.context)),
        ("embedding_length", u32(s.hidden)),
        ("block_count", u32(s.layers)),
        ("feed_forward_length", u32(s.ffn)),
        ("attention.head_count", u32(s.heads)),
        ("attention.layer_norm_epsilon", F32(s.norm_eps)),
        ("attention.causal", Bool(false)),
    ];
    match s.family {
        Family::NomicBert => keys.extend([
            ("rope.freq_base", F32(s.rope_base)),
            ("pooling_type", U32(POOLING_MEAN)),
        ]),
        _ => keys.push(("pooling_type", U32(POOLING_CLS))),
    }
    keys
}

/// The tensors of the encoder `s` outside its layers, in file order.
pub fn encoder_model_tensors(s: &Shape) -> Vec<LayerTensor> {
    let (e, vocab) = (s.hidden as u64, s.vocab as u64);
    let mut list = vec![
        ("token_embd.weight", vec![e, vocab]),
        ("token_types.weight", vec![e, 2]),
    ];
    if matches!(s.family, Family::Bert) {
        list.push(("position_embd.weight", vec![e, s.context as u64]));
    }
    list.extend([
        ("token_embd_norm.weight", vec![e]),
        ("token_embd_norm.bias", vec![e]),
    ]);
    list
}

/// The tensors of one layer of the encoder `s`, in file order.
fn encoder_layer_tensors(s: &Shape) -> Vec<LayerTensor> {
    let (e, ffn) = (s.hidden as u64, s.ffn as u64);
    let norm = |weight, bias| [(weight, vec![e]), (bias, vec![e])];
    let mut list = Vec::new();
    if matches!(s.family, Family::NomicBert) {
        list.extend([
            ("attn_qkv.weight", vec![e, 3 * e]),
            ("attn_output.weight", vec![e, e]),
        ]);
        list.extend(norm("attn_output_norm.weight", "attn_output_norm.bias"));
        list.extend([
            ("ffn_up.weight", vec![e, ffn]),
            ("ffn_gate.weight", vec![e, ffn]),
            ("ffn_down.weight", vec![ffn, e]),
        ]);
    } else {
        for (weight, bias) in [
            ("attn_q.weight", "attn_q.bias"),
            ("attn_k.weight", "attn_k.bias"),
            ("attn_v.weight", "attn_v.bias"),
            ("attn_output.weight", "attn_output.bias"),
        ] {
            list.extend([(weight, vec![e, e]), (bias, vec![e])]);
        }
        list.extend(norm("attn_output_norm.weight", "attn_output_norm.bias"));
        list.extend([
            ("ffn_up.weight", vec![e, ffn]),
            ("ffn_up.bias", vec![ffn]),
            ("ffn_down.weight", vec![ffn, e]),
            ("ffn_down.bias", vec![e]),
        ]);
    }
    list.extend(norm("layer_output_norm.weight", "layer_output_norm.bias"));
    list
}
