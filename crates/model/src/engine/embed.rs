//! Embeddings through the engine: [`Engine::embed`] runs a list of prompts as embedding
//! requests, as many at once as the engine holds, each batched with whatever else runs;
//! [`normalize`] is the L2 normalisation llama.cpp's server applies by default
//! (`embd_normalize = 2`).

use std::collections::HashMap;

use super::{Engine, Event, Request};
use crate::error::ModelError;

impl Engine<'_> {
    /// The pooled embedding of each prompt (tokenized with the model's special tokens), not
    /// normalised, in the order given; the other running sequences advance too (their events
    /// are dropped). Fails with the first prompt that fails.
    pub fn embed(&mut self, prompts: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        for prompt in prompts {
            self.validate(&Request::embedding(prompt.clone()))?;
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; prompts.len()];
        let mut waiting = HashMap::new();
        let mut next = 0;
        let mut failure = None;
        while out.iter().any(Option::is_none) {
            while next < prompts.len() && self.has_room() {
                let id = self.add(Request::embedding(prompts[next].clone()))?;
                waiting.insert(id, next);
                next += 1;
            }
            self.step(|event| match event {
                Event::Embedding { id, embedding } => {
                    if let Some(&at) = waiting.get(&id) {
                        out[at] = Some(embedding);
                    }
                }
                Event::Failed { id, error } if waiting.contains_key(&id) => {
                    failure.get_or_insert(error);
                }
                _ => {}
            });
            if let Some(error) = failure {
                for &id in waiting.keys() {
                    self.cancel(id, |_| {});
                }
                return Err(error);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }
}

/// `v / ‖v‖₂`, the sum of squares in f64 as llama.cpp's `common_embd_normalize`; a zero
/// vector stays zero.
pub fn normalize(v: &mut [f32]) {
    let sum: f64 = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum();
    let scale = if sum > 0.0 { 1.0 / sum.sqrt() } else { 0.0 };
    for x in v {
        *x = (f64::from(*x) * scale) as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_gives_unit_length_and_keeps_zero() {
        let mut v = [3.0, 4.0];
        normalize(&mut v);
        assert_eq!(v, [0.6, 0.8]);
        let mut zero = [0.0; 3];
        normalize(&mut zero);
        assert_eq!(zero, [0.0; 3]);
    }
}
