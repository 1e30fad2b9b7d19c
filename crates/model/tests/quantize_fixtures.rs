//! `rinfer quantize` against llama.cpp's quantizer: every quantized fixture model was made by
//! `llama_model_quantize` from the F32 file beside it, so quantizing that F32 file must give the
//! same tensor types and the same bytes.
//!
//! `tests/fixtures/quantize` holds the fixtures cut to the first two rows of every matrix
//! (`make_slim.py` there): quantization works row by row and the per-tensor rules read only
//! names, row lengths and expert counts, so the cut files test every fixture in a few MB. One
//! model is also compared whole, file for file.

use std::path::PathBuf;

use rinfer_formats::GgmlType;
use rinfer_formats::gguf::GgufFile;
use rinfer_model::quantize::{FileType, QuantizeError, plan_types, quantize_model};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn open(path: PathBuf) -> GgufFile {
    GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Quantizes `input` as `file_type` and checks every tensor's type and bytes, and the file
/// type, against `expected`.
fn assert_reproduces(input: &GgufFile, expected: &GgufFile, file_type: FileType, pure: bool) {
    let bytes = quantize_model(input, file_type, pure, Vec::new(), |_| {}).expect("quantize");
    let got = GgufFile::from_bytes(bytes).expect("output parses");
    let names = |f: &GgufFile| {
        f.tensors()
            .map(|t| t.name().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&got), names(expected), "tensor order");
    for (g, w) in got.tensors().zip(expected.tensors()) {
        assert_eq!((g.ty(), g.dims()), (w.ty(), w.dims()), "{}", g.name());
        if let Some(i) = g.data.iter().zip(w.data).position(|(a, b)| a != b) {
            panic!("{} ({}): first differing byte at {i}", g.name(), g.ty());
        }
    }
    assert_eq!(
        got.metadata().get("general.file_type"),
        expected.metadata().get("general.file_type")
    );
}

/// Each quantized fixture: its F32 source, how llama.cpp made it, and its types.
const FIXTURES: &[(&str, &str, FileType, bool)] = &[
    ("llama-tiny-f32", "llama-tiny-f16", FileType::F16, true),
    ("llama-tiny-f32", "llama-tiny-bf16", FileType::Bf16, true),
    ("llama-tiny-f32", "llama-tiny-q4_0", FileType::Q4_0, true),
    ("llama-tiny-f32", "llama-tiny-q4_1", FileType::Q4_1, true),
    ("llama-tiny-f32", "llama-tiny-q5_0", FileType::Q5_0, true),
    ("llama-tiny-f32", "llama-tiny-q5_1", FileType::Q5_1, true),
    ("llama-tiny-f32", "llama-tiny-q8_0", FileType::Q8_0, true),
    ("llama-tiny-f32", "llama-tiny-q2_k", FileType::Q2K, true),
    ("llama-tiny-f32", "llama-tiny-q3_k", FileType::Q3KM, true),
    ("llama-tiny-f32", "llama-tiny-q4_k", FileType::Q4KM, true),
    ("llama-tiny-f32", "llama-tiny-q5_k", FileType::Q5KM, true),
    ("llama-tiny-f32", "llama-tiny-q6_k", FileType::Q6K, true),
    ("qwen2-tiny-f32", "qwen2-tiny-q4_k_m", FileType::Q4KM, false),
    ("qwen3-tiny-f32", "qwen3-tiny-q5_k_m", FileType::Q5KM, false),
    (
        "gemma3-tiny-f32",
        "gemma3-tiny-q4_k_m",
        FileType::Q4KM,
        false,
    ),
    ("phi2-tiny-f32", "phi2-tiny-q3_k_m", FileType::Q3KM, false),
    ("gpt2-tiny-f32", "gpt2-tiny-q2_k", FileType::Q2K, false),
    (
        "qwen3moe-tiny-f32",
        "qwen3moe-tiny-q4_k_m",
        FileType::Q4KM,
        false,
    ),
    (
        "mixtral-tiny-f32",
        "mixtral-tiny-q8_0",
        FileType::Q8_0,
        true,
    ),
];

#[test]
fn quantizing_each_f32_fixture_reproduces_llama_cpp_byte_for_byte() {
    let dir = fixtures().join("quantize");
    for &(source, quantized, file_type, pure) in FIXTURES {
        let input = open(dir.join(format!("{source}.slim.gguf")));
        let expected = open(dir.join(format!("{quantized}.slim.gguf")));
        eprintln!(
            "{quantized}: {file_type}{}",
            if pure { " --pure" } else { "" }
        );
        assert_reproduces(&input, &expected, file_type, pure);
    }
}

#[test]
fn mxfp4_moe_puts_experts_in_mxfp4_and_the_rest_in_q8_0() {
    let dir = fixtures().join("quantize");
    let input = open(dir.join("gpt-oss-tiny-f32.slim.gguf"));
    let expected = open(dir.join("gpt-oss-tiny-mxfp4.slim.gguf"));
    let planned: Vec<(String, GgmlType)> = plan_types(&input, FileType::Mxfp4Moe, false)
        .into_iter()
        .map(|(t, ty)| (t.name().to_string(), ty))
        .collect();
    let want: Vec<(String, GgmlType)> = expected
        .tensors()
        .map(|t| (t.name().to_string(), t.ty()))
        .collect();
    assert_eq!(planned, want);
    assert_reproduces(&input, &expected, FileType::Mxfp4Moe, false);
}

#[test]
fn a_whole_model_quantizes_to_llama_cpp_file_byte_for_byte() {
    let dir = fixtures().join("models");
    let input = open(dir.join("gemma3-tiny-f32.gguf"));
    let expected = std::fs::read(dir.join("gemma3-tiny-q4_k_m.gguf")).expect("fixture");
    let got = quantize_model(&input, FileType::Q4KM, false, Vec::new(), |_| {}).expect("quantize");
    assert_eq!(got.len(), expected.len(), "file size");
    if let Some(i) = got.iter().zip(&expected).position(|(a, b)| a != b) {
        panic!("first differing byte at {i}");
    }
}

#[test]
fn quantized_input_is_refused_with_a_pointer_to_f32() {
    let input = open(fixtures().join("quantize/llama-tiny-q8_0.slim.gguf"));
    let err = quantize_model(&input, FileType::Q4_0, false, Vec::new(), |_| {})
        .expect_err("a Q8_0 model is refused");
    assert!(
        matches!(err, QuantizeError::AlreadyQuantized { .. }),
        "{err}"
    );
}

#[test]
fn progress_reports_every_tensor_once_in_order() {
    let input = open(fixtures().join("quantize/llama-tiny-f32.slim.gguf"));
    let mut seen = Vec::new();
    quantize_model(&input, FileType::Q8_0, true, Vec::new(), |p| {
        seen.push((p.done, p.total))
    })
    .unwrap();
    let n = input.tensors().len();
    assert_eq!(seen, (1..=n).map(|d| (d, n)).collect::<Vec<_>>());
}

#[test]
fn a_nan_weight_is_refused_naming_the_tensor() {
    use rinfer_formats::gguf::{GgufWriter, MetadataValue};
    let mut values = vec![0.5f32; 64];
    values[40] = f32::NAN;
    let mut w = GgufWriter::new();
    w.add_metadata(
        "general.architecture",
        MetadataValue::String("llama".into()),
    )
    .unwrap();
    let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    w.add_tensor("blk.0.attn_q.weight", GgmlType::F32, &[32, 2], bytes)
        .unwrap();
    let input = GgufFile::from_bytes(w.to_bytes()).unwrap();
    let err = quantize_model(&input, FileType::Q8_0, false, Vec::new(), |_| {})
        .expect_err("NaN is refused");
    assert!(
        matches!(&err, QuantizeError::NonFinite { tensor, index: 40 } if tensor == "blk.0.attn_q.weight"),
        "{err}"
    );
}

/// Cosine similarity of the logits of `tokens` under `a` and `b`.
fn logits_cosine(a: &rinfer_model::Model, b: &rinfer_model::Model, tokens: &[u32]) -> f64 {
    use rinfer_model::{KvCache, Logits, Scratch};
    let run = |m: &rinfer_model::Model| {
        let n = tokens.len();
        let mut cache = KvCache::new(&m.config, n, n);
        let mut scratch = Scratch::new(&m.config, n);
        m.forward(tokens, &mut cache, &mut scratch, Logits::All)
            .unwrap()
            .to_vec()
    };
    let (x, y) = (run(a), run(b));
    let dot: f64 = x.iter().zip(&y).map(|(a, b)| *a as f64 * *b as f64).sum();
    let norm = |v: &[f32]| v.iter().map(|a| (*a as f64).powi(2)).sum::<f64>().sqrt();
    dot / (norm(&x) * norm(&y))
}

#[test]
fn every_file_type_rinfer_writes_loads_and_stays_close_to_f32() {
    use std::sync::Arc;
    let f32_file = Arc::new(open(fixtures().join("models/gemma3-tiny-f32.gguf")));
    let reference = rinfer_model::Model::from_gguf(&f32_file).unwrap();
    let tokens = [2, 651, 3037, 576, 1081, 603, 1024, 17];
    // MXFP4_MOE is for MoE models, TQ2_0 for models trained ternary (random weights keep a
    // cosine near 0.1); the IQ1, IQ2, IQ3_XXS and IQ3_XS types need an importance matrix.
    // `quantize_imatrix.rs` compares those with llama.cpp's files.
    let skipped = [
        "MXFP4_MOE",
        "TQ2_0",
        "IQ1_S",
        "IQ1_M",
        "IQ2_XXS",
        "IQ2_XS",
        "IQ2_S",
        "IQ2_M",
        "IQ3_XXS",
        "IQ3_XS",
    ];
    for name in FileType::names().filter(|n| !skipped.contains(n)) {
        let file_type: FileType = name.parse().unwrap();
        let bytes = quantize_model(&f32_file, file_type, false, Vec::new(), |_| {}).unwrap();
        let model = rinfer_model::Model::from_gguf(&Arc::new(GgufFile::from_bytes(bytes).unwrap()))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let cos = logits_cosine(&reference, &model, &tokens);
        eprintln!("{name}: cosine {cos:.5}");
        // Floors with a margin under what this random tiny model gives (it amplifies rounding).
        let floor = match file_type {
            FileType::F32 | FileType::F16 | FileType::Bf16 | FileType::Q8_0 => 0.999,
            FileType::Q2K => 0.75,
            FileType::Q3KS => 0.85,
            FileType::Iq3S | FileType::Iq3M => 0.8,
            _ => 0.93,
        };
        assert!(cos > floor, "{name}: cosine {cos} under {floor}");
    }
}
