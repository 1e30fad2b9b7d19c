//! Every dense fixture model can go to the GPU (mixture-of-experts ones are refused, see
//! `moe_experts.rs`): its view for the CUDA backend passes the upload plan,
//! which then holds every tensor of the file exactly once, in its stored bytes (no dequantized
//! copies). Without a GPU, loading ends in an error that says why.

use std::sync::Arc;

use rinfer_cuda::{CudaError, GpuModel, LoadOptions, UploadPlan};
use rinfer_formats::gguf::GgufFile;
use rinfer_model::Model;

fn fixture_models() -> Vec<std::path::PathBuf> {
    let dir = format!("{}/../../tests/fixtures/models", env!("CARGO_MANIFEST_DIR"));
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
        if model.config.experts.is_some() {
            continue;
        }
        let view = model.gpu_view().unwrap();
        let plan = UploadPlan::new(&view, &options(128, 16))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let file_bytes: usize = file.tensors().map(|t| t.data.len()).sum();
        assert_eq!(plan.weight_bytes(), file_bytes, "{}", path.display());
        assert_eq!(view.config.vocab_size, model.config.vocab_size);
        assert_eq!(plan.kv_slots.len(), model.config.layers);
    }
}

#[test]
fn loading_a_fixture_without_a_gpu_says_why() {
    let path = &fixture_models()[0];
    let (model, _file) = Model::open_gguf(path).unwrap();
    match GpuModel::load(&model.gpu_view().unwrap(), &options(128, 16)) {
        Ok(gpu) => assert!(!gpu.info().name.is_empty()),
        Err(error @ (CudaError::NotBuilt | CudaError::NoDriver { .. })) => {
            assert!(error.to_string().contains("--device cpu"), "{error}");
        }
        Err(other) => panic!("unexpected error: {other}"),
    }
}

fn options(context: usize, max_batch: usize) -> LoadOptions {
    LoadOptions {
        ordinal: 0,
        context,
        max_batch,
        all_logits: true,
    }
}
