//! ggml's IQ3_S quantizer (`quantize_row_iq3_s_impl` with 32-value sub-blocks), with importance
//! weights or, without them, the squares of the values as weights.
//!
//! Per sub-block the signs are stored apart and the magnitudes rounded to the levels
//! {1, 3, …, 15} of a scale tried at nineteen values around `max / 15`; each group of four is
//! snapped to [`IQ3S_GRID`] (the nearest neighbour in weighted distance when off it) and the
//! scale with the best weighted fit kept, then refitted. Sub-block scales are stored as 4-bit
//! odd multiples of the largest over 31, the super-block scale with ggml's factor 1.033.
//!
//! ggml does not advance its grid-index and sign cursors past an all-zero sub-block, so the
//! sub-blocks after one are stored one place early; this port does the same, for the same
//! bytes.
//!
//! [`IQ3S_GRID`]: crate::quant::iq_grids::IQ3S_GRID

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::BlockIq3S;
use crate::quant::QuantizeWeighted;
use crate::quant::grid_search::{GridSearch, IQ3S, Lookup};
use crate::quant::util::nearest_int;
use crate::quant::weighted::{importance_weights, sum_squares};

/// Levels per value (`2l + 1`, `l < K_MAX_Q`).
const K_MAX_Q: i32 = 8;
/// Values per sub-block.
const BLOCK: usize = 32;

impl QuantizeWeighted for BlockIq3S {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let grid = &*IQ3S;
        let mut b = BlockIq3S::zeroed();
        let (mut qs_at, mut signs_at) = (0, 0);
        let mut scales = [0.0f32; QK_K / BLOCK];
        let mut max_scale = 0.0f32;
        let sigma2 = 2.0 * sum_squares(&x[..QK_K]) / QK_K as f32;
        let (mut weight, mut waux, mut xval) = ([0.0f32; BLOCK], [0.0f32; BLOCK], [0.0f32; BLOCK]);
        for ib in 0..QK_K / BLOCK {
            let xb = &x[BLOCK * ib..BLOCK * ib + BLOCK];
            match weights {
                Some(qw) => {
                    importance_weights(&qw[BLOCK * ib..BLOCK * ib + BLOCK], xb, sigma2, &mut weight)
                }
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
                for i in 0..8 {
                    let v = xb[8 * k + i];
                    if v >= 0.0 {
                        xval[8 * k + i] = v;
                    } else {
                        xval[8 * k + i] = -v;
                        *s |= 1 << i;
                    }
                }
            }
            let max = xval[1..]
                .iter()
                .fold(xval[0], |m, &v| if m > v { m } else { v });
            let mut l = [0u8; BLOCK];
            if max == 0.0 {
                continue;
            }
            let mut best = 0.0f32;
            let mut scale = max / (2 * K_MAX_Q - 1) as f32;
            let mut on_grid = [false; BLOCK / 4];
            let mut laux = [0u8; BLOCK];
            for is in -9..=9 {
                let id = ((2 * K_MAX_Q - 1) as f32 + is as f32 * 0.2) / max;
                let this_scale = 1.0 / id;
                let mut on_grid_aux = [true; BLOCK / 4];
                for (k, on) in on_grid_aux.iter_mut().enumerate() {
                    (_, *on) = snap_group(grid, &xval, &waux, k, id, this_scale, &mut laux);
                }
                let (sumqx, sumq2) = fit(&weight, &xval, &laux);
                if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                    scale = sumqx / sumq2;
                    best = scale * sumqx;
                    l = laux;
                    on_grid = on_grid_aux;
                }
            }
            if on_grid.iter().any(|&on| !on) && scale > 0.0 {
                let id = 1.0 / scale;
                for k in 0..BLOCK / 4 {
                    let (index, _) = snap_group(grid, &xval, &waux, k, id, scale, &mut l);
                    l[4 * k..4 * k + 4].copy_from_slice(&grid.levels(index).map(|v| v as u8));
                }
                let (sumqx, sumq2) = fit(&weight, &xval, &l);
                if sumq2 > 0.0 {
                    scale = sumqx / sumq2;
                }
            }
            if scale < 0.0 {
                scale = -scale;
                for s in &mut block_signs {
                    *s = !*s;
                }
            }
            for k in 0..BLOCK / 4 {
                // Codes always come from the grid here; ggml aborts otherwise.
                let index = match grid.lookup(pack(&l[4 * k..4 * k + 4])) {
                    Lookup::OnGrid(i) => i,
                    Lookup::Neighbours(_) => 0,
                };
                let n = ib * (BLOCK / 4) + k;
                b.qs[qs_at + k] = (index & 255) as u8;
                b.qh[n / 8] |= ((index >> 8) << (n % 8)) as u8;
            }
            qs_at += BLOCK / 4;
            b.signs[signs_at..signs_at + BLOCK / 8].copy_from_slice(&block_signs);
            signs_at += BLOCK / 8;
            scales[ib] = scale;
            max_scale = if max_scale > scale { max_scale } else { scale };
        }
        if max_scale == 0.0 {
            return b;
        }
        let d = max_scale / 31.0;
        b.d = f16::from_f32(d * 1.033);
        let id = 1.0 / d;
        for ib in (0..QK_K / BLOCK).step_by(2) {
            let level = |s: f32| nearest_int(0.5 * (id * s - 1.0)).clamp(0, 15) as u8;
            b.scales[ib / 2] = level(scales[ib]) | (level(scales[ib + 1]) << 4);
        }
        b
    }
}

/// Four levels packed three bits each, as the grid map indexes them.
fn pack(levels: &[u8]) -> usize {
    levels
        .iter()
        .enumerate()
        .fold(0, |u, (i, &l)| u | (l as usize) << (3 * i))
}

/// Rounds group `k` of `xval` to levels at inverse scale `id` and snaps them to the grid (the
/// best neighbour at `scale` when off it, written into `l`): the grid index and whether the
/// rounded levels were on the grid.
fn snap_group(
    grid: &GridSearch<4>,
    xval: &[f32; BLOCK],
    waux: &[f32; BLOCK],
    k: usize,
    id: f32,
    scale: f32,
    l: &mut [u8; BLOCK],
) -> (usize, bool) {
    let group = &mut l[4 * k..4 * k + 4];
    for (i, q) in group.iter_mut().enumerate() {
        let v = nearest_int(0.5 * (id * xval[4 * k + i] - 1.0));
        *q = v.clamp(0, K_MAX_Q - 1) as u8;
    }
    match grid.lookup(pack(group)) {
        Lookup::OnGrid(i) => (i, true),
        Lookup::Neighbours(list) => {
            let (xg, wg) = (&xval[4 * k..4 * k + 4], &waux[4 * k..4 * k + 4]);
            let i = grid.best_neighbour(list, xg, wg, scale);
            group.copy_from_slice(&grid.levels(i).map(|v| v as u8));
            (i, false)
        }
    }
}

/// `Σ w·x·q` and `Σ w·q²` of the levels `l` (values `q = 2l + 1`).
fn fit(weight: &[f32; BLOCK], xval: &[f32; BLOCK], l: &[u8; BLOCK]) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    for i in 0..BLOCK {
        let (w, q) = (weight[i], (2 * l[i] as i32 + 1) as f32);
        sumqx += w * xval[i] * q;
        sumq2 += w * q * q;
    }
    (sumqx, sumq2)
}
