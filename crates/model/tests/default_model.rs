//! The default model (gemma-3-270m Q4_K_M) against llama.cpp: prompt logits within the fixtures'
//! tolerances, greedy continuations equal where the reference is decisive.
//!
//! Needs the model: `cargo xtask test` fetches it and passes its path in `RINFER_TEST_MODEL`.

mod common;

use common::reference::{GreedyDecoding, check_greedy, cosine, ids, last_logits, log_sum_exp};
use common::{batched_logits, default_model};
use rinfer_model::Model;
use rinfer_model::sampling::argmax;
use serde_json::Value;

/// Tolerances of the fixtures README §3.4 for gemma3-270m.
const MAX_ABS: f64 = 3.0;
const MEAN_ABS: f64 = 0.35;
const ARGMAX_MARGIN: f64 = 1.0;
const ARGMAX_AGREEMENT: f64 = 0.85;
const MIN_COSINE: f64 = 0.99;
/// Greedy continuations must agree up to the first step whose reference margin is below this.
const GREEDY_MARGIN: f64 = 0.5;

fn refs() -> Value {
    common::reference::refs("gemma3-270m")
}

fn floats(value: &Value) -> Vec<f64> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect()
}

fn open() -> Model {
    Model::open_gguf(default_model()).unwrap().0
}

#[test]
fn prompt_logits_match_llama_cpp() {
    let model = open();
    let vocab = model.config.vocab_size;
    let (mut agree, mut decisive) = (0usize, 0usize);
    for case in refs()["cases"].as_array().unwrap() {
        let name = &case["case"];
        let tokens = ids(&case["tokens"]);
        let logits = batched_logits(&model, &tokens);
        let (mut max_abs, mut sum_abs, mut count) = (0f64, 0f64, 0usize);
        for (i, row) in logits.chunks_exact(vocab).enumerate() {
            for (id, want) in ids(&case["top_ids"][i])
                .iter()
                .zip(floats(&case["top_logits"][i]))
            {
                let diff = (row[*id as usize] as f64 - want).abs();
                max_abs = max_abs.max(diff);
                sum_abs += diff;
                count += 1;
            }
            let lse = case["logsumexp"][i].as_f64().unwrap();
            assert!(
                (log_sum_exp(row) - lse).abs() <= MAX_ABS,
                "{name} pos {i}: logsumexp {} vs {lse}",
                log_sum_exp(row)
            );
            if case["top2_margin"][i].as_f64().unwrap() > ARGMAX_MARGIN {
                decisive += 1;
                agree += usize::from(argmax(row) as u64 == case["argmax"][i].as_u64().unwrap());
            }
        }
        let mean_abs = sum_abs / count as f64;
        let cos = cosine(&logits[logits.len() - vocab..], &last_logits(case));
        eprintln!("{name}: max abs {max_abs:.3} mean abs {mean_abs:.3} last cosine {cos:.5}");
        assert!(max_abs <= MAX_ABS, "{name}: max abs {max_abs}");
        assert!(mean_abs <= MEAN_ABS, "{name}: mean abs {mean_abs}");
        assert!(cos >= MIN_COSINE, "{name}: last-position cosine {cos}");
    }
    let share = agree as f64 / decisive as f64;
    eprintln!("argmax agrees at {agree} of {decisive} decisive positions");
    assert!(share >= ARGMAX_AGREEMENT, "argmax agreement {share}");
}

#[test]
fn greedy_continuations_match_llama_cpp() {
    let model = open();
    for case in refs()["cases"].as_array().unwrap() {
        let decisive = check_greedy(&model, "gemma3-270m", case, GREEDY_MARGIN);
        eprintln!(
            "{}: {decisive} greedy tokens equal to llama.cpp's",
            case["case"]
        );
    }
}

#[test]
fn teacher_forced_steps_agree_where_the_reference_is_decisive() {
    let model = open();
    for case in refs()["cases"].as_array().unwrap() {
        let name = &case["case"];
        let (mut decoding, mut logits) = GreedyDecoding::prompt(&model, case);
        let greedy = &case["greedy"];
        let expected = ids(&greedy["ids"]);
        let margins = floats(&greedy["top2_margin"]);
        for (step, &want) in expected.iter().enumerate() {
            let top5 = ids(&greedy["top5_ids"][step]);
            let got = argmax(&logits);
            assert!(
                top5.contains(&got),
                "{name} step {step}: argmax {got} not in llama.cpp's top 5 {top5:?}"
            );
            if margins[step] > ARGMAX_MARGIN {
                assert_eq!(got, want, "{name} step {step}");
            }
            let lse = greedy["logsumexp"][step].as_f64().unwrap();
            assert!((log_sum_exp(&logits) - lse).abs() <= MAX_ABS);
            logits = decoding.step(want);
        }
    }
}
