//! Log-probabilities of the model's distribution (before any sampling filter or penalty).

use super::request::TokenLogprob;
use crate::tokenizer::Tokenizer;

/// Prepares the log-probabilities of one logits row: returns a function that, given the token
/// actually chosen, gives its entry with the `top` most likely alternatives.
pub fn of_row<'a>(
    row: &'a [f32],
    top: usize,
    tokenizer: &'a Tokenizer,
) -> impl FnOnce(u32) -> TokenLogprob + 'a {
    let log_sum = log_sum_exp(row);
    let best = top_indices(row, top);
    let bytes = move |id: u32| tokenizer.token_piece(id).unwrap_or_default().to_vec();
    move |token| TokenLogprob {
        bytes: bytes(token),
        logprob: row
            .get(token as usize)
            .map_or(f32::NEG_INFINITY, |l| l - log_sum),
        top: best
            .into_iter()
            .map(|id| (bytes(id), row[id as usize] - log_sum))
            .collect(),
    }
}

/// `log Σ exp(x)`, computed stably.
fn log_sum_exp(row: &[f32]) -> f32 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        return max;
    }
    let sum: f64 = row.iter().map(|&l| f64::from((l - max).exp())).sum();
    max + sum.ln() as f32
}

/// The ids of the `n` largest values, largest first (ties: lower id first).
fn top_indices(row: &[f32], n: usize) -> Vec<u32> {
    let mut best: Vec<u32> = Vec::with_capacity(n + 1);
    if n == 0 {
        return best;
    }
    for (i, &l) in row.iter().enumerate() {
        if best.len() == n && l <= row[best[n - 1] as usize] {
            continue;
        }
        let at = best.partition_point(|&j| row[j as usize] >= l);
        best.insert(at, i as u32);
        best.truncate(n);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_indices_are_sorted_and_stable() {
        let row = [0.5, 2.0, -1.0, 2.0, 1.0];
        assert_eq!(top_indices(&row, 3), vec![1, 3, 4]);
        assert_eq!(top_indices(&row, 0), Vec::<u32>::new());
        assert_eq!(top_indices(&row, 9).len(), 5);
    }

    #[test]
    fn log_sum_exp_normalises() {
        let row = [1000.0f32, 1000.0];
        assert!((log_sum_exp(&row) - (1000.0 + 2f32.ln())).abs() < 1e-3);
    }
}
