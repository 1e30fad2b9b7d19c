//! `rinfer rerank`: documents as arguments or lines of stdin, llama-server's ranking and
//! scores (the fixture's references), JSON or TSV, `--top-n`, and clear refusals of a model
//! that does not rerank and of a reranker asked for embeddings.

mod cli_support;

use cli_support::{fixture, rinfer_with_stdin, succeeded};
use serde_json::Value;

const MODEL: &str = "bert-rank-tiny-f32";

fn case() -> Value {
    let path = fixture(&format!("rerank/{MODEL}.rerank.json"));
    let refs: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    refs["cases"][0].clone()
}

/// The texts of the case's documents.
fn documents(case: &Value) -> Vec<&str> {
    case["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect()
}

/// `(index, score)` of llama-server's results, best first.
fn reference(case: &Value) -> Vec<(u64, f64)> {
    case["answer"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let index = r["index"].as_u64().unwrap();
            (index, r["relevance_score"].as_f64().unwrap())
        })
        .collect()
}

#[test]
fn documents_as_arguments_print_llama_cpp_scores_best_first_as_json() {
    let case = case();
    let path = fixture(&format!("rerank/{MODEL}.gguf"));
    let query = case["query"].as_str().unwrap();
    let documents = documents(&case);
    let mut args = vec!["rerank", "-m", path.as_str(), "-t", "2", "--query", query];
    args.extend(&documents);
    let out = rinfer_with_stdin(&args, b"");
    succeeded(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["query"], query);
    let results = report["results"].as_array().unwrap();
    let want = reference(&case);
    assert_eq!(results.len(), want.len());
    for (ours, (index, score)) in results.iter().zip(want) {
        assert_eq!(ours["index"], index);
        assert_eq!(ours["document"], documents[index as usize]);
        // BERT: llama.cpp's f16-table GELU (see the model crate's reference_rerank test).
        let ours = ours["relevance_score"].as_f64().unwrap();
        assert!(
            (ours - score).abs() <= 1e-3 * score.abs(),
            "{ours} against {score}"
        );
    }
}

#[test]
fn lines_of_stdin_print_the_best_as_tsv() {
    let case = case();
    let path = fixture(&format!("rerank/{MODEL}.gguf"));
    let documents = documents(&case);
    let stdin = documents.join("\n\n") + "\n";
    let query = case["query"].as_str().unwrap();
    let out = rinfer_with_stdin(
        &[
            "rerank", "-m", &path, "-t", "2", "-q", query, "--top-n", "2", "--tsv",
        ],
        stdin.as_bytes(),
    );
    succeeded(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    for (line, (index, _)) in lines.iter().zip(reference(&case)) {
        let fields: Vec<&str> = line.split('\t').collect();
        assert_eq!(fields[1], index.to_string(), "{line}");
        assert_eq!(fields[2], documents[index as usize]);
    }
}

#[test]
fn a_model_that_is_not_a_reranker_is_refused_and_a_reranker_does_not_embed() {
    let embedder = fixture("models/bert-embd-tiny-f32.gguf");
    let out = rinfer_with_stdin(&["rerank", "-m", &embedder, "-q", "q", "doc"], b"");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a reranker"), "{stderr}");
    let ranker = fixture(&format!("rerank/{MODEL}.gguf"));
    let out = rinfer_with_stdin(&["embed", "-m", &ranker, "hello"], b"");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rinfer rerank"), "{stderr}");
}
