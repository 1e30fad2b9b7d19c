//! ggml's IQ1_M quantizer (`quantize_row_iq1_m_impl`), with importance weights or, without
//! them, the squares of the values as weights.
//!
//! Per 16-value sub-block the values go to three levels `{−1, 0, 1} ± δ` (δ = 1/8), the sign of
//! δ chosen per group of eight: sorted by value, every split into a low, a middle and a high
//! run is scored exactly from prefix sums of `w·x` and `w` kept per half (the least weighted
//! squared error at the best scale) for the four sign pairs. Each group is then snapped to
//! [`IQ1S_GRID`] (the nearest neighbour in weighted distance when off it) and the scale
//! refitted. Sub-block scales are stored as 3-bit odd multiples of the largest over 15; the
//! super-block scale is the least-squares fit of all values to their codes, with ggml's
//! factor 1.1125.
//!
//! [`IQ1S_GRID`]: crate::quant::iq_grids::IQ1S_GRID

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::BlockIq1M;
use crate::quant::QuantizeWeighted;
use crate::quant::grid_search::{IQ1S, Lookup};
use crate::quant::iq1_s::DELTA;
use crate::quant::iq1_s::quantize::{sorted_order, split_levels};
use crate::quant::util::nearest_int;
use crate::quant::weighted::{squares_or_importance, sum_squares};

/// Sub-blocks with no value above this magnitude are stored as zero (ggml's
/// `GROUP_MAX_EPS_IQ1_M`).
const GROUP_MAX_EPS_IQ1_M: f32 = 1e-7;
/// Values per sub-block.
const BLOCK: usize = 16;
/// The levels with δ added and subtracted.
const X_P: [f32; 3] = [-1.0 + DELTA, DELTA, 1.0 + DELTA];
const X_M: [f32; 3] = [-1.0 - DELTA, -DELTA, 1.0 - DELTA];
/// The `qh` bits of the signs of δ of a sub-block's two groups, by sign pair (0: both +,
/// 1: second −, 2: first −, 3: both −).
const SHIFT_MASKS: [u8; 4] = [0x00, 0x80, 0x08, 0x88];

/// The levels of group `k` (0 or 1) of a sub-block with sign pair `pair`.
fn levels_of(pair: usize, k: usize) -> &'static [f32; 3] {
    let minus = if k == 0 { pair >= 2 } else { pair % 2 == 1 };
    if minus { &X_M } else { &X_P }
}

impl QuantizeWeighted for BlockIq1M {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let grid = &*IQ1S;
        let mut b = BlockIq1M::zeroed();
        let mut scales = [0.0f32; QK_K / BLOCK];
        let mut pairs = [0usize; QK_K / BLOCK];
        let mut index = [[0usize; 2]; QK_K / BLOCK];
        let mut max_scale = 0.0f32;
        let sigma2 = 2.0 * sum_squares(&x[..QK_K]) / QK_K as f32;
        let mut weight = [0.0f32; BLOCK];
        let qw_of = |ib: usize| weights.map(|w| &w[BLOCK * ib..BLOCK * ib + BLOCK]);
        for ib in 0..QK_K / BLOCK {
            let xb = &x[BLOCK * ib..BLOCK * ib + BLOCK];
            squares_or_importance(qw_of(ib), xb, sigma2, &mut weight);
            let max = xb[1..]
                .iter()
                .fold(xb[0].abs(), |m, v| if m > v.abs() { m } else { v.abs() });
            if max < GROUP_MAX_EPS_IQ1_M {
                continue;
            }
            let Some((mut scale, mut pair, mut l)) = best_split(xb, &weight, max) else {
                continue;
            };
            if scale < 0.0 {
                for v in &mut l {
                    *v = 2 - *v;
                }
                scale = -scale;
                pair = 3 - pair;
            }
            let mut all_on_grid = true;
            for k in 0..2 {
                let group = &l[8 * k..8 * k + 8];
                index[ib][k] = match grid.lookup(grid.pack(group)) {
                    Lookup::OnGrid(i) => i,
                    Lookup::Neighbours(list) => {
                        all_on_grid = false;
                        let (xg, wg) = (&xb[8 * k..8 * k + 8], &weight[8 * k..8 * k + 8]);
                        grid.best_valued_neighbour(list, xg, wg, scale, levels_of(pair, k))
                    }
                };
            }
            if !all_on_grid {
                let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
                for k in 0..2 {
                    let xx = levels_of(pair, k);
                    for (j, &lv) in grid.levels(index[ib][k]).iter().enumerate() {
                        let (w, q) = (weight[8 * k + j], xx[lv as usize]);
                        sumqx += w * q * xb[8 * k + j];
                        sumq2 += w * q * q;
                    }
                }
                if sumqx > 0.0 && sumq2 > 0.0 {
                    scale = sumqx / sumq2;
                }
            }
            for (k, &i) in index[ib].iter().enumerate() {
                b.qs[2 * ib + k] = (i & 255) as u8;
            }
            b.qh[ib] = ((index[ib][0] >> 8) | ((index[ib][1] >> 8) << 4)) as u8;
            scales[ib] = scale;
            pairs[ib] = pair;
            max_scale = if max_scale > scale { max_scale } else { scale };
        }
        if max_scale == 0.0 {
            return b;
        }
        let mut words = [0u16; 4];
        let mut d = max_scale / 15.0;
        let id = 1.0 / d;
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for ib in 0..QK_K / BLOCK {
            let l = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 7);
            words[ib / 4] |= (l as u16) << (3 * (ib % 4));
            b.qh[ib] |= SHIFT_MASKS[pairs[ib]];
            let xb = &x[BLOCK * ib..BLOCK * ib + BLOCK];
            squares_or_importance(qw_of(ib), xb, sigma2, &mut weight);
            for k in 0..2 {
                let xx = levels_of(pairs[ib], k);
                for (j, &lv) in grid.levels(index[ib][k]).iter().enumerate() {
                    let w = weight[8 * k + j];
                    let q = xx[lv as usize] * (2 * l + 1) as f32;
                    sumqx += w * q * xb[8 * k + j];
                    sumq2 += w * q * q;
                }
            }
        }
        if sumq2 > 0.0 {
            d = sumqx / sumq2;
        }
        let s = f16::from_f32(d * 1.1125).to_bits();
        for (k, word) in words.iter_mut().enumerate() {
            *word |= ((s >> (4 * k)) & 0xF) << 12;
            b.scales[2 * k..2 * k + 2].copy_from_slice(&word.to_le_bytes());
        }
        b
    }
}

/// The best split of the sorted values of `xb` into levels 0, 1 and 2, with the sign of δ
/// chosen per half: the scale, the sign pair and the levels of the values in their order;
/// `None` when no split has a positive fit.
fn best_split(xb: &[f32], weight: &[f32; BLOCK], max: f32) -> Option<(f32, usize, [u8; BLOCK])> {
    let idx: [usize; BLOCK] = sorted_order(xb);
    let (mut px, mut pw) = ([[0.0f32; BLOCK + 1]; 2], [[0.0f32; BLOCK + 1]; 2]);
    for (j, &i) in idx.iter().enumerate() {
        let h = usize::from(i >= BLOCK / 2);
        px[h][j + 1] = px[h][j] + weight[i] * xb[i];
        px[1 - h][j + 1] = px[1 - h][j];
        pw[h][j + 1] = pw[h][j] + weight[i];
        pw[1 - h][j + 1] = pw[1 - h][j];
    }
    let txs = [px[0][BLOCK], px[1][BLOCK]];
    let tws = [pw[0][BLOCK], pw[1][BLOCK]];
    let (p2, m2) = (X_P[2], X_M[2]);
    let cp1 = X_P[0] * X_P[0] - X_P[1] * X_P[1];
    let cp2 = X_P[1] * X_P[1] - X_P[2] * X_P[2];
    let cm1 = X_M[0] * X_M[0] - X_M[1] * X_M[1];
    let cm2 = X_M[1] * X_M[1] - X_M[2] * X_M[2];
    let (mut best_score, mut scale) = (-f32::MAX, max);
    let mut best: Option<(usize, usize, usize)> = None;
    for i1 in 0..=BLOCK {
        for i2 in i1..=BLOCK {
            let (mut qx_p, mut qx_m, mut q2_p, mut q2_m) =
                ([0.0f32; 2], [0.0f32; 2], [0.0; 2], [0.0; 2]);
            for h in 0..2 {
                let sx = px[h][i1] + px[h][i2];
                qx_p[h] = txs[h] * p2 - sx;
                qx_m[h] = txs[h] * m2 - sx;
                q2_p[h] = tws[h] * p2 * p2 + pw[h][i1] * cp1 + pw[h][i2] * cp2;
                q2_m[h] = tws[h] * m2 * m2 + pw[h][i1] * cm1 + pw[h][i2] * cm2;
            }
            let sumqx = [
                qx_p[0] + qx_p[1],
                qx_p[0] + qx_m[1],
                qx_m[0] + qx_p[1],
                qx_m[0] + qx_m[1],
            ];
            let sumq2 = [
                q2_p[0] + q2_p[1],
                q2_p[0] + q2_m[1],
                q2_m[0] + q2_p[1],
                q2_m[0] + q2_m[1],
            ];
            for k in 0..4 {
                if sumq2[k] > 0.0 && sumqx[k] * sumqx[k] > best_score * sumq2[k] {
                    scale = sumqx[k] / sumq2[k];
                    best_score = scale * sumqx[k];
                    best = Some((i1, i2, k));
                }
            }
        }
    }
    let (i1, i2, pair) = best?;
    Some((scale, pair, split_levels(&idx, i1, i2)))
}
