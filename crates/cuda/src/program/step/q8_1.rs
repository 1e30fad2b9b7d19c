//! The decode recipe's products with block-quantized matrices: the activations quantized to
//! q8_1 once for every matrix that reads them, then the integer matvec in launches of at most
//! `MMVQ_TOKENS` rows. Matrices of one type and width whose outputs are adjacent columns of
//! one buffer (q, k and v; gate and up) share a launch, as the rows of one matrix stacked: a
//! row's arithmetic is the same in either launch, and the step takes fewer launches, the small
//! matrices (k and v) no longer a launch of a few blocks each.

use rinfer_transformer::Linear;

use super::{Recipe, Sequence, at};
use crate::launch;
use crate::program::{Arg, KernelRef, MatrixAddress, OnDevice};

/// The most matrices one q8_1 launch takes (the kernel's `Q8_1Matrices`).
const MAX_MATRICES: usize = 3;

impl Sequence<'_, '_> {
    /// Whether a decode step's products with `w` run the q8_1 matvec: a block-quantized format
    /// whose codes are aligned for its reads.
    pub(super) fn on_q8_1(&self, w: &MatrixAddress) -> bool {
        self.recipe == Recipe::Decode
            && w.ty.has_q8_1_matvec()
            && w.ptr.is_multiple_of(w.ty.codes_alignment())
    }

    /// `linear` of each of `ls` from `x` (`(buffer, row width)`), their outputs adjacent
    /// columns of `y` from its column 0, in order: on the q8_1 matvec, each run of matrices of
    /// one type and width in one launch.
    pub(super) fn adjacent_linears(
        &mut self,
        ls: &[&Linear<OnDevice>],
        (x, ldx): (u64, usize),
        (y, ldy): (u64, usize),
    ) {
        let mut column = 0;
        let mut rest = ls;
        while let Some(first) = rest.first() {
            let w = &first.weight;
            let joins = |l: &&&Linear<OnDevice>| {
                let v = &l.weight;
                self.on_q8_1(v) && (v.ty, v.cols, v.row_bytes) == (w.ty, w.cols, w.row_bytes)
            };
            let run = if self.on_q8_1(w) {
                rest.iter().take(MAX_MATRICES).take_while(joins).count()
            } else {
                1
            };
            let (group, others) = rest.split_at(run);
            let y_at = (at(y, column), ldy);
            if let [l] = group {
                self.linear(l, x, ldx, y_at.0, ldy);
            } else {
                let parts: Vec<_> = group.iter().map(|l| (&l.weight, l.bias)).collect();
                self.q8_1_products(&parts, (x, ldx), y_at, self.n);
            }
            column += group.iter().map(|l| l.weight.rows).sum::<usize>();
            rest = others;
        }
    }

    /// `y[t, r] = W[r] · q8_1(x[t]) + b[r]` for `n` tokens, in launches of at most
    /// `MMVQ_TOKENS`, `W` the rows of `parts` stacked (at most [`MAX_MATRICES`] matrices of one
    /// type and width, each with its bias), so that their outputs are adjacent columns of `y`.
    pub(super) fn q8_1_products(
        &mut self,
        parts: &[(&MatrixAddress, Option<u64>)],
        (x, ldx): (u64, usize),
        (y, ldy): (u64, usize),
        n: usize,
    ) {
        let per_launch = launch::MMVQ_TOKENS as usize;
        for t0 in (0..n).step_by(per_launch) {
            let rows = per_launch.min(n - t0);
            let (x, y) = (at(x, t0 * ldx), at(y, t0 * ldy));
            self.matvec_q8_1(parts, (x, ldx), (y, ldy), rows);
        }
    }

    /// One launch of [`Self::q8_1_products`] for `n` ≤ `MMVQ_TOKENS` tokens, `x` quantized
    /// first unless the q8_1 buffers already hold it.
    fn matvec_q8_1(
        &mut self,
        parts: &[(&MatrixAddress, Option<u64>)],
        (x, ldx): (u64, usize),
        (y, ldy): (u64, usize),
        n: usize,
    ) {
        let work = *self.b.work;
        let (w, _) = parts[0];
        debug_assert!((1..=MAX_MATRICES).contains(&parts.len()));
        if self.quantized != Some((x, ldx, w.cols)) {
            self.fixed(
                "quantize_q8_1",
                launch::quantize_q8_1(n, w.cols),
                &[
                    Arg::Ptr(x),
                    Arg::I32(ldx as i32),
                    Arg::I32(w.cols as i32),
                    Arg::Ptr(work.xq),
                    Arg::Ptr(work.xq_meta),
                ],
            );
            self.quantized = Some((x, ldx, w.cols));
        }
        let kernel = if n == 1 {
            KernelRef::MatvecQ8_1(w.ty)
        } else {
            KernelRef::MatvecBatchQ8_1(w.ty)
        };
        // Matrix i's rows start at splits[i]; a missing matrix starts past the last row.
        let rows: usize = parts.iter().map(|(m, _)| m.rows).sum();
        let mut splits = [rows; MAX_MATRICES];
        let (mut weights, mut biases) = ([w.ptr; MAX_MATRICES], [0; MAX_MATRICES]);
        let mut first = 0;
        for (i, (m, bias)) in parts.iter().enumerate() {
            (splits[i], weights[i], biases[i]) = (first, m.ptr, bias.unwrap_or(0));
            first += m.rows;
        }
        let args = [
            Arg::Ptr(weights[0]),
            Arg::Ptr(weights[1]),
            Arg::Ptr(weights[2]),
            Arg::I64(w.row_bytes),
            Arg::I32(splits[1] as i32),
            Arg::I32(splits[2] as i32),
            Arg::Ptr(biases[0]),
            Arg::Ptr(biases[1]),
            Arg::Ptr(biases[2]),
            Arg::Ptr(work.xq),
            Arg::Ptr(work.xq_meta),
            Arg::Ptr(y),
            Arg::I32(ldy as i32),
            Arg::I32(rows as i32),
            Arg::I32(w.cols as i32),
            Arg::I32(n as i32),
        ];
        self.push(kernel, launch::matvec_q8_1(rows), &args);
        if y == x {
            self.quantized = None;
        }
    }
}
