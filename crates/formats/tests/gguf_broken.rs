//! Every deliberately broken fixture file is rejected with its own error, never a panic.

use rinfer_formats::gguf::{GgufError, GgufFile};

fn fixture(name: &str) -> String {
    format!(
        "{}/../../tests/fixtures/models/broken/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn open_err(name: &str) -> GgufError {
    match GgufFile::open(fixture(name)) {
        Ok(_) => panic!("{name} was accepted"),
        Err(e) => e,
    }
}

#[test]
fn minimal_valid_file_parses() {
    let file = GgufFile::open(fixture("minimal_valid.gguf")).unwrap();
    assert_eq!(file.header().architecture(), Some("llama"));
    let t = file.tensor("t0").unwrap();
    assert_eq!(t.dims(), &[8, 2]);
    let values: Vec<f32> = t
        .data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(values, (0..16).map(|i| i as f32).collect::<Vec<_>>());
}

#[test]
fn each_broken_file_gets_its_own_error() {
    type Expectation = fn(&GgufError) -> bool;
    let cases: &[(&str, Expectation)] = &[
        ("bad_magic.gguf", |e| {
            matches!(e, GgufError::BadMagic { .. })
        }),
        ("bad_version.gguf", |e| {
            matches!(e, GgufError::UnsupportedVersion { version: 99, .. })
        }),
        ("absurd_tensor_count.gguf", |e| {
            matches!(
                e,
                GgufError::ImpossibleCount {
                    what: "tensor count",
                    ..
                }
            )
        }),
        ("absurd_kv_count.gguf", |e| {
            matches!(
                e,
                GgufError::ImpossibleCount {
                    what: "metadata entry count",
                    ..
                }
            )
        }),
        ("absurd_string_length.gguf", |e| {
            matches!(
                e,
                GgufError::ImpossibleCount {
                    what: "metadata key",
                    ..
                }
            )
        }),
        ("absurd_array_length.gguf", |e| {
            matches!(
                e,
                GgufError::ImpossibleCount {
                    what: "array length",
                    ..
                }
            )
        }),
        ("tensor_offset_past_eof.gguf", |e| {
            matches!(e, GgufError::TensorPastEnd { .. })
        }),
        ("tensor_data_past_eof.gguf", |e| {
            matches!(e, GgufError::TensorPastEnd { .. })
        }),
        ("misaligned_tensor_offset.gguf", |e| {
            matches!(e, GgufError::MisalignedTensor { .. })
        }),
        ("tensor_dims_overflow.gguf", |e| {
            matches!(e, GgufError::DimsOverflow { .. })
        }),
        ("duplicate_tensor_name.gguf", |e| {
            matches!(e, GgufError::DuplicateTensor { .. })
        }),
        ("bad_tensor_type.gguf", |e| {
            matches!(e, GgufError::UnknownTensorType { type_id: 250, .. })
        }),
        ("truncated_llama-tiny-q2_k.gguf", |e| {
            matches!(e, GgufError::TensorPastEnd { .. })
        }),
    ];
    for (name, expected) in cases {
        let err = open_err(name);
        assert!(expected(&err), "{name}: unexpected error {err:?}");
        let message = err.to_string();
        assert!(
            !message.contains('\n'),
            "{name}: multi-line message {message:?}"
        );
    }
}

#[test]
fn every_truncation_of_a_valid_file_is_an_error() {
    let bytes = std::fs::read(fixture("minimal_valid.gguf")).unwrap();
    for len in 0..bytes.len() {
        assert!(
            GgufFile::from_bytes(bytes[..len].to_vec()).is_err(),
            "cut at {len}"
        );
    }
}

#[test]
fn version_one_and_big_endian_files_are_named() {
    let mut bytes = std::fs::read(fixture("minimal_valid.gguf")).unwrap();
    bytes[4..8].copy_from_slice(&1u32.to_le_bytes());
    let err = GgufFile::from_bytes(bytes.clone()).err().unwrap();
    assert!(
        matches!(err, GgufError::UnsupportedVersion { version: 1, .. }),
        "{err}"
    );
    bytes[4..8].copy_from_slice(&3u32.to_be_bytes());
    let err = GgufFile::from_bytes(bytes).err().unwrap();
    assert!(matches!(err, GgufError::BigEndian { version: 3 }), "{err}");
}

#[test]
fn a_missing_file_names_its_path() {
    let err = GgufFile::open("/nonexistent/model.gguf").err().unwrap();
    assert!(err.to_string().contains("/nonexistent/model.gguf"));
}
