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
use crate::quant::grid_fit::{Refit, SubBlockFit, scale_levels};
use crate::quant::grid_search::IQ3XXS;

/// Values per sub-block.
const BLOCK: usize = 32;
/// Sub-blocks with no magnitude above this are stored as zero (ggml's `GROUP_MAX_EPS_IQ3_XXS`).
const GROUP_MAX_EPS_IQ3_XXS: f32 = 1e-8;

impl QuantizeWeighted for BlockIq3Xxs {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let mut b = BlockIq3Xxs::zeroed();
        let mut signs_and_scales = [0u32; QK_K / BLOCK];
        let fit = SubBlockFit {
            grid: &*IQ3XXS,
            even_signs: true,
            eps: GROUP_MAX_EPS_IQ3_XXS,
            steps: -15..=15,
            step: 0.2,
            refit: Refit::OffGridOnly,
        };
        let mut scales = [0.0f32; QK_K / BLOCK];
        let max_scale = fit.fit_iq3(x, weights, &mut scales, |ib, index, fitted| {
            for (k, &index) in index.iter().enumerate() {
                b.qs[8 * ib + k] = index as u8;
            }
            signs_and_scales[ib] = fitted
                .signs
                .iter()
                .enumerate()
                .fold(0, |w, (k, &s)| w | (s as u32) << (7 * k));
        });
        if max_scale == 0.0 {
            return BlockIq3Xxs::zeroed();
        }
        let (d, levels) = scale_levels(&scales, max_scale);
        b.d = f16::from_f32(d * 1.0125);
        for (ib, (&word, &level)) in signs_and_scales.iter().zip(&levels).enumerate() {
            let word = word | (level as u32) << 28;
            b.qs[QK_K / 4 + 4 * ib..QK_K / 4 + 4 * ib + 4].copy_from_slice(&word.to_le_bytes());
        }
        b
    }
}
