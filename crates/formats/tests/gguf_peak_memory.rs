//! Reading the header of a crafted GGUF file costs memory in proportion to what rinfer accepts,
//! not to what the file claims. Alone in its test binary so that the peak it measures is its own.

#![cfg(target_os = "linux")]

use std::fs::File;
use std::io::Write;

use rinfer_formats::gguf::GgufFile;

/// The process's peak resident memory (`VmHWM`), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/self/status");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib * 1024
}

#[test]
fn a_69_mb_file_of_one_byte_array_items_does_not_cost_gigabytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("amplify.gguf");
    let len: u64 = 69 << 20;
    let mut head = b"GGUF".to_vec();
    head.extend_from_slice(&3u32.to_le_bytes());
    head.extend_from_slice(&0u64.to_le_bytes()); // tensors
    head.extend_from_slice(&1u64.to_le_bytes()); // metadata entries
    head.extend_from_slice(&1u64.to_le_bytes());
    head.extend_from_slice(b"a");
    head.extend_from_slice(&9u32.to_le_bytes()); // array
    head.extend_from_slice(&0u32.to_le_bytes()); // of u8
    let count = len - head.len() as u64 - 8;
    head.extend_from_slice(&count.to_le_bytes());
    let mut file = File::create(&path).unwrap();
    file.write_all(&head).unwrap();
    file.set_len(len).unwrap();
    drop(file);

    let before = peak_rss();
    let result = GgufFile::open(&path);
    let grown = peak_rss().saturating_sub(before);
    assert!(result.is_err(), "an array of {count} items is accepted");
    assert!(
        grown < 256 << 20,
        "reading the header raised the peak memory by {} MiB",
        grown >> 20
    );
}
