//! The engine on the GPU, run on the host: the engine drives the device seam
//! (`rinfer_model::engine::GpuDevice`) implemented over the CUDA kernels compiled for the host
//! (the emulation of `gpu_forward_emulated`), its KV caches block tables into one pool of KV
//! blocks. The prefix cache keeps the pool's blocks by reference, a new sequence lists the
//! cached blocks of its prompt, and a shared block is copied before it is written:
//!
//! - a request whose prompt extends a running one's gives, bit for bit, the tokens and
//!   log-probabilities of the same request on a fresh engine, with its prefix reported cached;
//! - the second of `n` = 2 choices (started as the server starts it: once the first's prompt
//!   is cached, seed + 1) takes the first's blocks instead of computing its prompt again, and
//!   each choice equals its own request run alone;
//! - a request whose whole prompt is cached (its last token alone computed again) gives, bit
//!   for bit, what it gave cold, beside another request too;
//! - a chat's next turn, whose prompt repeats the last prompt and its reply, reuses the last
//!   prompt and computes the reply again (its rows came from the decode kernels), and gives
//!   what it gives cold;
//! - on a model with sliding-window layers (Gemma 3's, rings of 16 + 24 slots), a prompt that
//!   continues a running one's takes its blocks and gets the rows its rings keep written back,
//!   and equals its cold run;
//! - when every sequence has ended and the cached prefixes are forgotten (or the engine is
//!   dropped), every block of the pool is free again.
//!
//! The model's matrices are quantized, so prompt chunks run on tensor cores and decoding on
//! the q8_1 matvecs: warm equals cold because a prompt token is computed the same in a chunk of
//! any length, the one-token chunk of a cache hit included.

mod common;
// Shared with `gpu_forward_emulated`, which uses the helpers this test does not.
#[allow(dead_code)]
mod gpu_emulation;

use common::{SeqEvent, seq_event};
use gpu_emulation::device::EmulatedGpu;
use gpu_emulation::{load_options, with_emulator, with_host_gpu};
use rinfer_cuda::kv_pool::{SharedBlocks, lock};
use rinfer_model::{
    BLOCK_TOKENS, Engine, EngineSettings, LoadedModel, Request, SeqId, TokenLogprob,
};

/// Full attention only, Q8_0 matrices.
const MODEL: &str = "llama-tiny-q8_0";
const SEQUENCES: usize = 2;
const CONTEXT: usize = 96;
const MAX_BATCH: usize = 32;

/// Runs `test` with an engine of `loaded` over the emulated GPU, and the pool's allocator.
fn with_engine(
    loaded: &LoadedModel,
    prefix_cache_bytes: usize,
    test: impl FnOnce(&mut Engine<'_>, &SharedBlocks),
) {
    with_engine_feeding(loaded, MAX_BATCH, prefix_cache_bytes, test);
}

/// [`with_engine`] feeding at most `max_batch` tokens a step.
fn with_engine_feeding(
    loaded: &LoadedModel,
    max_batch: usize,
    prefix_cache_bytes: usize,
    test: impl FnOnce(&mut Engine<'_>, &SharedBlocks),
) {
    with_emulator(|emulate| {
        let options = load_options(CONTEXT, max_batch, SEQUENCES);
        with_host_gpu(emulate, &loaded.model, &options, |gpu| {
            let blocks = gpu.pool.blocks.clone();
            let device = EmulatedGpu::new(gpu);
            let settings = EngineSettings {
                max_batch,
                prefix_cache_bytes,
                ..EngineSettings::parallel(SEQUENCES, CONTEXT)
            };
            let mut engine = Engine::with_gpu(loaded, None, settings, Box::new(device)).unwrap();
            assert_eq!(engine.device().kind(), "cuda");
            test(&mut engine, &blocks);
        });
    });
}

fn loaded() -> LoadedModel {
    open(MODEL)
}

fn open(model: &str) -> LoadedModel {
    LoadedModel::open(common::fixtures().join(format!("models/{model}.gguf"))).unwrap()
}

/// `n` tokens that no call with another `seed` starts with.
fn tokens(seed: u32, n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| 3 + (seed * 131 + i * 17) % 200)
        .collect()
}

/// Greedy or seeded sampling (end of generation masked), with log-probabilities.
fn request(loaded: &LoadedModel, prompt: Vec<u32>, seed: Option<u64>) -> Request {
    common::logprob_request(loaded, prompt, seed, 8)
}

/// Tokens and log-probabilities (compared bit for bit) of one sequence, and the prompt tokens
/// it reused.
#[derive(Clone, Debug, Default, PartialEq)]
struct Outcome {
    tokens: Vec<u32>,
    logprobs: Vec<Option<TokenLogprob>>,
    cached: usize,
}

/// Steps until every sequence has ended; the outcomes of `ids` (with the sequences that
/// `after_prompt` started) and the rows of every step. `after_prompt(engine, id, steps)` is
/// called once for each sequence of `ids` after the step that gave its first token (`steps`
/// run so far), and may start another sequence.
fn finish_all(
    engine: &mut Engine<'_>,
    ids: &mut Vec<SeqId>,
    mut after_prompt: impl FnMut(&mut Engine<'_>, SeqId, usize) -> Option<SeqId>,
) -> (Vec<Outcome>, Vec<usize>) {
    let mut outcomes = vec![Outcome::default(); ids.len()];
    let mut steps = Vec::new();
    while engine.is_busy() {
        let mut first_tokens = Vec::new();
        let rows = engine.step(|event| match seq_event(ids, event) {
            Some(SeqEvent::Token { at, logprob }) => {
                if outcomes[at].logprobs.is_empty() {
                    first_tokens.push(ids[at]);
                }
                outcomes[at].logprobs.push(logprob);
            }
            Some(SeqEvent::Finished { at, tokens, cached }) => {
                outcomes[at].tokens = tokens;
                outcomes[at].cached = cached;
            }
            None => {}
        });
        steps.push(rows);
        for id in first_tokens {
            if let Some(new) = after_prompt(engine, id, steps.len()) {
                ids.push(new);
                outcomes.push(Outcome::default());
            }
        }
    }
    (outcomes, steps)
}

/// `request` alone on a fresh engine that caches nothing.
fn cold(loaded: &LoadedModel, request: Request) -> Outcome {
    cold_feeding(loaded, MAX_BATCH, request)
}

/// [`cold`] feeding at most `max_batch` tokens a step.
fn cold_feeding(loaded: &LoadedModel, max_batch: usize, request: Request) -> Outcome {
    let mut outcome = None;
    with_engine_feeding(loaded, max_batch, 0, |engine, _| {
        let mut ids = vec![engine.add(request).unwrap()];
        outcome = finish_all(engine, &mut ids, |_, _, _| None).0.pop();
    });
    let outcome = outcome.unwrap();
    assert_eq!(outcome.cached, 0);
    outcome
}

#[test]
fn a_prompt_extending_a_running_ones_reuses_its_blocks_and_equals_it_cold() {
    let loaded = loaded();
    for seed in [None, Some(7)] {
        // 37 tokens: two whole blocks and 5 positions of a third. The second prompt extends
        // it and starts while the first decodes: it takes the first's two whole blocks from
        // the prefix cache. The third shares 20 tokens with the first and runs after both in
        // the first's slot: it keeps the slot's first block and writes into its second, which
        // the prefix cache shares, so it copies that block first.
        let first = tokens(1, 37);
        let second = [&first[..], &tokens(2, 6)].concat();
        let third = [&first[..20], &tokens(3, 9)].concat();
        let expected: Vec<Outcome> = [&first, &second, &third]
            .iter()
            .map(|prompt| cold(&loaded, request(&loaded, prompt.to_vec(), seed)))
            .collect();
        with_engine(&loaded, 1 << 20, |engine, blocks| {
            let free = lock(blocks).free();
            let mut ids = vec![engine.add(request(&loaded, first.clone(), seed)).unwrap()];
            let leader = ids[0];
            let (mut outcomes, _) = finish_all(engine, &mut ids, |engine, id, _| {
                (id == leader).then(|| engine.add(request(&loaded, second.clone(), seed)).unwrap())
            });
            assert_eq!(ids.len(), 2, "the second request started beside the first");
            let mut ids = vec![engine.add(request(&loaded, third.clone(), seed)).unwrap()];
            outcomes.extend(finish_all(engine, &mut ids, |_, _, _| None).0);
            let cached: Vec<usize> = outcomes.iter().map(|o| o.cached).collect();
            assert_eq!(
                cached,
                [0, 2 * BLOCK_TOKENS, 20],
                "{seed:?}: prompt tokens reused"
            );
            for (i, (warm, cold)) in outcomes.into_iter().zip(&expected).enumerate() {
                let warm = Outcome { cached: 0, ..warm };
                assert_eq!(&warm, cold, "{seed:?}: request {i} warm differs from cold");
            }
            assert!(
                engine.kv_pool_stats().blocks_in_use > 0,
                "the prefixes are kept"
            );
            engine.clear_prefix_cache();
            assert_eq!(lock(blocks).free(), free, "every block is free again");
            assert_eq!(engine.kv_pool_stats().blocks_in_use, 0);
        });
    }
}

#[test]
fn two_choices_share_the_prompt_and_each_equals_its_own_run() {
    let loaded = loaded();
    let prompt = tokens(4, 40);
    for seed in [None, Some(11)] {
        let sibling_seed = seed.map(|s| s + 1);
        let expected = [
            cold(&loaded, request(&loaded, prompt.clone(), seed)),
            cold(&loaded, request(&loaded, prompt.clone(), sibling_seed)),
        ];
        let mut free = 0;
        let mut pool = None;
        with_engine(&loaded, 1 << 20, |engine, blocks| {
            free = lock(blocks).free();
            pool = Some(blocks.clone());
            let mut ids = vec![engine.add(request(&loaded, prompt.clone(), seed)).unwrap()];
            let leader = ids[0];
            let mut started_after = None;
            let (outcomes, steps) = finish_all(engine, &mut ids, |engine, id, steps| {
                if id != leader {
                    return None;
                }
                // The second choice starts as the server starts it: once the first's prompt is
                // cached. It lists the first's blocks, taking no block of its own yet.
                let before = lock(blocks).free();
                let sibling = engine.add(request(&loaded, prompt.clone(), sibling_seed));
                assert_eq!(
                    lock(blocks).free(),
                    before,
                    "the prompt's blocks are shared"
                );
                started_after = Some(steps);
                Some(sibling.unwrap())
            });
            // Its first step computes only the prompt tokens past the shared blocks, beside
            // the first choice's decoding row.
            let first_step = started_after.and_then(|at| steps.get(at));
            assert_eq!(first_step, Some(&(1 + prompt.len() - 2 * BLOCK_TOKENS)));
            assert_eq!(outcomes[1].cached, 2 * BLOCK_TOKENS, "{seed:?}");
            for (choice, (outcome, expected)) in outcomes.iter().zip(&expected).enumerate() {
                let outcome = Outcome {
                    cached: 0,
                    ..outcome.clone()
                };
                assert_eq!(&outcome, expected, "{seed:?}: choice {choice}");
            }
        });
        let pool = pool.unwrap();
        assert_eq!(
            lock(&pool).free(),
            free,
            "the dropped engine gave every block back"
        );
    }
}

#[test]
fn a_prompt_found_whole_in_the_prefix_cache_equals_its_cold_run() {
    let loaded = loaded();
    for seed in [None, Some(5)] {
        // Three whole blocks, all cached after the first run: the repeat computes its last
        // token again as a prompt of one token, beside the first chunk of another request.
        let prompt = tokens(5, 3 * BLOCK_TOKENS);
        let other = tokens(6, 21);
        let expected = cold(&loaded, request(&loaded, prompt.clone(), seed));
        with_engine(&loaded, 1 << 20, |engine, _| {
            let mut ids = vec![engine.add(request(&loaded, prompt.clone(), seed)).unwrap()];
            let mut outcomes = finish_all(engine, &mut ids, |_, _, _| None).0;
            let mut ids = vec![
                engine.add(request(&loaded, prompt.clone(), seed)).unwrap(),
                engine.add(request(&loaded, other.clone(), seed)).unwrap(),
            ];
            let (again, _) = finish_all(engine, &mut ids, |_, _, _| None);
            assert_eq!(
                again[0].cached,
                prompt.len() - 1,
                "{seed:?}: prompt tokens reused"
            );
            outcomes.push(again[0].clone());
            for (run, outcome) in outcomes.into_iter().enumerate() {
                let outcome = Outcome {
                    cached: 0,
                    ..outcome
                };
                assert_eq!(outcome, expected, "{seed:?}: run {run} differs from cold");
            }
        });
    }
}

#[test]
fn a_chats_next_turn_computes_the_reply_again_and_equals_its_cold_run() {
    let loaded = loaded();
    for seed in [None, Some(9)] {
        // The reply fills the first block's end and the whole second block.
        let first = tokens(8, 20);
        let turn = || common::logprob_request(&loaded, first.clone(), seed, 24);
        let reply = cold(&loaded, turn()).tokens;
        assert_eq!(reply.len(), 24);
        let next: Vec<u32> = [first.clone(), reply, tokens(9, 10)].concat();
        let expected = cold(&loaded, request(&loaded, next.clone(), seed));
        with_engine(&loaded, 1 << 20, |engine, _| {
            let mut ids = vec![engine.add(turn()).unwrap()];
            finish_all(engine, &mut ids, |_, _, _| None);
            let mut ids = vec![engine.add(request(&loaded, next, seed)).unwrap()];
            let warm = finish_all(engine, &mut ids, |_, _, _| None).0.remove(0);
            assert_eq!(
                warm.cached,
                first.len(),
                "{seed:?}: the last prompt is reused"
            );
            let warm = Outcome { cached: 0, ..warm };
            assert_eq!(warm, expected, "{seed:?}: the next turn differs from cold");
        });
    }
}

#[test]
fn a_sliding_window_models_cached_prefix_brings_its_ring_rows_back() {
    let loaded = open("gemma3-tiny-q4_k_m");
    // Window 16: rings of 16 + 24 slots keep the last 40 of the 48 positions reused (from
    // slot 8 on, wrapping), and the first prompt's second step of 24 tokens completes its
    // second and third blocks, whose rows are read in one go (wrapping too).
    let max_batch = 24;
    for seed in [None, Some(3)] {
        // The second prompt continues the first's three whole blocks and starts while the
        // first decodes, in the other slot: its prefix comes from the prefix cache.
        let first = tokens(4, 70);
        let second = [&first[..48], &tokens(5, 11)].concat();
        let expected: Vec<Outcome> = [&first, &second]
            .iter()
            .map(|prompt| cold_feeding(&loaded, max_batch, request(&loaded, prompt.to_vec(), seed)))
            .collect();
        with_engine_feeding(&loaded, max_batch, 1 << 20, |engine, _| {
            let mut ids = vec![engine.add(request(&loaded, first.clone(), seed)).unwrap()];
            let leader = ids[0];
            let (outcomes, _) = finish_all(engine, &mut ids, |engine, id, _| {
                (id == leader).then(|| engine.add(request(&loaded, second.clone(), seed)).unwrap())
            });
            let cached: Vec<usize> = outcomes.iter().map(|o| o.cached).collect();
            assert_eq!(
                cached,
                [0, 3 * BLOCK_TOKENS],
                "{seed:?}: prompt tokens reused"
            );
            for (i, (warm, cold)) in outcomes.into_iter().zip(&expected).enumerate() {
                let warm = Outcome { cached: 0, ..warm };
                assert_eq!(&warm, cold, "{seed:?}: request {i} warm differs from cold");
            }
        });
    }
}
