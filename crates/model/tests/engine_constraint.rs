//! Constrained decoding in the engine: a request's constraint masks every logits row before
//! sampling, so the sequence generates only what it allows, and ends when it is complete.

mod common;

use std::sync::Arc;

use common::fixtures;
use rinfer_model::engine::{ConstraintMatcher, TokenConstraint};
use rinfer_model::{DeviceRequest, Engine, EngineSettings, FinishReason, LoadedModel, Request};

/// Allows exactly `tokens`, in order, then is complete.
#[derive(Debug)]
struct Exactly(Vec<u32>);

struct ExactlyMatcher {
    tokens: Vec<u32>,
    done: usize,
}

impl TokenConstraint for Exactly {
    fn start(&self) -> Box<dyn ConstraintMatcher> {
        Box::new(ExactlyMatcher {
            tokens: self.0.clone(),
            done: 0,
        })
    }
}

impl ConstraintMatcher for ExactlyMatcher {
    fn mask(&mut self, logits: &mut [f32]) {
        let allowed = self.tokens[self.done] as usize;
        for (id, l) in logits.iter_mut().enumerate() {
            if id != allowed {
                *l = f32::NEG_INFINITY;
            }
        }
    }

    fn accept(&mut self, token: u32) {
        assert_eq!(token, self.tokens[self.done], "a masked token was sampled");
        self.done += 1;
    }

    fn is_complete(&self) -> bool {
        self.done == self.tokens.len()
    }
}

#[test]
fn a_constrained_sequence_generates_only_what_its_constraint_allows_and_ends_with_it() {
    let loaded = LoadedModel::open(fixtures().join("models/gemma3-tiny-q4_k_m.gguf")).unwrap();
    let mut engine = Engine::new(&loaded, EngineSettings::single(256), DeviceRequest::Cpu).unwrap();
    let prompt = loaded.tokenizer.encode("Once upon", true, false).unwrap();
    let wanted = vec![300, 301, 302, 7];
    for temperature in [0.0, 1.5] {
        let mut request = Request::new(prompt.clone(), 50);
        request.sampling.temperature = temperature;
        request.constraint = Some(Arc::new(Exactly(wanted.clone())) as Arc<dyn TokenConstraint>);
        let generation = engine.generate(request, |_| {}).unwrap();
        assert_eq!(generation.tokens, wanted, "temperature {temperature}");
        assert_eq!(generation.finish, FinishReason::EndOfGeneration);
    }
    // Without one, the same request samples freely.
    let free = engine.generate(Request::new(prompt, 4), |_| {}).unwrap();
    assert_ne!(free.tokens, wanted);
}

/// Allows any token, and fails (a limit of its engine) after `after` tokens.
#[derive(Debug)]
struct FailsAfter(usize);

struct FailsAfterMatcher {
    left: usize,
}

impl TokenConstraint for FailsAfter {
    fn start(&self) -> Box<dyn ConstraintMatcher> {
        Box::new(FailsAfterMatcher { left: self.0 })
    }
}

impl ConstraintMatcher for FailsAfterMatcher {
    fn mask(&mut self, _logits: &mut [f32]) {}

    fn accept(&mut self, _token: u32) {
        self.left = self.left.saturating_sub(1);
    }

    fn is_complete(&self) -> bool {
        false
    }

    fn failure(&self) -> Option<&str> {
        (self.left == 0).then_some("the grammar engine gave up")
    }
}

#[test]
fn a_constraint_that_fails_fails_its_sequence_instead_of_finishing_it() {
    let loaded = LoadedModel::open(fixtures().join("models/gemma3-tiny-q4_k_m.gguf")).unwrap();
    let mut engine = Engine::new(&loaded, EngineSettings::single(256), DeviceRequest::Cpu).unwrap();
    let prompt = loaded.tokenizer.encode("Once upon", true, false).unwrap();
    let mut request = Request::new(prompt.clone(), 50);
    request.constraint = Some(Arc::new(FailsAfter(3)) as Arc<dyn TokenConstraint>);
    let error = engine.generate(request, |_| {}).unwrap_err();
    assert!(
        error.to_string().contains("the grammar engine gave up"),
        "{error}"
    );
    // The engine goes on serving.
    let free = engine.generate(Request::new(prompt, 4), |_| {}).unwrap();
    assert_eq!(free.tokens.len(), 4);
}
