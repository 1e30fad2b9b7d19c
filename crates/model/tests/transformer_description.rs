//! The transformer each architecture describes: the stages both executors (the CPU forward pass
//! and the CUDA step builder) walk. Architecture differences live only in these lists and their
//! parameters.

mod common;

use common::fixture_model;
use rinfer_kernels::block::{RopeStyle, Stage};
use rinfer_model::config::Positional;
use rinfer_model::{KvCache, Logits, Model, Scratch};

/// The stages of every layer, by name.
fn stage_names(name: &str) -> Vec<Vec<&'static str>> {
    let model = fixture_model(name);
    assert_eq!(model.transformer(), &model.config.transformer());
    model
        .transformer()
        .blocks
        .iter()
        .map(|block| {
            block
                .stages
                .iter()
                .map(|stage| match stage {
                    Stage::AttentionNorm(_) => "attn_norm",
                    Stage::Qkv => "qkv",
                    Stage::QkNorm { .. } => "qk_norm",
                    Stage::Rope(_) => "rope",
                    Stage::Attention(_) => "attention",
                    Stage::AttentionOutput => "attn_output",
                    Stage::PostAttentionNorm(_) => "post_attn_norm",
                    Stage::AttentionResidual => "x+=out",
                    Stage::FfnNorm(_) => "ffn_norm",
                    Stage::Ffn(_) => "ffn",
                    Stage::Router(_) => "router",
                    Stage::Experts(_) => "experts",
                    Stage::PostFfnNorm(_) => "post_ffn_norm",
                    Stage::FfnResidual => "x+=h",
                    Stage::ParallelResidual => "x+=out+h",
                })
                .collect()
        })
        .collect()
}

#[test]
fn a_llama_block_is_pre_norm_attention_then_ffn() {
    for block in stage_names("llama-tiny-q4_k") {
        assert_eq!(
            block,
            [
                "attn_norm",
                "qkv",
                "rope",
                "attention",
                "attn_output",
                "x+=out",
                "ffn_norm",
                "ffn",
                "x+=h"
            ]
        );
    }
}

#[test]
fn a_gemma3_block_adds_qk_norms_and_post_norms() {
    for block in stage_names("gemma3-tiny-f32") {
        assert_eq!(
            block,
            [
                "attn_norm",
                "qkv",
                "qk_norm",
                "rope",
                "attention",
                "attn_output",
                "post_attn_norm",
                "x+=out",
                "ffn_norm",
                "ffn",
                "post_ffn_norm",
                "x+=h"
            ]
        );
    }
}

#[test]
fn a_phi2_block_runs_attention_and_ffn_in_parallel() {
    for block in stage_names("phi2-tiny-q3_k_m") {
        assert_eq!(
            block,
            [
                "attn_norm",
                "qkv",
                "rope",
                "attention",
                "attn_output",
                "ffn",
                "x+=out+h"
            ]
        );
    }
}

#[test]
fn learned_positions_have_no_rope_stage() {
    for block in stage_names("gpt2-tiny-q2_k") {
        assert!(!block.contains(&"rope"), "{block:?}");
    }
}

#[test]
fn sliding_layers_carry_their_window_and_local_rope_base() {
    let model = fixture_model("gemma3-tiny-f32");
    let c = &model.config;
    let (Positional::Rope(rope), Some(sliding)) = (c.positional, c.sliding_window) else {
        panic!("gemma3 has RoPE and sliding-window layers");
    };
    for (layer, block) in model.transformer().blocks.iter().enumerate() {
        let attention = block.attention().expect("every block attends");
        let params = block.rope().expect("every block rotates");
        let slides = sliding.applies_to(layer);
        assert_eq!(
            attention.window,
            slides.then_some(sliding.window),
            "layer {layer}"
        );
        let base = if slides { rope.base_local } else { rope.base };
        assert_eq!(params.freq_base, base, "layer {layer}");
        assert_eq!(params.style, RopeStyle::Neox);
        assert_eq!(attention.scale, c.attention_scale);
        assert_eq!(attention.softcap, c.attn_softcap);
    }
}

#[test]
fn a_stage_without_its_weights_is_an_error_not_a_panic() {
    let model = fixture_model("llama-tiny-q4_k");
    let mut config = model.config.clone();
    config.post_norms = true;
    let model = Model::new(config, model.weights);
    let mut cache = KvCache::new(&model.config, 4, 4);
    let mut scratch = Scratch::new(&model.config, 4);
    let error = model
        .forward(&[1, 2], &mut cache, &mut scratch, Logits::Last)
        .expect_err("an error");
    let message = error.to_string();
    assert!(
        message.contains("layer 0") && message.contains("post-attention norm"),
        "{message}"
    );
}
