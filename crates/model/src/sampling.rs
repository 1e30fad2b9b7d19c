//! Choosing the next token from logits: penalties, bias, greedy or filtered random sampling.
//!
//! The order follows llama.cpp's default chain: logit bias, repetition/frequency/presence
//! penalties, then greedy argmax, or top-k → top-p → min-p → temperature → a seeded draw.
//! All buffers are sized once; sampling a token allocates nothing.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How to sample. The defaults are llama.cpp's.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    /// Softmax temperature; `<= 0` means greedy.
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens (0: all).
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches `top_p` (1: all).
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` times the most likely one (0: none).
    pub min_p: f32,
    /// Divide positive logits (multiply negative ones) of recent tokens by this (1: off).
    pub repeat_penalty: f32,
    /// Subtract `count × frequency_penalty` from recent tokens' logits.
    pub frequency_penalty: f32,
    /// Subtract `presence_penalty` from the logits of tokens seen recently.
    pub presence_penalty: f32,
    /// How many recent tokens the penalties look at.
    pub penalty_last_n: usize,
    /// Added to the logits of these tokens before anything else.
    pub logit_bias: Vec<(u32, f32)>,
    /// Seed of the random draw: the same seed gives the same text.
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            penalty_last_n: 64,
            logit_bias: Vec::new(),
            seed: 0,
        }
    }
}

/// A sampling parameter outside its range, named as the HTTP API names it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("`{field}` = {value} is outside {range}")]
pub struct InvalidSamplingParam {
    /// The parameter (`temperature`, `top_p`, `min_p`, `repeat_penalty`, `frequency_penalty`,
    /// `presence_penalty`, `logit_bias`).
    pub field: &'static str,
    /// The value given.
    pub value: f32,
    /// The values accepted, in interval notation.
    pub range: &'static str,
}

impl SamplingParams {
    /// Always the most likely token.
    pub fn greedy() -> Self {
        Self {
            temperature: 0.0,
            ..Self::default()
        }
    }

    /// Checks every parameter against its range, the one rule the command line and the HTTP
    /// API share: NaN, a negative temperature or a `top_p` of 0 are refused, not clamped.
    ///
    /// ```
    /// use rinfer_model::SamplingParams;
    ///
    /// assert!(SamplingParams::default().validate().is_ok());
    /// let bad = SamplingParams { top_p: f32::NAN, ..SamplingParams::default() };
    /// assert_eq!(bad.validate().unwrap_err().field, "top_p");
    /// ```
    pub fn validate(&self) -> Result<(), InvalidSamplingParam> {
        let check = |field, value: f32, accepted: bool, range| match accepted {
            true => Ok(()),
            false => Err(InvalidSamplingParam {
                field,
                value,
                range,
            }),
        };
        let (t, p, m, r) = (
            self.temperature,
            self.top_p,
            self.min_p,
            self.repeat_penalty,
        );
        let (f, pr) = (self.frequency_penalty, self.presence_penalty);
        check("temperature", t, (0.0..=2.0).contains(&t), "[0, 2]")?;
        check("top_p", p, p > 0.0 && p <= 1.0, "(0, 1]")?;
        check("min_p", m, (0.0..=1.0).contains(&m), "[0, 1]")?;
        check("repeat_penalty", r, r > 0.0 && r.is_finite(), "(0, +inf)")?;
        check("frequency_penalty", f, (-2.0..=2.0).contains(&f), "[-2, 2]")?;
        check(
            "presence_penalty",
            pr,
            (-2.0..=2.0).contains(&pr),
            "[-2, 2]",
        )?;
        // A bias of -inf bans a token (`--ignore-eos` does that); NaN has no meaning.
        match self.logit_bias.iter().find(|(_, bias)| bias.is_nan()) {
            Some(&(_, value)) => Err(InvalidSamplingParam {
                field: "logit_bias",
                value,
                range: "[-inf, +inf]",
            }),
            None => Ok(()),
        }
    }
}

/// A sampler for one sequence: parameters, penalty history and a seeded generator.
pub struct Sampler {
    params: SamplingParams,
    rng: StdRng,
    /// Recent tokens, oldest first, at most `penalty_last_n`.
    history: std::collections::VecDeque<u32>,
    /// Occurrences of each token in `history`.
    counts: Vec<u32>,
    /// (token, logit or probability) candidates.
    candidates: Vec<(u32, f32)>,
}

impl Sampler {
    /// A sampler over a vocabulary of `vocab` tokens.
    pub fn new(params: SamplingParams, vocab: usize) -> Self {
        Self {
            rng: StdRng::seed_from_u64(params.seed),
            history: std::collections::VecDeque::with_capacity(params.penalty_last_n + 1),
            counts: vec![0; vocab],
            candidates: Vec::with_capacity(vocab),
            params,
        }
    }

    /// Records a token (prompt or generated) for the penalties.
    pub fn accept(&mut self, token: u32) {
        if self.params.penalty_last_n == 0 || token as usize >= self.counts.len() {
            return;
        }
        if self.history.len() == self.params.penalty_last_n
            && let Some(old) = self.history.pop_front()
        {
            self.counts[old as usize] -= 1;
        }
        self.history.push_back(token);
        self.counts[token as usize] += 1;
    }

    fn penalties_active(&self) -> bool {
        let p = &self.params;
        p.repeat_penalty != 1.0 || p.frequency_penalty != 0.0 || p.presence_penalty != 0.0
    }

    /// Chooses the next token from `logits` (which it may modify).
    pub fn sample(&mut self, logits: &mut [f32]) -> u32 {
        for &(id, bias) in &self.params.logit_bias {
            if let Some(l) = logits.get_mut(id as usize) {
                *l += bias;
            }
        }
        if self.penalties_active() {
            let p = &self.params;
            for &id in &self.history {
                let count = self.counts[id as usize];
                let l = &mut logits[id as usize];
                // Each distinct token is penalised once even if it repeats in the history;
                // mark it done by zeroing the count on this pass and restore below.
                if count == 0 {
                    continue;
                }
                *l = if *l > 0.0 {
                    *l / p.repeat_penalty
                } else {
                    *l * p.repeat_penalty
                };
                *l -= count as f32 * p.frequency_penalty + p.presence_penalty;
                self.counts[id as usize] = 0;
            }
            for &id in &self.history {
                self.counts[id as usize] += 1;
            }
        }
        if self.params.temperature <= 0.0 {
            return argmax(logits);
        }
        self.sample_filtered(logits)
    }

    fn sample_filtered(&mut self, logits: &[f32]) -> u32 {
        let p = &self.params;
        let c = &mut self.candidates;
        c.clear();
        c.extend(logits.iter().enumerate().map(|(i, &l)| (i as u32, l)));
        let by_logit = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if p.top_k > 0 && p.top_k < c.len() {
            c.select_nth_unstable_by(p.top_k - 1, by_logit);
            c.truncate(p.top_k);
        }
        c.sort_unstable_by(by_logit);
        // Probabilities at temperature 1 for the filters, as llama.cpp computes them.
        let max = c[0].1;
        let mut sum = 0.0;
        for (_, l) in c.iter_mut() {
            *l = (*l - max).exp();
            sum += *l;
        }
        c.iter_mut().for_each(|(_, prob)| *prob /= sum);
        if p.top_p < 1.0 {
            let mut cumulative = 0.0;
            let keep = c
                .iter()
                .position(|&(_, prob)| {
                    cumulative += prob;
                    cumulative >= p.top_p
                })
                .map_or(c.len(), |i| i + 1);
            c.truncate(keep.max(1));
        }
        if p.min_p > 0.0 {
            let threshold = c[0].1 * p.min_p;
            let keep = c.iter().take_while(|&&(_, prob)| prob >= threshold).count();
            c.truncate(keep.max(1));
        }
        // Temperature on the survivors: (p / p_max)^(1/T), renormalised by the draw below. The
        // most likely keeps weight 1, so a tiny temperature (1/T overflowing) is greedy.
        let inv_t = 1.0 / p.temperature;
        let top = c[0].1;
        let mut total = 0.0;
        for (_, prob) in c.iter_mut() {
            *prob = (*prob / top).powf(inv_t);
            total += *prob;
        }
        if !total.is_finite() {
            return c[0].0;
        }
        let mut target = self.rng.random::<f32>() * total;
        for &(id, prob) in c.iter() {
            if target < prob {
                return id;
            }
            target -= prob;
        }
        c[c.len() - 1].0
    }
}

/// The index of the largest logit; ties go to the lowest index.
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tiny_temperature_is_greedy() {
        for temperature in [1e-30, 1e-45, f32::MIN_POSITIVE] {
            let params = SamplingParams {
                temperature,
                ..SamplingParams::default()
            };
            let mut s = Sampler::new(params, 5);
            for _ in 0..20 {
                assert_eq!(
                    s.sample(&mut [0.0, 2.0, 3.0, 2.9, 1.0]),
                    2,
                    "T = {temperature}"
                );
            }
        }
    }

    #[test]
    fn greedy_takes_the_first_maximum() {
        let mut s = Sampler::new(SamplingParams::greedy(), 4);
        assert_eq!(s.sample(&mut [0.0, 3.0, 3.0, 1.0]), 1);
    }

    #[test]
    fn same_seed_same_tokens_different_seed_differs() {
        let logits: Vec<f32> = (0..50).map(|i| (i % 7) as f32 * 0.3).collect();
        let draw = |seed| {
            let params = SamplingParams {
                seed,
                top_k: 0,
                top_p: 1.0,
                min_p: 0.0,
                temperature: 1.5,
                ..SamplingParams::default()
            };
            let mut s = Sampler::new(params, 50);
            (0..64)
                .map(|_| s.sample(&mut logits.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn top_k_one_is_greedy() {
        let params = SamplingParams {
            top_k: 1,
            temperature: 5.0,
            ..SamplingParams::default()
        };
        let mut s = Sampler::new(params, 5);
        for _ in 0..20 {
            assert_eq!(s.sample(&mut [0.1, 0.2, 2.0, 1.9, 0.0]), 2);
        }
    }

    #[test]
    fn min_p_drops_unlikely_tokens() {
        let params = SamplingParams {
            top_k: 0,
            top_p: 1.0,
            min_p: 0.5,
            temperature: 1.0,
            ..SamplingParams::default()
        };
        let mut s = Sampler::new(params, 3);
        for _ in 0..50 {
            // exp(-3) is far below half of the top probability.
            assert_ne!(s.sample(&mut [0.0, 0.0, -3.0]), 2);
        }
    }

    #[test]
    fn penalties_and_bias_move_the_choice() {
        let params = SamplingParams {
            temperature: 0.0,
            presence_penalty: 2.0,
            ..SamplingParams::default()
        };
        let mut s = Sampler::new(params, 3);
        s.accept(0);
        assert_eq!(s.sample(&mut [1.0, 0.5, 0.0]), 1);
        let params = SamplingParams {
            temperature: 0.0,
            logit_bias: vec![(2, 10.0)],
            ..SamplingParams::default()
        };
        assert_eq!(Sampler::new(params, 3).sample(&mut [1.0, 0.5, 0.0]), 2);
    }
}
