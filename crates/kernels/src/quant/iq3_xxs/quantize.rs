//! ggml's IQ3_XXS quantizer (`quantize_row_iq3_xxs_impl` with the 256-entry grid), with
//! importance weights or, without them, the squares of the values as weights.
//!
//! Per 32-value sub-block: the signs are taken out (each group of eight keeps an even number
//! of negatives, flipping the least important value when needed, so seven bits store them),
//! and the magnitudes fitted to [`IQ3XXS_GRID`] at the best of 31 scales around `max / 15`
//! ([`SubBlockFit`], only the groups that were off the grid snapped again). The
//! sub-block scales are then stored as 4-bit odd multiples of the largest over 31, the
//! super-block scale with ggml's factor 1.0125.
//!
//! [`IQ3XXS_GRID`]: crate::quant::iq_grids::IQ3XXS_GRID
//! [`SubBlockFit`]: crate::quant::grid_fit::SubBlockFit

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::BlockIq3Xxs;
use crate::quant::QuantizeWeighted;
use crate::quant::grid_fit::{Fitted, Refit, SubBlockFit, scale_level};
use crate::quant::grid_search::IQ3XXS;
use crate::quant::weighted::{squares_or_importance, sum_squares};

/// Values per sub-block.
const BLOCK: usize = 32;
/// Sub-blocks with no magnitude above this are stored as zero (ggml's `GROUP_MAX_EPS_IQ3_XXS`).
const GROUP_MAX_EPS_IQ3_XXS: f32 = 1e-8;

impl QuantizeWeighted for BlockIq3Xxs {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let mut b = BlockIq3Xxs::zeroed();
        let mut scales = [0.0f32; QK_K / BLOCK];
        let mut signs_and_scales = [0u32; QK_K / BLOCK];
        let mut max_scale = 0.0f32;
        let sigma2 = 2.0 * sum_squares(&x[..QK_K]) / QK_K as f32;
        let fit = SubBlockFit {
            grid: &*IQ3XXS,
            even_signs: true,
            eps: GROUP_MAX_EPS_IQ3_XXS,
            steps: -15..=15,
            step: 0.2,
            refit: Refit::OffGridOnly,
        };
        let mut weight = [0.0f32; BLOCK];
        for ib in 0..QK_K / BLOCK {
            let at = BLOCK * ib..BLOCK * ib + BLOCK;
            let xb = &x[at.clone()];
            squares_or_importance(weights.map(|w| &w[at]), xb, sigma2, &mut weight);
            let Some(Fitted {
                scale,
                signs,
                levels,
            }) = fit.fit(xb, &weight)
            else {
                continue;
            };
            for k in 0..BLOCK / 4 {
                b.qs[8 * ib + k] = fit.grid.index_of(&levels[4 * k..4 * k + 4]) as u8;
            }
            signs_and_scales[ib] = signs
                .iter()
                .enumerate()
                .fold(0, |w, (k, &s)| w | (s as u32) << (7 * k));
            scales[ib] = scale;
            max_scale = if max_scale > scale { max_scale } else { scale };
        }
        if max_scale == 0.0 {
            return BlockIq3Xxs::zeroed();
        }
        let d = max_scale / 31.0;
        b.d = f16::from_f32(d * 1.0125);
        let id = 1.0 / d;
        for (ib, (&word, &s)) in signs_and_scales.iter().zip(&scales).enumerate() {
            let word = word | (scale_level(id, s) as u32) << 28;
            b.qs[QK_K / 4 + 4 * ib..QK_K / 4 + 4 * ib + 4].copy_from_slice(&word.to_le_bytes());
        }
        b
    }
}
