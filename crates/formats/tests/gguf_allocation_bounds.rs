//! Counts in a GGUF header cannot make the reader allocate beyond what the file backs and a
//! fixed limit: a crafted (or sparse) file gets a clear error, never an allocation abort.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use rinfer_formats::gguf::{GgufError, GgufFile, GgufHeader, MAX_METADATA_VALUES, MAX_TENSORS};

/// Header bytes: magic, version 3, tensor count, metadata entry count.
fn header(tensors: u64, entries: u64) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&tensors.to_le_bytes());
    out.extend_from_slice(&entries.to_le_bytes());
    out
}

/// A metadata entry `key` holding an array of `count` u8 items, without the items.
fn u8_array_entry(key: &str, count: u64) -> Vec<u8> {
    let mut out = (key.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&9u32.to_le_bytes()); // array
    out.extend_from_slice(&0u32.to_le_bytes()); // of u8
    out.extend_from_slice(&count.to_le_bytes());
    out
}

/// Writes `head` then extends the file to `len` bytes as a hole: no disk space is used.
fn sparse_file(path: &Path, head: &[u8], len: u64) {
    let mut file = File::create(path).unwrap();
    file.write_all(head).unwrap();
    file.set_len(len).unwrap();
}

fn over_limit(err: &GgufError) -> bool {
    matches!(err, GgufError::CountOverLimit { .. })
}

#[test]
fn a_sparse_4_gib_file_claiming_a_huge_array_is_refused_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sparse.gguf");
    let len = 4u64 << 30;
    let mut head = header(0, 1);
    let entry = u8_array_entry("tokenizer.ggml.token_type", 0);
    // Exactly as many items as the rest of the file holds.
    let count = len - (head.len() + entry.len()) as u64;
    head.extend(u8_array_entry("tokenizer.ggml.token_type", count));
    sparse_file(&path, &head, len);

    let err = GgufFile::open(&path).err().expect("the file is refused");
    assert!(over_limit(&err), "{err}");
    let message = err.to_string();
    assert!(message.contains("limit"), "{message}");
}

#[test]
fn a_tensor_count_beyond_the_limit_is_refused_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tensors.gguf");
    let len = 4u64 << 30;
    sparse_file(&path, &header(len / 32, 0), len);

    let err = GgufFile::open(&path).err().expect("the file is refused");
    assert!(over_limit(&err), "{err}");
    assert!(MAX_TENSORS < len / 32);
}

#[test]
fn arrays_that_together_pass_the_value_limit_are_refused() {
    // Four arrays, each under the limit alone, over it together.
    let each = MAX_METADATA_VALUES / 4 + 1;
    let mut bytes = header(0, 4);
    for i in 0..4 {
        bytes.extend(u8_array_entry(&format!("array.{i}"), each));
        bytes.resize(bytes.len() + each as usize, 0);
    }
    let err = GgufHeader::parse(&bytes).expect_err("the header is refused");
    assert!(over_limit(&err), "{err}");
}

#[test]
fn an_array_at_the_value_limit_is_read() {
    let count = MAX_METADATA_VALUES - 1; // the entry's own value counts too
    let mut bytes = header(0, 1);
    bytes.extend(u8_array_entry("array", count));
    bytes.resize(bytes.len() + count as usize, 7);
    let header = GgufHeader::parse(&bytes).unwrap();
    let items = header.metadata.get_array("array").unwrap();
    assert_eq!(items.len() as u64, count);
}

#[test]
fn an_array_count_the_file_cannot_back_is_refused() {
    let mut bytes = header(0, 1);
    bytes.extend(u8_array_entry("array", 1000));
    bytes.resize(bytes.len() + 999, 0);
    let err = GgufHeader::parse(&bytes).expect_err("the header is refused");
    assert!(
        matches!(err, GgufError::ImpossibleCount { count: 1000, .. }),
        "{err}"
    );
}
