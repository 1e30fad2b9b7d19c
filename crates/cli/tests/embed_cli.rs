//! `rinfer embed`: texts as arguments or lines of stdin, JSON or TSV, llama.cpp's vectors (the
//! fixture's references), and a clear refusal for a model that does not embed.

mod cli_support;
#[path = "../../../tests/support/embedding_cases.rs"]
mod embedding_cases;

use cli_support::{fixture, rinfer_with_stdin, succeeded};
use embedding_cases::{cosine, embedding_cases};
use serde_json::Value;

/// The prompts and normalised embeddings of the fixture's reference cases.
fn cases(model: &str) -> Vec<(String, Vec<f64>)> {
    embedding_cases(fixture(&format!("refs/{model}.embeddings.json")))
        .into_iter()
        .map(|c| (c.prompt, c.embedding))
        .collect()
}

#[test]
fn texts_as_arguments_print_llama_cpp_vectors_as_json() {
    let model = "bert-embd-tiny-f32";
    let path = fixture(&format!("models/{model}.gguf"));
    let cases = cases(model);
    let mut args = vec!["embed", "-m", path.as_str(), "-t", "2"];
    args.extend(cases.iter().map(|c| c.0.as_str()));
    let out = rinfer_with_stdin(&args, b"");
    succeeded(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["pooling"], "mean");
    assert_eq!(report["dimensions"], 64);
    let embeddings = report["embeddings"].as_array().unwrap();
    assert_eq!(embeddings.len(), cases.len());
    for (ours, (prompt, reference)) in embeddings.iter().zip(&cases) {
        let ours: Vec<f64> = ours
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let cos = cosine(&ours, reference);
        assert!(cos >= 0.9999, "{prompt:?}: cosine {cos}");
    }
}

#[test]
fn lines_of_stdin_print_as_tsv() {
    let model = "qwen3-embd-tiny-f32";
    let path = fixture(&format!("models/{model}.gguf"));
    let cases = cases(model);
    // The third prompt holds a newline; the first two are single lines.
    let stdin = format!("{}\n\n{}\n", cases[0].0, cases[1].0);
    let out = rinfer_with_stdin(
        &["embed", "-m", &path, "-t", "2", "--tsv"],
        stdin.as_bytes(),
    );
    succeeded(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    for (line, (prompt, reference)) in lines.iter().zip(&cases) {
        let ours: Vec<f64> = line.split('\t').map(|x| x.parse().unwrap()).collect();
        assert_eq!(ours.len(), 64);
        let cos = cosine(&ours, reference);
        assert!(cos >= 0.9999, "{prompt:?}: cosine {cos}");
    }
}

#[test]
fn a_model_without_pooling_is_refused() {
    let path = fixture("models/qwen3-tiny-q5_k_m.gguf");
    let out = rinfer_with_stdin(&["embed", "-m", &path, "hello"], b"");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not an embedding model"), "{stderr}");
}
