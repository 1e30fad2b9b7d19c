//! Elementwise arithmetic on rows.

/// `x += y` (residual connections).
pub fn add_inplace(x: &mut [f32], y: &[f32]) {
    assert_eq!(x.len(), y.len());
    for (x, &y) in x.iter_mut().zip(y) {
        *x += y;
    }
}

/// `x *= s`.
pub fn scale(x: &mut [f32], s: f32) {
    for v in x {
        *v *= s;
    }
}

/// Soft capping, `x = cap * tanh(x / cap)` (Gemma 2 logits and attention scores).
pub fn softcap(x: &mut [f32], cap: f32) {
    for v in x {
        *v = cap * (*v / cap).tanh();
    }
}

/// `x = tanh(x)` (a ranker's classifier).
pub fn tanh_inplace(x: &mut [f32]) {
    for v in x {
        *v = v.tanh();
    }
}

/// ggml's softmax of a row in place: `exp(x - max)` in f32, summed in f64, scaled by the
/// inverse sum rounded to f32.
pub fn softmax_inplace(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f64;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v as f64;
    }
    let inv = (1.0 / sum) as f32;
    x.iter_mut().for_each(|v| *v *= inv);
}
