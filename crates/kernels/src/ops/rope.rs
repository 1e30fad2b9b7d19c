//! Rotary position embedding of the heads of one position.

/// Which dimensions a rotation pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs `(2i, 2i + 1)` (llama; ggml's mode 0).
    Norm,
    /// Halves `(i, i + n_rot / 2)` (GPT-NeoX, Qwen, Gemma, Phi; ggml's mode 2).
    Neox,
}

/// Rotation parameters of one model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeParams {
    /// Rotated dimensions per head (even, at most the head size); the rest pass through.
    pub n_rot: usize,
    /// Frequency base (`theta_i = pos * base^(-2i / n_rot)`).
    pub freq_base: f32,
    /// Linear position scale (1.0 for none).
    pub freq_scale: f32,
    /// Pairing of dimensions.
    pub style: RopeStyle,
}

/// Rotates every head of `x` (`x.len()` a multiple of `head_dim`) for position `pos`.
///
/// Angles are built as ggml builds them: `theta` starts at `pos` and is multiplied by
/// `base^(-2 / n_rot)` once per pair, in f32. `freq_factors` (`n_rot / 2` values, Llama 3.1's
/// `rope_freqs`) divide each pair's angle.
pub fn rope(
    x: &mut [f32],
    head_dim: usize,
    pos: usize,
    p: &RopeParams,
    freq_factors: Option<&[f32]>,
) {
    assert!(p.n_rot.is_multiple_of(2) && p.n_rot <= head_dim && head_dim > 0);
    assert_eq!(x.len() % head_dim, 0);
    if let Some(f) = freq_factors {
        assert_eq!(f.len(), p.n_rot / 2);
    }
    let theta_scale = p.freq_base.powf(-2.0 / p.n_rot as f32);
    let mut theta = pos as f32;
    for i in 0..p.n_rot / 2 {
        let angle = p.freq_scale * theta / freq_factors.map_or(1.0, |f| f[i]);
        let (sin, cos) = (angle.sin(), angle.cos());
        let (a, b) = match p.style {
            RopeStyle::Norm => (2 * i, 2 * i + 1),
            RopeStyle::Neox => (i, i + p.n_rot / 2),
        };
        for head in x.chunks_exact_mut(head_dim) {
            let (x0, x1) = (head[a], head[b]);
            head[a] = x0 * cos - x1 * sin;
            head[b] = x0 * sin + x1 * cos;
        }
        theta *= theta_scale;
    }
}
