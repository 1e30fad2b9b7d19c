//! The `rinfer` binary as users run it: exit codes, one-line errors, JSON outputs.

mod cli_support;
mod serve_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use cli_support::{failure, fixture, fixtures, rinfer, spawn_rinfer, succeeded};
use serde_json::Value;

fn json_of(out: &Output) -> Value {
    succeeded(out);
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

#[test]
fn every_broken_file_exits_with_status_1_and_a_one_line_error() {
    for entry in std::fs::read_dir(fixtures().join("models/broken")).unwrap() {
        let file = entry.unwrap().path();
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        // The `moe_` files are valid containers whose metadata lies about the experts: loading
        // the model refuses them (`model/tests/moe_broken.rs`), `inspect` shows what they hold.
        if !name.ends_with(".gguf") || name == "minimal_valid.gguf" || name.starts_with("moe_") {
            continue;
        }
        let out = rinfer(&["inspect", &file.display().to_string()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{name}: {stderr}");
    }
}

#[test]
fn tokenize_works_on_a_vocabulary_only_file() {
    let vocab = fixture("tokenizer/ggml-vocab-llama-spm.gguf");
    let out = json_of(&rinfer(&[
        "tokenize",
        "--model",
        &vocab,
        "ied 4 ½ months",
        "--json",
    ]));
    // llama.cpp's vector for this text, after the BOS the vocabulary adds.
    let expected = [1, 474, 287, 29871, 29946, 29871, 30226, 7378];
    let tokens: Vec<u64> = out["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect();
    assert_eq!(tokens, expected);
}

#[test]
fn logits_reports_every_position() {
    let model = fixture("models/llama-tiny-q8_0.gguf");
    let out = json_of(&rinfer(&[
        "logits",
        "--model",
        &model,
        "--tokens",
        "1,15,27,300",
        "--top-k",
        "3",
    ]));
    assert_eq!(out["tokens"].as_array().unwrap().len(), 4);
    let positions = out["positions"].as_array().unwrap();
    assert_eq!(positions.len(), 4);
    for position in positions {
        let top = position["top"].as_array().unwrap();
        assert_eq!(top.len(), 3);
        assert_eq!(top[0][0], position["argmax"]);
        assert!(position["lse"].as_f64().unwrap() >= top[0][1].as_f64().unwrap());
    }
}

#[test]
fn run_json_reports_tokens_text_and_timings() {
    let model = fixture("models/gemma3-tiny-q4_k_m.gguf");
    let out = json_of(&rinfer(&[
        "run",
        "--model",
        &model,
        "Hello there",
        "-n",
        "5",
        "--seed",
        "3",
        "--json",
    ]));
    assert!(out["prompt_tokens"].as_u64().unwrap() > 0);
    assert!(out["tokens"].as_array().unwrap().len() <= 5);
    assert!(out["text"].is_string());
    for key in ["load_s", "prefill_tok_s", "decode_tok_s"] {
        assert!(out["timings"][key].is_number(), "{key}");
    }
}

#[test]
fn the_same_seed_gives_the_same_text() {
    let model = fixture("models/gemma3-tiny-q4_k_m.gguf");
    let args = [
        "run",
        "--model",
        &model,
        "Once upon",
        "-n",
        "12",
        "--seed",
        "42",
        "--temperature",
        "1.0",
        "--json",
    ];
    assert_eq!(
        json_of(&rinfer(&args))["tokens"],
        json_of(&rinfer(&args))["tokens"]
    );
}

#[test]
fn a_prompt_beyond_the_context_is_refused_before_any_work() {
    let model = fixture("models/gemma3-tiny-q4_k_m.gguf");
    let out = rinfer(&[
        "run",
        "--model",
        &model,
        "one two three four five six",
        "-n",
        "64",
        "--ctx",
        "16",
    ]);
    let stderr = failure(&out);
    assert!(stderr.contains("context"), "{stderr}");
}

#[test]
fn a_file_without_weights_is_a_clear_error() {
    let vocab = fixture("tokenizer/ggml-vocab-gpt-2.gguf");
    let stderr = failure(&rinfer(&["run", "--model", &vocab, "hi"]));
    assert!(stderr.contains("token_embd.weight"), "{stderr}");
}

/// Runs `rinfer ARGS`, failing the test if it has not exited after `seconds` (a hang).
fn rinfer_within(seconds: u64, args: &[&str]) -> Output {
    use std::time::{Duration, Instant};
    let mut child = spawn_rinfer(args, Stdio::null());
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("rinfer {args:?} still runs after {seconds} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Asserts `out` failed with a clear message containing `expected`, without a panic.
fn assert_refused(out: &Output, expected: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "status {:?}: {stderr}",
        out.status
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains(expected),
        "expected {expected:?} in: {stderr}"
    );
}

/// The gpt2 fixture with its `gpt2.context_length` replaced, written into `dir`.
fn gpt2_claiming_context(dir: &Path, context: u32) -> String {
    use rinfer_formats::gguf::{GgufFile, GgufWriter, MetadataValue};
    let file = GgufFile::open(fixtures().join("models/gpt2-tiny-q2_k.gguf")).unwrap();
    let mut writer = GgufWriter::from_file(&file).unwrap();
    writer.set_metadata("gpt2.context_length", MetadataValue::U32(context));
    let path = dir.join("gpt2-claims-4096.gguf");
    writer.write_file(&path).unwrap();
    path.display().to_string()
}

#[test]
fn a_context_past_the_learned_position_table_is_refused_not_a_panic() {
    let model = fixture("models/gpt2-tiny-q2_k.gguf");
    let out = rinfer_within(
        120,
        &[
            "run",
            "-m",
            &model,
            "--ctx",
            "1024",
            "-n",
            "700",
            "--ignore-eos",
            "hi",
        ],
    );
    assert_refused(&out, "at most 512");
}

#[test]
fn a_model_claiming_more_context_than_its_position_table_runs_within_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let model = gpt2_claiming_context(dir.path(), 4096);
    let out = rinfer_within(120, &["run", "-m", &model, "-n", "8", "hi", "--json"]);
    assert!(json_of(&out)["tokens"].is_array());
    // The default context is the table's 512 positions: a longer generation is refused.
    let out = rinfer_within(
        120,
        &["run", "-m", &model, "-n", "600", "--ignore-eos", "hi"],
    );
    assert_refused(&out, "context of 512 tokens");
}

#[test]
fn numeric_options_beyond_their_limits_are_refused_naming_the_limit() {
    let model = fixture("models/gemma3-tiny-q4_k_m.gguf");
    let cases: &[&[&str]] = &[
        &["run", "-m", &model, "--ctx", "1000000000", "hi"],
        &["run", "-m", &model, "--ctx", "4611686018427387904", "hi"],
        &["run", "-m", &model, "--ctx", "0", "hi"],
        &["run", "-m", &model, "-t", "1000000", "hi"],
        &["run", "-m", &model, "-n", "18446744073709551615", "hi"],
        &["serve", "-m", &model, "--parallel", "100000"],
        &["serve", "-m", &model, "--queue", "18446744073709551615"],
    ];
    for args in cases {
        let out = rinfer_within(30, args);
        assert_refused(&out, "is outside");
    }
}

#[test]
fn a_context_beyond_the_available_memory_is_refused_before_allocating() {
    // qwen3-tiny keeps 4 KiB of keys and values per position: 2^24 positions need 64 GiB.
    let needed: u64 = 64 << 30;
    let available = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m
                .lines()
                .find(|l| l.starts_with("MemAvailable:"))?
                .to_string();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map(|kib| kib * 1024);
    if available.is_none_or(|a| a >= needed) {
        eprintln!("skipped: this machine has {available:?} bytes available");
        return;
    }
    let model = fixture("models/qwen3-tiny-q5_k_m.gguf");
    let out = rinfer_within(
        60,
        &[
            "run",
            "-m",
            &model,
            "--ctx",
            "16777216",
            "--kv-type",
            "f32",
            "hi",
        ],
    );
    assert_refused(&out, "MiB of memory is available");
}

#[test]
fn sampling_options_out_of_range_are_refused_as_the_server_refuses_them() {
    let model = fixture("models/gemma3-tiny-q4_k_m.gguf");
    for (flag, value) in [
        ("--temperature", "NaN"),
        ("--temperature", "-1"),
        ("--top-p", "0"),
        ("--top-p", "NaN"),
        ("--min-p", "2"),
        ("--repeat-penalty", "-1"),
    ] {
        let arg = format!("{flag}={value}");
        let out = rinfer_within(30, &["run", "-m", &model, &arg, "hi"]);
        assert_refused(&out, flag);
    }
}

#[test]
fn a_closed_stderr_does_not_turn_an_error_into_a_panic() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rinfer"))
        .args(["inspect", "/nonexistent/model.gguf"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end: the error message meets a broken pipe.
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{status:?}");
}

#[cfg(unix)]
#[test]
fn fifos_and_devices_are_refused_as_model_or_prompt_files() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let fifo = fifo.display().to_string();
    let model = fixture("models/gemma3-tiny-q4_k_m.gguf");

    assert_refused(
        &rinfer_within(30, &["run", "-m", &fifo, "hi"]),
        "not a regular file",
    );
    assert_refused(
        &rinfer_within(30, &["inspect", &fifo]),
        "not a regular file",
    );
    for prompt in [fifo.as_str(), "/dev/zero"] {
        let out = rinfer_within(30, &["run", "-m", &model, "-f", prompt]);
        assert_refused(&out, "not a regular file");
    }
}

#[test]
fn a_prompt_file_over_the_size_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.txt");
    std::fs::File::create(&big)
        .unwrap()
        .set_len((64 << 20) + 1)
        .unwrap();
    let model = fixture("models/gemma3-tiny-q4_k_m.gguf");
    let out = rinfer_within(30, &["run", "-m", &model, "-f", &big.display().to_string()]);
    assert_refused(&out, "64 MiB");
}

#[test]
fn an_error_names_its_cause_once() {
    let out = rinfer_within(30, &["run", "-m", "/nonexistent/model.gguf", "hi"]);
    let stderr = failure(&out);
    assert_eq!(stderr.matches("No such file").count(), 1, "{stderr}");
    let out = rinfer_within(
        30,
        &["serve", "-m", "/nonexistent/model.gguf", "--port", "0"],
    );
    let stderr = failure(&out);
    assert_eq!(stderr.matches("No such file").count(), 1, "{stderr}");
    assert_eq!(stderr.matches("cannot access").count(), 1, "{stderr}");
}

#[test]
fn serve_logs_carry_no_colour_codes_when_stderr_is_not_a_terminal() {
    let server = serve_support::Server::start(&[
        "--model",
        &fixture("models/gemma3-tiny-q4_k_m.gguf"),
        "--ctx",
        "64",
    ]);
    let log = server.log.lock().unwrap().join("\n");
    assert!(log.contains("listening on"), "{log}");
    assert!(!log.contains('\u{1b}'), "{log:?}");
}

/// Writes `llama-tiny-q8_0` as a three-shard split model (llama-gguf-split's names and
/// `split.*` keys) into `dir`; returns the shards' paths.
fn write_split_fixture(dir: &Path) -> Vec<PathBuf> {
    use rinfer_formats::gguf::{GgufFile, GgufWriter, MetadataValue, shard_path};
    let file = GgufFile::open(fixtures().join("models/llama-tiny-q8_0.gguf")).unwrap();
    let tensors: Vec<_> = file.tensors().collect();
    let per = tensors.len().div_ceil(3);
    let prefix = dir.join("tiny").display().to_string();
    (0..3)
        .map(|i| {
            let mut w = if i == 0 {
                GgufWriter::with_metadata_of(&file).unwrap()
            } else {
                GgufWriter::new()
            };
            let split = [
                ("split.no", MetadataValue::U16(i as u16)),
                ("split.count", MetadataValue::U16(3)),
                (
                    "split.tensors.count",
                    MetadataValue::I32(tensors.len() as i32),
                ),
            ];
            for (key, value) in split {
                w.add_metadata(key, value).unwrap();
            }
            for t in tensors.iter().skip(i * per).take(per) {
                w.add_tensor(t.name(), t.ty(), t.dims(), t.data.to_vec())
                    .unwrap();
            }
            let path = shard_path(&prefix, i as u32 + 1, 3);
            w.write_file(&path).unwrap();
            path
        })
        .collect()
}

#[test]
fn inspect_reports_a_split_model_whole_and_the_model_loads_from_its_first_shard() {
    let dir = tempfile::tempdir().unwrap();
    let shards = write_split_fixture(dir.path());
    let whole = json_of(&rinfer(&[
        "inspect",
        "--json",
        &fixture("models/llama-tiny-q8_0.gguf"),
    ]));
    let split = json_of(&rinfer(&[
        "inspect",
        "--json",
        &shards[1].display().to_string(),
    ]));
    assert_eq!(split["shards"], 3);
    for key in ["tensor_count", "parameters", "architecture", "tensor_types"] {
        assert_eq!(split[key], whole[key], "{key}");
    }
    let first = shards[0].display().to_string();
    let generate = |model: &str| {
        let out = rinfer(&[
            "run", "--model", model, "hello", "-n", "6", "--seed", "5", "--json",
        ]);
        json_of(&out)["tokens"].clone()
    };
    assert_eq!(
        generate(&first),
        generate(&fixture("models/llama-tiny-q8_0.gguf"))
    );
    // Without its siblings the first shard is refused, naming the missing one.
    std::fs::remove_file(&shards[2]).unwrap();
    let stderr = failure(&rinfer(&["run", "--model", &first, "-n", "4", "hello"]));
    assert!(stderr.contains("tiny-00003-of-00003.gguf"), "{stderr}");
}
