//! The steps ggml's grid quantizers (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) share, each
//! written once with ggml's float operations in ggml's order so the codes come out bit for bit.
//!
//! A group of values is stored as signs apart and magnitudes on a grid ([`GridSearch`]). The
//! magnitudes of a sub-block are fitted by [`search_scale`]: a scale is tried at a row of values
//! around a first estimate; at each, every group is rounded to the odd levels `2l + 1` and
//! snapped to the grid, and the trial with the best weighted fit `(Σwxq)² / Σwq²` is kept. The
//! groups that were off the grid are then snapped again at that best scale (which of them, the
//! quantizers differ on: [`Refit`]) and the scale refitted by least squares. [`SubBlockFit`]
//! does a whole sub-block: its signs, the all-zero test, the search and a sign flip should the
//! scale come out negative.

use std::ops::Range;

use rinfer_formats::QK_K;

use super::grid_search::GridSearch;
use super::util::nearest_int;
use super::weighted::{squares_or_importance, sum_squares};

/// Which groups [`search_scale`] snaps again at the best scale it found.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refit {
    /// Every group, whenever the scale is positive (IQ2_XXS).
    Always,
    /// Every group, unless the best trial put all of them on the grid; with no trial better
    /// than none, every group (IQ3_S).
    AllUnlessOnGrid,
    /// Only the groups the best trial put off the grid; none when no trial was better than
    /// none (IQ2_XS, IQ2_S, IQ3_XXS).
    OffGridOnly,
}

/// The scales [`search_scale`] tries, inverse scales `(2·levels − 1 + is·step) / max` for `is`
/// in `steps`, and what it does with the best.
pub(crate) struct Trials {
    /// The range of `is`.
    pub steps: std::ops::RangeInclusive<i32>,
    /// The step of the numerator.
    pub step: f32,
    /// The denominator: the largest magnitude (or an estimate of the largest level's value).
    pub max: f32,
    /// The scale kept when no trial fits better.
    pub start: f32,
    /// Which groups are snapped again at the best scale.
    pub refit: Refit,
}

/// How a format fits one sub-block to its grid: the sign storage, the threshold below which the
/// sub-block is stored as zero, the scale trials around `max / (2·levels − 1)` and the refit.
pub(crate) struct SubBlockFit<'g, const N: usize> {
    /// The grid.
    pub grid: &'g GridSearch<N>,
    /// Seven stored sign bits per group of eight ([`even_signs`]) rather than eight ([`signs`]).
    pub even_signs: bool,
    /// Sub-blocks whose largest magnitude is below this are stored as zero.
    pub eps: f32,
    /// The range of `is` of the [`Trials`].
    pub steps: std::ops::RangeInclusive<i32>,
    /// The step of the [`Trials`].
    pub step: f32,
    /// Which groups are snapped again at the best scale.
    pub refit: Refit,
}

/// One sub-block fitted by [`SubBlockFit::fit`]: a non-negative scale, the sign bits of each
/// group of eight and the levels of each value (the first `len / 8` and `len` used).
pub(crate) struct Fitted {
    pub scale: f32,
    pub signs: [u8; 4],
    pub levels: [u8; 32],
}

impl<const N: usize> SubBlockFit<'_, N> {
    /// Fits the values `xb` (16 or 32) with the value weights `weight`; `None` when the
    /// sub-block is stored as zero.
    pub(crate) fn fit(&self, xb: &[f32], weight: &[f32]) -> Option<Fitted> {
        let n = xb.len();
        let (mut waux, mut xval) = ([0.0f32; 32], [0.0f32; 32]);
        let (waux, xval) = (&mut waux[..n], &mut xval[..n]);
        for (a, &w) in waux.iter_mut().zip(weight) {
            *a = w.sqrt();
        }
        let mut signs_of = [0u8; 4];
        for (k, s) in signs_of[..n / 8].iter_mut().enumerate() {
            let g = 8 * k..8 * k + 8;
            *s = if self.even_signs {
                even_signs(&xb[g.clone()], &weight[g.clone()], &mut xval[g])
            } else {
                signs(&xb[g.clone()], &mut xval[g])
            };
        }
        let max = max_of(xval);
        if max < self.eps {
            return None;
        }
        let mut levels = [0u8; 32];
        let trials = Trials {
            steps: self.steps.clone(),
            step: self.step,
            max,
            start: max / (2 * self.grid.levels_count() - 1) as f32,
            refit: self.refit,
        };
        let mut scale = search_scale(self.grid, trials, xval, weight, waux, &mut levels[..n]);
        if scale < 0.0 {
            scale = -scale;
            let mask = if self.even_signs { 127 } else { 255 };
            for s in &mut signs_of {
                *s = !*s & mask;
            }
        }
        Some(Fitted {
            scale,
            signs: signs_of,
            levels,
        })
    }

    /// Fits each sub-block of the super-block `x`, as many as `scales` holds: `weigh` writes the
    /// value weights of the values at the range it is given, [`fit`](Self::fit) fits them and
    /// `store` stores fitted sub-block `ib`, whose scale goes to `scales[ib]` (left as it is for
    /// a sub-block stored as zero). Gives the largest scale, folded from 0 as ggml's `MAX`.
    pub(crate) fn fit_sub_blocks(
        &self,
        x: &[f32],
        scales: &mut [f32],
        mut weigh: impl FnMut(Range<usize>, &mut [f32]),
        mut store: impl FnMut(usize, &Fitted),
    ) -> f32 {
        let len = QK_K / scales.len();
        let mut weight = [0.0f32; 32];
        let weight = &mut weight[..len];
        let mut max_scale = 0.0f32;
        for (ib, scale_of) in scales.iter_mut().enumerate() {
            let at = len * ib..len * ib + len;
            weigh(at.clone(), weight);
            let Some(fitted) = self.fit(&x[at], weight) else {
                continue;
            };
            store(ib, &fitted);
            *scale_of = fitted.scale;
            max_scale = if max_scale > fitted.scale {
                max_scale
            } else {
                fitted.scale
            };
        }
        max_scale
    }
}

impl SubBlockFit<'_, 4> {
    /// [`fit_sub_blocks`](Self::fit_sub_blocks) as the IQ3 quantizers do it: eight 32-value
    /// sub-blocks of groups of four, weighted by [`squares_or_importance`] of the importance
    /// `weights` with `σ² = 2·Σx²/256`; `store` gets each fitted sub-block's eight grid indices.
    pub(crate) fn fit_iq3(
        &self,
        x: &[f32],
        weights: Option<&[f32]>,
        scales: &mut [f32; QK_K / 32],
        mut store: impl FnMut(usize, [usize; 8], &Fitted),
    ) -> f32 {
        let sigma2 = 2.0 * sum_squares(&x[..QK_K]) / QK_K as f32;
        let weigh = |at: Range<usize>, weight: &mut [f32]| {
            squares_or_importance(weights.map(|w| &w[at.clone()]), &x[at], sigma2, weight);
        };
        self.fit_sub_blocks(x, scales, weigh, |ib, fitted| {
            let index =
                std::array::from_fn(|k| self.grid.index_of(&fitted.levels[4 * k..4 * k + 4]));
            store(ib, index, fitted);
        })
    }
}

/// Fits the magnitudes `xval` of one sub-block (whole groups of `N`) to the grid with the value
/// weights `weight` and the distance weights `waux` (their square roots): writes the levels of
/// each group into `l` and gives the scale. `l` holds the levels kept when no trial fits
/// better than `trials.start`.
pub(crate) fn search_scale<const N: usize>(
    grid: &GridSearch<N>,
    trials: Trials,
    xval: &[f32],
    weight: &[f32],
    waux: &[f32],
    l: &mut [u8],
) -> f32 {
    let (mut scale, refit) = (trials.start, trials.refit);
    let n = xval.len();
    let groups = n / N;
    let mut laux = [0u8; 32];
    let laux = &mut laux[..n];
    let mut on_grid = [refit == Refit::OffGridOnly; 8];
    let mut best = 0.0f32;
    let odd = (2 * grid.levels_count() - 1) as f32;
    for is in trials.steps {
        let id = (odd + is as f32 * trials.step) / trials.max;
        let this_scale = 1.0 / id;
        let mut on_grid_aux = [true; 8];
        for (k, on) in on_grid_aux[..groups].iter_mut().enumerate() {
            let at = N * k..N * k + N;
            (_, *on) = grid.snap(
                &xval[at.clone()],
                &waux[at.clone()],
                id,
                this_scale,
                &mut laux[at],
            );
        }
        let (sumqx, sumq2) = fit(weight, xval, laux);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            l.copy_from_slice(laux);
            on_grid = on_grid_aux;
        }
    }
    let any_off = on_grid[..groups].iter().any(|&on| !on);
    let refit_now = match refit {
        Refit::Always => true,
        Refit::AllUnlessOnGrid | Refit::OffGridOnly => any_off,
    };
    if refit_now && scale > 0.0 {
        let id = 1.0 / scale;
        for (k, &on) in on_grid[..groups].iter().enumerate() {
            if refit == Refit::OffGridOnly && on {
                continue;
            }
            let at = N * k..N * k + N;
            grid.snap(&xval[at.clone()], &waux[at.clone()], id, scale, &mut l[at]);
        }
        let (sumqx, sumq2) = fit(weight, xval, l);
        if sumq2 > 0.0 {
            scale = sumqx / sumq2;
        }
    }
    scale
}

/// `Σ w·x·q` and `Σ w·q²` of the levels `l` (values `q = 2l + 1`), accumulated in order.
pub(crate) fn fit(weight: &[f32], xval: &[f32], l: &[u8]) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    for ((&w, &x), &l) in weight.iter().zip(xval).zip(l) {
        let q = (2 * l as i32 + 1) as f32;
        sumqx += w * x * q;
        sumq2 += w * q * q;
    }
    (sumqx, sumq2)
}

/// Splits one group of eight values `xb` into magnitudes `xval` and sign bits (bit `i`: value
/// `i` negative), as the formats with seven stored sign bits need them: with an odd number of
/// negatives, the value of least importance `weight·x²` (the first of equals) has its sign
/// flipped, its magnitude stored negative. Gives the seven stored bits.
pub(crate) fn even_signs(xb: &[f32], weight: &[f32], xval: &mut [f32]) -> u8 {
    let mut s = signs(xb, xval);
    if s.count_ones() % 2 == 1 {
        let importance = |i: usize| weight[i] * xb[i] * xb[i];
        let (mut imin, mut min) = (0, importance(0));
        for i in 1..8 {
            let ax = importance(i);
            if ax < min {
                min = ax;
                imin = i;
            }
        }
        xval[imin] = -xval[imin];
        s ^= 1 << imin;
    }
    s & 127
}

/// Splits one group of eight values `xb` into magnitudes `xval` and sign bits (bit `i`: value
/// `i` negative, `-0.0` counting as positive).
pub(crate) fn signs(xb: &[f32], xval: &mut [f32]) -> u8 {
    let mut s = 0u8;
    for (i, (v, &x)) in xval.iter_mut().zip(xb).enumerate() {
        if x >= 0.0 {
            *v = x;
        } else {
            *v = -x;
            s |= 1 << i;
        }
    }
    s
}

/// The largest of `xval`, as ggml's `MAX` folds it from the first.
pub(crate) fn max_of(xval: &[f32]) -> f32 {
    xval[1..]
        .iter()
        .fold(xval[0], |m, &v| if m > v { m } else { v })
}

/// The super-block scale `d = max_scale / 31` of the sub-block `scales` and their 4-bit levels
/// under it, `nearest_int(0.5·(s/d − 1))` clamped to `0..=15` (the stored scale is `2l + 1`).
pub(crate) fn scale_levels<const M: usize>(scales: &[f32; M], max_scale: f32) -> (f32, [u8; M]) {
    let d = max_scale / 31.0;
    let id = 1.0 / d;
    let level = |s: f32| nearest_int(0.5 * (id * s - 1.0)).clamp(0, 15) as u8;
    (d, scales.map(level))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_odd_number_of_negatives_flips_the_least_important_value() {
        let xb = [0.5f32, -0.25, 0.75, 0.1, -0.9, 0.3, -0.05, 0.2];
        let mut xval = [0.0f32; 8];
        let s = even_signs(&xb, &[1.0; 8], &mut xval);
        assert_eq!(s, 0b0001_0010);
        assert_eq!(xval[6], -0.05);
        assert_eq!(xval[1], 0.25);
    }
}
