//! Speculative decoding by prompt lookup never changes the output: greedy and seeded requests
//! give the same tokens, log-probabilities and text with speculation on and off, alone or
//! beside other sequences, through sliding-window rings that wrap and with the prefix cache
//! reusing the blocks a speculating sequence left; and the guesses are really confirmed.

mod common;
mod speculation_support;

use rinfer_model::{EngineSettings, Generation, Speculation};
use speculation_support::*;

/// Gemma 3 (sliding window of 16 on two of its three layers), Llama and Qwen 3 (full
/// attention), and a mixture of experts.
const MODELS: [&str; 4] = [
    "gemma3-tiny-q4_k_m",
    "llama-tiny-q4_k",
    "qwen3-tiny-q5_k_m",
    "qwen3moe-tiny-q4_k_m",
];

#[test]
fn greedy_and_seeded_speculation_give_the_output_of_plain_decoding() {
    assert_lookup_gives_plain_outputs(&MODELS, 4, 60);
}

#[test]
fn speculating_beside_other_sequences_changes_no_ones_tokens() {
    let loaded = loaded("gemma3-tiny-q4_k_m");
    let requests = || {
        let mut requests = mixed_requests(&loaded, repetitive_prompt, [50, 45, 40]);
        requests.push(request(&loaded, repetitive_prompt(4), None, 30));
        requests
    };
    let mut plain = engine(&loaded, settings(1, Speculation::Off));
    let alone: Vec<Output> = requests()
        .into_iter()
        .map(|r| generate_one(&mut plain, r))
        .collect();
    let mut fast = engine(&loaded, settings(4, LOOKUP));
    assert_eq!(run_all(&mut fast, requests()), alone);
    assert!(fast.speculation_stats().drafted_tokens > 0);
}

#[test]
fn a_request_that_opts_out_guesses_nothing() {
    let loaded = loaded("gemma3-tiny-q4_k_m");
    let mut fast = engine(&loaded, settings(1, LOOKUP));
    let (mut drafted, mut accepted) = (0, 0);
    for case in 0..4 {
        let mut opted_out = request(&loaded, repetitive_prompt(case), None, 40);
        opted_out.speculate = false;
        let before = fast.speculation_stats();
        let out: Generation = fast.generate(opted_out, |_| {}).unwrap();
        assert_eq!(out.timings.drafted_tokens, 0);
        assert_eq!(fast.speculation_stats(), before);
        let request = request(&loaded, repetitive_prompt(case), None, 40);
        let out = fast.generate(request, |_| {}).unwrap();
        drafted += out.timings.drafted_tokens;
        accepted += out.timings.accepted_tokens;
    }
    assert!(drafted > 0 && accepted <= drafted, "{drafted} {accepted}");
    let stats = fast.speculation_stats();
    assert_eq!(
        (stats.drafted_tokens, stats.accepted_tokens),
        (drafted as u64, accepted as u64)
    );
}

#[test]
fn the_prefix_cache_reuses_only_confirmed_tokens_of_a_speculating_sequence() {
    for name in ["gemma3-tiny-q4_k_m", "llama-tiny-q4_k"] {
        let loaded = loaded(name);
        let with_cache = EngineSettings {
            prefix_cache_bytes: 1 << 22,
            ..settings(1, LOOKUP)
        };
        let mut fast = engine(&loaded, with_cache);
        let first = generate_one(&mut fast, request(&loaded, repetitive_prompt(3), None, 70));
        // A new prompt that extends the first sequence's tokens: its prefix comes from the
        // blocks the speculating sequence stored (or from its slot).
        let prompt = [repetitive_prompt(3), first.0[..66].to_vec(), vec![5, 6]].concat();
        let reused = generate_one(&mut fast, request(&loaded, prompt.clone(), Some(2), 20));
        assert!(fast.prefix_stats().cached_tokens > 0, "{name}");
        let mut plain = engine(&loaded, settings(1, Speculation::Off));
        let expected = generate_one(&mut plain, request(&loaded, prompt, Some(2), 20));
        assert_eq!(reused, expected, "{name}");
    }
}
