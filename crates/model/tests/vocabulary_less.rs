//! GGUF files without a vocabulary (`tokenizer.ggml.model = "none"`, llama.cpp's no-vocab
//! mode) load with their tokenizer and run from token ids; text cannot be encoded, and the
//! error says why. The broken mixture-of-experts fixtures, which have no vocabulary either, are
//! therefore refused for their own fault, each named (llama.cpp aborts on two of them).

#[path = "../../../tests/support/broken_moe_files.rs"]
mod broken_moe_files;
mod common;

use broken_moe_files::BROKEN_MOE_FILES;
use common::fixtures;
use rinfer_model::{
    DeviceRequest, Engine, EngineSettings, LoadedModel, Request, SamplingParams, TokenizerError,
};

fn open(name: &str) -> Result<LoadedModel, String> {
    let path = fixtures().join(format!("models/broken/{name}.gguf"));
    LoadedModel::open(path).map_err(|e| e.to_string())
}

#[test]
fn the_control_loads_without_a_vocabulary_and_decodes_from_token_ids() {
    let loaded = open("moe_control_valid").unwrap();
    assert!(!loaded.tokenizer.has_vocabulary());
    assert_eq!(loaded.model.config.vocab_size, 64);
    let err = loaded.tokenizer.encode("hello", true, false).unwrap_err();
    assert!(matches!(err, TokenizerError::NoVocabulary), "{err}");
    assert!(err.to_string().contains("no vocabulary"), "{err}");
    let settings = EngineSettings {
        score: true,
        ..EngineSettings::single(64)
    };
    let mut engine = Engine::new(&loaded, settings, DeviceRequest::Cpu).unwrap();
    let request = Request::new(vec![1, 7, 14, 21], 8).with_sampling(SamplingParams::greedy());
    let out = engine.generate(request, |_| {}).unwrap();
    assert_eq!(out.tokens.len(), 8);
    assert!(out.tokens.iter().all(|&t| t < 64), "{:?}", out.tokens);
    let logits = engine.score(&[3, 9, 27]).unwrap();
    assert_eq!(logits.len(), 3 * 64);
    assert!(logits.iter().all(|l| l.is_finite()));
}

/// Each broken file is refused with its own fault, not for its missing vocabulary.
#[test]
fn each_broken_file_is_refused_for_its_own_fault() {
    for (name, fault) in BROKEN_MOE_FILES {
        let message = open(name).err().unwrap_or_else(|| panic!("{name} loaded"));
        assert!(message.contains(fault), "{name}: {message}");
        assert!(!message.contains("vocabulary"), "{name}: {message}");
        assert!(!message.contains('\n'), "{name}: not one line: {message}");
    }
}
