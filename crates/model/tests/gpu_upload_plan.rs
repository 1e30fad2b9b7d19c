//! Every fixture model (dense and mixture-of-experts, gpt-oss with its sinks and expert biases
//! included) can go to the GPU: its view for the CUDA backend passes the upload plan, which then holds every tensor of the file exactly once, in
//! its stored bytes (no dequantized copies; a layer's experts as one stacked tensor per
//! projection). The architectures whose stages the GPU does not run yet (latent attention,
//! shared experts, sigmoid routing, hybrid recurrent layers, Gemma 4) are refused by the plan
//! with an error that names the reason and `--device cpu`, which makes the device `auto` run
//! them on the CPU. Without a GPU, loading ends in an error that says why.

mod common;

use std::borrow::Cow;
use std::sync::Arc;

use common::load_options;
use rinfer_cuda::{CudaError, GpuModel, HostStacked, HostView, LoadOptions, UploadPlan};
use rinfer_formats::gguf::GgufFile;
use rinfer_model::Model;
use rinfer_model::weights::Matrix;
use rinfer_transformer::{Block, Stage};

/// The fixture architectures the CUDA backend refuses, by file name prefix (the hybrid
/// recurrent ones are known by their config).
const CPU_ONLY: [&str; 6] = [
    "bert-",
    "deepseek2-",
    "gemma4-",
    "glm4moe-",
    "qwen35moe-",
    "nomic-bert-",
];

fn cpu_only(path: &std::path::Path) -> bool {
    let name = path.file_name().unwrap().to_string_lossy();
    CPU_ONLY.iter().any(|prefix| name.starts_with(prefix))
}

fn fixture_models() -> Vec<std::path::PathBuf> {
    let dir = common::fixtures().join("models");
    let mut models: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
        .collect();
    models.sort();
    assert!(!models.is_empty());
    models
}

#[test]
fn every_fixture_uploads_each_tensor_once_in_its_stored_bytes() {
    for path in fixture_models() {
        let file = Arc::new(GgufFile::open(&path).unwrap());
        let model = Model::from_gguf(&file).unwrap();
        let view = model.gpu_view().unwrap();
        let planned = UploadPlan::new(&view, &options(128, 16));
        let name = path.file_name().unwrap().to_string_lossy();
        if name.starts_with("gemma4") {
            // Not run by the CUDA backend yet: refused before any upload, saying so, which
            // lets `--device auto` fall back to the CPU with that reason.
            let Err(CudaError::Unsupported(why)) = planned else {
                panic!("{}: the plan accepted gemma4", path.display());
            };
            assert!(
                why.contains("gemma4") && why.contains("--device cpu"),
                "{why}"
            );
            // The variants are refused for what is new in them, before what every layer has.
            let feature = match &name[..] {
                "gemma4-kvshare-tiny-f32.gguf" => "KV sharing",
                "gemma4-moe-tiny-f32.gguf" | "gemma4-moe-fused-tiny-f32.gguf" => {
                    "experts beside a dense FFN"
                }
                _ => "gemma4",
            };
            assert!(why.contains(feature), "{name}: {why}");
            continue;
        }
        if cpu_only(&path) || model.config.recurrent.is_some() {
            match planned {
                Err(e @ CudaError::Unsupported(_)) => {
                    assert!(e.to_string().contains("--device cpu"), "{e}");
                }
                other => panic!("{}: planned {:?}", path.display(), other.map(|_| ())),
            }
            continue;
        }
        let plan = planned.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let file_bytes: usize = file.tensors().map(|t| t.data.len()).sum();
        assert_eq!(plan.weight_bytes(), file_bytes, "{}", path.display());
        assert_eq!(view.vocab_size, model.config.vocab_size);
        assert_eq!(plan.kv_slots.len(), model.config.layers);
    }
}

#[test]
fn mixture_of_experts_fixtures_stack_each_projection_and_size_the_route_buffers() {
    let mut seen = 0;
    for path in fixture_models().into_iter().filter(|p| !cpu_only(p)) {
        let (model, _file) = Model::open_gguf(&path).unwrap();
        let Some(experts) = model.config.experts else {
            continue;
        };
        seen += 1;
        let view = model.gpu_view().unwrap();
        let (batch, layers) = (16, model.config.layers);
        let plan = UploadPlan::new(&view, &options(128, batch)).unwrap();
        let stacked = plan
            .matrices
            .iter()
            .filter(|m| m.name.ends_with("_exps.weight"))
            .count();
        assert_eq!(stacked, 3 * layers, "{}", path.display());
        let b = &plan.buffers;
        assert_eq!(b.router, batch * experts.count, "{}", path.display());
        assert_eq!(b.routes, batch * experts.used);
        assert_eq!(b.expert_gate_up, batch * experts.used * 2 * experts.ffn_dim);
        assert_eq!(b.expert_out, batch * experts.used * model.config.hidden);
    }
    assert!(seen >= 6, "the qwen3moe, Mixtral and gpt-oss fixtures");
}

#[test]
fn experts_stored_apart_are_copied_into_one_stacked_tensor() {
    let path = fixture_models()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("qwen3moe-tiny-f32"))
        .unwrap();
    let (model, _file) = Model::open_gguf(&path).unwrap();
    let mut weights = model.weights.clone();
    // Each expert's own buffer, as a file with one tensor per expert gives.
    for block in &mut weights.transformer.blocks {
        for stage in &mut block.stages {
            if let Stage::Experts { weights, .. } = stage {
                for l in weights.each_mut().into_iter().flatten() {
                    let m = &l.weight;
                    l.weight = Matrix::from_owned(m.ty, m.rows, m.cols, m.data().to_vec());
                }
            }
        }
    }
    let apart = Model::new(model.config.clone(), weights);
    let (borrowed, copied) = (model.gpu_view().unwrap(), apart.gpu_view().unwrap());
    for (b, c) in borrowed.blocks.iter().zip(&copied.blocks) {
        fn experts<'b>(block: &'b Block<HostView<'_>>) -> Option<[&'b HostStacked<'b>; 3]> {
            block.stages.iter().find_map(|s| match s {
                Stage::Experts { weights, .. } => Some(weights.each()),
                _ => None,
            })
        }
        let (Some(b), Some(c)) = (experts(b), experts(c)) else {
            panic!("qwen3moe layers are experts");
        };
        for (b, c) in b.into_iter().zip(c) {
            assert!(matches!(b.data, Cow::Borrowed(_)));
            assert!(matches!(c.data, Cow::Owned(_)));
            assert_eq!(b.data, c.data);
        }
    }
    let options = options(64, 8);
    assert_eq!(
        UploadPlan::new(&borrowed, &options).unwrap(),
        UploadPlan::new(&copied, &options).unwrap()
    );
}

#[test]
fn loading_a_fixture_without_a_gpu_says_why() {
    let models = fixture_models();
    let path = models.iter().find(|p| !cpu_only(p)).unwrap();
    let (model, _file) = Model::open_gguf(path).unwrap();
    match GpuModel::load(&model.gpu_view().unwrap(), &options(128, 16)) {
        Ok(gpu) => assert!(!gpu.info().name.is_empty()),
        Err(error @ (CudaError::NotBuilt | CudaError::NoDriver { .. })) => {
            assert!(error.to_string().contains("--device cpu"), "{error}");
        }
        Err(other) => panic!("unexpected error: {other}"),
    }
}

/// One sequence's options, every row's logits kept.
fn options(context: usize, max_batch: usize) -> LoadOptions {
    LoadOptions {
        all_logits: true,
        ..load_options(context, max_batch, 1)
    }
}
