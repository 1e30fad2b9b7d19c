//! A mixture-of-experts router: from one row's expert scores to the experts it runs and their
//! weights, with ggml's arithmetic (softmax sums in f64, ties to the lower expert id).

pub use rinfer_transformer::Gating;

/// The least sum the renormalised weights are divided by (ggml's clamp).
const MIN_WEIGHT_SUM: f32 = 6.103_515_6e-5;

/// ggml's softmax of a row in place: `exp(x - max)` in f32, summed in f64, scaled by the
/// inverse sum rounded to f32.
fn softmax_inplace(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f64;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v as f64;
    }
    let inv = (1.0 / sum) as f32;
    x.iter_mut().for_each(|v| *v *= inv);
}

/// Routes one row: `scores` are the router's outputs (one per expert, overwritten), `ids` and
/// `weights` receive the `ids.len()` experts picked, highest first, and their weights.
///
/// # Panics
/// When `ids` and `weights` differ in length or ask for more experts than there are scores (a
/// caller bug; the loader checks the counts).
///
/// ```
/// use rinfer_kernels::ops::{Gating, route};
///
/// let mut scores = [0.0, 2.0, 1.0, -1.0];
/// let (mut ids, mut weights) = ([0u32; 2], [0.0f32; 2]);
/// route(Gating::TopKSoftmax, &mut scores, &mut ids, &mut weights);
/// assert_eq!(ids, [1, 2]);
/// assert!((weights[0] + weights[1] - 1.0).abs() < 1e-6 && weights[0] > weights[1]);
/// ```
pub fn route(gating: Gating, scores: &mut [f32], ids: &mut [u32], weights: &mut [f32]) {
    let k = ids.len();
    assert!(k == weights.len() && k <= scores.len());
    if gating == Gating::SoftmaxTopK {
        softmax_inplace(scores);
    }
    for slot in 0..k {
        // The largest score not yet picked, the lower id on ties (a stable descending sort).
        let mut best: Option<usize> = None;
        for (e, &s) in scores.iter().enumerate() {
            if ids[..slot].contains(&(e as u32)) {
                continue;
            }
            if best.is_none_or(|b| s > scores[b]) {
                best = Some(e);
            }
        }
        let best = best.expect("k <= experts");
        ids[slot] = best as u32;
        weights[slot] = scores[best];
    }
    match gating {
        Gating::SoftmaxTopK => {
            let sum = weights.iter().map(|&w| w as f64).sum::<f64>() as f32;
            let sum = sum.max(MIN_WEIGHT_SUM);
            weights.iter_mut().for_each(|w| *w /= sum);
        }
        Gating::TopKSoftmax => softmax_inplace(weights),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_top_k_renormalises_the_picked_probabilities() {
        let mut scores = [1.0f32, 3.0, 2.0, 0.5];
        let p: Vec<f64> = {
            let e: Vec<f64> = scores.iter().map(|&s| (s as f64).exp()).collect();
            let sum: f64 = e.iter().sum();
            e.iter().map(|v| v / sum).collect()
        };
        let (mut ids, mut weights) = ([0u32; 2], [0.0f32; 2]);
        route(Gating::SoftmaxTopK, &mut scores, &mut ids, &mut weights);
        assert_eq!(ids, [1, 2]);
        let sum = p[1] + p[2];
        assert!((weights[0] as f64 - p[1] / sum).abs() < 1e-6);
        assert!((weights[1] as f64 - p[2] / sum).abs() < 1e-6);
    }

    #[test]
    fn top_k_softmax_picks_by_raw_score_and_weighs_only_the_picked() {
        let mut scores = [-5.0f32, 0.25, 4.0, 0.5];
        let (mut ids, mut weights) = ([0u32; 2], [0.0f32; 2]);
        route(Gating::TopKSoftmax, &mut scores, &mut ids, &mut weights);
        assert_eq!(ids, [2, 3]);
        let e = (0.5f64 - 4.0).exp();
        assert!((weights[0] as f64 - 1.0 / (1.0 + e)).abs() < 1e-6);
        assert!((weights[1] as f64 - e / (1.0 + e)).abs() < 1e-6);
    }

    #[test]
    fn ties_go_to_the_lower_expert() {
        let mut scores = [1.0f32, 2.0, 2.0, 2.0];
        let (mut ids, mut weights) = ([0u32; 3], [0.0f32; 3]);
        route(Gating::SoftmaxTopK, &mut scores, &mut ids, &mut weights);
        assert_eq!(ids, [1, 2, 3]);
    }
}
