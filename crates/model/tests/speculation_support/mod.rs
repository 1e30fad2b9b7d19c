//! What the speculation tests share: fixture models, engine settings whose sliding-window
//! rings wrap, requests that run to their ends, and a loop that collects every output.

#![allow(dead_code)]

use rinfer_model::{
    DeviceRequest, Engine, EngineSettings, Event, LoadedModel, Request, SamplingParams, SeqId,
    Speculation, SpeculationStats,
};

use crate::common::{fixtures, unending_request};

/// Prompt lookup with up to 6 guesses a step.
pub const LOOKUP: Speculation = Speculation::PromptLookup { draft_max: 6 };

/// An engine on the CPU.
pub fn engine(loaded: &LoadedModel, settings: EngineSettings) -> Engine<'_> {
    Engine::new(loaded, settings, DeviceRequest::Cpu).unwrap()
}

/// A prompt that repeats itself, so its continuation is likely to repeat too.
pub fn repetitive_prompt(seed: u32) -> Vec<u32> {
    let phrase: Vec<u32> = (0..7).map(|i| 3 + (seed * 131 + i * 17) % 400).collect();
    [phrase.as_slice(), &phrase, &phrase[..4]].concat()
}

pub fn loaded(name: &str) -> LoadedModel {
    LoadedModel::open(fixtures().join(format!("models/{name}.gguf"))).unwrap()
}

/// Batches of 8 rows, so the sliding-window rings (16 + 8 slots) wrap within the generation.
pub fn settings(sequences: usize, speculation: Speculation) -> EngineSettings {
    EngineSettings {
        max_batch: 8.max(sequences),
        speculation,
        prefix_cache_bytes: 0,
        ..EngineSettings::parallel(sequences, 192)
    }
}

/// Greedy (end of generation masked, so it runs to the end) or seeded sampling with a repeat
/// penalty, with log-probabilities.
pub fn request(loaded: &LoadedModel, prompt: Vec<u32>, seed: Option<u64>, n: usize) -> Request {
    let sampling = match seed {
        None => SamplingParams::greedy(),
        Some(seed) => SamplingParams {
            seed,
            temperature: 0.7,
            repeat_penalty: 1.05,
            ..SamplingParams::default()
        },
    };
    unending_request(loaded, prompt, sampling, n, 2)
}

/// Three requests to run side by side: greedy on `prompt(1)`, seeded on `prompt(2)`, and seeded
/// on `prompt(9)` but opted out of speculation; `max_tokens` tokens each, in that order.
pub fn mixed_requests(
    loaded: &LoadedModel,
    prompt: impl Fn(u32) -> Vec<u32>,
    max_tokens: [usize; 3],
) -> Vec<Request> {
    let mut opted_out = request(loaded, prompt(9), Some(3), max_tokens[2]);
    opted_out.speculate = false;
    vec![
        request(loaded, prompt(1), None, max_tokens[0]),
        request(loaded, prompt(2), Some(11), max_tokens[1]),
        opted_out,
    ]
}

/// Tokens, text and log-probabilities of one generation.
pub type Output = (Vec<u32>, String, Vec<f32>);

/// Runs `requests` together to their ends; their outputs in order.
pub fn run_all(engine: &mut Engine<'_>, requests: Vec<Request>) -> Vec<Output> {
    let ids: Vec<SeqId> = requests
        .into_iter()
        .map(|r| engine.add(r).unwrap())
        .collect();
    let mut outputs: Vec<Output> = vec![Default::default(); ids.len()];
    let at = |id| ids.iter().position(|&i| i == id).unwrap();
    let max_batch = engine.settings().max_batch;
    while engine.is_busy() {
        let rows = engine.step(|event| match event {
            Event::Token {
                id, text, logprob, ..
            } => {
                let out = &mut outputs[at(id)];
                out.1.push_str(&text);
                out.2.push(logprob.unwrap().logprob);
            }
            Event::Finished { id, tokens, .. } => outputs[at(id)].0 = tokens,
            Event::Failed { error, .. } => panic!("{error}"),
            Event::Embedding { .. } => {}
        });
        assert!(rows <= max_batch, "guesses never overfill the batch");
    }
    outputs
}

pub fn generate_one(engine: &mut Engine<'_>, request: Request) -> Output {
    run_all(engine, vec![request]).pop().unwrap()
}

/// Asserts that `fast` (speculating) gives `plain`'s output for each of `prompts`, greedy and
/// seeded (with its index plus 5), `max_tokens` each; `label` names the model in failures.
pub fn assert_outputs_of_plain_decoding(
    label: &str,
    loaded: &LoadedModel,
    (plain, fast): (&mut Engine<'_>, &mut Engine<'_>),
    prompts: &[Vec<u32>],
    max_tokens: usize,
) {
    for (case, prompt) in prompts.iter().enumerate() {
        for seed in [None, Some(case as u64 + 5)] {
            let make = || request(loaded, prompt.clone(), seed, max_tokens);
            let expected = generate_one(plain, make());
            let got = generate_one(fast, make());
            assert_eq!(got, expected, "{label}, case {case}, seed {seed:?}");
        }
    }
}

/// Asserts that prompt lookup gives plain decoding's output on each fixture of `models` for the
/// first `prompts` repetitive prompts, `max_tokens` each (see
/// [`assert_outputs_of_plain_decoding`]), that plain decoding guesses nothing, and that of all
/// the guesses some were confirmed and some rejected.
pub fn assert_lookup_gives_plain_outputs(models: &[&str], prompts: u32, max_tokens: usize) {
    let mut guesses = Guesses::default();
    let prompts: Vec<_> = (0..prompts).map(repetitive_prompt).collect();
    for &name in models {
        let loaded = loaded(name);
        let mut plain = engine(&loaded, settings(1, Speculation::Off));
        let mut fast = engine(&loaded, settings(1, LOOKUP));
        let engines = (&mut plain, &mut fast);
        assert_outputs_of_plain_decoding(name, &loaded, engines, &prompts, max_tokens);
        let plain_guesses = plain.speculation_stats();
        assert_eq!(plain_guesses, SpeculationStats::default(), "{name}");
        guesses.add(&fast);
    }
    guesses.assert_some_confirmed_and_some_rejected();
}

/// The guesses of several speculating engines, added up.
#[derive(Debug, Default)]
pub struct Guesses(SpeculationStats);

impl Guesses {
    pub fn add(&mut self, engine: &Engine<'_>) {
        self.add_stats(engine.speculation_stats());
    }

    pub fn add_stats(&mut self, stats: SpeculationStats) {
        self.0.drafted_tokens += stats.drafted_tokens;
        self.0.accepted_tokens += stats.accepted_tokens;
    }

    pub fn total(&self) -> SpeculationStats {
        self.0
    }

    /// Asserts that some guesses were confirmed and some rejected (so the rollback ran).
    pub fn assert_some_confirmed_and_some_rejected(&self) {
        let total = &self.0;
        assert!(total.accepted_tokens > 0, "no guess confirmed: {total:?}");
        assert!(
            total.accepted_tokens < total.drafted_tokens,
            "no guess was rejected, so no rollback was tested: {total:?}"
        );
    }
}
