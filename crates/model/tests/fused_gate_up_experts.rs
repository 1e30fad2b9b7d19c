//! Experts whose gate and up projections a file stores as one tensor, `ffn_gate_up_exps`
//! (each expert's gate rows, then its up rows), as llama.cpp allows for Gemma 4, DeepSeek-V2
//! and Qwen3.5-MoE: the same model as the separate `ffn_gate_exps` and `ffn_up_exps`, to the
//! bit, on the CPU and in the CUDA upload plan; refused where llama.cpp refuses it.

mod common;

use common::{fixture_model, load_options};
use rinfer_cuda::UploadPlan;
use rinfer_formats::gguf::{GgufFile, GgufWriter};
use rinfer_model::{KvCache, Logits, Model, ModelError, Scratch};

/// `name`'s file with each layer's `ffn_gate_exps` and `ffn_up_exps` fused into one
/// `ffn_gate_up_exps`: per expert, its gate rows, then its up rows.
fn fused_file(name: &str) -> GgufFile {
    let file = common::fixture_file(name);
    let mut writer = GgufWriter::with_metadata_of(&file).unwrap();
    let tensors: Vec<_> = file.tensors().collect();
    for t in &tensors {
        if t.name().ends_with("ffn_up_exps.weight") {
            continue;
        }
        let Some(layer) = t.name().strip_suffix("ffn_gate_exps.weight") else {
            writer
                .add_tensor(t.name(), t.ty(), t.dims(), t.data.to_vec())
                .unwrap();
            continue;
        };
        let up_name = format!("{layer}ffn_up_exps.weight");
        let up = tensors.iter().find(|u| u.name() == up_name).unwrap();
        let (dims, experts) = (t.dims(), t.dims()[2] as usize);
        let slab = t.data.len() / experts;
        let mut data = Vec::with_capacity(2 * t.data.len());
        for (gate, up) in t.data.chunks_exact(slab).zip(up.data.chunks_exact(slab)) {
            data.extend_from_slice(gate);
            data.extend_from_slice(up);
        }
        let fused = format!("{layer}ffn_gate_up_exps.weight");
        let fused_dims = [dims[0], 2 * dims[1], dims[2]];
        writer
            .add_tensor(&fused, t.ty(), &fused_dims, data)
            .unwrap();
    }
    GgufFile::from_bytes(writer.to_bytes()).unwrap()
}

fn fused_model(name: &str) -> Result<Model, ModelError> {
    Model::from_gguf(&std::sync::Arc::new(fused_file(name)))
}

/// Every position's logits of a prompt, then of one decode step after it.
fn logits(model: &Model) -> Vec<f32> {
    let tokens = [2, 415, 1936, 906, 285, 1142];
    let mut cache = KvCache::new(&model.config, tokens.len() + 1, tokens.len());
    let mut scratch = Scratch::new(&model.config, tokens.len());
    let mut all = model
        .forward(&tokens, &mut cache, &mut scratch, Logits::All)
        .unwrap()
        .to_vec();
    let next = model.forward(&[17], &mut cache, &mut scratch, Logits::Last);
    all.extend_from_slice(next.unwrap());
    all
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn the_gemma4_fused_fixture_gives_the_separate_fixtures_logits_to_the_bit() {
    let separate = fixture_model("gemma4-moe-tiny-f32");
    let fused = fixture_model("gemma4-moe-fused-tiny-f32");
    assert_eq!(
        fused.weights.bytes_by_type(),
        separate.weights.bytes_by_type()
    );
    assert!(same_bits(&logits(&fused), &logits(&separate)));
}

#[test]
fn fused_gate_up_experts_load_as_the_separate_ones_where_llama_cpp_allows_them() {
    for name in [
        "deepseek2-tiny-f32",
        "deepseek2-tiny-q8_0",
        "qwen35moe-tiny-q8_0",
    ] {
        let (separate, fused) = (fixture_model(name), fused_model(name).unwrap());
        assert!(same_bits(&logits(&fused), &logits(&separate)), "{name}");
    }
}

#[test]
fn fused_gate_up_experts_are_refused_where_llama_cpp_refuses_them() {
    // qwen3moe's and Mixtral's llama.cpp loaders read only the separate tensors.
    for name in ["qwen3moe-tiny-q4_k_m", "mixtral-tiny-q8_0"] {
        let err = fused_model(name).err().expect("refused").to_string();
        assert!(err.contains("ffn_gate_exps"), "{name}: {err}");
    }
}

#[test]
fn the_cuda_backend_plans_fused_and_separate_experts_alike() {
    let options = load_options(64, 8, 1);
    for name in ["deepseek2-tiny-q8_0", "qwen35moe-tiny-q8_0"] {
        // Planned alike, or refused for the same reason (a feature of the model, not of
        // how its file stores the experts).
        let plan = |m: &Model| {
            let view = m.gpu_view().map_err(|e| e.to_string())?;
            UploadPlan::new(&view, &options).map_err(|e| e.to_string())
        };
        let (separate, fused) = (fixture_model(name), fused_model(name).unwrap());
        assert_eq!(plan(&fused), plan(&separate), "{name}");
    }
}
