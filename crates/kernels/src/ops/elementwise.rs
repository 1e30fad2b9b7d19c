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
