//! Rotary position embedding of the heads of one position.

pub use rinfer_transformer::{RopeParams, RopeStyle, Yarn};

/// YaRN's angle of a pair.
trait YarnAngle {
    fn angle(&self, i: usize, theta_extrap: f32, freq_scale: f32) -> f32;
}

impl YarnAngle for Yarn {
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
