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
use crate::quant::grid_fit::{Fitted, Refit, SubBlockFit, scale_level};
use crate::quant::grid_search::IQ2S;
use crate::quant::weighted::{importance_weights, sum_squares};

/// Values per half sub-block.
const BLOCK: usize = 16;
/// Half sub-blocks with no magnitude above this are stored as zero (ggml's
/// `GROUP_MAX_EPS_IQ2_S`).
const GROUP_MAX_EPS_IQ2_S: f32 = 1e-8;

impl QuantizeWeighted for BlockIq2S {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let mut b = BlockIq2S::zeroed();
        let mut scales = [0.0f32; QK_K / BLOCK];
        let mut max_scale = 0.0f32;
        let sigma2 = 2.0 * sum_squares(&x[..QK_K]) / QK_K as f32;
        let fit = SubBlockFit {
            grid: &*IQ2S,
            even_signs: false,
            eps: GROUP_MAX_EPS_IQ2_S,
            steps: -9..=9,
            step: 0.1,
            refit: Refit::OffGridOnly,
        };
        let mut weight = [0.0f32; BLOCK];
        for (ib, scale_of) in scales.iter_mut().enumerate() {
            let at = BLOCK * ib..BLOCK * ib + BLOCK;
            let xb = &x[at.clone()];
            match weights {
                Some(qw) => importance_weights(&qw[at], xb, sigma2, &mut weight),
                None => {
                    for (w, &v) in weight.iter_mut().zip(xb) {
                        *w = 0.25 * sigma2 + v * v;
                    }
                }
            }
            let Some(Fitted {
                scale,
                signs,
                levels,
            }) = fit.fit(xb, &weight)
            else {
                continue;
            };
            for (k, &s) in signs[..BLOCK / 8].iter().enumerate() {
                let index = fit.grid.index_of(&levels[8 * k..8 * k + 8]);
                let g = 2 * ib + k;
                b.qs[g] = (index & 255) as u8;
                b.qh[g / 4] |= ((index >> 8) << (2 * (g % 4))) as u8;
                b.qs[QK_K / 8 + g] = s;
            }
            *scale_of = scale;
            max_scale = if max_scale > scale { max_scale } else { scale };
        }
        if max_scale == 0.0 {
            return b;
        }
        let d = max_scale / 31.0;
        b.d = f16::from_f32(d * 0.9875);
        let id = 1.0 / d;
        for (ib, &s) in scales.iter().enumerate() {
            b.scales[ib / 2] |= scale_level(id, s) << (4 * (ib % 2));
        }
        b
    }
}
