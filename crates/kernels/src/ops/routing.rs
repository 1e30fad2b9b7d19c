//! A mixture-of-experts router: from one row's expert scores to the experts it runs and their
//! weights, with ggml's arithmetic (softmax and weight sums in f64, ties to the lower expert
//! id). Sigmoid gating picks by `sigmoid(score) + selection bias` but weighs by the sigmoid
//! alone; the weights are multiplied by the router's scale last.

pub use rinfer_transformer::{Gating, Router};

use super::elementwise::softmax_inplace;

/// The least sum the renormalised weights are divided by (ggml's clamp).
const MIN_WEIGHT_SUM: f32 = 6.103_515_6e-5;

/// `weights /= max(Σ weights, ggml's least sum)`, the sum in f64.
fn normalize(weights: &mut [f32]) {
    let sum = weights.iter().map(|&w| w as f64).sum::<f64>() as f32;
    let sum = sum.max(MIN_WEIGHT_SUM);
    weights.iter_mut().for_each(|w| *w /= sum);
}

/// ggml's sigmoid, `1 / (1 + exp(-x))` in f32.
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Routes one row: `scores` are the router's outputs (one per expert, overwritten),
/// `selection_bias` (one per expert) is added to them only to choose, `ids` and `weights`
/// receive the `ids.len()` experts picked, highest first, and their weights.
///
/// # Panics
/// When `ids` and `weights` differ in length or ask for more experts than there are scores, or
/// a bias is not one value per score (a caller bug; the loader checks the counts).
///
/// ```
/// use rinfer_kernels::ops::{Gating, Router, route};
///
/// let router = Router { experts: 4, used: 2, gating: Gating::TopKSoftmax, scale: 1.0 };
/// let mut scores = [0.0, 2.0, 1.0, -1.0];
/// let (mut ids, mut weights) = ([0u32; 2], [0.0f32; 2]);
/// route(&router, &mut scores, None, &mut ids, &mut weights);
/// assert_eq!(ids, [1, 2]);
/// assert!((weights[0] + weights[1] - 1.0).abs() < 1e-6 && weights[0] > weights[1]);
/// ```
pub fn route(
    router: &Router,
    scores: &mut [f32],
    selection_bias: Option<&[f32]>,
    ids: &mut [u32],
    weights: &mut [f32],
) {
    let k = ids.len();
    assert!(k == weights.len() && k <= scores.len());
    assert!(selection_bias.is_none_or(|b| b.len() == scores.len()));
    match router.gating {
        Gating::SoftmaxTopK | Gating::SoftmaxTopKUnnormalized => softmax_inplace(scores),
        Gating::Sigmoid { .. } => scores.iter_mut().for_each(|s| *s = sigmoid(*s)),
        Gating::TopKSoftmax => {}
    }
    let choice = |e: usize| scores[e] + selection_bias.map_or(0.0, |b| b[e]);
    for slot in 0..k {
        // The largest choice not yet picked, the lower id on ties (a stable descending sort).
        let mut best: Option<(usize, f32)> = None;
        for e in 0..scores.len() {
            if ids[..slot].contains(&(e as u32)) {
                continue;
            }
            let c = choice(e);
            if best.is_none_or(|(_, b)| c > b) {
                best = Some((e, c));
            }
        }
        let (best, _) = best.expect("k <= experts");
        ids[slot] = best as u32;
        weights[slot] = scores[best];
    }
    match router.gating {
        Gating::SoftmaxTopK | Gating::Sigmoid { normalize: true } => normalize(weights),
        Gating::SoftmaxTopKUnnormalized | Gating::Sigmoid { normalize: false } => {}
        Gating::TopKSoftmax => softmax_inplace(weights),
    }
    if router.scale != 1.0 {
        weights.iter_mut().for_each(|w| *w *= router.scale);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(gating: Gating, experts: usize, used: usize) -> Router {
        Router {
            experts,
            used,
            gating,
            scale: 1.0,
        }
    }

    fn route_one(gating: Gating, scores: &mut [f32], ids: &mut [u32], weights: &mut [f32]) {
        let r = router(gating, scores.len(), ids.len());
        route(&r, scores, None, ids, weights);
    }

    #[test]
    fn sigmoid_picks_by_the_biased_score_and_weighs_by_the_sigmoid_alone() {
        let logits = [0.5f32, 2.0, -1.0, 1.0];
        let bias = [0.0f32, -3.0, 2.0, 0.0];
        let s: Vec<f64> = logits
            .iter()
            .map(|&x| 1.0 / (1.0 + (-x as f64).exp()))
            .collect();
        let mut r = router(Gating::Sigmoid { normalize: true }, 4, 2);
        r.scale = 2.5;
        let mut scores = logits;
        let (mut ids, mut weights) = ([0u32; 2], [0.0f32; 2]);
        route(&r, &mut scores, Some(&bias), &mut ids, &mut weights);
        // Biased: 0.62, -2.12, 2.27, 0.73: experts 2 then 3, expert 1's high score not chosen.
        assert_eq!(ids, [2, 3]);
        let sum = s[2] + s[3];
        assert!((weights[0] as f64 - 2.5 * s[2] / sum).abs() < 1e-6);
        assert!((weights[1] as f64 - 2.5 * s[3] / sum).abs() < 1e-6);

        let mut scores = logits;
        let r = router(Gating::Sigmoid { normalize: false }, 4, 2);
        route(&r, &mut scores, None, &mut ids, &mut weights);
        assert_eq!(ids, [1, 3]);
        assert!((weights[0] as f64 - s[1]).abs() < 1e-6);
        assert!((weights[1] as f64 - s[3]).abs() < 1e-6);
    }

    #[test]
    fn softmax_top_k_renormalises_the_picked_probabilities() {
        let mut scores = [1.0f32, 3.0, 2.0, 0.5];
        let p: Vec<f64> = {
            let e: Vec<f64> = scores.iter().map(|&s| (s as f64).exp()).collect();
            let sum: f64 = e.iter().sum();
            e.iter().map(|v| v / sum).collect()
        };
        let (mut ids, mut weights) = ([0u32; 2], [0.0f32; 2]);
        route_one(Gating::SoftmaxTopK, &mut scores, &mut ids, &mut weights);
        assert_eq!(ids, [1, 2]);
        let sum = p[1] + p[2];
        assert!((weights[0] as f64 - p[1] / sum).abs() < 1e-6);
        assert!((weights[1] as f64 - p[2] / sum).abs() < 1e-6);
    }

    #[test]
    fn top_k_softmax_picks_by_raw_score_and_weighs_only_the_picked() {
        let mut scores = [-5.0f32, 0.25, 4.0, 0.5];
        let (mut ids, mut weights) = ([0u32; 2], [0.0f32; 2]);
        route_one(Gating::TopKSoftmax, &mut scores, &mut ids, &mut weights);
        assert_eq!(ids, [2, 3]);
        let e = (0.5f64 - 4.0).exp();
        assert!((weights[0] as f64 - 1.0 / (1.0 + e)).abs() < 1e-6);
        assert!((weights[1] as f64 - e / (1.0 + e)).abs() < 1e-6);
    }

    #[test]
    fn ties_go_to_the_lower_expert() {
        let mut scores = [1.0f32, 2.0, 2.0, 2.0];
        let (mut ids, mut weights) = ([0u32; 3], [0.0f32; 3]);
        route_one(Gating::SoftmaxTopK, &mut scores, &mut ids, &mut weights);
        assert_eq!(ids, [1, 2, 3]);
    }
}
