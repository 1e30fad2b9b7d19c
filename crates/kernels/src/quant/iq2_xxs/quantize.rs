//! ggml's IQ2_XXS quantizer (`quantize_row_iq2_xxs_impl`), which needs importance weights.
//!
//! Per 32-value sub-block: the signs are taken out (each group of eight keeps an even number of
//! negatives, flipping the least important value when needed, so seven bits store them), the
//! magnitudes are rounded to the levels {1, 3, 5} of a scale tried at thirteen values around a
//! first estimate, each group of eight snapped to the nearest point of [`IQ2XXS_GRID`] (through
//! the neighbour lists of [`grid_search`]), and the scale with the best weighted fit is kept.
//! The sub-block scales are then stored as 4-bit multiples of the largest over 31.
//!
//! [`IQ2XXS_GRID`]: crate::quant::iq_grids::IQ2XXS_GRID
//! [`grid_search`]: crate::quant::grid_search

use half::f16;
use rinfer_formats::QK_K;

use super::BlockIq2Xxs;
use crate::quant::QuantizeWeighted;
use crate::quant::grid_search::{IQ2XXS, Lookup};
use crate::quant::util::{GROUP_MAX_EPS, nearest_int};
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
            for k in 0..4 {
                let (mut nflip, mut s) = (0, 0u8);
                for i in 0..8 {
                    let v = xb[8 * k + i];
                    if v >= 0.0 {
                        xval[8 * k + i] = v;
                    } else {
                        xval[8 * k + i] = -v;
                        nflip += 1;
                        s |= 1 << i;
                    }
                }
                if nflip % 2 == 1 {
                    let importance = |i: usize| weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                    let (mut imin, mut min) = (0, importance(0));
                    for i in 1..8 {
                        let ax = importance(i);
                        if ax < min {
                            min = ax;
                            imin = i;
                        }
                    }
                    xval[8 * k + imin] = -xval[8 * k + imin];
                    s ^= 1 << imin;
                }
                block_signs[k] = s & 127;
            }
            let max = xval[1..]
                .iter()
                .fold(xval[0], |m, &v| if m > v { m } else { v });
            if max < GROUP_MAX_EPS {
                continue;
            }
            let mut l = [0u8; 32];
            let mut scale = make_qp_quants(K_MAX_Q + 1, &xval, &mut l, &weight);
            let eff_max = scale * K_MAX_Q as f32;
            if eff_max <= 0.0 {
                continue;
            }
            let mut laux = [0u8; 32];
            let mut best = 0.0f32;
            for is in -6..=6 {
                let id = ((2 * K_MAX_Q - 1) as f32 + is as f32 * 0.1) / eff_max;
                let this_scale = 1.0 / id;
                for k in 0..4 {
                    snap_group(grid, &xval, &waux, k, id, this_scale, &mut laux);
                }
                let (sumqx, sumq2) = fit(&weight, &xval, &laux);
                if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                    scale = sumqx / sumq2;
                    best = scale * sumqx;
                    l = laux;
                }
            }
            if scale > 0.0 {
                let id = 1.0 / scale;
                for k in 0..4 {
                    let index = snap_group(grid, &xval, &waux, k, id, scale, &mut l);
                    l[8 * k..8 * k + 8].copy_from_slice(&grid.levels(index).map(|v| v as u8));
                }
                let (sumqx, sumq2) = fit(&weight, &xval, &l);
                if sumq2 > 0.0 {
                    scale = sumqx / sumq2;
                }
            }
            if scale < 0.0 {
                scale = -scale;
                for s in &mut block_signs {
                    *s = !*s & 127;
                }
            }
            for k in 0..4 {
                let u = pack(&l[8 * k..8 * k + 8]);
                // Codes always come from the grid here; ggml aborts otherwise.
                let index = match grid.lookup(u) {
                    Lookup::OnGrid(i) => i,
                    Lookup::Neighbours(_) => 0,
                };
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
        let d = max_scale / 31.0;
        b.d = f16::from_f32(d);
        let id = 1.0 / d;
        for ib in 0..QK_K / 32 {
            let l = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 15);
            q2[2 * ib + 1] |= (l as u32) << 28;
        }
        for (i, w) in q2.iter().enumerate() {
            b.qs[2 * i] = *w as u16;
            b.qs[2 * i + 1] = (*w >> 16) as u16;
        }
        b
    }
}

/// Eight levels packed two bits each, as the grid map indexes them.
fn pack(levels: &[u8]) -> usize {
    levels
        .iter()
        .enumerate()
        .fold(0, |u, (i, &l)| u | (l as usize) << (2 * i))
}

/// Rounds group `k` of `xval` to levels at inverse scale `id`, snaps them to the grid (the
/// best neighbour at `scale` when off it, written into `l`) and gives the grid index.
fn snap_group(
    grid: &crate::quant::grid_search::GridSearch<8>,
    xval: &[f32; 32],
    waux: &[f32; 32],
    k: usize,
    id: f32,
    scale: f32,
    l: &mut [u8; 32],
) -> usize {
    let group = &mut l[8 * k..8 * k + 8];
    for (i, q) in group.iter_mut().enumerate() {
        let v = nearest_int(0.5 * (id * xval[8 * k + i] - 1.0));
        *q = v.clamp(0, K_MAX_Q - 1) as u8;
    }
    match grid.lookup(pack(group)) {
        Lookup::OnGrid(i) => i,
        Lookup::Neighbours(list) => {
            let i = grid.best_neighbour(
                list,
                &xval[8 * k..8 * k + 8],
                &waux[8 * k..8 * k + 8],
                scale,
            );
            group.copy_from_slice(&grid.levels(i).map(|v| v as u8));
            i
        }
    }
}

/// `Σ w·x·q` and `Σ w·q²` of the levels `l` (values `q = 2l + 1`).
fn fit(weight: &[f32; 32], xval: &[f32; 32], l: &[u8; 32]) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    for i in 0..32 {
        let (w, q) = (weight[i], (2 * l[i] as i32 + 1) as f32);
        sumqx += w * xval[i] * q;
        sumq2 += w * q * q;
    }
    (sumqx, sumq2)
}
