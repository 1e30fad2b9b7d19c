//! `rinfer quantize` and `rinfer convert` as users run them: the file llama.cpp writes, errors
//! for types rinfer cannot write, and a Hugging Face checkpoint taken to a quantized model that
//! runs.

mod cli_support;

use std::path::Path;
use std::process::Output;

use cli_support::{failure, fixtures, rinfer, succeeded};

fn arg(p: &Path) -> String {
    p.display().to_string()
}

/// `rinfer quantize INPUT OUT TYPE`.
fn quantize(input: &Path, out: &Path, ty: &str) -> Output {
    rinfer(&["quantize", &arg(input), &arg(out), ty])
}

/// The error output of quantizing the fixture `models/{model}.gguf` as `ty`, which must fail
/// and write no file.
fn refused(model: &str, ty: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let input = fixtures().join(format!("models/{model}.gguf"));
    let out = quantize(&input, &dir.path().join("x.gguf"), ty);
    assert!(!out.status.success());
    assert!(!dir.path().join("x.gguf").exists());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts that `rinfer quantize [OPTIONS] INPUT OUT TYPE` writes the file llama.cpp wrote,
/// `expected`, byte for byte; `input` and `expected` are fixture models. It runs in the
/// fixtures' `models/iq`, where the importance matrix is: llama-quantize recorded the matrix's
/// file name as given, relative to its directory.
fn assert_quantizes_to(options: &[&str], (input, ty): (&str, &str), expected: &str) {
    let models = fixtures().join("models");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(format!("{}.gguf", ty.to_lowercase()));
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_rinfer"))
        .current_dir(models.join("iq"))
        .arg("quantize")
        .args(options)
        .args([&arg(&models.join(input)), &arg(&out), ty])
        .output()
        .unwrap();
    succeeded(&output);
    let expected = std::fs::read(models.join(expected)).unwrap();
    assert!(
        std::fs::read(&out).unwrap() == expected,
        "differs from llama.cpp's file"
    );
}

#[test]
fn quantize_writes_the_file_llama_quantize_writes() {
    let q4_k_m = ("gemma3-tiny-f32.gguf", "q4_k_m");
    assert_quantizes_to(&[], q4_k_m, "gemma3-tiny-q4_k_m.gguf");
}

#[test]
fn a_type_rinfer_cannot_write_is_refused_naming_those_it_can() {
    let stderr = refused("gemma3-tiny-f32", "Q2_K_S");
    assert!(
        stderr.contains("Q2_K_S") && stderr.contains("Q4_K_M"),
        "{stderr}"
    );
}

#[test]
fn quantize_with_an_imatrix_writes_the_file_llama_quantize_writes() {
    let imatrix = ["--imatrix", "llama-tiny.imatrix.gguf"];
    let iq2_xxs = ("llama-tiny-f32.gguf", "IQ2_XXS");
    assert_quantizes_to(&imatrix, iq2_xxs, "iq/llama-tiny-iq2_xxs.gguf");
}

#[test]
fn iq2_xxs_without_an_imatrix_is_refused_pointing_to_the_option() {
    let stderr = refused("llama-tiny-f32", "IQ2_XXS");
    assert!(stderr.contains("--imatrix"), "{stderr}");
}

#[test]
fn an_already_quantized_model_is_refused_with_one_line_and_no_file_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixtures().join("models/gemma3-tiny-q4_k_m.gguf");
    let stderr = failure(&quantize(&input, &dir.path().join("x.gguf"), "Q8_0"));
    assert!(stderr.contains("already Q"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_converted_checkpoint_quantizes_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (f16, q8) = (dir.path().join("f16.gguf"), dir.path().join("q8_0.gguf"));
    let hf = fixtures().join("llama3bpe-tiny-hf");
    succeeded(&rinfer(&["convert", &arg(&hf), &arg(&f16)]));
    succeeded(&rinfer(&["quantize", &arg(&f16), &arg(&q8), "Q8_0"]));
    let out = rinfer(&["run", "--model", &arg(&q8), "Hello", "-n", "3", "--json"]);
    succeeded(&out);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(json["prompt_tokens"].as_u64().unwrap() > 0);
}
