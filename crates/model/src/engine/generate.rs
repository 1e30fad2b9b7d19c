//! Running one request to its end ([`Engine::generate`], for `run`, `chat` and library users)
//! and scoring a token sequence ([`Engine::score`]).

use super::{Engine, Event, Generation, Request};
use crate::error::ModelError;

impl Engine<'_> {
    /// Runs `request` to its end, calling `on_text` with each piece of text as soon as it is
    /// safe to show; the other running sequences advance too (their events are dropped).
    pub fn generate(
        &mut self,
        request: Request,
        mut on_text: impl FnMut(&str),
    ) -> Result<Generation, ModelError> {
        let id = self.add(request)?;
        let mut text = String::new();
        let mut result = None;
        while result.is_none() {
            self.step(|event| match event {
                Event::Token { id: e, text: t, .. } if e == id => {
                    on_text(&t);
                    text.push_str(&t);
                }
                Event::Finished {
                    id: e,
                    reason,
                    tokens,
                    timings,
                } if e == id => {
                    result = Some(Ok((reason, tokens, timings)));
                }
                Event::Failed { id: e, error } if e == id => {
                    result = Some(Err(error));
                }
                _ => {}
            });
        }
        let (finish, tokens, timings) = result.expect("the loop ends with a result")?;
        Ok(Generation {
            tokens,
            text,
            finish,
            timings,
        })
    }

    /// The logits of every position of `tokens`, `[n, vocab]`, from an empty cache (needs
    /// [`EngineSettings::score`](super::EngineSettings::score) and a free slot).
    pub fn score(&mut self, tokens: &[u32]) -> Result<Vec<f32>, ModelError> {
        let Some(&slot) = self.free.last() else {
            return Err(ModelError::EngineFull(self.settings.max_sequences));
        };
        let cache = &mut self.caches[slot];
        let result = self.executor.score(&self.loaded.model, tokens, cache);
        cache.clear();
        self.histories[slot].clear();
        result
    }
}
