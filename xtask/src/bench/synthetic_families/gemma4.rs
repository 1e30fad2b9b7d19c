//! Gemma 4 as a synthetic family: its `gemma4.*` metadata and tensors as llama.cpp's `gemma4`
//! loader requires them (`../shared/fixtures/README.md` § "New architectures").
//!
//! Sliding-window layers have their own head size and RoPE base; full-attention layers rotate
//! proportionally (`rope_freqs` divides the angles of the pairs past the rotated ones by a huge
//! number). Every layer adds its per-layer input (PLE), whose table (`per_layer_token_embd`) is
//! a second embedding `per_layer_input × layers` wide. The last `shared_kv_layers` layers keep
//! no KV cache: they project queries only, so the file has no `attn_k`, `attn_v` or
//! `attn_k_norm` for them.

use rinfer_formats::gguf::{MetadataValue, ValueType};

use super::{ArchKey, LayerTensor, Shape};

/// The layers of a Gemma 4 model beyond [`Shape`]'s dims, which give its full-attention heads.
#[derive(Clone, Copy, Debug)]
pub struct Gemma4Layers {
    /// Every this many layers one is full attention (the last of each group); the others use
    /// the sliding window.
    pub full_attention_interval: usize,
    /// Positions a sliding-window layer sees.
    pub window: usize,
    /// Width of a sliding-window head (all of it rotated).
    pub sliding_head_dim: usize,
    /// Rotated pairs of a full-attention head.
    pub full_rotated_pairs: usize,
    /// Width of each layer's per-layer input.
    pub per_layer_input: usize,
    /// The last layers that read an earlier layer's KV cache.
    pub shared_kv_layers: usize,
    /// The logits' soft cap.
    pub softcap: f32,
}

/// RoPE base of the sliding-window layers.
const SLIDING_ROPE_BASE: f32 = 1e4;

/// The divisor of a pair's angle that leaves it unrotated (as the converter writes it).
const UNROTATED: f32 = 1e30;

/// Whether layer `i` uses the sliding window.
fn is_sliding(g: Gemma4Layers, i: usize) -> bool {
    !(i + 1).is_multiple_of(g.full_attention_interval)
}

/// Whether layer `i` reads an earlier layer's KV cache instead of keeping its own.
fn shares_kv(s: &Shape, g: Gemma4Layers, i: usize) -> bool {
    i >= s.layers - g.shared_kv_layers
}

/// The `gemma4.*` metadata of `s`, keys relative to the architecture prefix.
pub fn arch_metadata(s: &Shape, g: Gemma4Layers) -> Vec<ArchKey> {
    use MetadataValue::{Bool, F32, U32};
    let u32 = |n: usize| U32(n as u32);
    vec![
        ("context_length", u32(s.context)),
        ("embedding_length", u32(s.hidden)),
        ("block_count", u32(s.layers)),
        ("feed_forward_length", u32(s.ffn)),
        ("rope.freq_base", F32(s.rope_base)),
        ("rope.freq_base_swa", F32(SLIDING_ROPE_BASE)),
        ("rope.dimension_count", u32(s.head_dim)),
        ("rope.dimension_count_swa", u32(g.sliding_head_dim)),
        ("attention.head_count", u32(s.heads)),
        ("attention.head_count_kv", u32(s.kv_heads)),
        ("attention.key_length", u32(s.head_dim)),
        ("attention.value_length", u32(s.head_dim)),
        ("attention.key_length_swa", u32(g.sliding_head_dim)),
        ("attention.value_length_swa", u32(g.sliding_head_dim)),
        ("attention.layer_norm_rms_epsilon", F32(s.norm_eps)),
        ("attention.sliding_window", u32(g.window)),
        (
            "attention.sliding_window_pattern",
            MetadataValue::Array {
                element: ValueType::Bool,
                items: (0..s.layers).map(|i| Bool(is_sliding(g, i))).collect(),
            },
        ),
        ("attention.shared_kv_layers", u32(g.shared_kv_layers)),
        ("embedding_length_per_layer_input", u32(g.per_layer_input)),
        ("final_logit_softcapping", F32(g.softcap)),
    ]
}

/// The tensors of `s` outside its layers that other families lack, in file order.
pub fn model_tensors(s: &Shape, g: Gemma4Layers) -> Vec<LayerTensor> {
    let (e, p, layers) = (s.hidden as u64, g.per_layer_input as u64, s.layers as u64);
    vec![
        ("rope_freqs.weight", vec![s.head_dim as u64 / 2]),
        (
            "per_layer_token_embd.weight",
            vec![p * layers, s.vocab as u64],
        ),
        ("per_layer_model_proj.weight", vec![e, p * layers]),
        ("per_layer_proj_norm.weight", vec![p]),
    ]
}

/// The per-pair divisors of a full-attention layer's angles (`rope_freqs.weight`, f32 bytes):
/// one for the rotated pairs, [`UNROTATED`] for the rest.
pub fn rope_freqs(s: &Shape, g: Gemma4Layers) -> Vec<u8> {
    (0..s.head_dim / 2)
        .map(|pair| match pair < g.full_rotated_pairs {
            true => 1.0f32,
            false => UNROTATED,
        })
        .flat_map(f32::to_le_bytes)
        .collect()
}

/// The tensors of layer `i` of `s`, in file order.
pub fn layer_tensors(s: &Shape, g: Gemma4Layers, i: usize) -> Vec<LayerTensor> {
    let (e, ffn, p) = (s.hidden as u64, s.ffn as u64, g.per_layer_input as u64);
    let hd = match is_sliding(g, i) {
        true => g.sliding_head_dim as u64,
        false => s.head_dim as u64,
    };
    let (q, kv) = (s.heads as u64 * hd, s.kv_heads as u64 * hd);
    let mut list = vec![("attn_norm.weight", vec![e]), ("attn_q.weight", vec![e, q])];
    let own_kv = !shares_kv(s, g, i);
    if own_kv {
        list.extend([
            ("attn_k.weight", vec![e, kv]),
            ("attn_v.weight", vec![e, kv]),
        ]);
    }
    list.extend([
        ("attn_output.weight", vec![q, e]),
        ("attn_q_norm.weight", vec![hd]),
    ]);
    if own_kv {
        list.push(("attn_k_norm.weight", vec![hd]));
    }
    list.extend([
        ("post_attention_norm.weight", vec![e]),
        ("layer_output_scale.weight", vec![1]),
        ("ffn_norm.weight", vec![e]),
        ("ffn_gate.weight", vec![e, ffn]),
        ("ffn_up.weight", vec![e, ffn]),
        ("ffn_down.weight", vec![ffn, e]),
        ("post_ffw_norm.weight", vec![e]),
        ("inp_gate.weight", vec![e, p]),
        ("proj.weight", vec![p, e]),
        ("post_norm.weight", vec![e]),
    ]);
    list
}
