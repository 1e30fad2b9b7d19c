//! The engine on hybrid models, whose recurrent layers keep a state that cannot be cut back:
//! speculation restores it when guesses are rejected (the output equals plain decoding), a
//! slot is reused in place when the new prompt continues what it holds, and a prompt that
//! branches off a cached one starts from the state its last whole cached block kept (warm
//! equals cold, the reused tokens reported).

mod common;
mod speculation_support;

use rinfer_model::{Engine, EngineSettings, Event, Speculation, SpeculationStats};
use speculation_support::*;

const MODELS: [&str; 3] = ["lfm2-tiny-q8_0", "qwen35-tiny-q8_0", "qwen35moe-tiny-q8_0"];

#[test]
fn speculation_on_a_recurrent_state_gives_the_output_of_plain_decoding() {
    let mut total = SpeculationStats::default();
    for name in MODELS {
        let loaded = loaded(name);
        let mut plain = engine(&loaded, settings(1, Speculation::Off));
        let mut fast = engine(&loaded, settings(1, LOOKUP));
        for case in 0..3u32 {
            for seed in [None, Some(u64::from(case) + 5)] {
                let make = || request(&loaded, repetitive_prompt(case), seed, 160);
                let expected = generate_one(&mut plain, make());
                let got = generate_one(&mut fast, make());
                assert_eq!(got, expected, "{name}, case {case}, seed {seed:?}");
            }
        }
        // Two sequences speculating side by side.
        let two = || {
            (0..2)
                .map(|c| request(&loaded, repetitive_prompt(c + 7), None, 40))
                .collect()
        };
        let mut plain2 = engine(&loaded, settings(2, Speculation::Off));
        let mut fast2 = engine(&loaded, settings(2, LOOKUP));
        assert_eq!(
            run_all(&mut fast2, two()),
            run_all(&mut plain2, two()),
            "{name}"
        );
        let stats = fast.speculation_stats();
        total.drafted_tokens += stats.drafted_tokens;
        total.accepted_tokens += stats.accepted_tokens;
    }
    assert!(total.accepted_tokens > 0, "no guess confirmed: {total:?}");
    assert!(
        total.accepted_tokens < total.drafted_tokens,
        "no guess rejected, so no state was restored: {total:?}"
    );
}

/// Tokens and the prompt tokens reused of one request run alone.
fn generate_counting(engine: &mut Engine<'_>, request: rinfer_model::Request) -> (Vec<u32>, usize) {
    let id = engine.add(request).unwrap();
    let mut done = None;
    while engine.is_busy() {
        engine.step(|event| match event {
            Event::Finished {
                id: e,
                tokens,
                timings,
                ..
            } if e == id => done = Some((tokens, timings.cached_tokens)),
            Event::Failed { error, .. } => panic!("{error}"),
            _ => {}
        });
    }
    done.unwrap()
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
        // A chat turn: the history, the reply (all but its last token is in the cache), more.
        let held = first.len() + out.len() - 1;
        let next = [first.as_slice(), &out, &repetitive_prompt(2)].concat();
        let (cold, _) = generate_counting(
            &mut engine(&loaded, settings),
            request(&loaded, next.clone(), None, 10),
        );
        let (got, cached) = generate_counting(&mut warm, request(&loaded, next.clone(), None, 10));
        assert_eq!(cached, held, "{name}: the whole held state is reused");
        assert_eq!(got, cold, "{name}: warm equals cold");
        // Branching off inside the held tokens: the slot cannot go back, the prefix cache's
        // blocks can, to the state kept at the end of the last whole block before the branch.
        let branching = [&next[..35], repetitive_prompt(4).as_slice()].concat();
        let (cold, _) = generate_counting(
            &mut engine(&loaded, settings),
            request(&loaded, branching.clone(), None, 10),
        );
        let (got, cached) = generate_counting(&mut warm, request(&loaded, branching, None, 10));
        assert_eq!(cached, 32, "{name}: two whole blocks from the prefix cache");
        assert_eq!(got, cold, "{name}: from the blocks equals cold");
        // A prompt that diverges inside what the slot holds starts from an empty state.
        let diverging = [&first[..5], repetitive_prompt(3).as_slice()].concat();
        let (cold, _) = generate_counting(
            &mut engine(&loaded, settings),
            request(&loaded, diverging.clone(), None, 10),
        );
        let (got, cached) = generate_counting(&mut warm, request(&loaded, diverging, None, 10));
        assert_eq!(cached, 0, "{name}: a recurrent state is not cut back");
        assert_eq!(got, cold, "{name}");
    }
}
