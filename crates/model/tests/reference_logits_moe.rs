//! The mixture-of-experts fixture models (qwen3moe, Mixtral-style llama, gpt-oss with MXFP4
//! experts, GLM-4.5 and DeepSeek-V2 with sigmoid routing, shared experts and latent attention)
//! against llama.cpp's logits, greedy continuations and tokens, within the fixtures README's
//! MoE tolerances (§3.4). Routing is discontinuous: where two experts' scores nearly tie, any
//! rounding difference may pick the other one, so quantized models are held per position.

mod common;

use common::reference::{F32_NEW_ARCHS, Q8_0_NEW_ARCHS, Tolerance, check_model};

/// Quantized weights, activations quantized as ggml does (README §3.4), with the 1.5 bound
/// held at 99 % of a case's positions as the README's newer quantized classes hold it: the
/// references come from an AVX-512 build, and rinfer's AVX2 kernels (chosen on a CPU without
/// AVX-512 VNNI) sum in another order, which flips one near-tied route of qwen3moe's "mixed"
/// case (2.3 at that position).
const QUANTIZED_MOE: Tolerance = Tolerance {
    per_position: 0.5,
    share: 0.98,
    max_abs: 1.5,
    max_abs_share: 0.99,
    mean_abs: 0.03,
    argmax_share: 0.97,
    greedy_margin: 1.0,
    min_cosine: None,
};

/// F32 weights of the 2026 MoE families: greedy ids hold up to the first step whose margin is
/// below the tolerance (README §3.4).
const F32_NEW_MOE: Tolerance = Tolerance {
    greedy_margin: 1e-3,
    ..F32_NEW_ARCHS
};

/// Q8_0 weights of the 2026 families, activations quantized as ggml does (README §3.4); no
/// cosine bound (a routing flip at the last position may move it).
const QUANTIZED_NEW: Tolerance = Tolerance {
    min_cosine: None,
    ..Q8_0_NEW_ARCHS
};

#[test]
fn qwen3moe_f32_matches_llama_cpp() {
    check_model("qwen3moe-tiny-f32", &F32_NEW_ARCHS);
}

#[test]
fn qwen3moe_q4_k_m_matches_llama_cpp() {
    check_model("qwen3moe-tiny-q4_k_m", &QUANTIZED_MOE);
}

#[test]
fn mixtral_f32_matches_llama_cpp() {
    check_model("mixtral-tiny-f32", &F32_NEW_ARCHS);
}

#[test]
fn mixtral_q8_0_matches_llama_cpp() {
    check_model("mixtral-tiny-q8_0", &QUANTIZED_MOE);
}

#[test]
fn gpt_oss_f32_matches_llama_cpp() {
    check_model("gpt-oss-tiny-f32", &F32_NEW_ARCHS);
}

#[test]
fn gpt_oss_mxfp4_matches_llama_cpp() {
    check_model("gpt-oss-tiny-mxfp4", &QUANTIZED_MOE);
}

#[test]
fn glm4moe_f32_matches_llama_cpp() {
    check_model("glm4moe-tiny-f32", &F32_NEW_MOE);
}

#[test]
fn glm4moe_q8_0_matches_llama_cpp() {
    check_model("glm4moe-tiny-q8_0", &QUANTIZED_NEW);
}

#[test]
fn deepseek2_f32_matches_llama_cpp() {
    check_model("deepseek2-tiny-f32", &F32_NEW_MOE);
}

#[test]
fn deepseek2_q8_0_matches_llama_cpp() {
    check_model("deepseek2-tiny-q8_0", &QUANTIZED_NEW);
}
