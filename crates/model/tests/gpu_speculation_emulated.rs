//! Batch-invariant decoding and speculation on the GPU, run on the host: the engine drives the
//! CUDA kernels compiled for the host through the device seam (the emulation of
//! `gpu_engine_emulated`), on quantized models, whose decode products run the q8_1 matvec:
//!
//! - a request gives bit for bit the same tokens and log-probabilities alone and decoding
//!   beside 8 other sequences (passes of 9 rows: two q8_1 launches, where a one-sequence step
//!   of 9 tokens would run the f32 batched matmul), greedy and seeded;
//! - prompt lookup (on Qwen 3, whose fixture repeats its prompt, so guesses hold) gives the
//!   tokens and log-probabilities of plain GPU decoding, greedy and seeded, alone and beside
//!   other sequences, with guesses confirmed; after every step the pool holds exactly the
//!   blocks of the positions each sequence keeps (a rejected guess's block given back), as
//!   plain decoding does;
//! - a draft model, on the GPU too (its own emulated device), guessing for the GPU model
//!   likewise changes nothing.

mod common;
// Shared with the other emulated tests, which use the helpers this test does not.
#[allow(dead_code)]
mod gpu_emulation;
mod speculation_support;

use gpu_emulation::device::EmulatedGpu;
use gpu_emulation::{load_options, with_emulator, with_host_gpu};
use rinfer_cuda::LoadOptions;
use rinfer_cuda::kv_pool::{SharedBlocks, lock};
use rinfer_model::engine::GpuDevice;
use rinfer_model::{
    BLOCK_TOKENS, Engine, EngineSettings, Event, LoadedModel, Request, SeqId, Speculation,
    SpeculationStats, TokenLogprob,
};
use speculation_support::{Guesses, LOOKUP, loaded, repetitive_prompt, request};

const MODEL: &str = "llama-tiny-q8_0";
/// Its draft: the same weights quantized to Q4_K.
const DRAFT: &str = "llama-tiny-q4_k";
/// A model whose continuations follow its repetitive prompts.
const LOOKUP_MODEL: &str = "qwen3-tiny-q5_k_m";
const CONTEXT: usize = 128;
/// Rows of a step: every prompt of these tests is prefilled whole in the first step.
const MAX_BATCH: usize = 64;

/// Settings of `sequences` sequences in steps of up to `MAX_BATCH` rows, no prefix cache.
fn settings(sequences: usize, speculation: Speculation) -> EngineSettings {
    EngineSettings {
        max_batch: MAX_BATCH,
        speculation,
        prefix_cache_bytes: 0,
        ..EngineSettings::parallel(sequences, CONTEXT)
    }
}

/// Runs `test` with an engine of `loaded` (and `draft`, on an emulated GPU of its own) over
/// the emulated GPU, each loaded as the engine loads the CUDA runtime for `settings`, and the
/// pool's allocator.
fn with_engine(
    loaded: &LoadedModel,
    draft: Option<&LoadedModel>,
    settings: EngineSettings,
    test: impl FnOnce(&mut Engine<'_>, &SharedBlocks),
) {
    with_emulator(|emulate| {
        let options = load_options(CONTEXT, settings.max_batch, settings.max_sequences);
        let target = LoadOptions {
            guesses: settings.speculation.draft_max(),
            ..options.clone()
        };
        with_host_gpu(emulate, &loaded.model, &target, |gpu| {
            let blocks = gpu.pool.blocks.clone();
            let device = Box::new(EmulatedGpu::new(gpu));
            let run = |draft: Option<(&LoadedModel, Box<dyn GpuDevice + '_>)>| {
                let drafting = draft.is_some();
                let mut engine = Engine::with_gpu(loaded, draft, settings, device).unwrap();
                assert_eq!(engine.device().kind(), "cuda");
                assert_eq!(engine.settings().speculation, settings.speculation);
                let draft_device = engine.draft_device().map(|device| device.kind());
                assert_eq!(draft_device, drafting.then_some("cuda"));
                test(&mut engine, &blocks);
            };
            match draft {
                None => run(None),
                Some(draft) => with_host_gpu(emulate, &draft.model, &options, |draft_gpu| {
                    run(Some((draft, Box::new(EmulatedGpu::new(draft_gpu)))))
                }),
            }
        });
    });
}

/// Tokens and log-probabilities (compared bit for bit) of one sequence.
#[derive(Clone, Debug, Default, PartialEq)]
struct Outcome {
    tokens: Vec<u32>,
    logprobs: Vec<Option<TokenLogprob>>,
}

/// Runs `requests` together to their ends (each in a slot of its own): their outcomes in
/// order, and the rows of every step. After every step from the one that gives each sequence
/// its first token, checks that the pool's blocks in use are exactly those of the positions
/// the sequences' caches keep, a finished sequence's too (its slot keeps them for the next):
/// the prompt and every generated token but the newest.
fn run(engine: &mut Engine<'_>, requests: Vec<Request>) -> (Vec<Outcome>, Vec<usize>) {
    let prompts: Vec<usize> = requests.iter().map(|r| r.prompt.len()).collect();
    let ids: Vec<SeqId> = requests
        .into_iter()
        .map(|r| engine.add(r).unwrap())
        .collect();
    let at = |id| ids.iter().position(|&i| i == id).unwrap();
    let mut outcomes = vec![Outcome::default(); ids.len()];
    let mut steps = Vec::new();
    while engine.is_busy() {
        let rows = engine.step(|event| match event {
            Event::Token { id, logprob, .. } => outcomes[at(id)].logprobs.push(logprob),
            Event::Finished { id, tokens, .. } => outcomes[at(id)].tokens = tokens,
            Event::Failed { error, .. } => panic!("{error}"),
            Event::Embedding { .. } => {}
        });
        steps.push(rows);
        if outcomes.iter().all(|o| !o.logprobs.is_empty()) {
            let kept = (0..ids.len()).map(|s| prompts[s] + outcomes[s].logprobs.len() - 1);
            let blocks: usize = kept.map(|len| len.div_ceil(BLOCK_TOKENS)).sum();
            let in_use = engine.kv_pool_stats().blocks_in_use;
            assert_eq!(in_use, blocks, "step {}: blocks in use", steps.len());
        }
    }
    (outcomes, steps)
}

/// `n` tokens that no call with another `seed` starts with.
fn tokens(seed: u32, n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| 3 + (seed * 131 + i * 17) % 200)
        .collect()
}

#[test]
fn a_request_decodes_the_same_alone_and_beside_eight_others() {
    let loaded = loaded(MODEL);
    let sequences = 9;
    for seed in [None, Some(7)] {
        let make = |i: u32| {
            let seed = seed.map(|s| s + u64::from(i));
            common::logprob_request(&loaded, tokens(i, 5 + i as usize), seed, 12)
        };
        let mut alone = Outcome::default();
        with_engine(
            &loaded,
            None,
            settings(sequences, Speculation::Off),
            |e, _| {
                alone = run(e, vec![make(0)]).0.remove(0);
            },
        );
        with_engine(
            &loaded,
            None,
            settings(sequences, Speculation::Off),
            |e, _| {
                let (outcomes, steps) = run(e, (0..9).map(make).collect());
                assert!(
                    steps.contains(&9),
                    "{seed:?}: no pass decoded all nine: {steps:?}"
                );
                assert_eq!(
                    outcomes[0], alone,
                    "{seed:?}: the batch changed the request"
                );
            },
        );
    }
}

/// Runs each of `requests` alone on a plain engine, then all of them together on one that
/// speculates as `speculation` says (with `draft`): the same outcomes, bit for bit. Returns
/// the speculating engine's counts.
fn check_speculation(
    loaded: &LoadedModel,
    draft: Option<&LoadedModel>,
    speculation: Speculation,
    requests: impl Fn() -> Vec<Request>,
) -> SpeculationStats {
    let count = requests().len();
    let mut plain = Vec::new();
    for request in requests() {
        with_engine(loaded, None, settings(count, Speculation::Off), |e, _| {
            plain.push(run(e, vec![request]).0.remove(0));
            assert_eq!(e.speculation_stats(), SpeculationStats::default());
        });
    }
    let mut stats = SpeculationStats::default();
    with_engine(loaded, draft, settings(count, speculation), |e, blocks| {
        let free = lock(blocks).free();
        let (fast, steps) = run(e, requests());
        assert_eq!(fast, plain, "speculating changed the output");
        assert!(steps.iter().all(|&rows| rows <= MAX_BATCH), "{steps:?}");
        e.clear_prefix_cache();
        assert_eq!(lock(blocks).free(), free, "every block is free again");
        stats = e.speculation_stats();
    });
    stats
}

#[test]
fn prompt_lookup_on_the_gpu_gives_the_output_of_plain_decoding() {
    let loaded = loaded(LOOKUP_MODEL);
    let mut guesses = Guesses::default();
    for case in 0..2 {
        for seed in [None, Some(u64::from(case) + 5)] {
            let requests = || vec![request(&loaded, repetitive_prompt(case), seed, 24)];
            let stats = check_speculation(&loaded, None, LOOKUP, requests);
            guesses.add_stats(stats);
        }
    }
    let total = guesses.total();
    assert!(total.accepted_tokens > 0, "no guess confirmed: {total:?}");
}

#[test]
fn speculating_beside_other_sequences_on_the_gpu_changes_no_ones_tokens() {
    let loaded = loaded(LOOKUP_MODEL);
    let requests = || {
        let mut opted_out = request(&loaded, repetitive_prompt(9), Some(3), 16);
        opted_out.speculate = false;
        vec![
            request(&loaded, repetitive_prompt(1), None, 24),
            request(&loaded, repetitive_prompt(2), Some(11), 20),
            opted_out,
        ]
    };
    let stats = check_speculation(&loaded, None, LOOKUP, requests);
    assert!(stats.accepted_tokens > 0, "{stats:?}");
}

#[test]
fn a_draft_model_guessing_for_the_gpu_changes_nothing() {
    let (loaded, draft) = (loaded(MODEL), loaded(DRAFT));
    let speculation = Speculation::DraftModel { draft_max: 4 };
    let mut guesses = Guesses::default();
    for seed in [None, Some(9)] {
        let requests = || vec![request(&loaded, tokens(3, 9), seed, 20)];
        let stats = check_speculation(&loaded, Some(&draft), speculation, requests);
        guesses.add_stats(stats);
    }
    let total = guesses.total();
    assert!(total.accepted_tokens > 0, "no guess confirmed: {total:?}");
}
