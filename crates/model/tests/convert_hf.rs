//! `rinfer convert` of the Hugging Face twin of `llama3bpe-tiny`: the GGUF it writes holds
//! llama.cpp converter's tensors and tokenizer (compared with the GGUF twin llama.cpp's tools
//! made, cut to two rows per matrix in `tests/fixtures/quantize`) and computes the logits of the
//! safetensors checkpoint it came from.

mod common;

use std::sync::Arc;

use common::{batched_logits, fixtures};
use rinfer_formats::GgmlType;
use rinfer_formats::gguf::GgufFile;
use rinfer_model::convert::convert_hf_dir;
use rinfer_model::{LoadedModel, Model};

fn converted(ty: GgmlType) -> GgufFile {
    let dir = fixtures().join("llama3bpe-tiny-hf");
    let bytes = convert_hf_dir(&dir, ty, Vec::new(), &mut |_, _, _| {}).unwrap();
    GgufFile::from_bytes(bytes).expect("the output parses")
}

#[test]
fn converted_tensors_and_tokenizer_match_llama_cpps_gguf_twin() {
    let got = converted(GgmlType::F32);
    let twin = GgufFile::open(fixtures().join("quantize/llama3bpe-tiny-f32.slim.gguf")).unwrap();
    assert_eq!(got.tensors().len(), twin.tensors().len());
    for want in twin.tensors() {
        let t = got
            .tensor(want.name())
            .unwrap_or_else(|| panic!("{}", want.name()));
        assert_eq!(
            (t.ty(), t.dims()[0]),
            (want.ty(), want.dims()[0]),
            "{}",
            want.name()
        );
        assert!(t.data.starts_with(want.data), "{} differs", want.name());
    }
    for key in [
        "tokenizer.ggml.model",
        "tokenizer.ggml.pre",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.token_type",
        "tokenizer.ggml.merges",
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
        "llama.block_count",
        "llama.attention.head_count_kv",
        "llama.rope.freq_base",
    ] {
        assert_eq!(got.metadata().get(key), twin.metadata().get(key), "{key}");
    }
}

#[test]
fn converted_file_computes_the_checkpoints_logits() {
    let hf = Model::open_safetensors(fixtures().join("llama3bpe-tiny-hf")).unwrap();
    let gguf = Model::from_gguf(&Arc::new(converted(GgmlType::F32))).unwrap();
    let tokens = [4000, 17, 250, 3999, 42, 1024, 7, 7];
    let (a, b) = (batched_logits(&hf, &tokens), batched_logits(&gguf, &tokens));
    let max = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(max < 1e-3, "max |difference| {max}");
}

#[test]
fn converted_file_tokenizes_like_the_checkpoints_tokenizer() {
    let path = std::env::temp_dir().join(format!("rinfer-convert-{}.gguf", std::process::id()));
    std::fs::write(&path, converted(GgmlType::F16).bytes()).unwrap();
    let from_gguf = LoadedModel::open(&path).unwrap();
    let from_hf = LoadedModel::open(fixtures().join("llama3bpe-tiny-hf")).unwrap();
    std::fs::remove_file(&path).ok();
    for text in [
        "Hello world",
        "  spaces and 123 numbers!",
        "über naïve café",
    ] {
        assert_eq!(
            from_gguf.tokenizer.encode(text, true, false).unwrap(),
            from_hf.tokenizer.encode(text, true, false).unwrap(),
            "{text:?}"
        );
    }
}

#[test]
fn f16_conversion_keeps_vectors_f32() {
    let got = converted(GgmlType::F16);
    for t in got.tensors() {
        let want = if t.dims().len() == 1 {
            GgmlType::F32
        } else {
            GgmlType::F16
        };
        assert_eq!(t.ty(), want, "{}", t.name());
    }
    assert_eq!(
        got.metadata()
            .get("general.file_type")
            .and_then(|v| v.as_i128()),
        Some(1)
    );
}

#[test]
fn qwen_checkpoints_keep_their_q_k_rows_and_get_the_qwen2_pre_tokenizer() {
    let hf = fixtures().join("llama3bpe-tiny-hf");
    let dir = std::env::temp_dir().join(format!("rinfer-convert-qwen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["model.safetensors", "tokenizer.json"] {
        std::fs::copy(hf.join(file), dir.join(file)).unwrap();
    }
    let config = std::fs::read_to_string(hf.join("config.json")).unwrap();
    let config = config.replace("\"model_type\": \"llama\"", "\"model_type\": \"qwen3\"");
    std::fs::write(dir.join("config.json"), config).unwrap();
    let bytes = convert_hf_dir(&dir, GgmlType::F32, Vec::new(), &mut |_, _, _| {});
    let llama = converted(GgmlType::F32);
    std::fs::remove_dir_all(&dir).ok();
    let qwen = GgufFile::from_bytes(bytes.unwrap()).unwrap();
    assert_eq!(
        qwen.metadata()
            .get("tokenizer.ggml.pre")
            .and_then(|v| v.as_str()),
        Some("qwen2")
    );
    let q = "blk.0.attn_q.weight";
    assert_ne!(qwen.tensor(q).unwrap().data, llama.tensor(q).unwrap().data);
    let v = "blk.0.attn_v.weight";
    assert_eq!(qwen.tensor(v).unwrap().data, llama.tensor(v).unwrap().data);
}
