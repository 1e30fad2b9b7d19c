//! `rinfer quantize --imatrix` against `llama-quantize --imatrix`: each file of
//! `tests/fixtures/models/iq` was made by llama.cpp from `llama-tiny-f32.gguf` with the
//! importance matrix beside it (its `README.md` and `manifest.json` give the commands), so
//! quantizing the same input with the same matrix must give the same file, byte for byte. For
//! the other file types only the size and SHA-256 of llama.cpp's file, whole and per tensor,
//! are kept (`reference_sha256.json`).

use std::path::PathBuf;

use rinfer_formats::GgmlType;
use rinfer_formats::gguf::GgufFile;
use rinfer_model::quantize::{
    FileType, Imatrix, ImportanceMatrix, QuantizeError, quantize_model, quantize_model_with,
};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/models")
}

fn open(path: PathBuf) -> GgufFile {
    GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fixture's importance matrix.
fn imatrix() -> ImportanceMatrix {
    ImportanceMatrix::open(fixtures().join("iq/llama-tiny.imatrix.gguf")).expect("imatrix")
}

/// llama-quantize records the matrix under the name it was given on its command line.
const IMATRIX_NAME: &str = "llama-tiny.imatrix.gguf";

/// `input` quantized as `file_type` with the fixture's matrix.
fn quantize_with_matrix(input: &GgufFile, file_type: FileType) -> Vec<u8> {
    let matrix = imatrix();
    let imatrix = Imatrix {
        matrix: &matrix,
        file: IMATRIX_NAME,
    };
    quantize_model_with(input, file_type, false, Some(imatrix), Vec::new(), |_| {})
        .unwrap_or_else(|e| panic!("{file_type}: {e}"))
}

/// The F32 fixture quantized as `file_type` with the fixture's matrix.
fn quantize_fixture(file_type: FileType) -> Vec<u8> {
    quantize_with_matrix(&open(fixtures().join("llama-tiny-f32.gguf")), file_type)
}

/// Quantizes the F32 fixture as `file_type` with the fixture's matrix and compares the whole
/// file with llama.cpp's, naming the first tensor that differs.
fn assert_reproduces(file_type: FileType, expected_file: &str) {
    assert_same_file(
        file_type,
        quantize_fixture(file_type),
        fixtures().join("iq").join(expected_file),
    );
}

/// Compares `got` with the file at `expected_path`, naming the first tensor that differs.
fn assert_same_file(file_type: FileType, got: Vec<u8>, expected_path: PathBuf) {
    let expected = std::fs::read(&expected_path).expect("fixture");
    if got == expected {
        return;
    }
    let (g, w) = (
        GgufFile::from_bytes(got.clone()).expect("output parses"),
        open(expected_path),
    );
    for (a, b) in g.tensors().zip(w.tensors()) {
        assert_eq!(
            (a.name(), a.ty(), a.dims()),
            (b.name(), b.ty(), b.dims()),
            "{file_type}: tensor order and types"
        );
        if let Some(i) = a.data.iter().zip(b.data).position(|(x, y)| x != y) {
            let block = i / a.ty().type_size();
            panic!(
                "{file_type}: {} ({}) differs first at byte {i} (block {block})",
                a.name(),
                a.ty()
            );
        }
    }
    assert_eq!(
        g.metadata().iter().map(|(k, _)| k).collect::<Vec<_>>(),
        w.metadata().iter().map(|(k, _)| k).collect::<Vec<_>>(),
        "{file_type}: metadata keys"
    );
    assert_eq!(got.len(), expected.len(), "{file_type}: file size");
    panic!("{file_type}: the files differ outside the tensors (metadata values?)");
}

/// The file types whose llama.cpp files are kept whole.
#[test]
fn the_kept_file_types_with_an_imatrix_are_llama_cpp_files_byte_for_byte() {
    for (file_type, file) in [
        (FileType::Iq1S, "llama-tiny-iq1_s.gguf"),
        (FileType::Iq2Xxs, "llama-tiny-iq2_xxs.gguf"),
        (FileType::Iq3S, "llama-tiny-iq3_s.gguf"),
        (FileType::Tq2_0, "llama-tiny-tq2_0.gguf"),
    ] {
        assert_reproduces(file_type, file);
    }
}

/// The hex SHA-256 of `bytes`.
fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Quantizes the F32 fixture as `file_type` with the fixture's matrix and compares the size and
/// SHA-256 of the file with llama.cpp's, naming the first tensor that differs.
fn assert_reproduces_hashed(file_type: FileType) {
    let path = fixtures().join("iq/reference_sha256.json");
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let references: serde_json::Value = serde_json::from_slice(&text).expect("JSON");
    let name = format!("llama-tiny-{}.gguf", file_type.name().to_ascii_lowercase());
    let want = &references[&name];
    assert_eq!(
        want["type"],
        file_type.name(),
        "{name} is in the references"
    );
    let got = quantize_fixture(file_type);
    if want["size"] == got.len() && want["sha256"] == sha256(&got) {
        return;
    }
    let file = GgufFile::from_bytes(got.clone()).expect("output parses");
    let tensors = want["tensors"].as_object().expect("tensors");
    assert_eq!(
        file.tensors()
            .map(|t| t.name().to_string())
            .collect::<Vec<_>>(),
        tensors.keys().cloned().collect::<Vec<_>>(),
        "{file_type}: tensor order"
    );
    for t in file.tensors() {
        let w = &tensors[t.name()];
        assert_eq!(w["type"], t.ty().to_string(), "{file_type}: {}", t.name());
        assert_eq!(
            w["sha256"],
            sha256(t.data),
            "{file_type}: {} ({}) differs",
            t.name(),
            t.ty()
        );
    }
    panic!(
        "{file_type}: the tensors match, the file does not ({} bytes, llama.cpp's {}): metadata?",
        got.len(),
        want["size"]
    );
}

/// The file types of which only the hashes of llama.cpp's files are kept.
#[test]
fn the_hashed_file_types_with_an_imatrix_are_llama_cpp_files_byte_for_byte() {
    for file_type in [
        FileType::Iq1M,
        FileType::Iq2Xs,
        FileType::Iq2S,
        FileType::Iq2M,
        FileType::Iq3Xxs,
        FileType::Iq3Xs,
        FileType::Iq3M,
        FileType::Iq4Nl,
        FileType::Iq4Xs,
    ] {
        assert_reproduces_hashed(file_type);
    }
}

/// The small byte references: llama.cpp's files cut to the first two rows of every matrix by
/// `tests/fixtures/quantize/make_slim.py`, which rinfer must write for the cut F32 input, as
/// quantization works row by row and the importance matrix by column.
#[test]
fn the_first_rows_are_llama_cpp_bytes_for_each_new_iq_kernel() {
    let slim = fixtures().join("../quantize");
    let input = open(slim.join("llama-tiny-f32.slim.gguf"));
    for file_type in [
        FileType::Iq1M,
        FileType::Iq2Xs,
        FileType::Iq2M,
        FileType::Iq3Xs,
        FileType::Iq4Xs,
    ] {
        let name = file_type.name().to_ascii_lowercase();
        let expected = slim.join(format!("llama-tiny-{name}.imatrix.slim.gguf"));
        assert_same_file(file_type, quantize_with_matrix(&input, file_type), expected);
    }
}

#[test]
fn the_fixture_matrix_has_an_entry_per_layer_matrix_with_llama_cpp_metadata() {
    let m = imatrix();
    assert_eq!(m.len(), 14);
    assert_eq!((m.chunk_count(), m.chunk_size()), (27, 128));
    assert_eq!(m.datasets(), ["imatrix_text.txt"]);
    let down = m.get("blk.1.ffn_down.weight").expect("ffn_down entry");
    assert_eq!(down.len(), 512);
    assert!(down.iter().all(|v| v.is_finite() && *v >= 0.0));
    assert!(m.get("token_embd.weight").is_none());
}

#[test]
fn iq1_iq2_and_iq3_xxs_tensors_are_refused_without_an_imatrix_as_llama_cpp_does() {
    let input = open(fixtures().join("llama-tiny-f32.gguf"));
    for file_type in [
        FileType::Iq1S,
        FileType::Iq1M,
        FileType::Iq2Xxs,
        FileType::Iq2Xs,
        FileType::Iq2S,
        FileType::Iq2M,
        FileType::Iq3Xxs,
        FileType::Iq3Xs,
    ] {
        let err = quantize_model(&input, file_type, false, Vec::new(), |_| {})
            .expect_err("refused without an importance matrix");
        assert!(
            matches!(err, QuantizeError::MissingImatrix { .. }),
            "{file_type}: {err}"
        );
        assert!(err.to_string().contains("--imatrix"), "{err}");
    }
}

#[test]
fn an_imatrix_entry_of_the_wrong_width_is_refused() {
    use rinfer_formats::gguf::{GgufWriter, MetadataValue, ValueType};
    let mut w = GgufWriter::new();
    w.add_metadata(
        "imatrix.datasets",
        MetadataValue::Array {
            element: ValueType::String,
            items: vec![MetadataValue::String("t.txt".into())],
        },
    )
    .unwrap();
    w.add_metadata("imatrix.chunk_count", MetadataValue::U32(1))
        .unwrap();
    w.add_metadata("imatrix.chunk_size", MetadataValue::U32(8))
        .unwrap();
    let floats = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    w.add_tensor(
        "blk.0.attn_q.weight.in_sum2",
        GgmlType::F32,
        &[128],
        floats(&[1.0; 128]),
    )
    .unwrap();
    w.add_tensor(
        "blk.0.attn_q.weight.counts",
        GgmlType::F32,
        &[1],
        floats(&[1.0]),
    )
    .unwrap();
    let matrix = ImportanceMatrix::from_bytes(w.to_bytes()).unwrap();
    let input = open(fixtures().join("llama-tiny-f32.gguf"));
    let imatrix = Imatrix {
        matrix: &matrix,
        file: "wrong.gguf",
    };
    let err = quantize_model_with(
        &input,
        FileType::Iq3S,
        false,
        Some(imatrix),
        Vec::new(),
        |_| {},
    )
    .expect_err("a 128-column entry for a 256-column matrix");
    assert!(
        matches!(&err, QuantizeError::ImatrixSize { tensor, entry: 128, expected: 256 } if tensor == "blk.0.attn_q.weight"),
        "{err}"
    );
}
