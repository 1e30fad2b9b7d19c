//! The scalar reference of the packed 32-value formats with one scale per row (Q4_0, IQ4_NL,
//! Q5_0, Q8_0, MXFP4), which their SIMD kernels reproduce bit for bit: per row and block, the
//! exact integer `Σ c·a − offset·Σa` over the byte codes `c`, converted to f32, times
//! `d_w · d_a`, added to the running sum with one fused multiply-add, blocks in order; formats
//! with a min per row (Q4_1, Q5_1) then add `Σa` times `m_w · d_a` with a second one.

use super::{PackedFormat, ROWS};
use crate::operands::BlockSummary;
use crate::quant::q8_0::BlockQ8_0;

/// The sixteen rows of `w` (one row group, `nb` blocks) against each of the `out.len()` tokens
/// of `a` (`nb` blocks each, summaries in `s`); `code(x, i, j)` is row `i`'s byte code `j` of
/// block `x`, standing for `code − offset`, and `scale(x, i)` its scale.
pub(super) fn dot_group<P: PackedFormat<Act = BlockQ8_0>>(
    w: &[P],
    a: &[BlockQ8_0],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
    offset: i32,
    code: impl Fn(&P, usize, usize) -> i32,
    scale: impl Fn(&P, usize) -> f32,
) {
    dot_group_with_mins(
        w,
        a,
        s,
        out,
        offset,
        code,
        scale,
        None::<fn(&P, usize) -> f32>,
    );
}

/// [`dot_group`] for formats with a min per row: `min(x, i)` is row `i`'s min of block `x`.
#[allow(clippy::too_many_arguments)]
pub(super) fn dot_group_with_mins<P: PackedFormat<Act = BlockQ8_0>>(
    w: &[P],
    a: &[BlockQ8_0],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
    offset: i32,
    code: impl Fn(&P, usize, usize) -> i32,
    scale: impl Fn(&P, usize) -> f32,
    min: Option<impl Fn(&P, usize) -> f32>,
) {
    super::reference::dot_group(w, a, s, out, |acc, i, x, y, s| {
        let s = &s[0];
        let dot: i32 = (0..32).map(|j| code(x, i, j) * y.qs[j] as i32).sum();
        let isum = dot - offset * s.sum;
        let acc = (scale(x, i) * s.d).mul_add(isum as f32, acc);
        match &min {
            Some(min) => (min(x, i) * s.d).mul_add(s.sum as f32, acc),
            None => acc,
        }
    });
}
