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
    /// YaRN's blend of interpolated and extrapolated angles, where the model scales that way.
    pub yarn: Option<Yarn>,
}

/// YaRN context extension as ggml applies it (`ext_factor` 1): pairs below `corr_dims[0]` keep
/// their extrapolated angle `theta`, pairs above `corr_dims[1]` take the interpolated
/// `freq_scale * theta`, the ones between a linear ramp of the two; sine and cosine are both
/// scaled by `mscale`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Yarn {
    /// The first and last pair of the ramp.
    pub corr_dims: [f32; 2],
    /// The magnitude scale of sine and cosine.
    pub mscale: f32,
}

impl Yarn {
    /// ggml's parameters for `n_rot` rotated dimensions at frequency base `base`, trained at
    /// `n_ctx_orig` positions and stretched by `factor`, with its default betas (32 and 1).
    pub fn new(n_rot: usize, base: f32, n_ctx_orig: usize, factor: f32) -> Self {
        let corr_dim = |beta: f32| {
            n_rot as f32 * (n_ctx_orig as f32 / (beta * 2.0 * std::f32::consts::PI)).ln()
                / (2.0 * base.ln())
        };
        let low = corr_dim(32.0).floor().max(0.0);
        let high = corr_dim(1.0).ceil().min(n_rot as f32 - 1.0);
        Yarn {
            corr_dims: [low, high],
            mscale: 1.0 + 0.1 * factor.ln(),
        }
    }

    /// The angle of pair `i` and the scale of its sine and cosine.
    #[inline]
    fn angle(&self, i: usize, theta_extrap: f32, freq_scale: f32) -> f32 {
        let [low, high] = self.corr_dims;
        let y = (i as f32 - low) / (high - low).max(0.001);
        let ramp = 1.0 - y.clamp(0.0, 1.0);
        let theta_interp = freq_scale * theta_extrap;
        theta_interp * (1.0 - ramp) + theta_extrap * ramp
    }
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
        let (sin, cos) = match &p.yarn {
            None => {
                let angle = p.freq_scale * theta / freq_factors.map_or(1.0, |f| f[i]);
                (angle.sin(), angle.cos())
            }
            Some(yarn) => {
                let extrap = theta / freq_factors.map_or(1.0, |f| f[i]);
                let angle = yarn.angle(i, extrap, p.freq_scale);
                (angle.sin() * yarn.mscale, angle.cos() * yarn.mscale)
            }
        };
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
