//! ggml's IQ1_S quantizer (`quantize_row_iq1_s_impl`), which needs importance weights.
//!
//! Per 32-value sub-block the values go to three levels `{−1, 0, 1} ± δ` (δ = 1/8, its sign
//! chosen per sub-block): sorted by value, every split into a low, a middle and a high run is
//! scored exactly from prefix sums of `w·x` and `w` (the least weighted squared error at the
//! best scale), for both signs of δ. Each group of eight levels is then snapped to
//! [`IQ1S_GRID`] (the nearest neighbour in weighted distance when off it) and the scale refitted.
//! Sub-block scales are stored as 3-bit odd multiples of the largest over 15, the super-block
//! scale with ggml's factor 1.125.
//!
//! [`IQ1S_GRID`]: crate::quant::iq_grids::IQ1S_GRID

use half::f16;
use rinfer_formats::QK_K;

use super::{BlockIq1S, DELTA};
use crate::quant::QuantizeWeighted;
use crate::quant::grid_search::{IQ1S, Lookup};
use crate::quant::util::nearest_int;
use crate::quant::weighted::{importance_weights, sum_squares};

/// Sub-blocks with no value above this magnitude are stored as zero (ggml's
/// `GROUP_MAX_EPS_IQ1_S`).
const GROUP_MAX_EPS_IQ1_S: f32 = 1e-12;

/// Values per sub-block.
const BLOCK: usize = 32;

impl QuantizeWeighted for BlockIq1S {
    const NEEDS_WEIGHTS: bool = true;

    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let grid = &*IQ1S;
        let ones = [1.0f32; QK_K];
        let qw = weights.unwrap_or(&ones);
        let x_p = [-1.0 + DELTA, DELTA, 1.0 + DELTA];
        let x_m = [-1.0 - DELTA, -DELTA, 1.0 - DELTA];
        let mut b = BlockIq1S {
            d: f16::from_f32(0.0),
            qs: [0; QK_K / 8],
            qh: [0; QK_K / 32],
        };
        let mut scales = [0.0f32; QK_K / BLOCK];
        let mut shifts = [1i8; QK_K / BLOCK];
        let mut max_scale = 0.0f32;
        let sigma2 = 2.0 * sum_squares(&x[..QK_K]) / QK_K as f32;
        let mut weight = [0.0f32; BLOCK];
        for ib in 0..QK_K / BLOCK {
            let xb = &x[BLOCK * ib..BLOCK * ib + BLOCK];
            importance_weights(&qw[BLOCK * ib..BLOCK * ib + BLOCK], xb, sigma2, &mut weight);
            let max = xb[1..]
                .iter()
                .fold(xb[0].abs(), |m, v| if m > v.abs() { m } else { v.abs() });
            if max < GROUP_MAX_EPS_IQ1_S {
                continue;
            }
            let Some((mut scale, mut shift, mut l)) = best_split(xb, &weight, &x_p, &x_m, max)
            else {
                continue;
            };
            if scale < 0.0 {
                for v in &mut l {
                    *v = 2 - *v;
                }
                scale = -scale;
                shift = -shift;
            }
            let xx = if shift == 1 { &x_p } else { &x_m };
            let mut index = [0usize; BLOCK / 8];
            let mut all_on_grid = true;
            for k in 0..BLOCK / 8 {
                let group = &mut l[8 * k..8 * k + 8];
                let u = group
                    .iter()
                    .enumerate()
                    .fold(0, |u, (j, &v)| u | (v as usize) << (2 * j));
                index[k] = match grid.lookup(u) {
                    Lookup::OnGrid(i) => i,
                    Lookup::Neighbours(list) => {
                        all_on_grid = false;
                        let (xg, wg) = (&xb[8 * k..8 * k + 8], &weight[8 * k..8 * k + 8]);
                        grid.best_valued_neighbour(list, xg, wg, scale, xx)
                    }
                };
            }
            if !all_on_grid {
                let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
                for k in 0..BLOCK / 8 {
                    for (j, &lv) in grid.levels(index[k]).iter().enumerate() {
                        let (w, q) = (weight[8 * k + j], xx[lv as usize]);
                        sumqx += w * q * xb[8 * k + j];
                        sumq2 += w * q * q;
                    }
                }
                if sumqx > 0.0 && sumq2 > 0.0 {
                    scale = sumqx / sumq2;
                }
            }
            let mut h = 0u16;
            for (k, &i) in index.iter().enumerate() {
                b.qs[(BLOCK / 8) * ib + k] = (i & 255) as u8;
                h |= ((i >> 8) as u16) << (3 * k);
            }
            b.qh[ib] = h;
            scales[ib] = scale;
            shifts[ib] = shift;
            max_scale = if max_scale > scale { max_scale } else { scale };
        }
        if max_scale == 0.0 {
            return b;
        }
        let d = max_scale / 15.0;
        b.d = f16::from_f32(d * 1.125);
        let id = 1.0 / d;
        for ib in 0..QK_K / BLOCK {
            let mut l = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 7);
            if shifts[ib] == -1 {
                l |= 8;
            }
            b.qh[ib] |= (l as u16) << 12;
        }
        b
    }
}

/// The best split of the sorted values of `xb` into levels 0, 1 and 2 of `x_p` (shift 1) or
/// `x_m` (shift −1): the scale, the shift and the levels of the values in their order; `None`
/// when no split has a positive fit.
fn best_split(
    xb: &[f32],
    weight: &[f32; BLOCK],
    x_p: &[f32; 3],
    x_m: &[f32; 3],
    max: f32,
) -> Option<(f32, i8, [u8; BLOCK])> {
    let idx: [usize; BLOCK] = sorted_order(xb);
    let (mut sumx, mut sumw) = ([0.0f32; BLOCK + 1], [0.0f32; BLOCK + 1]);
    for (j, &i) in idx.iter().enumerate() {
        sumx[j + 1] = sumx[j] + weight[i] * xb[i];
        sumw[j + 1] = sumw[j] + weight[i];
    }
    let score = |i1: usize, i2: usize, v: &[f32; 3]| {
        let sumqx = (sumx[i1] - sumx[0]) * v[0]
            + (sumx[i2] - sumx[i1]) * v[1]
            + (sumx[BLOCK] - sumx[i2]) * v[2];
        let sumq2 = (sumw[i1] - sumw[0]) * v[0] * v[0]
            + (sumw[i2] - sumw[i1]) * v[1] * v[1]
            + (sumw[BLOCK] - sumw[i2]) * v[2] * v[2];
        (sumqx, sumq2)
    };
    let (mut best_score, mut scale) = (-f32::MAX, max);
    let mut best: Option<(usize, usize, i8)> = None;
    for i1 in 0..=BLOCK {
        for i2 in i1..=BLOCK {
            for (v, shift) in [(x_p, 1), (x_m, -1)] {
                let (sumqx, sumq2) = score(i1, i2, v);
                if sumq2 > 0.0 && sumqx * sumqx > best_score * sumq2 {
                    scale = sumqx / sumq2;
                    best_score = scale * sumqx;
                    best = Some((i1, i2, shift));
                }
            }
        }
    }
    let (i1, i2, shift) = best?;
    Some((scale, shift, split_levels(&idx, i1, i2)))
}

/// The order of the values `xb` sorted by value, as ggml sorts `(value, index)` pairs (glibc's
/// `qsort`, a stable merge sort).
pub(crate) fn sorted_order<const N: usize>(xb: &[f32]) -> [usize; N] {
    let mut idx: [usize; N] = std::array::from_fn(|j| j);
    idx.sort_by(|&a, &b| {
        xb[a]
            .partial_cmp(&xb[b])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    idx
}

/// The levels of values split at positions `i1` and `i2` of their sorted order `idx`: 0
/// before `i1`, 1 before `i2`, 2 from there.
pub(crate) fn split_levels<const N: usize>(idx: &[usize; N], i1: usize, i2: usize) -> [u8; N] {
    let mut l = [0u8; N];
    for (j, &i) in idx.iter().enumerate() {
        l[i] = if j < i1 {
            0
        } else if j < i2 {
            1
        } else {
            2
        };
    }
    l
}
