//! ggml's IQ2_XXS quantizer (`quantize_row_iq2_xxs_impl`), which needs importance weights.
//!
//! Per 32-value sub-block: the signs are taken out (each group of eight keeps an even number of
//! negatives, flipping the least important value when needed, so seven bits store them), the
//! magnitudes are rounded to the levels {1, 3, 5} of a scale tried at thirteen values around a
//! first estimate, each group of eight snapped to the nearest point of [`IQ2XXS_GRID`] (through
//! the neighbour lists of [`grid_search`]), and the scale with the best weighted fit is kept ([`grid_fit::search_scale`]).
//! The sub-block scales are then stored as 4-bit multiples of the largest over 31.
//!
//! [`IQ2XXS_GRID`]: crate::quant::iq_grids::IQ2XXS_GRID
//! [`grid_search`]: crate::quant::grid_search
//! [`grid_fit::search_scale`]: crate::quant::grid_fit::search_scale

use half::f16;
use rinfer_formats::QK_K;

use super::BlockIq2Xxs;
use crate::quant::QuantizeWeighted;
use crate::quant::grid_fit::{Refit, Trials, even_signs, max_of, scale_levels, search_scale};
use crate::quant::grid_search::IQ2XXS;
use crate::quant::util::GROUP_MAX_EPS;
use crate::quant::weighted::{importance_weights, make_qp_quants, sum_squares};

/// The largest level index (levels `2l + 1`, `l < K_MAX_Q`).
const K_MAX_Q: i32 = 3;

impl QuantizeWeighted for BlockIq2Xxs {
    const NEEDS_WEIGHTS: bool = true;

    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let grid = &*IQ2XXS;
        let ones = [1.0f32; QK_K];
        let qw = weights.unwrap_or(&ones);
        let mut q2 = [0u32; QK_K / 16];
        let mut scales = [0.0f32; QK_K / 32];
        let mut max_scale = 0.0f32;
        let sigma2 = sum_squares(&x[..QK_K]) / QK_K as f32;
        let (mut weight, mut waux, mut xval) = ([0.0f32; 32], [0.0f32; 32], [0.0f32; 32]);
        for ib in 0..QK_K / 32 {
            let xb = &x[32 * ib..32 * ib + 32];
            importance_weights(&qw[32 * ib..32 * ib + 32], xb, sigma2, &mut weight);
            for (a, &w) in waux.iter_mut().zip(&weight) {
                *a = w.sqrt();
            }
            let mut block_signs = [0u8; 4];
            for (k, s) in block_signs.iter_mut().enumerate() {
                let g = 8 * k..8 * k + 8;
                *s = even_signs(&xb[g.clone()], &weight[g.clone()], &mut xval[g]);
            }
            let max = max_of(&xval);
            if max < GROUP_MAX_EPS {
                continue;
            }
            let mut l = [0u8; 32];
            let scale = make_qp_quants(K_MAX_Q + 1, &xval, &mut l, &weight);
            let eff_max = scale * K_MAX_Q as f32;
            if eff_max <= 0.0 {
                continue;
            }
            let trials = Trials {
                steps: -6..=6,
                step: 0.1,
                max: eff_max,
                start: scale,
                refit: Refit::Always,
            };
            let mut scale = search_scale(grid, trials, &xval, &weight, &waux, &mut l);
            if scale < 0.0 {
                scale = -scale;
                for s in &mut block_signs {
                    *s = !*s & 127;
                }
            }
            for k in 0..4 {
                let index = grid.index_of(&l[8 * k..8 * k + 8]);
                q2[2 * ib] |= (index as u32) << (8 * k);
                q2[2 * ib + 1] |= (block_signs[k] as u32) << (7 * k);
            }
            scales[ib] = scale;
            max_scale = if max_scale > scale { max_scale } else { scale };
        }
        let mut b = BlockIq2Xxs {
            d: f16::from_f32(0.0),
            qs: [0; QK_K / 8],
        };
        if max_scale == 0.0 {
            return b;
        }
        let (d, levels) = scale_levels(&scales, max_scale);
        b.d = f16::from_f32(d);
        for (ib, &level) in levels.iter().enumerate() {
            q2[2 * ib + 1] |= (level as u32) << 28;
        }
        for (i, w) in q2.iter().enumerate() {
            b.qs[2 * i] = *w as u16;
            b.qs[2 * i + 1] = (*w >> 16) as u16;
        }
        b
    }
}
