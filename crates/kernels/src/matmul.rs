//! `Y = W·X` for a batch of activation rows (prefill), parallel over output rows.
//!
//! Each weight row is read once per tile of [`TOKEN_TILE`] tokens and dotted with all of them
//! while it is hot in cache; [`crate::TypeKernels::vec_dot_tile`] decodes each weight block once
//! for the whole tile where the type has a tile kernel. Every output equals the
//! [`crate::TypeKernels::vec_dot`] call that [`crate::matvec()`] makes, so each token's outputs
//! are bit-identical to a matvec of that token.

use rayon::prelude::*;

use crate::dispatch::Kernels;
use crate::error::KernelError;
use crate::matvec::{ActivationBuffer, WeightMatrix, quantize_activations, rows_per_task};

/// Tokens dotted with one weight row before moving to the next row.
pub const TOKEN_TILE: usize = 8;

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
        return crate::matvec::matvec(kernels, w, x, act, y);
    }
    let k = kernels.get(w.ty())?;
    w.check_align(k)?;
    let rows = w.rows();
    let expected = n_tokens * rows;
    if y.len() != expected {
        return Err(KernelError::LengthMismatch {
            what: "output",
            expected,
            actual: y.len(),
        });
    }
    let tile_needed = rows * TOKEN_TILE.min(n_tokens);
    if act.tile.len() < tile_needed {
        return Err(KernelError::ScratchTooSmall {
            what: "matmul tile",
            needed: tile_needed,
            capacity: act.tile.len(),
        });
    }
    let mut tile = std::mem::take(&mut act.tile);
    let result = quantize_activations(k, w, x, n_tokens, act).map(|a| {
        let a_row = k.activation_row_bytes(w.cols());
        for t0 in (0..n_tokens).step_by(TOKEN_TILE) {
            let nt = TOKEN_TILE.min(n_tokens - t0);
            let tile = &mut tile[..rows * nt];
            let chunk = rows_per_task(rows, w.row_bytes() * nt);
            let acts = &a[t0 * a_row..(t0 + nt) * a_row];
            let dot_rows = |first: usize, out: &mut [f32]| {
                for (r, out) in (first..).zip(out.chunks_exact_mut(nt)) {
                    k.vec_dot_tile(w.row(r), acts, out);
                }
            };
            tile.par_chunks_mut(chunk * nt)
                .with_max_len(1)
                .enumerate()
                .for_each(|(i, out)| dot_rows(i * chunk, out));
            y[t0 * rows..(t0 + nt) * rows]
                .par_chunks_mut(rows)
                .enumerate()
                .for_each(|(t, yt)| {
                    for (r, v) in yt.iter_mut().enumerate() {
                        *v = tile[r * nt + t];
                    }
                });
        }
    });
    act.tile = tile;
    result
}
