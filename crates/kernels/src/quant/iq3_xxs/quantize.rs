//! ggml's IQ3_XXS quantizer (`quantize_row_iq3_xxs_impl` with the 256-entry grid), with
//! importance weights or, without them, the squares of the values as weights.
//!
//! Per 32-value sub-block: the signs are taken out (each group of eight keeps an even number
//! of negatives, flipping the least important value when needed, so seven bits store them),
//! and the magnitudes fitted to [`IQ3XXS_GRID`] at the best of 31 scales around `max / 15`
//! ([`grid_fit::search_scale`], only the groups that were off the grid snapped again). The
//! sub-block scales are then stored as 4-bit odd multiples of the largest over 31, the
//! super-block scale with ggml's factor 1.0125.
//!
//! [`IQ3XXS_GRID`]: crate::quant::iq_grids::IQ3XXS_GRID
//! [`grid_fit::search_scale`]: crate::quant::grid_fit::search_scale

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::BlockIq3Xxs;
use crate::quant::QuantizeWeighted;
use crate::quant::grid_fit::{Refit, Trials, even_signs, max_of, scale_level, search_scale};
use crate::quant::grid_search::IQ3XXS;
use crate::quant::weighted::{importance_weights, sum_squares};

/// Values per sub-block.
const BLOCK: usize = 32;
/// Sub-blocks with no magnitude above this are stored as zero (ggml's `GROUP_MAX_EPS_IQ3_XXS`).
const GROUP_MAX_EPS_IQ3_XXS: f32 = 1e-8;

impl QuantizeWeighted for BlockIq3Xxs {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let grid = &*IQ3XXS;
        let mut b = BlockIq3Xxs::zeroed();
        let mut scales = [0.0f32; QK_K / BLOCK];
        let mut signs_and_scales = [0u32; QK_K / BLOCK];
        let mut max_scale = 0.0f32;
        let sigma2 = 2.0 * sum_squares(&x[..QK_K]) / QK_K as f32;
        let (mut weight, mut waux, mut xval) = ([0.0f32; BLOCK], [0.0f32; BLOCK], [0.0f32; BLOCK]);
        for ib in 0..QK_K / BLOCK {
            let at = BLOCK * ib..BLOCK * ib + BLOCK;
            let xb = &x[at.clone()];
            match weights {
                Some(qw) => importance_weights(&qw[at], xb, sigma2, &mut weight),
                None => {
                    for (w, &v) in weight.iter_mut().zip(xb) {
                        *w = v * v;
                    }
                }
            }
            for (a, &w) in waux.iter_mut().zip(&weight) {
                *a = w.sqrt();
            }
            let mut block_signs = [0u8; BLOCK / 8];
            for (k, s) in block_signs.iter_mut().enumerate() {
                let g = 8 * k..8 * k + 8;
                *s = even_signs(&xb[g.clone()], &weight[g.clone()], &mut xval[g]);
            }
            let max = max_of(&xval);
            if max < GROUP_MAX_EPS_IQ3_XXS {
                continue;
            }
            let mut l = [0u8; BLOCK];
            let trials = Trials {
                steps: -15..=15,
                step: 0.2,
                max,
            };
            let scale0 = max / 15.0;
            let mut scale = search_scale(
                grid,
                trials,
                &xval,
                &weight,
                &waux,
                scale0,
                Refit::OffGridOnly,
                &mut l,
            );
            if scale < 0.0 {
                scale = -scale;
                for s in &mut block_signs {
                    *s = !*s & 127;
                }
            }
            for k in 0..BLOCK / 4 {
                b.qs[8 * ib + k] = grid.index_of(&l[4 * k..4 * k + 4]) as u8;
            }
            signs_and_scales[ib] = block_signs
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
