//! The fixture models read as llama.cpp wrote them, and write back byte for byte.

use rinfer_formats::GgmlType;
use rinfer_formats::gguf::{GgufFile, GgufWriter};
use serde_json::Value;

fn models_dir() -> String {
    format!("{}/../../tests/fixtures/models", env!("CARGO_MANIFEST_DIR"))
}

fn fixture_models() -> Vec<(String, Value)> {
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(format!("{}/manifest.json", models_dir())).unwrap())
            .unwrap();
    let mut out = Vec::new();
    for entry in std::fs::read_dir(models_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "gguf") {
            let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
            out.push((stem.clone(), manifest[&stem].clone()));
        }
    }
    assert!(out.len() >= 5, "fixture models missing");
    out
}

#[test]
fn tensor_types_and_architecture_match_the_manifest() {
    for (name, manifest) in fixture_models() {
        let file = GgufFile::open(format!("{}/{name}.gguf", models_dir())).unwrap();
        assert_eq!(
            file.header().architecture(),
            manifest["arch"].as_str(),
            "{name}"
        );
        let types = manifest["tensor_types"].as_object().unwrap();
        assert_eq!(file.tensors().len(), types.len(), "{name}");
        for t in file.tensors() {
            assert_eq!(
                Some(t.ty().name()),
                types[t.name()].as_str(),
                "{name} {}",
                t.name()
            );
            let expected =
                t.ty().row_bytes(t.dims()[0]).unwrap() * t.dims()[1..].iter().product::<u64>();
            assert_eq!(t.data.len() as u64, expected);
        }
    }
}

#[test]
fn fixture_models_write_back_byte_identical() {
    for (name, _) in fixture_models() {
        let original = std::fs::read(format!("{}/{name}.gguf", models_dir())).unwrap();
        let file = GgufFile::from_bytes(original.clone()).unwrap();
        let rewritten = GgufWriter::from_file(&file).unwrap().to_bytes();
        assert!(rewritten == original, "{name}: rewritten file differs");
    }
}

#[test]
fn typed_getters_name_the_key() {
    let file = GgufFile::open(format!("{}/llama-tiny-q8_0.gguf", models_dir())).unwrap();
    let md = file.metadata();
    assert_eq!(md.get_u32("llama.block_count").unwrap(), 2);
    assert_eq!(md.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(md.get_array("tokenizer.ggml.tokens").unwrap().len(), 3000);
    let missing = md.get_u32("llama.no_such_key").unwrap_err().to_string();
    assert!(missing.contains("llama.no_such_key"), "{missing}");
    let wrong = md.get_u32("general.architecture").unwrap_err().to_string();
    assert!(
        wrong.contains("general.architecture") && wrong.contains("string"),
        "{wrong}"
    );
    let q8 = file.tensor("blk.0.attn_q.weight").unwrap();
    assert_eq!(q8.ty(), GgmlType::Q8_0);
}
