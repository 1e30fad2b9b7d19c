//! `rinfer imatrix` as a user runs it: a matrix `rinfer quantize --imatrix` reads, a line per
//! chunk, and clear errors that leave no file behind for an empty or short text and an
//! unwritable destination.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use rinfer_formats::gguf::GgufFile;

fn fixture(rel: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    root.join(rel).to_string_lossy().into_owned()
}

fn rinfer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rinfer"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the rinfer binary runs")
}

/// Runs `rinfer imatrix` on the tiny llama with `text`, writing `out`.
fn imatrix(text: &Path, out: &Path, extra: &[&str]) -> Output {
    let model = fixture("models/llama-tiny-f32.gguf");
    let mut args = vec![
        "imatrix",
        "-m",
        &model,
        "-f",
        text.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    rinfer(&args)
}

/// The files in `dir`.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn refused(out: &Output, expected: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains(expected), "{stderr}");
}

#[test]
fn the_matrix_written_is_read_by_quantize_and_each_chunk_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tiny.imatrix.gguf");
    let text = PathBuf::from(fixture("models/iq/imatrix_text.txt"));
    let run = imatrix(&text, &out, &["-c", "128", "--chunks", "2", "-t", "1"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(stderr.contains("[1/2] PPL = "), "{stderr}");
    assert!(stderr.contains("[2/2] PPL = "), "{stderr}");
    assert!(stderr.contains("Final estimate: PPL = "), "{stderr}");
    let file = GgufFile::open(&out).unwrap();
    assert_eq!(file.metadata().get_u32("imatrix.chunk_count").unwrap(), 2);
    assert_eq!(file.tensors().len(), 28);
    assert_eq!(listing(dir.path()), ["tiny.imatrix.gguf"]);

    let quantized = dir.path().join("tiny-q4_k.gguf");
    let model = fixture("models/llama-tiny-f32.gguf");
    let q = rinfer(&[
        "quantize",
        &model,
        quantized.to_str().unwrap(),
        "Q4_K_M",
        "--imatrix",
        out.to_str().unwrap(),
    ]);
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
}

#[test]
fn an_empty_or_short_text_is_refused_and_nothing_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.gguf");
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, " \n").unwrap();
    refused(&imatrix(&empty, &out, &[]), "is empty");
    let short = dir.path().join("short.txt");
    std::fs::write(&short, "Only a few words of text.").unwrap();
    refused(
        &imatrix(&short, &out, &["-c", "64"]),
        "need at least 128 (two chunks",
    );
    assert_eq!(listing(dir.path()), ["empty.txt", "short.txt"]);
}

#[test]
fn an_unwritable_destination_is_refused_before_computing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("missing/out.gguf");
    let text = PathBuf::from(fixture("models/iq/imatrix_text.txt"));
    refused(
        &imatrix(&text, &out, &["-c", "128"]),
        "cannot create a temporary file",
    );
    assert!(listing(dir.path()).is_empty());
}
