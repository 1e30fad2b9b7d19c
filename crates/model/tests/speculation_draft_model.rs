//! Speculative decoding with a draft model never changes the output: a quantized fixture
//! guessing for its F32 sibling (same vocabulary) gives the tokens, log-probabilities and text
//! of plain decoding, greedy and seeded, alone or beside other sequences, with the prefix cache
//! reusing what a speculating sequence left; a draft model identical to the model has every
//! guess confirmed; a draft model of another vocabulary, or settings that disagree with the
//! draft model given, are refused with an error that says why.

mod common;
mod speculation_support;

use rinfer_model::{DeviceRequest, Engine, EngineSettings, LoadedModel, ModelError, Speculation};
use speculation_support::*;

/// Targets and their drafts: Gemma 3 (sliding window of 16 on two of its three layers, so the
/// rings wrap) and a mixture of experts, each guessed for by its quantized sibling.
const PAIRS: [(&str, &str); 2] = [
    ("gemma3-tiny-f32", "gemma3-tiny-q4_k_m"),
    ("qwen3moe-tiny-f32", "qwen3moe-tiny-q4_k_m"),
];

const DRAFT: Speculation = Speculation::DraftModel { draft_max: 5 };

fn plain(loaded: &LoadedModel) -> Engine<'_> {
    Engine::new(loaded, settings(1, Speculation::Off), DeviceRequest::Cpu).unwrap()
}

fn drafted<'m>(
    loaded: &'m LoadedModel,
    draft: &'m LoadedModel,
    settings: EngineSettings,
) -> Engine<'m> {
    Engine::with_draft(loaded, Some(draft), settings, DeviceRequest::Cpu).unwrap()
}

fn prompt(seed: u32) -> Vec<u32> {
    (0..9).map(|i| 3 + (seed * 131 + i * 17) % 400).collect()
}

#[test]
fn greedy_and_seeded_decoding_with_a_draft_model_give_the_output_of_plain_decoding() {
    let mut guesses = Guesses::default();
    let prompts: Vec<_> = (0..3).map(prompt).collect();
    for (target, draft) in PAIRS {
        let (loaded, draft) = (loaded(target), loaded(draft));
        let mut plain = plain(&loaded);
        let mut fast = drafted(&loaded, &draft, settings(1, DRAFT));
        let engines = (&mut plain, &mut fast);
        assert_outputs_of_plain_decoding(target, &loaded, engines, &prompts, 50);
        guesses.add(&fast);
    }
    guesses.assert_some_confirmed_and_some_rejected();
}

#[test]
fn drafting_beside_other_sequences_changes_no_ones_tokens() {
    let (loaded, draft) = (loaded(PAIRS[0].0), loaded(PAIRS[0].1));
    let requests = || {
        let mut requests = mixed_requests(&loaded, prompt, [40, 35, 30]);
        let long_prompt = [prompt(4), prompt(5), prompt(6)].concat();
        requests.push(request(&loaded, long_prompt, None, 25));
        requests
    };
    let mut plain = plain(&loaded);
    let alone: Vec<Output> = requests()
        .into_iter()
        .map(|r| generate_one(&mut plain, r))
        .collect();
    let mut fast = drafted(&loaded, &draft, settings(4, DRAFT));
    assert_eq!(run_all(&mut fast, requests()), alone);
    // The slots keep what their draft caches hold: a second round starts from there.
    assert_eq!(run_all(&mut fast, requests()), alone);
    assert!(fast.speculation_stats().drafted_tokens > 0);
}

#[test]
fn a_draft_model_identical_to_the_model_has_every_greedy_guess_confirmed() {
    let loaded = loaded("gemma3-tiny-q4_k_m");
    let twin = self::loaded("gemma3-tiny-q4_k_m");
    let mut plain = plain(&loaded);
    let mut fast = drafted(&loaded, &twin, settings(1, DRAFT));
    for case in 0..3 {
        let make = || request(&loaded, prompt(case), None, 40);
        assert_eq!(
            generate_one(&mut fast, make()),
            generate_one(&mut plain, make())
        );
    }
    let stats = fast.speculation_stats();
    assert!(stats.drafted_tokens > 60, "{stats:?}");
    assert_eq!(stats.accepted_tokens, stats.drafted_tokens, "{stats:?}");
}

#[test]
fn the_prefix_cache_reuses_only_confirmed_tokens_of_a_drafting_sequence() {
    let (loaded, draft) = (loaded(PAIRS[0].0), loaded(PAIRS[0].1));
    let with_cache = EngineSettings {
        prefix_cache_bytes: 1 << 22,
        ..settings(2, DRAFT)
    };
    let mut fast = drafted(&loaded, &draft, with_cache);
    let first = generate_one(&mut fast, request(&loaded, prompt(3), None, 70));
    let extended = [prompt(3), first.0[..66].to_vec(), vec![5, 6]].concat();
    // Two at once: one continues in the first one's slot, the other from the stored blocks.
    let requests = || {
        vec![
            request(&loaded, extended.clone(), Some(2), 20),
            request(&loaded, extended.clone(), None, 20),
        ]
    };
    let reused = run_all(&mut fast, requests());
    assert!(fast.prefix_stats().cached_tokens > 0);
    let mut plain = plain(&loaded);
    let expected: Vec<Output> = requests()
        .into_iter()
        .map(|r| generate_one(&mut plain, r))
        .collect();
    assert_eq!(reused, expected);
}

#[test]
fn a_draft_model_of_another_vocabulary_is_refused() {
    let loaded = loaded("gemma3-tiny-f32");
    let other = self::loaded("llama-tiny-q4_k");
    let err = Engine::with_draft(
        &loaded,
        Some(&other),
        settings(1, DRAFT),
        DeviceRequest::Cpu,
    )
    .err()
    .expect("another vocabulary is refused");
    assert!(matches!(err, ModelError::DraftModel(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("vocabulary") && text.contains("tokenizer"),
        "{text}"
    );
}

#[test]
fn a_draft_model_and_the_speculation_setting_must_agree() {
    let loaded = loaded("gemma3-tiny-q4_k_m");
    let start = |draft: Option<&LoadedModel>, speculation| {
        Engine::with_draft(&loaded, draft, settings(1, speculation), DeviceRequest::Cpu)
            .err()
            .map(|e| e.to_string())
    };
    let without = start(None, DRAFT).expect("a draft setting without a model is refused");
    assert!(without.contains("--draft-model"), "{without}");
    let twin = self::loaded("gemma3-tiny-q4_k_m");
    let lookup = Speculation::PromptLookup { draft_max: 4 };
    for speculation in [Speculation::Off, lookup] {
        let unused = start(Some(&twin), speculation).expect("an unused draft model is refused");
        assert!(unused.contains("--speculate draft"), "{unused}");
    }
    assert!(start(Some(&twin), DRAFT).is_none());
}
