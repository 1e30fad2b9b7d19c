//! ggml's IQ2_S quantizer (`quantize_row_iq2_s_impl`), with importance weights or, without
//! them, the weights `σ²/4 + x²`.
//!
//! Per 16-value half sub-block: the eight sign bits of each group are stored whole, and the
//! magnitudes fitted to [`IQ2S_GRID`] at the best of nineteen scales around `max / 5`
//! ([`SubBlockFit`], only the groups that were off the grid snapped again). The half
//! sub-block scales are then stored as 4-bit odd multiples of the largest over 31, the
//! super-block scale with ggml's factor 0.9875.
//!
//! [`IQ2S_GRID`]: crate::quant::iq_grids::IQ2S_GRID
//! [`SubBlockFit`]: crate::quant::grid_fit::SubBlockFit

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::BlockIq2S;
use crate::quant::QuantizeWeighted;
use crate::quant::grid_fit::{Refit, SubBlockFit, scale_levels};
use crate::quant::grid_search::IQ2S;
use crate::quant::util::pack_nibbles;
use crate::quant::weighted::{importance_weights, sum_squares};

/// Values per half sub-block.
const BLOCK: usize = 16;
/// Half sub-blocks with no magnitude above this are stored as zero (ggml's
/// `GROUP_MAX_EPS_IQ2_S`).
const GROUP_MAX_EPS_IQ2_S: f32 = 1e-8;

impl QuantizeWeighted for BlockIq2S {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let mut b = BlockIq2S::zeroed();
        let sigma2 = 2.0 * sum_squares(&x[..QK_K]) / QK_K as f32;
        let fit = SubBlockFit {
            grid: &*IQ2S,
            even_signs: false,
            eps: GROUP_MAX_EPS_IQ2_S,
            steps: -9..=9,
            step: 0.1,
            refit: Refit::OffGridOnly,
        };
        let weigh = |at: std::ops::Range<usize>, weight: &mut [f32]| match weights {
            Some(qw) => importance_weights(&qw[at.clone()], &x[at], sigma2, weight),
            None => {
                for (w, &v) in weight.iter_mut().zip(&x[at]) {
                    *w = 0.25 * sigma2 + v * v;
                }
            }
        };
        let mut scales = [0.0f32; QK_K / BLOCK];
        let max_scale = fit.fit_sub_blocks(x, &mut scales, weigh, |ib, fitted| {
            for (k, &s) in fitted.signs[..BLOCK / 8].iter().enumerate() {
                let index = fit.grid.index_of(&fitted.levels[8 * k..8 * k + 8]);
                let g = 2 * ib + k;
                b.qs[g] = (index & 255) as u8;
                b.qh[g / 4] |= ((index >> 8) << (2 * (g % 4))) as u8;
                b.qs[QK_K / 8 + g] = s;
            }
        });
        if max_scale == 0.0 {
            return b;
        }
        let (d, levels) = scale_levels(&scales, max_scale);
        b.d = f16::from_f32(d * 0.9875);
        pack_nibbles(&levels, &mut b.scales);
        b
    }
}
