//! The shapes of the synthetic models `make-model` writes: each copies a real model's layout,
//! at its size where that runs on a CPU, scaled down where the real one is too large (each
//! doc comment says what it keeps and what it cuts).

use super::synthetic_families::{
    DeltaNet, Experts, Family, Gemma4Layers, GlmMoe, LatentAttention, Shape, ShortConv,
};

/// TinyLlama 1.1B's shape.
pub const LLAMA_1B: Shape = Shape {
    file_name: "llama-1b-synthetic-q4_k_m.gguf",
    family: Family::Llama,
    layers: 22,
    hidden: 2048,
    ffn: 5632,
    heads: 32,
    kv_heads: 4,
    head_dim: 64,
    vocab: 32_000,
    context: 2048,
    rope_base: 1e4,
    norm_eps: 1e-5,
};

/// A Qwen3-MoE of 5.1 billion parameters: 16 layers of 64 experts, 6 used per token.
pub const QWEN3_MOE: Shape = Shape {
    file_name: "qwen3moe-5b-synthetic-q4_k_m.gguf",
    family: Family::Qwen3Moe(Experts {
        count: 64,
        used: 6,
        ffn: 768,
    }),
    layers: 16,
    hidden: 2048,
    ffn: 768,
    heads: 32,
    kv_heads: 4,
    head_dim: 64,
    vocab: 32_000,
    context: 4096,
    rope_base: 1e6,
    norm_eps: 1e-5,
};

/// Qwen3.5-0.8B's text model: 24 layers, three gated delta-net layers to one of gated full
/// attention, a 248k vocabulary, tied embeddings.
pub const QWEN35_0_8B: Shape = Shape {
    file_name: "qwen35-0.8b-synthetic-q4_k_m.gguf",
    family: Family::Qwen35(DeltaNet {
        full_attention_interval: 4,
        qk_heads: 16,
        v_heads: 16,
        state: 128,
        conv_kernel: 4,
        rope_dims: 64,
    }),
    layers: 24,
    hidden: 1024,
    ffn: 3584,
    heads: 8,
    kv_heads: 2,
    head_dim: 256,
    vocab: 248_320,
    context: 262_144,
    rope_base: 1e7,
    norm_eps: 1e-6,
};

/// The layers of LFM2-1.2B that run attention; its other ten run short convolutions.
const LFM2_1_2B_ATTENTION: [usize; 6] = [2, 5, 8, 10, 12, 14];

/// LFM2-1.2B: 16 layers, six of them attention, the rest short convolutions of 3 taps.
pub const LFM2_1_2B: Shape = Shape {
    file_name: "lfm2-1.2b-synthetic-q4_k_m.gguf",
    family: Family::Lfm2(ShortConv {
        attention_layers: &LFM2_1_2B_ATTENTION,
        taps: 3,
    }),
    layers: 16,
    hidden: 2048,
    ffn: 8192,
    heads: 32,
    kv_heads: 8,
    head_dim: 64,
    vocab: 65_536,
    context: 128_000,
    rope_base: 1e6,
    norm_eps: 1e-5,
};

/// DeepSeek-V2-Lite cut to 3.3 billion parameters: its attention (16 latent-attention heads
/// over a 512-wide latent), its vocabulary and dense first layer, but 10 layers instead of 27
/// and 32 routed experts instead of 64 (6 used, 2 shared). Queries go through a rank-1536
/// compression as in DeepSeek-V2 and V3: llama.cpp takes a `deepseek2` file of other than 26
/// or 27 layers for one of those and requires it.
pub const DEEPSEEK2_LITE_3B: Shape = Shape {
    file_name: "deepseek2-lite-3b-synthetic-q4_k_m.gguf",
    family: Family::DeepSeek2(
        LatentAttention {
            q_lora: Some(1536),
            kv_lora: 512,
            nope: 128,
            rope: 64,
            v_head: 128,
            shared_experts: 2,
            leading_dense: 1,
        },
        Experts {
            count: 32,
            used: 6,
            ffn: 1408,
        },
    ),
    layers: 10,
    hidden: 2048,
    ffn: 10_944,
    heads: 16,
    kv_heads: 1,
    head_dim: 192,
    vocab: 102_400,
    context: 4096,
    rope_base: 1e4,
    norm_eps: 1e-6,
};

/// Qwen3.5-35B-A3B's layout at 4.3 billion parameters: its hidden width, heads, delta net,
/// 248k vocabulary and tied embeddings, three gated delta-net layers to one of gated full
/// attention, 8 routed experts per token beside one gated shared expert as wide as a routed
/// one (512); but 16 layers instead of 40 and 64 experts instead of 256.
pub const QWEN35_MOE_4B: Shape = Shape {
    file_name: "qwen35moe-4b-synthetic-q4_k_m.gguf",
    family: Family::Qwen35Moe(
        DeltaNet {
            full_attention_interval: 4,
            qk_heads: 16,
            v_heads: 32,
            state: 128,
            conv_kernel: 4,
            rope_dims: 64,
        },
        Experts {
            count: 64,
            used: 8,
            ffn: 512,
        },
    ),
    layers: 16,
    hidden: 2048,
    ffn: 512,
    heads: 16,
    kv_heads: 2,
    head_dim: 256,
    vocab: 248_320,
    context: 262_144,
    rope_base: 1e7,
    norm_eps: 1e-6,
};

/// GLM-4.5-Air's layout at 3.5 billion parameters: a dense first layer then experts routed by
/// sigmoid with a selection bias (8 used, 1 shared), q/k/v biases and no q/k norms, 128-wide
/// heads rotated over their first half, its 151k vocabulary, untied; but half its width (2048,
/// 48 query and 4 key/value heads, expert FFN 704, dense FFN 5472), 10 layers instead of 46 and
/// 64 experts instead of 128, and no multi-token-prediction layer.
pub const GLM4_MOE_AIR_3B: Shape = Shape {
    file_name: "glm4moe-air-3b-synthetic-q4_k_m.gguf",
    family: Family::Glm4Moe(
        GlmMoe {
            rope_dims: 64,
            leading_dense: 1,
            shared_experts: 1,
        },
        Experts {
            count: 64,
            used: 8,
            ffn: 704,
        },
    ),
    layers: 10,
    hidden: 2048,
    ffn: 5472,
    heads: 48,
    kv_heads: 4,
    head_dim: 128,
    vocab: 151_552,
    context: 131_072,
    rope_base: 1e6,
    norm_eps: 1e-5,
};

/// Gemma 4 E2B's layout at its size (4 billion parameters, 2.3 of them its per-layer
/// embedding table): 35 layers, four sliding-window layers (256-wide heads, window 512) to one
/// of full attention (512-wide heads, a quarter rotated), one key/value head, per-layer inputs
/// 256 wide, the last 20 layers reading earlier layers' KV caches, a 262k vocabulary, tied
/// and soft-capped logits. Only its KV-sharing layers' double-width FFN is left out: every
/// layer's is 6144 wide.
pub const GEMMA4_E2B: Shape = Shape {
    file_name: "gemma4-e2b-synthetic-q4_k_m.gguf",
    family: Family::Gemma4(Gemma4Layers {
        full_attention_interval: 5,
        window: 512,
        sliding_head_dim: 256,
        full_rotated_pairs: 64,
        per_layer_input: 256,
        shared_kv_layers: 20,
        softcap: 30.0,
    }),
    layers: 35,
    hidden: 1536,
    ffn: 6144,
    heads: 8,
    kv_heads: 1,
    head_dim: 512,
    vocab: 262_144,
    context: 131_072,
    rope_base: 1e6,
    norm_eps: 1e-6,
};

/// bge-small-en-v1.5's shape: a 12-layer BERT, 384 wide, `[CLS]` pooling.
pub const BGE_SMALL: Shape = Shape {
    file_name: "bge-small-synthetic-q4_k_m.gguf",
    family: Family::Bert,
    layers: 12,
    hidden: 384,
    ffn: 1536,
    heads: 12,
    kv_heads: 12,
    head_dim: 32,
    vocab: 30_522,
    context: 512,
    rope_base: 1e4,
    norm_eps: 1e-12,
};

/// nomic-embed-text-v1.5's shape: a 12-layer nomic-bert, 768 wide, rotary positions of base
/// 1000 over 2048 positions, mean pooling.
pub const NOMIC_EMBED: Shape = Shape {
    file_name: "nomic-embed-v1.5-synthetic-q4_k_m.gguf",
    family: Family::NomicBert,
    layers: 12,
    hidden: 768,
    ffn: 3072,
    heads: 12,
    kv_heads: 12,
    head_dim: 64,
    vocab: 30_522,
    context: 2048,
    rope_base: 1e3,
    norm_eps: 1e-12,
};

/// The synthetic embedding models, by the name the embeddings bench gives them.
pub const EMBEDDING_MODELS: [(&str, &Shape); 2] =
    [("bge-small", &BGE_SMALL), ("nomic-embed", &NOMIC_EMBED)];

/// The synthetic language models, by the name the bench options give them.
pub const MODELS: [(&str, &Shape); 8] = [
    ("llama-1b", &LLAMA_1B),
    ("qwen3moe", &QWEN3_MOE),
    ("qwen35", &QWEN35_0_8B),
    ("lfm2", &LFM2_1_2B),
    ("deepseek2", &DEEPSEEK2_LITE_3B),
    ("gemma4", &GEMMA4_E2B),
    ("glm4moe", &GLM4_MOE_AIR_3B),
    ("qwen35moe", &QWEN35_MOE_4B),
];
