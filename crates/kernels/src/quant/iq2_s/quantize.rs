//! ggml's IQ2_S quantizer (`quantize_row_iq2_s_impl`), with importance weights or, without
//! them, the weights `σ²/4 + x²`.
//!
//! Per 16-value half sub-block: the eight sign bits of each group are stored whole, and the
//! magnitudes fitted to [`IQ2S_GRID`] at the best of nineteen scales around `max / 5`
//! ([`grid_fit::search_scale`], only the groups that were off the grid snapped again). The half
//! sub-block scales are then stored as 4-bit odd multiples of the largest over 31, the
//! super-block scale with ggml's factor 0.9875.
//!
//! [`IQ2S_GRID`]: crate::quant::iq_grids::IQ2S_GRID
//! [`grid_fit::search_scale`]: crate::quant::grid_fit::search_scale

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::BlockIq2S;
use crate::quant::QuantizeWeighted;
use crate::quant::grid_fit::{Refit, Trials, max_of, scale_level, search_scale, signs};
use crate::quant::grid_search::IQ2S;
use crate::quant::weighted::{importance_weights, sum_squares};

/// Values per half sub-block.
const BLOCK: usize = 16;
/// Half sub-blocks with no magnitude above this are stored as zero (ggml's
/// `GROUP_MAX_EPS_IQ2_S`).
const GROUP_MAX_EPS_IQ2_S: f32 = 1e-8;

impl QuantizeWeighted for BlockIq2S {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let grid = &*IQ2S;
        let mut b = BlockIq2S::zeroed();
        let mut scales = [0.0f32; QK_K / BLOCK];
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
                        *w = 0.25 * sigma2 + v * v;
                    }
                }
            }
            for (a, &w) in waux.iter_mut().zip(&weight) {
                *a = w.sqrt();
            }
            let mut block_signs = [0u8; BLOCK / 8];
            for (k, s) in block_signs.iter_mut().enumerate() {
                *s = signs(&xb[8 * k..8 * k + 8], &mut xval[8 * k..8 * k + 8]);
            }
            let max = max_of(&xval);
            if max < GROUP_MAX_EPS_IQ2_S {
                continue;
            }
            let mut l = [0u8; BLOCK];
            let trials = Trials {
                steps: -9..=9,
                step: 0.1,
                max,
            };
            let scale0 = max / 5.0;
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
                    *s = !*s;
                }
            }
            for (k, &s) in block_signs.iter().enumerate() {
                let index = grid.index_of(&l[8 * k..8 * k + 8]);
                let g = 2 * ib + k;
                b.qs[g] = (index & 255) as u8;
                b.qh[g / 4] |= ((index >> 8) << (2 * (g % 4))) as u8;
                b.qs[QK_K / 8 + g] = s;
            }
            scales[ib] = scale;
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
