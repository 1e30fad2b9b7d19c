//! `Y = W·X` for a batch of activation rows (prefill), parallel over output rows.
//!
//! Each task owns a contiguous range of weight rows for every token (one parallel region per
//! product) and dots each row with a tile of [`TOKEN_TILE`] tokens at a time while it is hot in
//! cache; [`TypeKernels::vec_dot_tile`] decodes each weight block once for the whole tile where
//! the type has a tile kernel, and [`TypeKernels::vec_dot_pairs`] takes two rows at once where
//! the type has a two-row kernel (AArch64's int8 matrix multiply). Every output equals the [`TypeKernels::vec_dot`] call that
//! [`crate::matvec()`] makes, so each token's outputs are bit-identical to a matvec of that
//! token.

use crate::dispatch::{Kernels, TypeKernels};
use crate::error::KernelError;
use crate::matvec::{matvec, quantize_activations};
use crate::operands::{ActivationBuffer, TOKEN_TILE, WeightMatrix};
use crate::parallel::{for_row_ranges, rows_per_task};

/// `Y = W·X`: `x` holds `n_tokens` rows of `W.cols()` values, `y` receives `n_tokens` rows of
/// `W.rows()` values. All tokens are quantized once into `act`.
///
/// # Errors
/// As [`crate::matvec()`], and [`KernelError::ScratchTooSmall`] when `act` was sized for fewer
/// tokens, columns or rows.
pub fn matmul(
    kernels: &Kernels,
    w: &WeightMatrix<'_>,
    x: &[f32],
    n_tokens: usize,
    act: &mut ActivationBuffer,
    y: &mut [f32],
) -> Result<(), KernelError> {
    if n_tokens == 1 {
        return matvec(kernels, w, x, act, y);
    }
    let k = kernels.get(w.ty())?;
    w.check_align(k.align())?;
    let rows = w.rows();
    KernelError::check_len("output", n_tokens * rows, y.len())?;
    // The tile holds at least one token tile for every row; groups of as many tokens as fit
    // each run as one parallel region (the whole batch, except for very tall matrices).
    let tile_needed = rows * TOKEN_TILE.min(n_tokens);
    if act.tile.len() < tile_needed {
        return Err(KernelError::ScratchTooSmall {
            what: "matmul tile",
            needed: tile_needed,
            capacity: act.tile.len(),
        });
    }
    let group = (act.tile.len() / rows / TOKEN_TILE * TOKEN_TILE).max(TOKEN_TILE);
    let mut tile = std::mem::take(&mut act.tile);
    let result = quantize_activations(k, w, x, n_tokens, act).map(|a| {
        let a_row = k.activation_row_bytes(w.cols());
        for g0 in (0..n_tokens).step_by(group) {
            let n = group.min(n_tokens - g0);
            let acts = &a[g0 * a_row..(g0 + n) * a_row];
            let out = &mut y[g0 * rows..(g0 + n) * rows];
            matmul_group(k, w, acts, n, &mut tile, out);
        }
    });
    act.tile = tile;
    result
}

/// [`matmul`] of `n` quantized activation rows `a` in one parallel region.
fn matmul_group(
    k: &TypeKernels,
    w: &WeightMatrix<'_>,
    a: &[u8],
    n: usize,
    tile: &mut [f32],
    y: &mut [f32],
) {
    let a_row = a.len() / n;
    let chunk = rows_per_task(w.rows(), w.row_bytes() * n);
    for_row_ranges(n, chunk, tile, y, |first, out| {
        let len = out.len() / n;
        // Row pairs where the type has a two-row kernel, else single rows.
        let step = if k.has_row_pairs() { 2 } else { 1 };
        let mut dots = [0.0; 2 * TOKEN_TILE];
        for t0 in (0..n).step_by(TOKEN_TILE) {
            let nt = TOKEN_TILE.min(n - t0);
            let acts = &a[t0 * a_row..(t0 + nt) * a_row];
            for i in (0..len).step_by(step) {
                let rows = step.min(len - i);
                let dots = &mut dots[..rows * nt];
                match rows {
                    2 => k.vec_dot_pairs(w.row_range(first + i, 2), acts, dots),
                    _ => k.vec_dot_tile(w.row(first + i), acts, dots),
                }
                for (r, dots) in dots.chunks_exact(nt).enumerate() {
                    for (t, &d) in dots.iter().enumerate() {
                        out[(t0 + t) * len + i + r] = d;
                    }
                }
            }
        }
    });
}
