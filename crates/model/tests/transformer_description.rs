//! The transformer each architecture describes: the stages both executors (the CPU forward pass
//! and the CUDA step builder) walk. Architecture differences live only in these lists and their
//! parameters.

mod common;

use common::fixture_model;
use rinfer_formats::gguf::{GgufFile, GgufWriter};
use rinfer_model::Model;
use rinfer_model::config::Positional;
use rinfer_transformer::{Block, Gating, Handles, Qkv, RopeStyle, Stage};

/// The stages of every layer, by name.
fn stage_names(name: &str) -> Vec<Vec<&'static str>> {
    let model = fixture_model(name);
    let names = names_of(&model.transformer().blocks);
    assert_eq!(names, names_of(&model.config.transformer().blocks));
    names
}

/// The stages of every block, by name.
fn names_of<H: Handles>(blocks: &[Block<H>]) -> Vec<Vec<&'static str>> {
    blocks
        .iter()
        .map(|block| {
            block
                .stages
                .iter()
                .map(|stage| match stage {
                    Stage::AttentionNorm(_) => "attn_norm",
                    Stage::Qkv(_) => "qkv",
                    Stage::LatentQkv { .. } => "latent_qkv",
                    Stage::LatentOutput { .. } => "latent_output",
                    Stage::SharedExperts { .. } => "shared_experts",
                    Stage::QkNorm { .. } => "qk_norm",
                    Stage::Rope(_) => "rope",
                    Stage::Attention { .. } => "attention",
                    Stage::AttentionGate => "attn_gate",
                    Stage::ShortConv { .. } => "short_conv",
                    Stage::DeltaNet { .. } => "delta_net",
                    Stage::AttentionOutput(_) => "attn_output",
                    Stage::PostAttentionNorm(_) => "post_attn_norm",
                    Stage::AttentionResidual => "x+=out",
                    Stage::FfnNorm(_) => "ffn_norm",
                    Stage::Ffn { .. } => "ffn",
                    Stage::Router { .. } => "router",
                    Stage::Experts { .. } => "experts",
                    Stage::PostFfnNorm(_) => "post_ffn_norm",
                    Stage::FfnResidual => "x+=h",
                    Stage::ParallelResidual => "x+=out+h",
                    Stage::ValueNorm { .. } => "v_norm",
                    Stage::PerLayerInput { .. } => "x+=per_layer",
                    Stage::OutputScale(_) => "x*=scale",
                    Stage::ResidualNorm(_) => "x=norm(x)",
                    Stage::QueryNorm { .. } => "q_norm",
                    Stage::SharedAttention { .. } => "shared_attention",
                    Stage::RouterNorm { .. } => "router_norm",
                    Stage::ExpertScales(_) => "expert_scales",
                    Stage::StashFfn => "stash=h",
                    Stage::AddStash => "h+=stash",
                })
                .collect()
        })
        .collect()
}

/// The attention stages of a Gemma 4 layer that keeps its own KV cache.
const GEMMA4_ATTENTION: [&str; 7] = [
    "qkv",
    "qk_norm",
    "v_norm",
    "rope",
    "attention",
    "attn_output",
    "post_attn_norm",
];

/// A pre-norm block: `attn_norm`, the `mixer` stages, the residual add, then `ffn_norm`, the
/// `ffn` stages and their residual add.
fn pre_norm(mixer: &[&'static str], ffn: &[&'static str]) -> Vec<&'static str> {
    [
        &["attn_norm"],
        mixer,
        &["x+=out", "ffn_norm"],
        ffn,
        &["x+=h"],
    ]
    .concat()
}

#[test]
fn hybrid_layers_mix_by_recurrence_or_by_attention_as_their_metadata_says() {
    let conv = pre_norm(&["short_conv"], &["ffn"]);
    let lfm2_attention = pre_norm(
        &["qkv", "qk_norm", "rope", "attention", "attn_output"],
        &["ffn"],
    );
    assert_eq!(
        stage_names("lfm2-tiny-q8_0"),
        [conv.clone(), conv.clone(), lfm2_attention, conv]
    );
    let delta = pre_norm(&["delta_net"], &["ffn"]);
    let gated = pre_norm(
        &[
            "qkv",
            "qk_norm",
            "rope",
            "attention",
            "attn_gate",
            "attn_output",
        ],
        &["ffn"],
    );
    assert_eq!(
        stage_names("qwen35-tiny-q8_0"),
        [delta.clone(), delta.clone(), delta.clone(), gated.clone()]
    );
    // Qwen3.5-MoE: the same mixers, each FFN a gated shared expert beside softmax-routed ones.
    let moe = |mut block: Vec<&'static str>| {
        let ffn = block.iter().position(|&s| s == "ffn").unwrap();
        block.splice(ffn..=ffn, ["shared_experts", "router", "experts"]);
        block
    };
    assert_eq!(
        stage_names("qwen35moe-tiny-q8_0"),
        [
            moe(delta.clone()),
            moe(delta.clone()),
            moe(delta),
            moe(gated)
        ]
    );
    for block in &fixture_model("qwen35moe-tiny-q8_0").transformer().blocks {
        for stage in &block.stages {
            match stage {
                Stage::SharedExperts { gate_inp, .. } => assert!(gate_inp.is_some()),
                Stage::Router { router, .. } => {
                    assert_eq!(router.gating, Gating::SoftmaxTopK);
                    assert_eq!((router.experts, router.used, router.scale), (8, 2, 1.0));
                }
                _ => {}
            }
        }
    }
}

#[test]
fn a_bert_block_is_post_norm_and_reads_the_residual_stream() {
    for block in stage_names("bert-embd-tiny-f32") {
        assert_eq!(
            block,
            [
                "qkv",
                "attention",
                "attn_output",
                "x+=out",
                "x=norm(x)",
                "ffn",
                "x+=h",
                "x=norm(x)"
            ]
        );
    }
}

#[test]
fn a_nomic_bert_block_is_berts_with_a_fused_qkv_and_neox_rotary_positions() {
    for block in stage_names("nomic-bert-embd-tiny-f32") {
        assert_eq!(
            block,
            [
                "qkv",
                "rope",
                "attention",
                "attn_output",
                "x+=out",
                "x=norm(x)",
                "ffn",
                "x+=h",
                "x=norm(x)"
            ]
        );
    }
    let model = fixture_model("nomic-bert-embd-tiny-f32");
    for block in &model.transformer().blocks {
        assert!(matches!(block.stages[0], Stage::Qkv(Qkv::Fused(_))));
        let rope = block.rope().expect("every block rotates");
        assert_eq!(
            (rope.style, rope.freq_base, rope.n_rot),
            (RopeStyle::Neox, 1000.0, 16)
        );
    }
}

#[test]
fn a_nomic_bert_moe_file_is_refused_by_name() {
    let path = common::fixtures().join("models/nomic-bert-embd-tiny-f32.gguf");
    let file = GgufFile::open(path).unwrap();
    let mut writer = GgufWriter::from_file(&file).unwrap();
    writer.set_metadata(
        "general.architecture",
        rinfer_formats::gguf::MetadataValue::String("nomic-bert-moe".into()),
    );
    let file = GgufFile::from_bytes(writer.to_bytes()).unwrap();
    let err = Model::from_gguf(&std::sync::Arc::new(file))
        .err()
        .expect("an error")
        .to_string();
    assert!(
        err.contains("nomic-bert-moe") && err.contains("not supported yet"),
        "{err}"
    );
}

#[test]
fn a_llama_block_is_pre_norm_attention_then_ffn() {
    let expected = pre_norm(&["qkv", "rope", "attention", "attn_output"], &["ffn"]);
    for block in stage_names("llama-tiny-q4_k") {
        assert_eq!(block, expected);
    }
}

#[test]
fn a_gemma3_block_adds_qk_norms_and_post_norms() {
    let expected = pre_norm(
        &[
            "qkv",
            "qk_norm",
            "rope",
            "attention",
            "attn_output",
            "post_attn_norm",
        ],
        &["ffn", "post_ffn_norm"],
    );
    for block in stage_names("gemma3-tiny-f32") {
        assert_eq!(block, expected);
    }
}

#[test]
fn a_gemma4_block_norms_values_and_adds_its_per_layer_input() {
    let block = pre_norm(&GEMMA4_ATTENTION, &["ffn", "post_ffn_norm"]);
    let expected = [&block[..], &["x+=per_layer", "x*=scale"]].concat();
    for block in stage_names("gemma4-tiny-q8_0") {
        assert_eq!(block, expected);
    }
}

/// Gemma 4's last layers that share the KV caches of earlier ones project only queries,
/// norm only them, and attend over the earlier layer's cache (1 for the sliding layer, 2 for
/// the full one).
#[test]
fn gemma4_kv_sharing_layers_project_only_queries() {
    let model = fixture_model("gemma4-kvshare-tiny-f32");
    let t = model.transformer();
    let shared = [
        "qkv",
        "q_norm",
        "rope",
        "shared_attention",
        "attn_output",
        "post_attn_norm",
    ];
    let block = pre_norm(&shared, &["ffn", "post_ffn_norm"]);
    let expected = [&block[..], &["x+=per_layer", "x*=scale"]].concat();
    let names = names_of(&t.blocks);
    for layer in [3, 4] {
        assert_eq!(names[layer], expected, "layer {layer}");
        let q_only = matches!(t.blocks[layer].stages[1], Stage::Qkv(Qkv::QueryOnly { .. }));
        assert!(q_only, "layer {layer}");
    }
    let sources: Vec<_> = t.blocks.iter().map(|b| b.kv_source()).collect();
    assert_eq!(sources, [None, None, None, Some(1), Some(2)]);
    assert_eq!(t.blocks[3].attention().unwrap().window, Some(16));
    assert_eq!(t.blocks[4].attention().unwrap().window, None);
}

/// Gemma 4's experts run beside its dense FFN: the dense output post-normed and set aside, the
/// router on its own norm of the residual, the expert scales on the routed weights, the
/// experts on their own pre-norm and post-norm, the sum post-normed.
#[test]
fn gemma4_experts_run_beside_the_dense_ffn() {
    let model = fixture_model("gemma4-moe-tiny-f32");
    let ffn = [
        "ffn",
        "post_ffn_norm",
        "stash=h",
        "router_norm",
        "router",
        "expert_scales",
        "ffn_norm",
        "experts",
        "post_ffn_norm",
        "h+=stash",
        "post_ffn_norm",
    ];
    let expected = [&pre_norm(&GEMMA4_ATTENTION, &ffn)[..], &["x*=scale"]].concat();
    for block in names_of(&model.transformer().blocks) {
        assert_eq!(block, expected);
    }
    let experts = model.config.experts.unwrap();
    assert_eq!((experts.count, experts.used, experts.ffn_dim), (8, 2, 32));
    assert!(experts.dense_beside);
}

/// Gemma 4's layers differ: its sliding-window layers have narrower heads and more kv heads,
/// rotate all their dimensions at the local base and no factors; its full-attention layer has
/// wider heads, no `attn_v` (its values are its keys) and proportional RoPE.
#[test]
fn gemma4_layers_carry_their_own_heads_and_rope() {
    let model = fixture_model("gemma4-tiny-q8_0");
    let t = model.transformer();
    let shapes: Vec<_> = t
        .blocks
        .iter()
        .map(|b| {
            let rope = b.rope().unwrap();
            let window = b.attention().unwrap().window;
            let has_v = b
                .stages
                .iter()
                .any(|s| matches!(s, Stage::Qkv(Qkv::OptionalValue { v: Some(_), .. })));
            let h = b.heads;
            (
                h.heads,
                h.kv_heads,
                h.head_dim,
                window,
                rope.n_rot,
                rope.freq_base,
                rope.factors,
                has_v,
            )
        })
        .collect();
    assert_eq!(
        shapes,
        [
            (2, 2, 32, Some(16), 32, 10_000.0, false, true),
            (2, 2, 32, Some(16), 32, 10_000.0, false, true),
            (2, 1, 64, None, 64, 1_000_000.0, true, false),
        ]
    );
    assert_eq!(t.rope_freqs.as_ref().map(Vec::len), Some(32));
    assert_eq!(t.per_layer_inputs.as_ref().map(|p| p.width), Some(16));
    assert!(t.blocks.iter().all(|b| b.attention().unwrap().scale == 1.0));
    assert_eq!(t.final_softcap, Some(30.0));
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
fn a_declared_tensor_missing_from_the_file_is_an_error_naming_it() {
    let path = common::fixtures().join("models/llama-tiny-q4_k.gguf");
    let file = GgufFile::open(path).unwrap();
    let mut writer = GgufWriter::from_file(&file).unwrap();
    assert!(writer.remove_tensor("blk.1.ffn_norm.weight"));
    let file = GgufFile::from_bytes(writer.to_bytes()).unwrap();
    let error = Model::from_gguf(&std::sync::Arc::new(file))
        .err()
        .expect("an error");
    let message = error.to_string();
    assert!(message.contains("blk.1.ffn_norm.weight"), "{message}");
}

#[test]
fn a_deepseek2_block_is_latent_attention_then_dense_or_shared_and_routed_experts() {
    let attention = [
        "latent_qkv",
        "rope",
        "attention",
        "latent_output",
        "attn_output",
    ];
    assert_eq!(
        stage_names("deepseek2-tiny-q8_0"),
        dense_then_moe(&attention)
    );
}

#[test]
fn a_glm4moe_block_norms_q_and_k_and_its_ffn_by_the_post_attention_norm() {
    let attention = ["qkv", "qk_norm", "rope", "attention", "attn_output"];
    assert_eq!(stage_names("glm4moe-tiny-q8_0"), dense_then_moe(&attention));
}

/// The three layers of the MoE fixtures: one dense FFN, then two of shared and routed experts.
fn dense_then_moe(attention: &[&'static str]) -> [Vec<&'static str>; 3] {
    let moe = pre_norm(attention, &["shared_experts", "router", "experts"]);
    [pre_norm(attention, &["ffn"]), moe.clone(), moe]
}

/// A fixture rewritten without the metadata key `skip`.
fn without_key(name: &str, skip: &str) -> std::sync::Arc<GgufFile> {
    let file = common::fixture_file(name);
    let mut writer = GgufWriter::new();
    for (key, value) in file.metadata().iter().filter(|(key, _)| *key != skip) {
        writer.add_metadata(key, value.clone()).unwrap();
    }
    for t in file.tensors() {
        writer
            .add_tensor(t.name(), t.ty(), t.dims(), t.data.to_vec())
            .unwrap();
    }
    std::sync::Arc::new(GgufFile::from_bytes(writer.to_bytes()).unwrap())
}

#[test]
fn the_dense_ffn_width_may_be_absent_only_where_every_layer_runs_experts() {
    let file = without_key("qwen35moe-tiny-q8_0", "qwen35moe.feed_forward_length");
    let model = Model::from_gguf(&file).unwrap();
    assert_eq!(model.config.ffn_dim, 0);
    let tokens = &common::reference_prompts("qwen35moe-tiny-q8_0")[0];
    let with_width = fixture_model("qwen35moe-tiny-q8_0");
    assert_eq!(
        common::bits(&common::batched_logits(&model, tokens)),
        common::bits(&common::batched_logits(&with_width, tokens))
    );
    let file = without_key("qwen35-tiny-q8_0", "qwen35.feed_forward_length");
    let error = Model::from_gguf(&file).err().expect("an error").to_string();
    assert!(error.contains("qwen35.feed_forward_length"), "{error}");
    let file = without_key("deepseek2-tiny-q8_0", "deepseek2.feed_forward_length");
    let error = Model::from_gguf(&file).err().expect("an error").to_string();
    assert!(
        error.contains("deepseek2.feed_forward_length") && error.contains("layer 0"),
        "{error}"
    );
}
