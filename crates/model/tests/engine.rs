//! The engine that every front end drives: its tokens equal a plain greedy loop over the
//! forward pass, do not depend on what runs beside them, and its requests end for the reason
//! they should.

mod common;

use common::{FIXTURE_MODELS, fixtures, without_end_of_generation};
use rinfer_model::sampling::argmax;
use rinfer_model::{
    DeviceRequest, Engine, EngineSettings, Event, FinishReason, KvCache, KvType, LoadedModel,
    Logits, ModelError, Request, SamplingParams, Scratch, SeqId,
};

fn loaded(name: &str) -> LoadedModel {
    LoadedModel::open(fixtures().join(format!("models/{name}.gguf"))).unwrap()
}

fn engine(loaded: &LoadedModel, settings: EngineSettings) -> Engine<'_> {
    Engine::new(loaded, settings, DeviceRequest::Cpu).unwrap()
}

/// `n` greedy tokens after `prompt`, one plain forward call per token, with a `kv_type` cache.
fn greedy_reference(loaded: &LoadedModel, kv_type: KvType, prompt: &[u32], n: usize) -> Vec<u32> {
    let model = &loaded.model;
    let mut cache = KvCache::with_type(&model.config, kv_type, prompt.len() + n, 64);
    let mut scratch = Scratch::new(&model.config, 64);
    let mut out = Vec::new();
    let mut next = argmax(
        model
            .forward(prompt, &mut cache, &mut scratch, Logits::Last)
            .unwrap(),
    );
    while out.len() < n {
        out.push(next);
        next = argmax(
            model
                .forward(&[next], &mut cache, &mut scratch, Logits::Last)
                .unwrap(),
        );
    }
    out
}

/// Greedy with end-of-generation tokens masked, so the reference needs no stopping rule.
fn greedy_request(prompt: Vec<u32>, n: usize, loaded: &LoadedModel) -> Request {
    let sampling = without_end_of_generation(loaded, SamplingParams::greedy());
    Request::new(prompt, n).with_sampling(sampling)
}

fn prompt(loaded: &LoadedModel, text: &str) -> Vec<u32> {
    loaded.tokenizer.encode(text, true, false).unwrap()
}

#[test]
fn greedy_generation_equals_a_plain_forward_loop_on_every_fixture_and_kv_type() {
    for (name, kv_type) in FIXTURE_MODELS
        .into_iter()
        .flat_map(|name| KvType::ALL.map(|t| (name, t)))
    {
        let loaded = loaded(name);
        if KvCache::check_type(&loaded.model.config, kv_type).is_err() {
            continue;
        }
        let settings = EngineSettings {
            kv_type: Some(kv_type),
            ..EngineSettings::single(128)
        };
        let mut engine = engine(&loaded, settings);
        let prompt = prompt(&loaded, "The quick brown fox");
        let mut reference = greedy_reference(&loaded, kv_type, &prompt, 16);
        // The reference cannot mask end-of-generation tokens; cut where it would have stopped.
        if let Some(end) = reference.iter().position(|&t| loaded.tokenizer.is_eog(t)) {
            reference.truncate(end);
        }
        let out = engine
            .generate(
                greedy_request(prompt, reference.len().max(1), &loaded),
                |_| {},
            )
            .unwrap();
        if !reference.is_empty() {
            assert_eq!(out.tokens, reference, "{name} {kv_type}");
            assert_eq!(out.finish, FinishReason::Length, "{name} {kv_type}");
        }
    }
}

/// Runs every request to its end in one engine, all admitted at once; tokens by request.
fn run_together(engine: &mut Engine<'_>, requests: Vec<Request>) -> Vec<Vec<u32>> {
    let ids: Vec<SeqId> = requests
        .into_iter()
        .map(|r| engine.add(r).unwrap())
        .collect();
    let mut tokens = vec![Vec::new(); ids.len()];
    let mut finished = 0;
    while finished < ids.len() {
        engine.step(|event| match event {
            Event::Finished { id, tokens: t, .. } => {
                let i = ids.iter().position(|&x| x == id).unwrap();
                tokens[i] = t;
                finished += 1;
            }
            Event::Failed { error, .. } => panic!("{error}"),
            Event::Token { .. } | Event::Embedding { .. } => {}
        });
    }
    tokens
}

#[test]
fn a_sequence_gets_the_same_tokens_alone_or_beside_others() {
    let loaded = loaded("llama-tiny-q4_k");
    let texts = [
        "Hello world",
        "A much longer prompt that needs a few chunks",
        "x",
    ];
    let seeded = |seed| SamplingParams {
        temperature: 1.0,
        seed,
        ..SamplingParams::default()
    };
    let requests: Vec<Request> = texts
        .iter()
        .enumerate()
        .map(|(i, text)| Request::new(prompt(&loaded, text), 12).with_sampling(seeded(i as u64)))
        .collect();
    let alone: Vec<Vec<u32>> = requests
        .iter()
        .map(|r| {
            let mut e = engine(&loaded, EngineSettings::single(64));
            e.generate(r.clone(), |_| {}).unwrap().tokens
        })
        .collect();
    // Small prompt chunks, so prompts are prefilled while others decode.
    let settings = EngineSettings {
        prefill_chunk: 3,
        ..EngineSettings::parallel(3, 64)
    };
    let together = run_together(&mut engine(&loaded, settings), requests);
    assert_eq!(alone, together);
}

#[test]
fn a_stop_string_ends_the_text_before_it() {
    let loaded = loaded("gemma3-tiny-q4_k_m");
    let mut engine = engine(&loaded, EngineSettings::single(128));
    let prompt = prompt(&loaded, "Once upon a time");
    let free = engine
        .generate(greedy_request(prompt.clone(), 24, &loaded), |_| {})
        .unwrap();
    // A stop string taken from the middle of the free text.
    let chars: Vec<char> = free.text.chars().collect();
    let stop: String = chars[chars.len() / 2..chars.len() / 2 + 2].iter().collect();
    let cut = free.text.find(&stop).unwrap();
    let mut streamed = String::new();
    let stopped = engine
        .generate(
            greedy_request(prompt, 24, &loaded).with_stop(vec![stop.clone()]),
            |t| streamed.push_str(t),
        )
        .unwrap();
    assert_eq!(stopped.finish, FinishReason::StopString);
    assert_eq!(stopped.text, free.text[..cut]);
    assert_eq!(streamed, stopped.text);
}

#[test]
fn bad_requests_are_refused_before_any_work_and_leave_room() {
    let loaded = loaded("gemma3-tiny-q4_k_m");
    let mut engine = engine(&loaded, EngineSettings::single(16));
    let vocab = loaded.model.config.vocab_size as u32;
    assert!(matches!(
        engine.add(Request::new(vec![], 4)),
        Err(ModelError::InvalidRequest(_))
    ));
    assert!(matches!(
        engine.add(Request::new(vec![1, vocab], 4)),
        Err(ModelError::TokenOutOfRange { .. })
    ));
    assert!(matches!(
        engine.add(Request::new(vec![1; 10], 7)),
        Err(ModelError::ContextOverflow { .. })
    ));
    assert!(engine.has_room());
    engine.add(Request::new(vec![2, 3], 4)).unwrap();
    assert!(matches!(
        engine.add(Request::new(vec![2, 3], 4)),
        Err(ModelError::EngineFull(1))
    ));
}

#[test]
fn a_cancelled_sequence_frees_its_room_and_reports_why() {
    let loaded = loaded("gemma3-tiny-q4_k_m");
    let mut engine = engine(&loaded, EngineSettings::single(64));
    let id = engine
        .add(greedy_request(prompt(&loaded, "Hi"), 32, &loaded))
        .unwrap();
    engine.step(|_| {});
    let mut reason = None;
    assert!(engine.cancel(id, |event| {
        if let Event::Finished { reason: r, .. } = event {
            reason = Some(r);
        }
    }));
    assert_eq!(reason, Some(FinishReason::Cancelled));
    assert!(engine.has_room() && !engine.is_busy());
    assert!(!engine.cancel(id, |_| {}));
}

#[test]
fn a_cuda_request_without_a_gpu_is_an_error_and_auto_falls_back() {
    let loaded = loaded("gemma3-tiny-q4_k_m");
    let cuda = Engine::new(&loaded, EngineSettings::single(16), DeviceRequest::Cuda);
    assert!(matches!(cuda, Err(ModelError::Cuda(_))));
    let auto = Engine::new(&loaded, EngineSettings::single(16), DeviceRequest::Auto).unwrap();
    assert_eq!(auto.device().kind(), "cpu");
    assert!(auto.device().to_string().contains("no usable CUDA device"));
}
