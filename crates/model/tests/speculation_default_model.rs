//! Prompt-lookup speculation on the default model, asked to repeat a given text: the same
//! tokens and text as plain decoding, greedy and seeded, and guesses confirmed along the way.

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
