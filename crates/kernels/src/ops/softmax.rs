//! Numerically stable softmax of one row.

/// In-place softmax: `x_i = exp(x_i - max) / sum_j exp(x_j - max)`, the sum in f64 as ggml does.
/// Rows of `-inf` only (fully masked) become all zero.
pub fn softmax(x: &mut [f32]) {
    let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    if max == f32::NEG_INFINITY {
        x.fill(0.0);
        return;
    }
    let mut sum = 0.0f64;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v as f64;
    }
    let inv = (1.0 / sum) as f32;
    for v in x.iter_mut() {
        *v *= inv;
    }
}
