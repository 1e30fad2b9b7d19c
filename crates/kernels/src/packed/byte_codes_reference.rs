//! The scalar reference of the packed 32-value formats with one scale per row (Q4_0, IQ4_NL,
//! Q5_0, Q8_0, MXFP4), which their SIMD kernels reproduce bit for bit: per row and block, the
//! exact integer `Σ c·a − offset·Σa` over the byte codes `c`, converted to f32, times
//! `d_w · d_a`, added to the running sum with one fused multiply-add, blocks in order; formats
//! with a min per row (Q4_1, Q5_1) then add `Σa` times `m_w · d_a` with a second one.

use super::{PackedFormat, ROWS};
use crate::operands::BlockSummary;
use crate::quant::q8_0::BlockQ8_0;

/// What the reference reads of a packed block of one of these formats.
pub(super) trait ByteCodeRows: PackedFormat<Act = BlockQ8_0> {
    /// How far the byte codes lie above the values they stand for.
    const CODE_OFFSET: i32;
    /// Row `i`'s byte code `j`, standing for `code − CODE_OFFSET`.
    fn code(&self, i: usize, j: usize) -> i32;
    /// Row `i`'s scale.
    fn scale(&self, i: usize) -> f32;
    /// Row `i`'s min, for formats whose values are `d·q + m`.
    fn min(&self, _i: usize) -> Option<f32> {
        None
    }
}

/// The sixteen rows of `w` (one row group, `nb` blocks) against each of the `out.len()` tokens
/// of `a` (`nb` blocks each, summaries in `s`).
pub(super) fn dot_group<P: ByteCodeRows>(
    w: &[P],
    a: &[BlockQ8_0],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    super::reference::dot_group(w, a, s, out, |acc, i, x, y, s| {
        let s = &s[0];
        let dot: i32 = (0..32).map(|j| x.code(i, j) * y.qs[j] as i32).sum();
        let isum = dot - P::CODE_OFFSET * s.sum;
        let acc = (x.scale(i) * s.d).mul_add(isum as f32, acc);
        match x.min(i) {
            Some(min) => (min * s.d).mul_add(s.sum as f32, acc),
            None => acc,
        }
    });
}
