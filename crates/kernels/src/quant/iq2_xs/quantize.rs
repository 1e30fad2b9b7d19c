//! ggml's IQ2_XS quantizer (`quantize_row_iq2_xs_impl`), which needs importance weights.
//!
//! Per 16-value half sub-block: the signs are taken out (each group of eight keeps an even
//! number of negatives, flipping the least important value when needed, so seven bits store
//! them), and the magnitudes fitted to [`IQ2XS_GRID`] at the best of nineteen scales around
//! `max / 5` ([`SubBlockFit`], only the groups that were off the grid snapped again).
//! The half sub-block scales are then stored as 4-bit odd multiples of the largest over 31.
//!
//! [`IQ2XS_GRID`]: crate::quant::iq_grids::IQ2XS_GRID
//! [`SubBlockFit`]: crate::quant::grid_fit::SubBlockFit

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::BlockIq2Xs;
use crate::quant::QuantizeWeighted;
use crate::quant::grid_fit::{Refit, SubBlockFit, scale_levels};
use crate::quant::grid_search::IQ2XS;
use crate::quant::util::{GROUP_MAX_EPS, pack_nibbles};
use crate::quant::weighted::{importance_weights, sum_squares};

/// Values per half sub-block.
const BLOCK: usize = 16;

impl QuantizeWeighted for BlockIq2Xs {
    const NEEDS_WEIGHTS: bool = true;

    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let ones = [1.0f32; QK_K];
        let qw = weights.unwrap_or(&ones);
        let mut b = BlockIq2Xs::zeroed();
        let sigma2 = sum_squares(&x[..QK_K]) / QK_K as f32;
        let fit = SubBlockFit {
            grid: &*IQ2XS,
            even_signs: true,
            eps: GROUP_MAX_EPS,
            steps: -9..=9,
            step: 0.1,
            refit: Refit::OffGridOnly,
        };
        let mut scales = [0.0f32; QK_K / BLOCK];
        let max_scale = fit.fit_sub_blocks(
            x,
            &mut scales,
            |at, weight| importance_weights(&qw[at.clone()], &x[at], sigma2, weight),
            |ib, fitted| {
                for (k, &s) in fitted.signs[..BLOCK / 8].iter().enumerate() {
                    let index = fit.grid.index_of(&fitted.levels[8 * k..8 * k + 8]);
                    b.qs[2 * ib + k] = index as u16 | (s as u16) << 9;
                }
            },
        );
        if max_scale == 0.0 {
            b.qs = [0; QK_K / 8];
            return b;
        }
        let (d, levels) = scale_levels(&scales, max_scale);
        b.d = f16::from_f32(d);
        pack_nibbles(&levels, &mut b.scales);
        b
    }
}
