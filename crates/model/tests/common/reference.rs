//! Checks of a fixture model against llama.cpp's references (`refs/<model>.json`): every
//! position's top-20 logits, the last position's full logits and the greedy continuation,
//! within a class of the fixtures README's tolerances.

use rinfer_model::{KvCache, LoadedModel, Logits, Model, Scratch};
use serde_json::Value;

use super::fixtures;

/// The fixtures README's tolerances (§3.4) for one class of model.
pub struct Tolerance {
    /// Largest top-20 logit difference allowed at `share` of the positions...
    pub per_position: f64,
    /// ...this share of them.
    pub share: f64,
    /// Largest difference at `max_abs_share` of the positions of a case...
    pub max_abs: f64,
    /// ...this share of them (1: everywhere).
    pub max_abs_share: f64,
    /// Largest mean difference over a case's top-20 logits.
    pub mean_abs: f64,
    /// Least share of positions, over every case, whose argmax equals llama.cpp's.
    pub argmax_share: f64,
    /// Greedy ids must match until the first step whose reference margin is below this.
    pub greedy_margin: f64,
    /// Least cosine of the full-vocabulary last-position logits (`None`: a routing flip at the
    /// last position may move it).
    pub min_cosine: Option<f64>,
}

/// The fixtures README's class for F32 weights of the new dense, hybrid and MoE architectures
/// (§3.4): the architecture itself, exactly, its greedy ids matched to the end.
pub const F32_NEW_ARCHS: Tolerance = Tolerance {
    per_position: 1e-3,
    share: 1.0,
    max_abs: 1e-3,
    max_abs_share: 1.0,
    mean_abs: 1e-4,
    argmax_share: 1.0,
    greedy_margin: 0.0,
    min_cosine: Some(0.99999),
};

/// The fixtures README's class for Q8_0 weights of the new dense, hybrid and MoE
/// architectures, activations quantized as ggml does (§3.4).
pub const Q8_0_NEW_ARCHS: Tolerance = Tolerance {
    per_position: 0.5,
    share: 0.99,
    max_abs: 1.5,
    max_abs_share: 1.0,
    mean_abs: 0.03,
    argmax_share: 0.96,
    greedy_margin: 1.0,
    min_cosine: Some(0.995),
};

pub fn refs(name: &str) -> Value {
    let path = fixtures().join(format!("refs/{name}.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

pub fn ids(v: &Value) -> Vec<u32> {
    let ids = v.as_array().unwrap().iter();
    ids.map(|t| t.as_u64().unwrap() as u32).collect()
}

pub fn argmax(row: &[f32]) -> usize {
    (0..row.len())
        .max_by(|&a, &b| row[a].total_cmp(&row[b]).then(b.cmp(&a)))
        .unwrap()
}

/// The log of the sum of `exp` over a row of logits (its softmax's normaliser).
pub fn log_sum_exp(row: &[f32]) -> f64 {
    let max = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
    max + row
        .iter()
        .map(|&l| (l as f64 - max).exp())
        .sum::<f64>()
        .ln()
}

pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
    let norm = |v: &[f32]| v.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

pub fn last_logits(case: &Value) -> Vec<f32> {
    let file = case["last_logits_file"].as_str().unwrap();
    let bytes = std::fs::read(fixtures().join(file)).unwrap();
    let values = bytes.chunks_exact(4);
    values
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// Every case of a fixture model's references: its prompt's tokens, logits and greedy
/// continuation, and the share of positions whose argmax is llama.cpp's over all cases.
pub fn check_model(name: &str, tol: &Tolerance) {
    let path = fixtures().join(format!("models/{name}.gguf"));
    let loaded = LoadedModel::open(path).unwrap();
    let model = &loaded.model;
    let (mut argmax_equal, mut positions) = (0, 0);
    for case in refs(name)["cases"].as_array().unwrap() {
        let prompt = case["prompt"].as_str().unwrap();
        let tokens = loaded.tokenizer.encode(prompt, true, false).unwrap();
        assert_eq!(
            tokens,
            ids(&case["tokens"]),
            "{name} {} tokens",
            case["case"]
        );
        argmax_equal += check_logits(model, name, case, tol);
        positions += tokens.len();
        check_greedy(model, name, case, tol.greedy_margin);
    }
    let share = argmax_equal as f64 / positions as f64;
    assert!(
        share >= tol.argmax_share,
        "{name}: argmax {argmax_equal}/{positions}"
    );
}

/// Every position's logits of one case against the reference's top-20; the count of
/// positions whose argmax is llama.cpp's.
pub fn check_logits(model: &Model, name: &str, case: &Value, tol: &Tolerance) -> usize {
    let tokens = ids(&case["tokens"]);
    let (n, vocab) = (tokens.len(), model.config.vocab_size);
    let mut cache = KvCache::new(&model.config, n, n);
    let mut scratch = Scratch::new(&model.config, n);
    let logits = model
        .forward(&tokens, &mut cache, &mut scratch, Logits::All)
        .unwrap();
    let (mut within, mut within_max, mut argmax_equal) = (0, 0, 0);
    let (mut sum, mut count, mut max) = (0f64, 0, 0f64);
    for i in 0..n {
        let row = &logits[i * vocab..(i + 1) * vocab];
        let want = case["top_logits"][i].as_array().unwrap();
        let mut worst = 0f64;
        for (id, want) in ids(&case["top_ids"][i]).iter().zip(want) {
            let diff = (row[*id as usize] as f64 - want.as_f64().unwrap()).abs();
            worst = worst.max(diff);
            sum += diff;
            count += 1;
        }
        max = max.max(worst);
        within += usize::from(worst <= tol.per_position);
        within_max += usize::from(worst <= tol.max_abs);
        argmax_equal += usize::from(argmax(row) as u64 == case["argmax"][i].as_u64().unwrap());
    }
    let label = format!("{name} {}", case["case"]);
    let mean = sum / count as f64;
    eprintln!(
        "{label}: {within}/{n} positions within {}, max {max:.2e}, mean {mean:.2e}, argmax {argmax_equal}/{n}",
        tol.per_position
    );
    assert!(
        within as f64 >= tol.share * n as f64,
        "{label}: {within}/{n} positions within"
    );
    assert!(
        within_max as f64 >= tol.max_abs_share * n as f64,
        "{label}: max abs {max}, {within_max}/{n} positions within {}",
        tol.max_abs
    );
    assert!(mean <= tol.mean_abs, "{label}: mean abs {mean}");
    if let Some(min_cosine) = tol.min_cosine {
        let cos = cosine(&logits[(n - 1) * vocab..], &last_logits(case));
        assert!(cos >= min_cosine, "{label}: last-position cosine {cos}");
    }
    argmax_equal
}

/// The greedy continuation of one case, token by token after the prompt, against llama.cpp's
/// up to its first step with a reference margin below `greedy_margin`; returns the steps
/// compared.
pub fn check_greedy(model: &Model, name: &str, case: &Value, greedy_margin: f64) -> usize {
    let (mut decoding, mut logits) = GreedyDecoding::prompt(model, case);
    let greedy = &case["greedy"];
    let want = ids(&greedy["ids"]);
    let margins = greedy["top2_margin"].as_array().unwrap();
    let mut compared = 0;
    for (step, (&want, margin)) in want.iter().zip(margins).enumerate() {
        if margin.as_f64().unwrap() < greedy_margin {
            break;
        }
        let got = argmax(&logits) as u32;
        assert_eq!(got, want, "{name} {} greedy step {step}", case["case"]);
        compared += 1;
        logits = decoding.step(got);
    }
    compared
}

/// A model decoding a case of a reference file token by token, with room for the case's
/// prompt and greedy steps.
pub struct GreedyDecoding<'m> {
    model: &'m Model,
    cache: KvCache,
    scratch: Scratch,
}

impl<'m> GreedyDecoding<'m> {
    /// `model` fed the prompt of `case`, and the logits of its last token.
    pub fn prompt(model: &'m Model, case: &Value) -> (Self, Vec<f32>) {
        let tokens = ids(&case["tokens"]);
        let steps = case["greedy"]["ids"].as_array().unwrap().len();
        let cache = KvCache::new(&model.config, tokens.len() + steps, tokens.len());
        let scratch = Scratch::new(&model.config, tokens.len());
        let mut decoding = Self {
            model,
            cache,
            scratch,
        };
        let logits = decoding.feed(&tokens);
        (decoding, logits)
    }

    /// The logits after `token`, fed next.
    pub fn step(&mut self, token: u32) -> Vec<f32> {
        self.feed(&[token])
    }

    fn feed(&mut self, tokens: &[u32]) -> Vec<f32> {
        let logits = self
            .model
            .forward(tokens, &mut self.cache, &mut self.scratch, Logits::Last);
        logits.unwrap().to_vec()
    }
}
