//! The engine on hybrid models, whose recurrent layers keep a state that cannot be cut back:
//! speculation restores it when guesses are rejected (the output equals plain decoding), a
//! slot is reused in place when the new prompt continues what it holds or goes back to the
//! checkpoint kept at the end of its last prompt, and a prompt that branches off a cached one
//! starts from the state its last whole cached block kept (warm equals cold, the reused tokens
//! reported).

mod common;
mod speculation_support;

use rinfer_model::{Engine, EngineSettings, KvType, MemoryPlan, Speculation};
use speculation_support::*;

const MODELS: [&str; 3] = ["lfm2-tiny-q8_0", "qwen35-tiny-q8_0", "qwen35moe-tiny-q8_0"];

#[test]
fn speculation_on_a_recurrent_state_gives_the_output_of_plain_decoding() {
    assert_lookup_gives_plain_outputs(&MODELS, 3, 160);
}

#[test]
fn two_sequences_speculating_side_by_side_give_the_output_of_plain_decoding() {
    for name in MODELS {
        let loaded = loaded(name);
        let two = || {
            (0..2)
                .map(|c| request(&loaded, repetitive_prompt(c + 7), None, 40))
                .collect()
        };
        let mut plain = engine(&loaded, settings(2, Speculation::Off));
        let mut fast = engine(&loaded, settings(2, LOOKUP));
        assert_eq!(
            run_all(&mut fast, two()),
            run_all(&mut plain, two()),
            "{name}"
        );
    }
}

/// Tokens and the prompt tokens reused of one request run alone.
fn generate_counting(engine: &mut Engine<'_>, request: rinfer_model::Request) -> (Vec<u32>, usize) {
    let id = engine.add(request).unwrap();
    let (tokens, _, cached) = common::finish(engine, id);
    // Step on until the engine has retired the sequence as well.
    while engine.is_busy() {
        engine.step(|_| {});
    }
    (tokens, cached)
}

#[test]
fn a_slot_is_reused_in_place_exactly_when_the_prompt_continues_its_state() {
    for name in MODELS {
        let loaded = loaded(name);
        let settings = EngineSettings {
            prefix_cache_bytes: 1 << 24,
            ..settings(1, Speculation::Off)
        };
        let first = repetitive_prompt(1);
        let mut warm = engine(&loaded, settings);
        let (out, cached) = generate_counting(&mut warm, request(&loaded, first.clone(), None, 10));
        assert_eq!(cached, 0);
        // `prompt` on the warm engine gives what it gives on a fresh one; the prompt tokens
        // the warm one reused.
        let mut reused = |prompt: &[u32], what: &str| {
            let make = || request(&loaded, prompt.to_vec(), None, 10);
            let (cold, _) = generate_counting(&mut engine(&loaded, settings), make());
            let (got, cached) = generate_counting(&mut warm, make());
            assert_eq!(got, cold, "{name}, {what}: warm equals cold");
            cached
        };
        // A chat turn: the history, the reply (all but its last token is in the cache), more.
        let held = first.len() + out.len() - 1;
        let next = [first.as_slice(), &out, &repetitive_prompt(2)].concat();
        let cached = reused(&next, "a chat turn");
        assert_eq!(cached, held, "{name}: the whole held state is reused");
        // Branching off inside the held tokens: the slot cannot go back, the prefix cache's
        // blocks can, to the state kept at the end of the last whole block before the branch.
        let branching = [&next[..35], repetitive_prompt(4).as_slice()].concat();
        let cached = reused(&branching, "a branch");
        assert_eq!(cached, 32, "{name}: two whole blocks from the prefix cache");
        // A prompt that diverges inside what the slot holds starts from an empty state.
        let diverging = [&first[..5], repetitive_prompt(3).as_slice()].concat();
        let cached = reused(&diverging, "a divergence");
        assert_eq!(cached, 0, "{name}: a recurrent state is not cut back");
    }
}

#[test]
fn a_chat_turn_that_does_not_continue_the_reply_goes_back_to_the_last_prompts_checkpoint() {
    // Gemma 3 has sliding-window rings and no recurrent state: it is cut back as far as its
    // rings allow, which 6 generated tokens (batches of 8) do.
    for name in MODELS.into_iter().chain(["gemma3-tiny-q4_k_m"]) {
        let loaded = loaded(name);
        let settings = settings(1, Speculation::Off);
        let mut warm = engine(&loaded, settings);
        let plan = MemoryPlan::new(&loaded.model.config, KvType::F16, 192, 1, 8, 1).unwrap();
        assert_eq!(
            warm.kv_bytes(),
            plan.kv_cache_bytes,
            "{name}: the plan counts checkpoints"
        );
        for seed in [None, Some(3)] {
            warm.clear_prefix_cache();
            let first = repetitive_prompt(1);
            let make = |prompt: &[u32]| request(&loaded, prompt.to_vec(), seed, 6);
            let (out, cached) = generate_counting(&mut warm, make(&first));
            assert_eq!(cached, 0);
            // Each turn: the last prompt, a reply that is not the one generated (as a reply
            // tokenized again may be), a question. Its prompt is fed in chunks that end on other
            // positions than the cold run's.
            let mut prompt = first;
            let mut reply = out;
            for turn in 2..5 {
                let other = if reply[0] == 3 { 4 } else { 3 };
                let next = [prompt.as_slice(), &[other], &repetitive_prompt(turn)].concat();
                let run = |engine: &mut Engine<'_>| {
                    let id = engine.add(make(&next)).unwrap();
                    let out = common::finish(engine, id);
                    while engine.is_busy() {
                        engine.step(|_| {});
                    }
                    out
                };
                let (cold, cold_logprobs, _) = run(&mut engine(&loaded, settings));
                let (tokens, logprobs, cached) = run(&mut warm);
                assert_eq!(
                    cached,
                    prompt.len(),
                    "{name}, turn {turn}: the last prompt reused"
                );
                assert_eq!(
                    (&tokens, logprobs),
                    (&cold, cold_logprobs),
                    "{name}, turn {turn}, {seed:?}: warm equals cold"
                );
                (prompt, reply) = (next, tokens);
            }
        }
    }
}
