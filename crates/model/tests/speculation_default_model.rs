//! Prompt-lookup speculation on the default model, asked to repeat a given text or to carry on
//! an edit of one: the same tokens and text as plain decoding, greedy and seeded, and guesses
//! confirmed along the way.

mod common;

use common::default_model;
use rinfer_model::chat_template::{ChatMessage, resolve_with};
use rinfer_model::{
    DeviceRequest, Engine, EngineSettings, Generation, LoadedModel, Request, SamplingParams,
    Speculation,
};

const PASSAGE: &str = "The river rises in the northern hills, runs south through three \
    market towns and a forest of old oaks, and reaches the sea at a harbour that was built \
    by the Romans and rebuilt after the great storm of 1703.";

fn settings(speculation: Speculation) -> EngineSettings {
    EngineSettings {
        speculation,
        prefix_cache_bytes: 0,
        ..EngineSettings::single(512)
    }
}

fn prompt(loaded: &LoadedModel) -> Vec<u32> {
    let ask = format!("Repeat this text exactly, word for word:\n\n{PASSAGE}");
    // Gemma's built-in format, recognised from the vocabulary.
    resolve_with(None, None, None, &loaded.tokenizer)
        .unwrap()
        .template
        .render_tokens(&[ChatMessage::user(&ask)], true, &loaded.tokenizer)
        .unwrap()
}

fn generate(
    loaded: &LoadedModel,
    speculation: Speculation,
    sampling: SamplingParams,
) -> Generation {
    let mut engine = Engine::new(loaded, settings(speculation), DeviceRequest::Cpu).unwrap();
    let request = Request::new(prompt(loaded), 64).with_sampling(sampling);
    engine.generate(request, |_| {}).unwrap()
}

#[test]
fn repeating_a_text_with_prompt_lookup_gives_the_tokens_of_plain_decoding_and_accepts_guesses() {
    let loaded = LoadedModel::open(default_model()).unwrap();
    let lookup = Speculation::PromptLookup { draft_max: 8 };
    let seeded = SamplingParams {
        seed: 42,
        ..SamplingParams::default()
    };
    for sampling in [SamplingParams::greedy(), seeded] {
        let plain = generate(&loaded, Speculation::Off, sampling.clone());
        let fast = generate(&loaded, lookup, sampling.clone());
        assert_eq!(fast.tokens, plain.tokens, "{sampling:?}");
        assert_eq!(fast.text, plain.text);
        assert!(
            fast.timings.accepted_tokens > 0,
            "no guess confirmed while repeating the text: {:?}",
            fast.timings
        );
    }
}

/// A list and the start of its edited copy (every `true` made `false`), which the model carries
/// on, diverging from the list it copies at each change.
const BEGUN_EDIT: &str = "```json\n[\n  { \"id\": 1, \"name\": \"lamp\", \"in_stock\": true, \"shelf\": \"A3\" },\n  \
    { \"id\": 2, \"name\": \"desk\", \"in_stock\": true, \"shelf\": \"B1\" },\n  \
    { \"id\": 3, \"name\": \"chair\", \"in_stock\": false, \"shelf\": \"B2\" },\n  \
    { \"id\": 4, \"name\": \"clock\", \"in_stock\": true, \"shelf\": \"C1\" },\n  \
    { \"id\": 5, \"name\": \"shelf\", \"in_stock\": true, \"shelf\": \"C2\" }\n]\n```\n\n\
    The same with every \"in_stock\" set to false:\n\n```json\n[\n  \
    { \"id\": 1, \"name\": \"lamp\", \"in_stock\": false";

#[test]
fn carrying_on_an_edit_with_prompt_lookup_gives_the_tokens_of_plain_decoding() {
    let loaded = LoadedModel::open(default_model()).unwrap();
    let prompt = loaded.tokenizer.encode(BEGUN_EDIT, true, false).unwrap();
    let run = |speculation| {
        let mut engine = Engine::new(&loaded, settings(speculation), DeviceRequest::Cpu).unwrap();
        let request = Request::new(prompt.clone(), 96).with_sampling(SamplingParams::greedy());
        engine.generate(request, |_| {}).unwrap()
    };
    let plain = run(Speculation::Off);
    let fast = run(Speculation::PromptLookup { draft_max: 8 });
    assert_eq!(fast.tokens, plain.tokens);
    let t = fast.timings;
    let decoded = t.decoded_tokens();
    eprintln!(
        "{decoded} tokens in {} verification steps, {} of {} guesses accepted",
        decoded - t.accepted_tokens,
        t.accepted_tokens,
        t.drafted_tokens
    );
    assert!(
        t.accepted_tokens * 2 > decoded,
        "most tokens of the edit are guessed: {t:?}"
    );
}
