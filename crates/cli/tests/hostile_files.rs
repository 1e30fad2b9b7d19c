//! `rinfer convert` and `rinfer quantize` on hostile inputs and destinations: sizes a file
//! claims are checked before anything is allocated for them (an error, never an abort), the
//! temporary file goes on every exit (an error, Ctrl-C), and a destination that is a symlink,
//! a FIFO or one of the inputs is refused.

mod cli_support;

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use cli_support::{failure, fixtures, rinfer};
use serde_json::{Map, Value, json};

fn arg(p: &Path) -> String {
    p.display().to_string()
}

/// A copy of the tiny Hugging Face checkpoint in a fresh directory.
fn checkpoint() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixtures().join("llama3bpe-tiny-hf")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

/// The safetensors file's header and data.
fn read_safetensors(path: &Path) -> (Map<String, Value>, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    (header.as_object().unwrap().clone(), bytes[8 + n..].to_vec())
}

/// Writes a safetensors file of `header`, whose data section is `len` bytes long with `data`
/// at `at` (the rest left as a hole: a sparse file).
fn write_safetensors(path: &Path, header: &Map<String, Value>, len: u64, at: u64, data: &[u8]) {
    let text = serde_json::to_vec(header).unwrap();
    let mut file = std::fs::File::create(path).unwrap();
    file.write_all(&(text.len() as u64).to_le_bytes()).unwrap();
    file.write_all(&text).unwrap();
    let start = 8 + text.len() as u64;
    file.set_len(start + len).unwrap();
    file.seek(SeekFrom::Start(start + at)).unwrap();
    file.write_all(data).unwrap();
}

/// Moves every tensor but the embedding by `by` bytes, and gives the embedding `shape` over
/// `[0, embedding_bytes)`.
fn with_embedding(
    header: &Map<String, Value>,
    shape: Value,
    embedding_bytes: u64,
    by: i64,
) -> Map<String, Value> {
    let mut out = header.clone();
    for (name, info) in out.iter_mut() {
        if name == "__metadata__" {
            continue;
        }
        if name == "model.embed_tokens.weight" {
            info["shape"] = shape.clone();
            info["data_offsets"] = json!([0, embedding_bytes]);
            continue;
        }
        let offsets: Vec<i64> = info["data_offsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap() + by)
            .collect();
        info["data_offsets"] = json!(offsets);
    }
    out
}

const EMBEDDING_BYTES: u64 = 4010 * 256 * 4;

/// Rewrites the checkpoint's weights in `dir` so that its embedding claims `rows × columns` F32
/// values: a hole (a sparse file) before the other tensors, which keep their bytes.
fn claim_embedding(dir: &Path, rows: u64, columns: u64) {
    let path = dir.join("model.safetensors");
    let (header, data) = read_safetensors(&path);
    let claimed = rows * columns * 4;
    let header = with_embedding(
        &header,
        json!([rows, columns]),
        claimed,
        claimed as i64 - EMBEDDING_BYTES as i64,
    );
    let rest = &data[EMBEDDING_BYTES as usize..];
    write_safetensors(&path, &header, claimed + rest.len() as u64, claimed, rest);
}

/// Asserts that `result` failed with an error (exit 1, not an abort) containing `expected`.
fn assert_fails_with(result: &Output, expected: &str) {
    let stderr = failure(result);
    assert!(stderr.contains(expected), "{stderr}");
}

/// Runs `rinfer convert` of `input` into a fresh directory; asserts it failed with an error
/// (exit 1, not an abort) containing `expected`, and left nothing in that directory.
fn convert_fails(input: &Path, expected: &str) {
    let out = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let result = rinfer(&["convert", &arg(input), &arg(&out.path().join("m.gguf"))]);
    assert_fails_with(&result, expected);
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "files left behind"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_tokenizer_id_of_2_to_the_40_is_an_error_not_an_abort() {
    let dir = checkpoint();
    let path = dir.path().join("tokenizer.json");
    let mut tokenizer: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    tokenizer["added_tokens"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": 1u64 << 40, "content": "<huge>", "special": true}));
    std::fs::write(&path, serde_json::to_vec(&tokenizer).unwrap()).unwrap();
    convert_fails(dir.path(), "token id");
}

#[test]
fn an_embedding_of_2_to_the_31_rows_and_no_columns_is_an_error_not_an_abort() {
    let dir = checkpoint();
    claim_embedding(dir.path(), 1 << 31, 0);
    convert_fails(dir.path(), "no elements");
}

#[test]
fn a_sparse_checkpoint_claiming_64_gib_is_an_error_not_an_abort() {
    let dir = checkpoint();
    claim_embedding(dir.path(), 1 << 22, 4096);
    convert_fails(dir.path(), "MiB of memory is available");
}

#[test]
fn destinations_that_are_links_fifos_or_inputs_are_refused() {
    let dir = checkpoint();
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("precious.txt");
    std::fs::write(&target, "keep me").unwrap();
    let link = out.path().join("link.gguf");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let fifo = out.path().join("fifo.gguf");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let weights = dir.path().join("model.safetensors");
    let before = std::fs::read(&weights).unwrap();
    for (destination, expected) in [
        (&link, "symbolic link"),
        (&fifo, "not a regular file"),
        (&weights, "one of the files this command reads"),
    ] {
        let result = rinfer(&["convert", &arg(dir.path()), &arg(destination)]);
        assert_fails_with(&result, expected);
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    assert!(
        std::fs::read(&weights).unwrap() == before,
        "the input changed"
    );
    // quantize IN IN.
    let model = out.path().join("m.gguf");
    std::fs::copy(fixtures().join("models/gemma3-tiny-f32.gguf"), &model).unwrap();
    let before = std::fs::read(&model).unwrap();
    let result = rinfer(&["quantize", &arg(&model), &arg(&model), "Q8_0"]);
    assert_fails_with(&result, "one of the files");
    assert!(
        std::fs::read(&model).unwrap() == before,
        "the input changed"
    );
    // Only what the test made is there: no temporary file.
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 4);
}

fn signal(child: &std::process::Child, name: &str) {
    let sent = Command::new("kill")
        .args([name, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

#[test]
fn ctrl_c_during_a_conversion_removes_its_temporary_file() {
    let dir = checkpoint();
    // A conversion that takes a while: an embedding of 128 MiB (of zeros, a sparse file).
    claim_embedding(dir.path(), 1 << 17, 256);
    let out = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rinfer"))
        .args([
            "convert",
            &arg(dir.path()),
            &arg(&out.path().join("m.gguf")),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::fs::read_dir(out.path()).unwrap().count() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no temporary file appeared"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // Frozen while it writes, interrupted, let go: the interrupt finds the file being written.
    signal(&child, "-STOP");
    signal(&child, "-INT");
    signal(&child, "-CONT");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "the temporary file was left behind"
    );
}

#[test]
fn a_sparse_gguf_claiming_256_gib_is_an_error_not_an_abort() {
    use rinfer_formats::GgmlType;
    use rinfer_formats::gguf::{GgufStreamWriter, Metadata, MetadataValue, TensorHeader};

    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("sparse.gguf");
    let mut metadata = Metadata::default();
    metadata
        .insert(
            "general.architecture",
            MetadataValue::String("llama".into()),
        )
        .unwrap();
    let headers = [TensorHeader {
        name: "token_embd.weight".into(),
        ty: GgmlType::F32,
        dims: vec![1 << 16, 1 << 20],
    }];
    let mut file = std::fs::File::create(&input).unwrap();
    drop(GgufStreamWriter::new(&mut file, &metadata, &headers).unwrap());
    let head = file.stream_position().unwrap();
    file.set_len(head.next_multiple_of(32) + (1u64 << 38))
        .unwrap();
    drop(file);
    let output = dir.path().join("q8.gguf");
    let result = rinfer(&["quantize", &arg(&input), &arg(&output), "Q8_0"]);
    assert_fails_with(&result, "MiB of memory is available");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "files left behind"
    );
}
