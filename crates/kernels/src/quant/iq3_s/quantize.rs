//! ggml's IQ3_S quantizer (`quantize_row_iq3_s_impl` with 32-value sub-blocks), with importance
//! weights or, without them, the squares of the values as weights.
//!
//! Per sub-block the signs are stored apart and the magnitudes rounded to the levels
//! {1, 3, …, 15} of a scale tried at nineteen values around `max / 15`; each group of four is
//! snapped to [`IQ3S_GRID`] (the nearest neighbour in weighted distance when off it) and the
//! scale with the best weighted fit kept, then refitted. Sub-block scales are stored as 4-bit
//! odd multiples of the largest over 31, the super-block scale with ggml's factor 1.033
//! ([`SubBlockFit`] does the search).
//!
//! ggml does not advance its grid-index and sign cursors past an all-zero sub-block, so the
//! sub-blocks after one are stored one place early; this port does the same, for the same
//! bytes.
//!
//! [`IQ3S_GRID`]: crate::quant::iq_grids::IQ3S_GRID
//! [`SubBlockFit`]: crate::quant::grid_fit::SubBlockFit

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::BlockIq3S;
use crate::quant::QuantizeWeighted;
use crate::quant::grid_fit::{Refit, SubBlockFit, scale_levels};
use crate::quant::grid_search::IQ3S;
use crate::quant::util::pack_nibbles;

/// Values per sub-block.
const BLOCK: usize = 32;

impl QuantizeWeighted for BlockIq3S {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let mut b = BlockIq3S::zeroed();
        let (mut qs_at, mut signs_at) = (0, 0);
        let fit = SubBlockFit {
            grid: &*IQ3S,
            even_signs: false,
            // ggml skips only sub-blocks of magnitude 0: below the least positive float.
            eps: f32::from_bits(1),
            steps: -9..=9,
            step: 0.2,
            refit: Refit::AllUnlessOnGrid,
        };
        let mut scales = [0.0f32; QK_K / BLOCK];
        let max_scale = fit.fit_iq3(x, weights, &mut scales, |ib, index, fitted| {
            for (k, &index) in index.iter().enumerate() {
                let n = ib * (BLOCK / 4) + k;
                b.qs[qs_at + k] = (index & 255) as u8;
                b.qh[n / 8] |= ((index >> 8) << (n % 8)) as u8;
            }
            qs_at += BLOCK / 4;
            b.signs[signs_at..signs_at + BLOCK / 8].copy_from_slice(&fitted.signs);
            signs_at += BLOCK / 8;
        });
        if max_scale == 0.0 {
            return b;
        }
        let (d, levels) = scale_levels(&scales, max_scale);
        b.d = f16::from_f32(d * 1.033);
        pack_nibbles(&levels, &mut b.scales);
        b
    }
}
