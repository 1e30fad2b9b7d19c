//! Paths shared by the model crate's integration tests.

#![allow(dead_code)]

pub mod reference;

use std::path::PathBuf;

use rinfer_cuda::LoadOptions;
use rinfer_cuda::kernels::KvElement;
use rinfer_formats::gguf::GgufFile;
use rinfer_model::{
    DeviceRequest, Engine, EngineSettings, Event, KvCache, KvType, LoadedModel, Logits, Model,
    ModelConfig, Request, SamplingParams, Scratch, SeqId, TokenLogprob,
};

#[path = "../../../../tests/support/default_model.rs"]
mod default_model;

// Only the tests that need the default model use it.
#[allow(unused_imports)]
pub use default_model::default_model;

/// The repository's `tests/fixtures`.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// The tiny fixture models with llama.cpp references, one per architecture and tensor-type mix.
pub const FIXTURE_MODELS: [&str; 17] = [
    "deepseek2-tiny-q8_0",
    "gemma3-tiny-f32",
    "gemma3-tiny-q4_k_m",
    "gemma4-tiny-q8_0",
    "glm4moe-tiny-q8_0",
    "gpt-oss-tiny-mxfp4",
    "gpt2-tiny-q2_k",
    "lfm2-tiny-q8_0",
    "llama-tiny-q4_k",
    "llama-tiny-q8_0",
    "mixtral-tiny-q8_0",
    "phi2-tiny-q3_k_m",
    "qwen2-tiny-q4_k_m",
    "qwen3-tiny-q5_k_m",
    "qwen3moe-tiny-q4_k_m",
    "qwen35-tiny-q8_0",
    "qwen35moe-tiny-q8_0",
];

/// The KV cache types `config`'s model can keep its rows in (a q8_0 row must be whole blocks
/// per head: latent attention's rows of the tiny deepseek2 are 48 values).
pub fn kv_types(config: &ModelConfig) -> impl Iterator<Item = KvType> + '_ {
    KvType::ALL
        .into_iter()
        .filter(|&t| KvCache::check_type(config, t).is_ok())
}

/// Settings for `sequences` sequences of up to 512 positions with f32 keys and values, as the
/// embedding and ranking references were computed.
pub fn f32_kv_settings(sequences: usize) -> EngineSettings {
    EngineSettings {
        kv_type: Some(KvType::F32),
        ..EngineSettings::parallel(sequences, 512)
    }
}

/// Embeds (or, for a ranker, scores) `prompts` one at a time with an engine of `settings(1)`,
/// then all in one batch with an engine of `settings(prompts.len())`; asserts that the batch
/// changed no bit of any vector (`name` says whose) and returns the batched vectors.
pub fn embed_alone_and_batched(
    loaded: &LoadedModel,
    settings: impl Fn(usize) -> EngineSettings,
    prompts: &[Vec<u32>],
    name: &str,
) -> Vec<Vec<f32>> {
    let mut engine = Engine::new(loaded, settings(1), DeviceRequest::Cpu).unwrap();
    let alone: Vec<Vec<f32>> = prompts
        .iter()
        .flat_map(|prompt| engine.embed(std::slice::from_ref(prompt)).unwrap())
        .collect();
    let mut engine = Engine::new(loaded, settings(prompts.len()), DeviceRequest::Cpu).unwrap();
    let batched = engine.embed(prompts).unwrap();
    assert_eq!(alone, batched, "{name}: a batch changed a vector");
    batched
}

/// A request for `max_tokens` tokens of `prompt`, greedy (`seed` none) or seeded, that never
/// ends early (every end-of-generation token masked) and reports 3 log-probabilities a token:
/// runs of it compare bit for bit.
pub fn logprob_request(
    loaded: &LoadedModel,
    prompt: Vec<u32>,
    seed: Option<u64>,
    max_tokens: usize,
) -> Request {
    let sampling = match seed {
        None => SamplingParams::greedy(),
        Some(seed) => SamplingParams {
            seed,
            ..SamplingParams::default()
        },
    };
    unending_request(loaded, prompt, sampling, max_tokens, 3)
}

/// A request for `max_tokens` tokens of `prompt` sampled by `sampling` that never ends early
/// (every end-of-generation token of `loaded` masked) and reports `logprobs` log-probabilities
/// a token.
pub fn unending_request(
    loaded: &LoadedModel,
    prompt: Vec<u32>,
    sampling: SamplingParams,
    max_tokens: usize,
    logprobs: usize,
) -> Request {
    let sampling = without_end_of_generation(loaded, sampling);
    let mut request = Request::new(prompt, max_tokens).with_sampling(sampling);
    request.logprobs = Some(logprobs);
    request
}

/// `sampling` with every end-of-generation token of `loaded` masked, so that a generation runs
/// to its limit and needs no stopping rule.
pub fn without_end_of_generation(
    loaded: &LoadedModel,
    mut sampling: SamplingParams,
) -> SamplingParams {
    let eog = loaded.tokenizer.eog_ids().iter();
    sampling
        .logit_bias
        .extend(eog.map(|&id| (id, f32::NEG_INFINITY)));
    sampling
}

/// The load options of a GPU (emulated, or only planned for): `sequences` sequences of up to
/// `context` positions, run in steps of up to `max_batch` rows, with f16 keys and values, the
/// last row's logits only, and no blocks kept for a prefix cache.
pub fn load_options(context: usize, max_batch: usize, sequences: usize) -> LoadOptions {
    LoadOptions {
        ordinal: 0,
        context,
        max_batch,
        all_logits: false,
        sequences,
        nvrtc: Default::default(),
        kv: KvElement::F16,
        guesses: 0,
        cached_blocks: 0,
    }
}

/// The file of a fixture model.
pub fn fixture_file(name: &str) -> GgufFile {
    GgufFile::open(fixtures().join(format!("models/{name}.gguf"))).unwrap()
}

/// A fixture model.
pub fn fixture_model(name: &str) -> Model {
    Model::open_gguf(fixtures().join(format!("models/{name}.gguf")))
        .unwrap()
        .0
}

/// The token ids of every case of a model's reference file.
pub fn reference_prompts(name: &str) -> Vec<Vec<u32>> {
    let path = fixtures().join(format!("refs/{name}.json"));
    let refs: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    refs["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(case_tokens)
        .collect()
}

/// The token ids of one case of a reference file.
pub fn case_tokens(case: &serde_json::Value) -> Vec<u32> {
    case["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect()
}

/// Logits of every position of `tokens`, evaluated in one batch.
pub fn batched_logits(model: &Model, tokens: &[u32]) -> Vec<f32> {
    batched_logits_with(model, KvType::F32, tokens)
}

/// Logits of every position of `tokens`, evaluated in one batch with a `kv_type` cache.
pub fn batched_logits_with(model: &Model, kv_type: KvType, tokens: &[u32]) -> Vec<f32> {
    let n = tokens.len();
    let mut cache = KvCache::with_type(&model.config, kv_type, n, n);
    let mut scratch = Scratch::new(&model.config, n);
    model
        .forward(tokens, &mut cache, &mut scratch, Logits::All)
        .unwrap()
        .to_vec()
}

/// Bit patterns, so that comparisons are exact (and NaN-safe).
pub fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// Steps `engine` until sequence `id` ends: its tokens, their log-probabilities and the prompt
/// tokens it reused.
pub fn finish(engine: &mut Engine<'_>, id: SeqId) -> (Vec<u32>, Vec<Option<TokenLogprob>>, usize) {
    let mut logprobs = Vec::new();
    let mut done = None;
    while done.is_none() {
        assert!(engine.is_busy(), "{id:?} never finished");
        engine.step(|event| match seq_event(&[id], event) {
            Some(SeqEvent::Token { logprob, .. }) => logprobs.push(logprob),
            Some(SeqEvent::Finished { tokens, cached, .. }) => done = Some((tokens, cached)),
            None => {}
        });
    }
    let (tokens, cached) = done.unwrap();
    (tokens, logprobs, cached)
}

/// What an engine event tells of one of some sequences, `at` its index among them.
pub enum SeqEvent {
    /// A token, with its log-probability when the request asked for them.
    Token {
        at: usize,
        logprob: Option<TokenLogprob>,
    },
    /// The end: every generated token, and the prompt tokens reused.
    Finished {
        at: usize,
        tokens: Vec<u32>,
        cached: usize,
    },
}

/// What `event` tells of the sequences `ids` (`None`: it is of another sequence, or an
/// embedding); a failed sequence panics.
pub fn seq_event(ids: &[SeqId], event: Event) -> Option<SeqEvent> {
    let at = |id: SeqId| ids.iter().position(|&i| i == id);
    match event {
        Event::Token { id, logprob, .. } => Some(SeqEvent::Token {
            at: at(id)?,
            logprob,
        }),
        Event::Finished {
            id,
            tokens,
            timings,
            ..
        } => Some(SeqEvent::Finished {
            at: at(id)?,
            tokens,
            cached: timings.cached_tokens,
        }),
        Event::Failed { error, .. } => panic!("{error}"),
        Event::Embedding { .. } => None,
    }
}
