//! The prefix cache: a request that reuses cached keys and values gives bit-identical
//! log-probabilities and tokens to the same request computed from an empty cache, whether the
//! prefix comes from its slot's last sequence, from another (running or finished) sequence's
//! blocks, or is recomputed after eviction; sequences that share a prompt share its blocks by
//! reference, and one that writes into a shared block writes into its own copy; and the cache
//! stays within its byte budget.

mod common;

use common::{SeqEvent, default_model, fixtures, seq_event};
use rinfer_model::{
    BLOCK_TOKENS, DeviceRequest, Engine, EngineSettings, Event, Generation, LoadedModel, Request,
    SamplingParams, SeqId, TokenLogprob,
};

/// Gemma 3 (sliding window of 16 on two of its three layers), Llama (full attention only),
/// DeepSeek-V2 (latent attention) and Gemma 4 with KV sharing (its last two layers read the
/// ring and the blocks of earlier layers).
const MODELS: [&str; 4] = [
    "gemma3-tiny-q4_k_m",
    "llama-tiny-q4_k",
    "deepseek2-tiny-q8_0",
    "gemma4-kvshare-tiny-f32",
];

fn loaded(name: &str) -> LoadedModel {
    LoadedModel::open(fixtures().join(format!("models/{name}.gguf"))).unwrap()
}

/// Batches of 8 rows, so the sliding-window rings (16 + 8 slots) wrap within a short prompt.
fn settings(sequences: usize, budget: usize) -> EngineSettings {
    EngineSettings {
        max_batch: 8.max(sequences),
        prefix_cache_bytes: budget,
        ..EngineSettings::parallel(sequences, 160)
    }
}

const MIB: usize = 1 << 20;

fn engine(loaded: &LoadedModel, settings: EngineSettings) -> Engine<'_> {
    Engine::new(loaded, settings, DeviceRequest::Cpu).unwrap()
}

/// `n` tokens that no other call with a different `seed` starts with.
fn tokens(seed: u32, n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| 3 + (seed * 131 + i * 17) % 900)
        .collect()
}

fn concat(parts: &[&[u32]]) -> Vec<u32> {
    parts.concat()
}

/// Greedy (end of generation masked) or seeded sampling, with log-probabilities.
fn request(loaded: &LoadedModel, prompt: Vec<u32>, seed: Option<u64>) -> Request {
    common::logprob_request(loaded, prompt, seed, 12)
}

/// Tokens, log-probabilities (bit for bit) and the prompt tokens reused.
#[derive(Clone, Debug, PartialEq)]
struct Outcome {
    tokens: Vec<u32>,
    logprobs: Vec<Option<TokenLogprob>>,
}

fn run(engine: &mut Engine<'_>, request: Request) -> (Outcome, usize) {
    let id = engine.add(request).unwrap();
    finish(engine, id)
}

/// Steps until sequence `id` ends: its outcome and the prompt tokens it reused.
fn finish(engine: &mut Engine<'_>, id: SeqId) -> (Outcome, usize) {
    let (tokens, logprobs, cached) = common::finish(engine, id);
    (Outcome { tokens, logprobs }, cached)
}

/// Steps until the sequences `ids` and all others have ended: the outcomes of `ids` and the
/// prompt tokens each reused, in order, and the most KV blocks in use after any step.
fn finish_all(engine: &mut Engine<'_>, ids: &[SeqId]) -> (Vec<(Outcome, usize)>, usize) {
    let mut outcomes: Vec<_> = ids.iter().map(|_| (Vec::new(), None)).collect();
    let mut most_blocks = 0;
    while engine.is_busy() {
        engine.step(|event| match seq_event(ids, event) {
            Some(SeqEvent::Token { at, logprob }) => outcomes[at].0.push(logprob),
            Some(SeqEvent::Finished { at, tokens, cached }) => {
                outcomes[at].1 = Some((tokens, cached));
            }
            None => {}
        });
        most_blocks = most_blocks.max(engine.kv_pool_stats().blocks_in_use);
    }
    let outcomes = outcomes
        .into_iter()
        .map(|(logprobs, done)| {
            let (tokens, cached) = done.unwrap();
            (Outcome { tokens, logprobs }, cached)
        })
        .collect();
    (outcomes, most_blocks)
}

/// Steps until every sequence has ended.
fn drain(engine: &mut Engine<'_>) {
    while engine.is_busy() {
        engine.step(|_| {});
    }
}

/// The outcome of `request` in a fresh engine that caches nothing.
fn cold(loaded: &LoadedModel, request: Request) -> Outcome {
    let (outcome, cached) = run(&mut engine(loaded, settings(1, 0)), request);
    assert_eq!(cached, 0);
    outcome
}

#[test]
fn the_same_request_warm_equals_it_cold_greedy_and_seeded() {
    for name in MODELS {
        let loaded = loaded(name);
        for seed in [None, Some(7)] {
            let prompt = tokens(1, 45);
            let expected = cold(&loaded, request(&loaded, prompt.clone(), seed));
            // In place: the slot still holds the prompt, and 11 generated tokens after it. On
            // Gemma the rings (16 + 8 slots) no longer hold the window before the cut, so only
            // whole cached blocks are reused.
            let in_place = if name.starts_with("gemma") {
                2 * BLOCK_TOKENS
            } else {
                prompt.len() - 1
            };
            let mut warm = engine(&loaded, settings(1, 64 * MIB));
            let (first, cached) = run(&mut warm, request(&loaded, prompt.clone(), seed));
            assert_eq!((&first, cached), (&expected, 0), "{name} {seed:?}");
            let (again, cached) = run(&mut warm, request(&loaded, prompt.clone(), seed));
            assert_eq!(cached, in_place, "{name}");
            assert_eq!(again, expected, "{name} {seed:?} in place");
            // From the blocks, into a slot that never held the prompt: the slot that did goes
            // to a request that shares more with it.
            let mut other = engine(&loaded, settings(2, 64 * MIB));
            other.add(request(&loaded, tokens(2, 30), seed)).unwrap();
            run(&mut other, request(&loaded, prompt.clone(), seed));
            drain(&mut other);
            let holder = concat(&[&prompt[..44], &tokens(3, 5)]);
            other.add(request(&loaded, holder, seed)).unwrap();
            let (copied, cached) = run(&mut other, request(&loaded, prompt.clone(), seed));
            drain(&mut other);
            assert_eq!(cached, 2 * BLOCK_TOKENS, "{name}: reused from blocks");
            assert_eq!(copied, expected, "{name} {seed:?} from blocks");
        }
    }
}

#[test]
fn a_prompt_sharing_part_of_a_running_sequences_prompt_reuses_its_blocks() {
    for name in MODELS {
        let loaded = loaded(name);
        let shared = tokens(4, 40);
        let first = concat(&[&shared, &tokens(5, 9)]);
        let second = concat(&[&shared, &tokens(6, 13)]);
        let expected = cold(&loaded, request(&loaded, second.clone(), None));

        let mut engine = engine(&loaded, settings(2, 64 * MIB));
        engine.add(request(&loaded, first, None)).unwrap();
        while engine.prefix_stats().blocks < 3 {
            engine.step(|_| {});
        }
        assert_eq!(engine.running(), 1, "{name}: the first is still running");
        let (outcome, cached) = run(&mut engine, request(&loaded, second, None));
        drain(&mut engine);
        assert_eq!(cached, 2 * BLOCK_TOKENS, "{name}: the whole shared blocks");
        assert_eq!(outcome, expected, "{name}");
    }
}

#[test]
fn choices_of_one_prompt_share_its_blocks_by_reference() {
    for name in MODELS {
        let loaded = loaded(name);
        // Four whole blocks; each choice generates 12 tokens, into a fifth block.
        let prompt = tokens(30, 4 * BLOCK_TOKENS);
        let expected = cold(&loaded, request(&loaded, prompt.clone(), None));
        let mut engine = engine(&loaded, settings(4, 64 * MIB));
        // As the server starts the other choices: once the first choice's prompt is cached.
        let first = engine.add(request(&loaded, prompt.clone(), None)).unwrap();
        let mut early = Vec::new();
        while engine.prefix_stats().blocks < 4 {
            engine.step(|event| {
                if let Event::Token { logprob, .. } = event {
                    early.push(logprob);
                }
            });
        }
        let mut ids = vec![first];
        for _ in 0..3 {
            ids.push(engine.add(request(&loaded, prompt.clone(), None)).unwrap());
        }
        let (mut outcomes, most_blocks) = finish_all(&mut engine, &ids);
        early.append(&mut outcomes[0].0.logprobs);
        outcomes[0].0.logprobs = early;
        assert_eq!(
            outcomes[0],
            (expected.clone(), 0),
            "{name}: the first choice"
        );
        for (outcome, cached) in &outcomes[1..] {
            assert_eq!(*cached, prompt.len() - 1, "{name}: all but the last token");
            assert_eq!(outcome, &expected, "{name}");
        }
        // The prompt's 4 blocks once; the first choice's fifth block; each other choice its
        // copy of the last prompt block (it writes the last token's rows) and its fifth block.
        // Unshared, that would be 4 x 5 blocks.
        assert_eq!(most_blocks, 4 + 1 + 3 * 2, "{name}");
    }
}

#[test]
fn a_sequence_writing_into_a_shared_block_leaves_the_others_rows_unchanged() {
    let loaded = loaded("llama-tiny-q4_k");
    let history = tokens(40, 40);
    let mut engine = engine(&loaded, settings(2, 64 * MIB));
    run(&mut engine, request(&loaded, history.clone(), None));
    // The slot holds the history, whose first blocks the prefix cache shares. The first
    // request is cut back in place into the second block and writes its own tokens there; the
    // second, running beside it, takes the history's first two blocks from the prefix cache.
    let diverging = concat(&[&history[..20], &tokens(41, 20)]);
    let continuing = concat(&[&history, &tokens(42, 5)]);
    let expected = [
        cold(&loaded, request(&loaded, diverging.clone(), None)),
        cold(&loaded, request(&loaded, continuing.clone(), None)),
    ];
    let ids = [
        engine.add(request(&loaded, diverging, None)).unwrap(),
        engine
            .add(request(&loaded, continuing.clone(), None))
            .unwrap(),
    ];
    let (outcomes, _) = finish_all(&mut engine, &ids);
    assert_eq!(outcomes[0], (expected[0].clone(), 20));
    assert_eq!(outcomes[1], (expected[1].clone(), 2 * BLOCK_TOKENS));
    // Again, in place in the second slot, whose first blocks are still the prefix cache's.
    let (again, cached) = run(&mut engine, request(&loaded, continuing.clone(), None));
    assert_eq!((again, cached), (expected[1].clone(), continuing.len() - 1));
}

#[test]
fn a_slot_is_cut_back_in_place_only_while_its_rings_hold_the_window() {
    let loaded = loaded("gemma3-tiny-q4_k_m");
    let history = tokens(7, 60);
    // The slot then holds the 60 prompt tokens and 11 of the 12 generated ones: 71 positions,
    // of which the rings (16 + 8 slots) keep the last 24.
    for near in [true, false] {
        let mut engine = engine(&loaded, settings(1, 64 * MIB));
        let (first, _) = run(&mut engine, request(&loaded, history.clone(), None));
        let (prompt, reused) = if near {
            // Cut 5 positions back (within one batch of 8): in place, to the token.
            let kept = concat(&[&history, &first.tokens[..6]]);
            (concat(&[&kept, &tokens(8, 6)]), kept.len())
        } else {
            // Cut 31 back: the rings lost the window before the cut; whole blocks only.
            (concat(&[&history[..40], &tokens(9, 6)]), 2 * BLOCK_TOKENS)
        };
        let expected = cold(&loaded, request(&loaded, prompt.clone(), None));
        let (outcome, cached) = run(&mut engine, request(&loaded, prompt, None));
        assert_eq!(cached, reused, "near: {near}");
        assert_eq!(outcome, expected, "near: {near}");
    }
}

/// Bytes of one cached block of `loaded`'s model.
fn block_bytes(loaded: &LoadedModel) -> usize {
    let mut engine = engine(loaded, settings(1, 64 * MIB));
    run(&mut engine, request(loaded, tokens(10, 20), None));
    let stats = engine.prefix_stats();
    assert!(stats.blocks > 0);
    stats.bytes / stats.blocks
}

#[test]
fn an_evicted_prefix_is_recomputed_identically() {
    for name in MODELS {
        let loaded = loaded(name);
        let block = block_bytes(&loaded);
        let prompt = tokens(11, 50);
        let expected = cold(&loaded, request(&loaded, prompt.clone(), Some(3)));
        // Room for three blocks; two slots, so the prompt's slot is not the one reused later.
        let mut engine = engine(&loaded, settings(2, 3 * block));
        run(&mut engine, request(&loaded, prompt.clone(), Some(3)));
        let evictions = engine.prefix_stats().evictions;
        for seed in 12..16 {
            run(&mut engine, request(&loaded, tokens(seed, 40), None));
        }
        let stats = engine.prefix_stats();
        assert!(stats.evictions > evictions, "{name}: {stats:?}");
        let (outcome, cached) = run(&mut engine, request(&loaded, prompt, Some(3)));
        assert_eq!(cached, 0, "{name}: the prefix was evicted");
        assert_eq!(outcome, expected, "{name}");
    }
}

#[test]
fn a_long_run_of_distinct_prefixes_stays_within_the_budget_and_loses_nothing() {
    let loaded = loaded("gemma3-tiny-q4_k_m");
    let block = block_bytes(&loaded);
    let budget = 5 * block;
    let mut engine = engine(&loaded, settings(2, budget));
    // Two sequences of 160 positions (10 blocks each) and the prefix cache's 5 blocks.
    let pool = engine.kv_pool_stats();
    assert_eq!(pool.capacity, 2 * 10 + 5);
    let mut warm = None;
    for seed in 20..50 {
        let prompt = tokens(seed, 37 + seed as usize % 11);
        let (outcome, _) = run(&mut engine, request(&loaded, prompt.clone(), None));
        let stats = engine.prefix_stats();
        assert!(stats.bytes <= budget, "{stats:?}");
        let pool = engine.kv_pool_stats();
        assert!(pool.blocks_allocated <= pool.capacity, "{pool:?}");
        if seed % 7 == 0 {
            assert_eq!(outcome, cold(&loaded, request(&loaded, prompt, None)));
        }
        if seed == 30 {
            warm = Some(pool.bytes_allocated());
        }
    }
    let stats = engine.prefix_stats();
    assert_eq!(stats.blocks, 5);
    assert!(stats.evictions >= 30, "{stats:?}");
    assert_eq!(stats.requests, 30);
    // Evicted blocks go back to the pool and are taken again: after warm-up, no more.
    assert_eq!(Some(engine.kv_pool_stats().bytes_allocated()), warm);
}

#[test]
fn a_resent_history_evaluates_only_the_new_tokens_on_the_default_model() {
    let loaded = LoadedModel::open(default_model()).unwrap();
    let tokenizer = &loaded.tokenizer;
    let mut engine = Engine::new(
        &loaded,
        EngineSettings {
            prefix_cache_bytes: 64 * MIB,
            ..EngineSettings::single(512)
        },
        DeviceRequest::Cpu,
    )
    .unwrap();
    let mut history = tokenizer
        .encode(
            "You are a helpful assistant who answers in one short sentence. Question: what is the capital of France?",
            true,
            false,
        )
        .unwrap();
    for turn in 0..3 {
        let greedy = Request::new(history.clone(), 8).with_sampling(SamplingParams::greedy());
        let warm: Generation = engine.generate(greedy.clone(), |_| {}).unwrap();
        let mut fresh =
            Engine::new(&loaded, EngineSettings::single(512), DeviceRequest::Cpu).unwrap();
        let cold = fresh.generate(greedy, |_| {}).unwrap();
        assert_eq!(warm.tokens, cold.tokens, "turn {turn}");
        if turn > 0 {
            assert!(
                warm.timings.cached_tokens + 12 >= history.len(),
                "turn {turn}: {} of {} reused",
                warm.timings.cached_tokens,
                history.len()
            );
        }
        history.extend_from_slice(&warm.tokens);
        history.extend(
            tokenizer
                .encode(" And the next one?", false, false)
                .unwrap(),
        );
    }
}

#[test]
fn after_clearing_the_prefix_cache_a_request_is_computed_whole() {
    let loaded = loaded("llama-tiny-q4_k");
    let prompt = tokens(60, 40);
    let mut engine = engine(&loaded, settings(1, 64 * MIB));
    run(&mut engine, request(&loaded, prompt.clone(), None));
    engine.clear_prefix_cache();
    let (_, cached) = run(&mut engine, request(&loaded, prompt, None));
    assert_eq!(cached, 0);
    assert_eq!(
        engine.prefix_stats().blocks,
        3,
        "only the second request's blocks"
    );
}
