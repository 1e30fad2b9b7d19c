//! Scalar searches shared by ggml's quantizers that take importance weights (the `quant_weights`
//! of `quantize_q4_K`, `quantize_iq2_xxs`, …), written to round exactly as ggml does: the same
//! float operations in the same order, so the codes and scales come out bit for bit.
//!
//! An importance matrix holds, per input column of a matrix, the mean square of the activations
//! it met on calibration text. The quantizers turn it into per-value weights
//! `w_i = imatrix_i · sqrt(σ² + x_i²)` (σ² a multiple of the block's mean square) and minimise
//! the weighted squared error of each block instead of the plain one.

use super::util::{GROUP_MAX_EPS, make_qkx2_quants, nearest_int, symmetric_max};

/// The per-value weights of one group of values: `qw_i · sqrt(sigma2 + x_i²)` (ggml's
/// weighting of the importance matrix `qw`).
#[inline]
pub(crate) fn importance_weights(qw: &[f32], x: &[f32], sigma2: f32, out: &mut [f32]) {
    for ((o, &q), &v) in out.iter_mut().zip(qw).zip(x) {
        *o = q * (sigma2 + v * v).sqrt();
    }
}

/// [`importance_weights`] where the importance `qw` is given, else the squares `x_i²` (ggml's
/// weights without an importance matrix).
#[inline]
pub(crate) fn squares_or_importance(qw: Option<&[f32]>, x: &[f32], sigma2: f32, out: &mut [f32]) {
    match qw {
        Some(qw) => importance_weights(qw, x, sigma2, out),
        None => {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = v * v;
            }
        }
    }
}

/// The sum of squares of `x`, accumulated in order.
#[inline]
pub(crate) fn sum_squares(x: &[f32]) -> f32 {
    x.iter().fold(0.0f32, |s, v| s + v * v)
}

/// Affine quantization of one sub-block to `0..=nmax` with a weighted grid search over the
/// scale (ggml's `make_qkx3_quants`; `weights` `None` means `x_i²`). Writes codes to `l` and
/// returns `(scale, -min)`. It is `make_qkx2_quants` with those default weights: ggml's
/// `max <= min` test there is its `max == min` (the min is never above the max).
#[allow(clippy::too_many_arguments)]
pub(crate) fn make_qkx3_quants(
    nmax: i32,
    x: &[f32],
    weights: Option<&[f32]>,
    l: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
) -> (f32, f32) {
    let mut squares = [0.0f32; 32];
    let weights = match weights {
        Some(weights) => weights,
        None => {
            for (square, &v) in squares.iter_mut().zip(x) {
                *square = v * v;
            }
            &squares[..x.len()]
        }
    };
    make_qkx2_quants(nmax, x, weights, l, rmin, rdelta, nstep, use_mad)
}

/// Quantization of non-negative values (sub-block scales or mins) to `0..=nmax` with a weighted
/// scale search and a few rounds of coordinate descent (ggml's `make_qp_quants`). Writes codes
/// to `l` (as ggml's `uint8_t`) and returns the scale.
pub(crate) fn make_qp_quants(nmax: i32, x: &[f32], l: &mut [u8], quant_weights: &[f32]) -> f32 {
    let n = x.len();
    let max = x.iter().fold(0.0f32, |m, &v| if m > v { m } else { v });
    if max < GROUP_MAX_EPS {
        l[..n].fill(0);
        return 0.0;
    }
    let mut iscale = nmax as f32 / max;
    for i in 0..n {
        l[i] = nearest_int(iscale * x[i]) as u8;
    }
    let scale = 1.0 / iscale;
    let mut best_mse = 0.0f32;
    for i in 0..n {
        let diff = x[i] - scale * l[i] as f32;
        best_mse += quant_weights[i] * diff * diff;
    }
    for is in -4..=4 {
        if is == 0 {
            continue;
        }
        let iscale_is = (0.1 * is as f32 + nmax as f32) / max;
        let scale_is = 1.0 / iscale_is;
        let mut mse = 0.0f32;
        for i in 0..n {
            let q = nearest_int(iscale_is * x[i]).min(nmax);
            let diff = x[i] - scale_is * q as f32;
            mse += quant_weights[i] * diff * diff;
        }
        if mse < best_mse {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for i in 0..n {
        let q = nearest_int(iscale * x[i]).min(nmax);
        l[i] = q as u8;
        let (w, q) = (quant_weights[i], q as f32);
        sumlx += w * x[i] * q;
        suml2 += w * q * q;
    }
    for _ in 0..5 {
        let mut changed = false;
        for i in 0..n {
            let (w, li) = (quant_weights[i], l[i] as f32);
            let mut slx = sumlx - w * x[i] * li;
            let mut sl2 = suml2 - w * li * li;
            if slx > 0.0 && sl2 > 0.0 {
                let new_l = nearest_int(x[i] * sl2 / slx).min(nmax);
                if new_l != l[i] as i32 {
                    slx += w * x[i] * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l[i] = new_l as u8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    if suml2 > 0.0 { sumlx / suml2 } else { 0.0 }
}

/// Symmetric quantization of one group to `-nmax..nmax` with a weighted scale search (ggml's
/// `make_qx_quants` with `rmse_type == 1`, and with the importance `qw` as its weights where
/// given; `None` means `x_i²`). Writes codes offset by `nmax` to `l` and returns the scale.
pub(crate) fn make_qx_quants(nmax: i32, x: &[f32], l: &mut [i8], qw: Option<&[f32]>) -> f32 {
    let n = x.len();
    let Some(max) = symmetric_max(x, l) else {
        return 0.0;
    };
    let weight = |i: usize| match qw {
        Some(qw) => qw[i],
        None => x[i] * x[i],
    };
    let code = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    let mut iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for i in 0..n {
        let q = code(iscale, x[i]);
        l[i] = (q + nmax) as i8;
        sumlx += weight(i) * x[i] * q as f32;
        suml2 += weight(i) * q as f32 * q as f32;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (mut slx, mut sl2) = (0.0f32, 0.0f32);
        for (i, &v) in x.iter().enumerate() {
            let q = code(iscale, v);
            slx += weight(i) * v * q as f32;
            sl2 += weight(i) * q as f32 * q as f32;
        }
        if sl2 > 0.0 && slx * slx > best * sl2 {
            for i in 0..n {
                l[i] = (code(iscale, x[i]) + nmax) as i8;
            }
            scale = slx / sl2;
            best = scale * slx;
        }
    }
    scale
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testing::spread_values;

    #[test]
    fn qp_quants_of_exact_multiples_give_back_the_multiples() {
        let x: Vec<f32> = (0..8).map(|i| 0.5 * i as f32).collect();
        let mut l = [0u8; 8];
        let scale = make_qp_quants(7, &x, &mut l, &[1.0; 8]);
        assert_eq!(l, [0, 1, 2, 3, 4, 5, 6, 7]);
        assert!((scale - 0.5).abs() < 1e-6, "{scale}");
    }

    #[test]
    fn qp_quants_of_zeros_are_zero() {
        let mut l = [9u8; 4];
        assert_eq!(make_qp_quants(63, &[0.0; 4], &mut l, &[1.0; 4]), 0.0);
        assert_eq!(l, [0; 4]);
    }

    #[test]
    fn qkx3_quants_keep_codes_in_range_and_reconstruct_closely() {
        let x = spread_values(32, 13, 29, 9.0, 5.0);
        let w = vec![1.0f32; 32];
        let mut l = [0u8; 32];
        let (scale, neg_min) = make_qkx3_quants(15, &x, Some(&w), &mut l, -0.9, 0.05, 36, false);
        assert!(l.iter().all(|&q| q <= 15));
        let rms = (x
            .iter()
            .zip(&l)
            .map(|(v, &q)| (scale * q as f32 - neg_min - v).powi(2))
            .sum::<f32>()
            / 32.0)
            .sqrt();
        assert!(rms < 0.1 * scale.max(0.05) + 0.1, "rms {rms} scale {scale}");
    }
}
