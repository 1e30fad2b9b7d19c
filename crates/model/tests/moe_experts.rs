//! What a mixture-of-experts layer is made of and what it reads: the router and expert stages
//! each MoE architecture describes, and a decode step that reads exactly the experts its router
//! picks; older Mixtral files with one tensor per expert load (and plan for the GPU) as the
//! merged ones.

mod common;

use common::{fixture_model, load_options};
use rinfer_cuda::UploadPlan;
use rinfer_formats::GgmlType;
use rinfer_formats::gguf::{GgufFile, GgufWriter};
use rinfer_model::weights::{Cpu, Linear, Matrix};
use rinfer_model::{KvCache, Logits, Model, Scratch};
use rinfer_transformer::{Ffn, Gating, Stage};

/// Each layer's router and experts, as `(experts, used, gating, expert shape, expert width)`.
fn moe_layers(name: &str) -> Vec<(usize, usize, Gating, Ffn, usize)> {
    let model = fixture_model(name);
    let blocks = &model.transformer().blocks;
    blocks
        .iter()
        .map(|block| {
            assert!(!block.has_dense_ffn());
            let router = block.router().expect("a router");
            let experts = block.experts().expect("experts");
            let at = |f: fn(&Stage<Cpu>) -> bool| block.stages.iter().position(f).unwrap();
            let router_at = at(|s| matches!(s, Stage::Router { .. }));
            let experts_at = at(|s| matches!(s, Stage::Experts { .. }));
            assert!(at(|s| matches!(s, Stage::FfnNorm(_))) < router_at);
            assert_eq!(router_at + 1, experts_at);
            assert!(matches!(block.stages[experts_at + 1], Stage::FfnResidual));
            (
                router.experts,
                router.used,
                router.gating,
                experts.ffn,
                experts.ffn_dim,
            )
        })
        .collect()
}

#[test]
fn qwen3moe_and_mixtral_renormalise_the_top_k_of_a_softmax() {
    for layer in moe_layers("qwen3moe-tiny-q4_k_m") {
        assert_eq!(layer, (8, 2, Gating::SoftmaxTopK, Ffn::SiluGated, 64));
    }
    for layer in moe_layers("mixtral-tiny-q8_0") {
        assert_eq!(layer, (4, 2, Gating::SoftmaxTopK, Ffn::SiluGated, 128));
    }
}

#[test]
fn gpt_oss_takes_a_softmax_of_the_top_k_through_clamped_swiglu_experts() {
    let layers = moe_layers("gpt-oss-tiny-mxfp4");
    assert!(!layers.is_empty());
    for (experts, used, gating, ffn, width) in layers {
        assert_eq!(
            (gating, ffn, width),
            (Gating::TopKSoftmax, Ffn::ClampedSwiGlu, 32)
        );
        assert!(used < experts);
    }
}

#[test]
fn gpt_oss_alternates_sliding_and_full_layers_with_sinks_and_yarn() {
    let model = fixture_model("gpt-oss-tiny-f32");
    for (layer, block) in model.transformer().blocks.iter().enumerate() {
        let attention = block.attention().expect("attention");
        assert_eq!(
            attention.window,
            (layer % 2 == 0).then_some(16),
            "layer {layer}"
        );
        assert!(attention.sinks);
        let yarn = block.rope().and_then(|r| r.yarn).expect("YaRN");
        assert_eq!(yarn.corr_dims, [8.0, 18.0]);
    }
}

/// `m` as an F32 matrix of NaNs: any product that reads it is NaN.
fn poisoned(m: &Matrix) -> Matrix {
    let bytes = f32::NAN.to_le_bytes().repeat(m.rows * m.cols);
    Matrix::from_owned(GgmlType::F32, m.rows, m.cols, bytes)
}

/// The logits of one decode step at position 0.
fn decode(model: &Model, token: u32) -> Vec<f32> {
    let mut cache = KvCache::new(&model.config, 1, 1);
    let mut scratch = Scratch::new(&model.config, 1);
    let logits = model.forward(&[token], &mut cache, &mut scratch, Logits::Last);
    logits.unwrap().to_vec()
}

#[test]
fn a_decode_step_reads_only_the_experts_its_router_picks() {
    let model = fixture_model("mixtral-tiny-f32");
    let used = model.transformer().blocks[0].router().unwrap().used;
    for token in [1, 17, 300] {
        let clean = decode(&model, token);
        assert!(clean.iter().all(|l| l.is_finite()));
        let count = model.transformer().blocks[0].router().unwrap().experts;
        let mut read = 0;
        for e in 0..count {
            let mut weights = model.weights.clone();
            for stage in &mut weights.transformer.blocks[0].stages {
                if let Stage::Experts { weights, .. } = stage {
                    for projection in weights.each_mut() {
                        let l: &mut Linear = &mut projection[e];
                        l.weight = poisoned(&l.weight);
                    }
                }
            }
            let logits = decode(&Model::new(model.config.clone(), weights), token);
            if logits.iter().any(|l| l.is_nan()) {
                read += 1;
            } else {
                assert_eq!(logits, clean, "token {token}: expert {e} was not read");
            }
        }
        assert_eq!(read, used, "token {token}: experts read");
    }
}

#[test]
fn the_cuda_backend_plans_merged_and_per_expert_tensors_alike() {
    let options = load_options(64, 8, 1);
    for name in ["qwen3moe-tiny-q4_k_m", "mixtral-tiny-q8_0"] {
        let plan = |m: &Model| UploadPlan::new(&m.gpu_view().unwrap(), &options).unwrap();
        let (merged, split) = (fixture_model(name), with_per_expert_tensors(name));
        assert_eq!(plan(&split), plan(&merged), "{name}");
    }
}

/// `name`'s file with every 3-D expert tensor split into one 2-D tensor per expert, named as
/// older Mixtral files name them (`blk.N.ffn_gate.E.weight`).
fn with_per_expert_tensors(name: &str) -> Model {
    let file = common::fixture_file(name);
    let mut writer = GgufWriter::with_metadata_of(&file).unwrap();
    for t in file.tensors() {
        let Some(role) = t.name().strip_suffix("_exps.weight") else {
            writer
                .add_tensor(t.name(), t.ty(), t.dims(), t.data.to_vec())
                .unwrap();
            continue;
        };
        let (dims, experts) = (&t.dims()[..2], t.dims()[2] as usize);
        let slab = t.data.len() / experts;
        for (e, bytes) in t.data.chunks_exact(slab).enumerate() {
            let name = format!("{role}.{e}.weight");
            writer
                .add_tensor(&name, t.ty(), dims, bytes.to_vec())
                .unwrap();
        }
    }
    let file = GgufFile::from_bytes(writer.to_bytes()).unwrap();
    Model::from_gguf(&std::sync::Arc::new(file)).unwrap()
}

#[test]
fn per_expert_tensors_of_older_mixtral_files_give_the_same_logits() {
    let merged = fixture_model("mixtral-tiny-q8_0");
    let split = with_per_expert_tensors("mixtral-tiny-q8_0");
    let tokens = [1, 415, 1936, 906, 285, 1142];
    let run = |model: &Model| {
        let mut cache = KvCache::new(&model.config, tokens.len(), tokens.len());
        let mut scratch = Scratch::new(&model.config, tokens.len());
        let logits = model.forward(&tokens, &mut cache, &mut scratch, Logits::All);
        logits.unwrap().to_vec()
    };
    let (want, got) = (run(&merged), run(&split));
    assert_eq!(
        split.weights.bytes_by_type(),
        merged.weights.bytes_by_type()
    );
    assert!(
        want.iter()
            .zip(&got)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
}
