//! The loops every scalar reference of the packed layouts shares (tests only): each token, each
//! of the sixteen rows, and the row's blocks in order, folded into one f32 accumulator from 0.

use super::{PackedFormat, ROWS};
use crate::operands::BlockSummary;
use crate::quant::BlockFormat;

/// The sixteen rows of `w` (one row group, `nb = w.len()` blocks) against each of the
/// `out.len()` tokens of `a` (`nb` blocks each, with one summary per 32 values in `s`):
/// `fold(acc, i, x, y, s)` adds row `i`'s product of block `x` with activation block `y`
/// (whose summaries are `s`) to `acc`.
pub(super) fn dot_group<P: PackedFormat>(
    w: &[P],
    a: &[P::Act],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
    fold: impl Fn(f32, usize, &P, &P::Act, &[BlockSummary]) -> f32,
) {
    let per_block = <P::Act as BlockFormat>::ELEMS / 32;
    let nb = w.len();
    for (t, out) in out.iter_mut().enumerate() {
        let a = &a[t * nb..(t + 1) * nb];
        let s = &s[per_block * t * nb..per_block * (t + 1) * nb];
        for (i, o) in out.iter_mut().enumerate() {
            let blocks = w.iter().zip(a).zip(s.chunks_exact(per_block));
            *o = blocks.fold(0.0, |acc, ((x, y), s)| fold(acc, i, x, y, s));
        }
    }
}

/// A packed layout whose scalar reference folds each row's blocks one by one ([`dot_rows`]).
pub(super) trait RowReference: PackedFormat {
    /// Adds row `i`'s product of this block with activation block `y` (whose summaries are
    /// `s`) to `acc`.
    fn fold_row(&self, acc: f32, i: usize, y: &Self::Act, s: &[BlockSummary]) -> f32;
}

/// The scalar reference of a [`RowReference`] layout: [`dot_group`] with its
/// [`RowReference::fold_row`].
pub(super) fn dot_rows<P: RowReference>(
    w: &[P],
    a: &[P::Act],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    dot_group(w, a, s, out, |acc, i, x, y, s| x.fold_row(acc, i, y, s));
}
