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

#[test]
fn quantize_writes_the_file_llama_quantize_writes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q4_k_m.gguf");
    let input = fixtures().join("models/gemma3-tiny-f32.gguf");
    succeeded(&rinfer(&["quantize", &arg(&input), &arg(&out), "q4_k_m"]));
    let expected = std::fs::read(fixtures().join("models/gemma3-tiny-q4_k_m.gguf")).unwrap();
    assert!(
        std::fs::read(&out).unwrap() == expected,
        "differs from llama.cpp's file"
    );
}

#[test]
fn a_type_rinfer_cannot_write_is_refused_naming_those_it_can() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixtures().join("models/gemma3-tiny-f32.gguf");
    let out = quantize(&input, &dir.path().join("x.gguf"), "Q2_K_S");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("Q2_K_S") && stderr.contains("Q4_K_M"),
        "{stderr}"
    );
    assert!(!dir.path().join("x.gguf").exists());
}

#[test]
fn quantize_with_an_imatrix_writes_the_file_llama_quantize_writes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("iq2_xxs.gguf");
    let models = fixtures().join("models");
    // llama-quantize recorded the matrix's file name as given, relative to its directory.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_rinfer"))
        .current_dir(models.join("iq"))
        .args(["quantize", "--imatrix", "llama-tiny.imatrix.gguf"])
        .args([
            &arg(&models.join("llama-tiny-f32.gguf")),
            &arg(&out),
            "IQ2_XXS",
        ])
        .output()
        .unwrap();
    succeeded(&output);
    let expected = std::fs::read(models.join("iq/llama-tiny-iq2_xxs.gguf")).unwrap();
    assert!(
        std::fs::read(&out).unwrap() == expected,
        "differs from llama.cpp's file"
    );
}

#[test]
fn iq2_xxs_without_an_imatrix_is_refused_pointing_to_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixtures().join("models/llama-tiny-f32.gguf");
    let out = quantize(&input, &dir.path().join("x.gguf"), "IQ2_XXS");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--imatrix"), "{stderr}");
    assert!(!dir.path().join("x.gguf").exists());
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
