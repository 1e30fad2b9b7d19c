//! `rinfer imatrix` against `llama-imatrix`: `tests/fixtures/models/iq/llama-tiny.imatrix.gguf`
//! was computed by llama.cpp from `llama-tiny-f32.gguf` over `imatrix_text.txt` in chunks of
//! 128 tokens (the folder's `README.md`), so computing it again must give the same entries,
//! the same counts and the same sums to float rounding.
//!
//! How close is close: the first layer's q, k and v read the normed embeddings, computed alike,
//! so only the order of the additions differs (1e-6 apart). Every later input went through
//! attention, where llama.cpp's flash attention (on for the fixture) keeps f16 values and
//! accumulators: its own sums without flash attention (`-fa off`) differ from it by up to
//! 1.3e-3 relative (2e-4 on average) on this fixture, and rinfer's by as much.

mod common;

use rinfer_formats::gguf::{GgufFile, MetadataValue, TensorView};
use rinfer_model::LoadedModel;
use rinfer_model::imatrix::{
    CalibrationError, CalibrationOptions, ChunkDone, ImatrixSums, calibrate,
};
use rinfer_model::quantize::{FileType, Imatrix, ImportanceMatrix, quantize_model_with};

use common::fixtures;

/// The relative difference allowed between a sum of the first layer's q, k, v inputs and
/// llama.cpp's: the order of the additions.
const ORDER_TOLERANCE: f32 = 1e-5;
/// The relative difference allowed between any other sum and llama.cpp's: the spread of
/// llama.cpp's own two attention paths.
const SUM_TOLERANCE: f32 = 2e-3;
/// The mean relative difference allowed over all sums.
const MEAN_TOLERANCE: f64 = 3e-4;

/// The fixture model `models/<name>.gguf`.
fn fixture(name: &str) -> LoadedModel {
    LoadedModel::open(fixtures().join(format!("models/{name}.gguf"))).expect("fixture model")
}

/// The llama fixture llama.cpp's matrix was computed from.
fn model() -> LoadedModel {
    fixture("llama-tiny-f32")
}

fn options(chunk_size: usize) -> CalibrationOptions {
    CalibrationOptions {
        chunk_size,
        max_chunks: None,
        perplexity: true,
        dataset: "imatrix_text.txt".into(),
    }
}

/// The fixture text as the model tokenizes it, and the BOS that starts each chunk.
fn tokens(loaded: &LoadedModel, text: &str) -> (Vec<u32>, Option<u32>) {
    let t = &loaded.tokenizer;
    let ids = t.encode(text, true, false).expect("tokenizes");
    (ids, t.bos().filter(|_| t.add_bos()))
}

/// Calibrates `loaded` over the fixture text llama-imatrix read (`models/iq/imatrix_text.txt`)
/// with `options`, handing `progress` each finished chunk.
fn calibrate_on_text(
    loaded: &LoadedModel,
    options: &CalibrationOptions,
    progress: impl FnMut(&ChunkDone),
) -> ImatrixSums {
    let text = std::fs::read_to_string(fixtures().join("models/iq/imatrix_text.txt")).unwrap();
    let (ids, bos) = tokens(loaded, &text);
    calibrate(&loaded.model, &ids, bos, options, progress).expect("calibrates")
}

fn compute(chunk_size: usize) -> (ImatrixSums, Vec<f64>) {
    let mut perplexities = Vec::new();
    let sums = calibrate_on_text(&model(), &options(chunk_size), |done| {
        perplexities.extend(done.perplexity);
    });
    (sums, perplexities)
}

fn floats(t: &TensorView<'_>) -> Vec<f32> {
    t.data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// A file's metadata, one `key=value` line per key.
fn metadata(file: &GgufFile) -> Vec<String> {
    file.metadata()
        .iter()
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect()
}

#[test]
fn the_fixture_matrix_is_llama_imatrix_output_to_float_rounding() {
    let (sums, perplexities) = compute(128);
    let bytes = sums.to_gguf().expect("writes").to_bytes();
    let ours = GgufFile::from_bytes(bytes).expect("parses");
    let theirs = GgufFile::open(fixtures().join("models/iq/llama-tiny.imatrix.gguf")).unwrap();
    assert_eq!(metadata(&ours), metadata(&theirs), "metadata");
    assert_eq!(ours.tensors().len(), theirs.tensors().len(), "tensor count");
    let (mut worst, mut total, mut n) = (0.0f32, 0.0f64, 0usize);
    for (a, b) in ours.tensors().zip(theirs.tensors()) {
        assert_eq!(
            (a.name(), a.ty(), a.dims()),
            (b.name(), b.ty(), b.dims()),
            "tensors in llama.cpp's order and shapes"
        );
        let (x, y) = (floats(&a), floats(&b));
        if a.name().ends_with(".counts") {
            assert_eq!(x, y, "{}", a.name());
            continue;
        }
        let first_qkv = ["q", "k", "v"].map(|p| format!("blk.0.attn_{p}.weight.in_sum2"));
        let tolerance = match first_qkv.iter().any(|n| n == a.name()) {
            true => ORDER_TOLERANCE,
            false => SUM_TOLERANCE,
        };
        for (i, (x, y)) in x.iter().zip(&y).enumerate() {
            let rel = (x - y).abs() / y.abs().max(f32::MIN_POSITIVE);
            worst = worst.max(rel);
            (total, n) = (total + f64::from(rel), n + 1);
            assert!(rel <= tolerance, "{} [{i}]: {x} vs {y}", a.name());
        }
    }
    let mean = total / n as f64;
    eprintln!("relative difference of the sums: largest {worst:e}, mean {mean:e}");
    assert!(mean <= MEAN_TOLERANCE, "mean relative difference {mean:e}");
    assert_eq!(perplexities.len(), 27);
    // llama-imatrix printed `[27]77045.2961` and `Final estimate: PPL = 77045.2961 +/- 4769.90393`.
    let last = perplexities[26];
    assert!((last / 77045.2961 - 1.0).abs() < 1e-3, "perplexity {last}");
    let estimate = sums.perplexity().expect("asked for");
    assert!(
        (estimate.error / 4769.90393 - 1.0).abs() < 1e-2,
        "{estimate:?}"
    );
    assert!(sums.partial().is_empty());
}

/// Quantizes the F32 fixture as `file_type` with importance matrix `matrix`.
fn quantize(matrix: &ImportanceMatrix, file_type: FileType) -> Vec<u8> {
    let input = GgufFile::open(fixtures().join("models/llama-tiny-f32.gguf")).unwrap();
    let imatrix = Imatrix {
        matrix,
        file: "llama-tiny.imatrix.gguf",
    };
    quantize_model_with(&input, file_type, false, Some(imatrix), Vec::new(), |_| {})
        .unwrap_or_else(|e| panic!("{file_type}: {e}"))
}

/// Quantizing with rinfer's matrix: TQ2_0, whose quantizer ignores the importances, gives
/// llama-quantize's file byte for byte, metadata (the matrix's entries, chunks and dataset)
/// included. A type that weighs the importances cannot: a sum that differs in its last bits
/// tips a few blocks' rounding choices, as llama.cpp's own matrix computed without flash
/// attention does (its IQ3_S file differs from the fixture's in 39 bytes). Those are held
/// to a few blocks in a thousand.
#[test]
fn quantizing_with_our_matrix_gives_llama_cpp_file_up_to_rounding_ties() {
    let (sums, _) = compute(128);
    let ours = ImportanceMatrix::from_bytes(sums.to_gguf().unwrap().to_bytes()).unwrap();
    let expected = std::fs::read(fixtures().join("models/iq/llama-tiny-tq2_0.gguf")).unwrap();
    assert!(
        quantize(&ours, FileType::Tq2_0) == expected,
        "TQ2_0 with rinfer's importance matrix is not llama-quantize's file"
    );

    let got = GgufFile::from_bytes(quantize(&ours, FileType::Iq3S)).unwrap();
    let want = GgufFile::open(fixtures().join("models/iq/llama-tiny-iq3_s.gguf")).unwrap();
    let (mut differ, mut blocks) = (0, 0);
    for (a, b) in got.tensors().zip(want.tensors()) {
        assert_eq!((a.name(), a.ty(), a.dims()), (b.name(), b.ty(), b.dims()));
        let size = a.ty().type_size();
        let pairs = a.data.chunks(size).zip(b.data.chunks(size));
        differ += pairs.filter(|(x, y)| x != y).count();
        blocks += a.data.len() / size;
    }
    assert!(
        differ * 1000 <= blocks * 5,
        "IQ3_S: {differ} of {blocks} blocks differ from llama-quantize's"
    );
}

#[test]
fn a_text_shorter_than_two_chunks_is_refused_with_the_counts() {
    let loaded = model();
    let (ids, bos) = tokens(&loaded, "A short text of a few tokens.");
    let err = calibrate(&loaded.model, &ids, bos, &options(128), |_| {}).unwrap_err();
    assert!(
        matches!(err, CalibrationError::TooFewTokens { needed: 256, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("smaller chunk size"), "{err}");
    let err = calibrate(&loaded.model, &[], bos, &options(128), |_| {}).unwrap_err();
    assert!(matches!(
        err,
        CalibrationError::TooFewTokens { tokens: 0, .. }
    ));
    let err = calibrate(&loaded.model, &ids, bos, &options(0), |_| {}).unwrap_err();
    assert!(matches!(err, CalibrationError::ZeroChunkSize));
}

#[test]
fn metadata_names_the_dataset_and_counts_whole_chunks() {
    let options = CalibrationOptions {
        max_chunks: Some(3),
        perplexity: false,
        ..options(64)
    };
    let sums = calibrate_on_text(&model(), &options, |_| {});
    assert_eq!(sums.chunk_count(), 3);
    assert!(sums.perplexity().is_none());
    let file = GgufFile::from_bytes(sums.to_gguf().unwrap().to_bytes()).unwrap();
    assert_eq!(
        file.metadata().get("imatrix.datasets"),
        Some(&MetadataValue::Array {
            element: rinfer_formats::gguf::ValueType::String,
            items: vec![MetadataValue::String("imatrix_text.txt".into())],
        })
    );
    for e in sums.entries().values() {
        assert_eq!(e.counts(), [3 * 64]);
    }
}

/// A mixture of experts against llama-imatrix (`models/iq/qwen3moe-tiny.imatrix.gguf`, the
/// same text and chunks): the same entries and shapes, routed experts with a count each.
/// The router picks among near-tied experts on this random model, so a token in a few hundred
/// goes to another expert than in llama.cpp (as it does in llama.cpp itself without flash
/// attention): each expert's count is held to 0.5 % of llama.cpp's, their total exactly (every
/// token goes to `used` experts), and the experts' sums on average.
#[test]
fn a_mixture_of_experts_counts_each_experts_tokens_as_llama_imatrix() {
    let options = CalibrationOptions {
        dataset: "iq/imatrix_text.txt".into(),
        perplexity: false,
        ..options(128)
    };
    let sums = calibrate_on_text(&fixture("qwen3moe-tiny-f32"), &options, |_| {});
    let ours = GgufFile::from_bytes(sums.to_gguf().unwrap().to_bytes()).unwrap();
    let theirs = GgufFile::open(fixtures().join("models/iq/qwen3moe-tiny.imatrix.gguf")).unwrap();
    assert_eq!(metadata(&ours), metadata(&theirs), "metadata");
    assert_eq!(ours.tensors().len(), theirs.tensors().len());
    for (a, b) in ours.tensors().zip(theirs.tensors()) {
        assert_eq!((a.name(), a.ty(), a.dims()), (b.name(), b.ty(), b.dims()));
        let (x, y) = (floats(&a), floats(&b));
        let routed = a.name().contains("_exps.");
        match (a.name().ends_with(".counts"), routed) {
            (true, false) => assert_eq!(x, y, "{}", a.name()),
            (true, true) => {
                assert_eq!(x.iter().sum::<f32>(), y.iter().sum::<f32>(), "{}", a.name());
                for (c, l) in x.iter().zip(&y) {
                    assert!((c - l).abs() <= l * 0.005, "{}: {x:?} vs {y:?}", a.name());
                }
            }
            (false, false) => {
                for (i, (x, y)) in x.iter().zip(&y).enumerate() {
                    let rel = (x - y).abs() / y.abs();
                    assert!(rel <= 3e-3, "{} [{i}]: {x} vs {y}", a.name());
                }
            }
            (false, true) => {
                let rel = x.iter().zip(&y).map(|(x, y)| (x - y).abs() / y.abs());
                let mean = rel.sum::<f32>() / x.len() as f32;
                assert!(
                    mean <= 5e-3,
                    "{}: mean relative difference {mean}",
                    a.name()
                );
            }
        }
    }
}

/// Latent attention (the deepseek2 fixture): llama-imatrix on the same text with `-c 128`
/// counted 3712 rows for every dense product and `attn_k_b`, but 3569 for `attn_v_b`, which
/// reads each chunk's rows of a micro-batch apart and so skipped the last micro-batch of the
/// second batch (13 chunks, 11 rows each). Each writes one count and its heads' sums in a row.
#[test]
fn latent_attention_counts_its_value_product_per_chunk_as_llama_imatrix() {
    let options = CalibrationOptions {
        perplexity: false,
        ..options(128)
    };
    let sums = calibrate_on_text(&fixture("deepseek2-tiny-f32"), &options, |_| {});
    assert_eq!(sums.chunk_count(), 29);
    let entry = |name: &str| &sums.entries()[name];
    for layer in 0..3 {
        assert_eq!(
            entry(&format!("blk.{layer}.attn_q_a.weight")).counts(),
            [3712]
        );
        assert_eq!(
            entry(&format!("blk.{layer}.attn_k_b.weight")).counts(),
            [3712]
        );
        let v_b = entry(&format!("blk.{layer}.attn_v_b.weight"));
        assert_eq!(v_b.counts(), [3569]);
        assert_eq!(v_b.sums().len() % v_b.cols(), 0);
    }
    let file = GgufFile::from_bytes(sums.to_gguf().unwrap().to_bytes()).unwrap();
    let v_b = file
        .tensor("blk.0.attn_v_b.weight.in_sum2")
        .expect("written");
    assert_eq!(
        v_b.dims().len(),
        1,
        "heads' sums in one row, as ggml writes them"
    );
}
