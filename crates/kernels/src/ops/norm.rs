//! RMSNorm and LayerNorm of one row, with ggml's f64 accumulation.

/// `1 / sqrt(mean(x²) + eps)`, accumulated in f64 as ggml does.
fn rms_scale(x: &[f32], eps: f32) -> f32 {
    let sum: f64 = x.iter().map(|&v| (v as f64) * (v as f64)).sum();
    let mean = (sum / x.len() as f64) as f32;
    1.0 / (mean + eps).sqrt()
}

/// `out = x / sqrt(mean(x²) + eps) * weight`.
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    assert_eq!(x.len(), weight.len());
    assert_eq!(x.len(), out.len());
    let scale = rms_scale(x, eps);
    for ((o, &v), &w) in out.iter_mut().zip(x).zip(weight) {
        *o = v * scale * w;
    }
}

/// [`rms_norm`] in place.
pub fn rms_norm_inplace(x: &mut [f32], weight: &[f32], eps: f32) {
    assert_eq!(x.len(), weight.len());
    let scale = rms_scale(x, eps);
    for (v, &w) in x.iter_mut().zip(weight) {
        *v = *v * scale * w;
    }
}

/// `x = x / sqrt(mean(x²) + eps)`: RMSNorm without a scale.
pub fn rms_normalize_inplace(x: &mut [f32], eps: f32) {
    let scale = rms_scale(x, eps);
    x.iter_mut().for_each(|v| *v *= scale);
}

/// `out = (x - mean) / sqrt(var + eps) * weight + bias`.
pub fn layer_norm(x: &[f32], weight: &[f32], bias: Option<&[f32]>, eps: f32, out: &mut [f32]) {
    assert_eq!(x.len(), out.len());
    out.copy_from_slice(x);
    layer_norm_inplace(out, weight, bias, eps);
}

/// [`layer_norm`] in place.
pub fn layer_norm_inplace(out: &mut [f32], weight: &[f32], bias: Option<&[f32]>, eps: f32) {
    assert_eq!(out.len(), weight.len());
    let n = out.len() as f64;
    let mean = (out.iter().map(|&v| v as f64).sum::<f64>() / n) as f32;
    let mut sum2 = 0.0f64;
    for o in out.iter_mut() {
        *o -= mean;
        sum2 += (*o as f64) * (*o as f64);
    }
    let scale = 1.0 / ((sum2 / n) as f32 + eps).sqrt();
    for (o, &w) in out.iter_mut().zip(weight) {
        *o = *o * scale * w;
    }
    if let Some(bias) = bias {
        assert_eq!(out.len(), bias.len());
        for (o, &b) in out.iter_mut().zip(bias) {
            *o += b;
        }
    }
}
