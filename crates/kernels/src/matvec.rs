//! `y = W·x` for one activation row (decode), parallel over output rows.
//!
//! Determinism: every output value is one [`TypeKernels::vec_dot`] call on one thread, so the
//! result does not depend on the number of threads or on how rows are split among them.

use rayon::prelude::*;

use crate::dispatch::{Kernels, TypeKernels};
use crate::error::KernelError;
use crate::operands::{ActivationBuffer, WeightMatrix};
use crate::parallel::rows_per_task;

/// Checks `x` against the matrix and quantizes it into `act`; returns the quantized rows.
pub(crate) fn quantize_activations<'b>(
    k: &TypeKernels,
    w: &WeightMatrix<'_>,
    x: &[f32],
    n_tokens: usize,
    act: &'b mut ActivationBuffer,
) -> Result<&'b [u8], KernelError> {
    let act_ty = k.activation_type();
    let cols = w.cols();
    KernelError::check_whole_blocks(act_ty, cols, act_ty.block_size(), "elements")?;
    KernelError::check_len("activations", n_tokens * cols, x.len())?;
    let row_bytes = k.activation_row_bytes(cols);
    let bytes = act.bytes_mut(n_tokens * row_bytes)?;
    if n_tokens > 0 && row_bytes > 0 {
        bytes
            .par_chunks_mut(row_bytes)
            .zip(x.par_chunks(cols))
            .for_each(|(out, x)| k.quantize_activation(x, out));
    }
    Ok(bytes)
}

/// `y = W·x`: quantizes `x` once into `act`, then one fused dot product per output row, rows
/// spread over the current rayon pool in a few contiguous ranges per thread (on the calling
/// thread alone when the matrix is small).
///
/// # Errors
/// When `W`'s type has no dot product, `x.len() != W.cols()`, `y.len() != W.rows()`, the
/// weight data is misaligned for its blocks, or `act` is too small.
///
/// ```
/// use rinfer_formats::GgmlType;
/// use rinfer_kernels::{ActivationBuffer, Kernels, WeightMatrix, matvec};
///
/// // Two rows of one Q8_0 block each: scale 1.0 (f16 0x3C00), codes all 1, then all 2.
/// let mut data = Vec::new();
/// for code in [1u8, 2] {
///     data.extend([0x00, 0x3C]);
///     data.extend([code; 32]);
/// }
/// let w = WeightMatrix::new(GgmlType::Q8_0, 2, 32, &data)?;
/// let mut act = ActivationBuffer::for_matvec(32);
/// let mut y = [0.0f32; 2];
/// matvec(Kernels::detected(), &w, &[1.0; 32], &mut act, &mut y)?;
/// // Activations are quantized to Q8_0 too, so the products are close to 32 and 64.
/// assert!((y[0] - 32.0).abs() < 0.1 && (y[1] - 64.0).abs() < 0.1);
/// # Ok::<(), rinfer_kernels::KernelError>(())
/// ```
pub fn matvec(
    kernels: &Kernels,
    w: &WeightMatrix<'_>,
    x: &[f32],
    act: &mut ActivationBuffer,
    y: &mut [f32],
) -> Result<(), KernelError> {
    let k = kernels.get(w.ty())?;
    w.check_align(k.align())?;
    KernelError::check_len("output", w.rows(), y.len())?;
    let a = quantize_activations(k, w, x, 1, act)?;
    let dot_rows = |first: usize, ys: &mut [f32]| {
        for (r, y) in (first..).zip(ys) {
            *y = k.vec_dot(w.row(r), a);
        }
    };
    // One chunk (a small matrix) runs on the calling thread without involving the pool.
    let chunk = rows_per_task(w.rows(), w.row_bytes());
    y.par_chunks_mut(chunk)
        .with_max_len(1)
        .enumerate()
        .for_each(|(i, ys)| dot_rows(i * chunk, ys));
    Ok(())
}

#[cfg(test)]
mod tests;
