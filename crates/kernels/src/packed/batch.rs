//! Several one-token products of packed matrices in one parallel region: the experts a
//! decode step picks, whose matrices are each too small to be worth a parallel region of
//! their own (on two threads, the hand-over and join of each small product cost more than the
//! product's share of the work).

use std::ops::Range;

use rayon::prelude::*;

use super::{PackedMatrix, ROWS, quantize_input};
use crate::error::KernelError;
use crate::operands::ActivationBuffer;
use crate::parallel::rows_per_task;

/// One product of [`matvec_packed_batch`]: rows `rows` of `matrix` times input row `input`.
#[derive(Clone, Debug)]
pub struct RowsProduct<'a> {
    /// The packed matrix.
    pub matrix: &'a PackedMatrix,
    /// Its rows to multiply (as [`crate::matmul_packed_rows`] takes them, a whole number of
    /// 16-row groups).
    pub rows: Range<usize>,
    /// Which input row of the batch it multiplies.
    pub input: usize,
}

/// `y = [W₀[rows₀]·x[input₀], W₁[rows₁]·x[input₁], …]`: every product of one token, run in
/// one parallel region, each output the bits [`crate::matmul_packed_rows`] gives it. `x`
/// holds `n_inputs` rows of the matrices' width; each is quantized once, however many products
/// read it.
///
/// # Errors
/// [`KernelError::Unsupported`] when the matrices differ in width or in the format their
/// activations are quantized to ([`PackedMatrix::reads_input_like`]),
/// [`KernelError::RowRange`] when a product's rows are not whole 16-row groups of its matrix,
/// [`KernelError::LengthMismatch`] when `x`, `y` or an input index do not fit, and
/// [`KernelError::ScratchTooSmall`] when `act` holds fewer than `n_inputs` rows.
pub fn matvec_packed_batch(
    products: &[RowsProduct<'_>],
    x: &[f32],
    n_inputs: usize,
    act: &mut ActivationBuffer,
    y: &mut [f32],
) -> Result<(), KernelError> {
    let Some(first) = products.first() else {
        return Ok(());
    };
    let cols = first.matrix.cols;
    let mut total = 0;
    for p in products {
        let m = p.matrix;
        if !m.reads_input_like(first.matrix) {
            return Err(KernelError::Unsupported {
                ty: m.ty,
                op: "a batch of packed products of different widths or activation formats",
            });
        }
        let whole_groups = p.rows.len().is_multiple_of(ROWS);
        if !m.splits_at(p.rows.start) || p.rows.end > m.rows || !whole_groups {
            return Err(KernelError::RowRange {
                start: p.rows.start,
                end: p.rows.end,
                rows: m.rows,
            });
        }
        if p.input >= n_inputs {
            return Err(KernelError::LengthMismatch {
                what: "batch input index",
                expected: n_inputs,
                actual: p.input,
            });
        }
        total += p.rows.len();
    }
    for (what, expected, actual) in [
        ("activations", n_inputs * cols, x.len()),
        ("output", total, y.len()),
    ] {
        if expected != actual {
            return Err(KernelError::LengthMismatch {
                what,
                expected,
                actual,
            });
        }
    }
    // One token per input: no output tile.
    let parts = quantize_input(first.matrix, x, n_inputs, 0, act)?;
    let (a, s) = (&*parts.bytes, &*parts.summaries);
    let (a_row, s_row) = (a.len() / n_inputs, s.len() / n_inputs);
    // Tasks of whole row groups over the concatenated outputs; every product starts on a
    // group, so no group straddles two products.
    let bytes_per_row = first.matrix.data.bytes_per_row(cols);
    let chunk = rows_per_task(total, bytes_per_row).next_multiple_of(ROWS);
    y.par_chunks_mut(chunk)
        .with_max_len(1)
        .enumerate()
        .for_each(|(c, out)| {
            let mut at = c * chunk;
            for out in out.chunks_mut(ROWS) {
                let (p, row) = locate(products, at);
                let (a, s) = (
                    &a[p.input * a_row..(p.input + 1) * a_row],
                    &s[p.input * s_row..(p.input + 1) * s_row],
                );
                p.matrix.data.dot_one(row / ROWS, cols, a, s, out);
                at += out.len();
            }
        });
    Ok(())
}

/// The product that output `at` of the concatenated outputs belongs to, and its row there.
fn locate<'p, 'a>(products: &'p [RowsProduct<'a>], mut at: usize) -> (&'p RowsProduct<'a>, usize) {
    for p in products {
        if at < p.rows.len() {
            return (p, p.rows.start + at);
        }
        at -= p.rows.len();
    }
    unreachable!("outputs were counted from the products")
}
