//! Products of several packed matrices that read the same input: a layer's query, key and
//! value projections, or an FFN's gate and up. The input is quantized once for all of them,
//! and a one-token product runs every matrix in one parallel region (on two threads, the
//! hand-over and join of a parallel region cost as much as streaming a small key or value
//! matrix).

use rayon::prelude::*;

use super::{PackedMatrix, ROWS, quantize_input};
use crate::error::KernelError;
use crate::operands::{ActivationBuffer, ScratchParts};
use crate::parallel::rows_per_task;

/// `yᵢ = Wᵢ·x` for every matrix `Wᵢ` of `ws`: `x` holds `n_tokens` rows of the matrices'
/// common width, `ys[i]` receives `n_tokens` rows of `Wᵢ.rows()` values, each the bits
/// [`crate::matmul_packed`] gives it. The input is quantized once.
///
/// # Errors
/// [`KernelError::Unsupported`] when the matrices differ in width or in the format their
/// activations are quantized to ([`PackedMatrix::reads_input_like`]), [`KernelError::LengthMismatch`] when `x`, `ys` or one of
/// its outputs do not fit, and [`KernelError::ScratchTooSmall`] when `act` was sized for
/// fewer tokens, columns or rows.
///
/// ```
/// use rinfer_formats::GgmlType;
/// use rinfer_kernels::{ActivationBuffer, Kernels, WeightMatrix, matmul_packed_shared};
///
/// let (q, k) = (vec![0u8; 32 * 34], vec![0u8; 16 * 34]); // Q8_0 rows of 32 values
/// let q = WeightMatrix::new(GgmlType::Q8_0, 32, 32, &q)?;
/// let k = WeightMatrix::new(GgmlType::Q8_0, 16, 32, &k)?;
/// let kernels = Kernels::detected();
/// // `None` where the CPU has no packed kernel: multiply the matrices one by one instead.
/// if let (Some(q), Some(k)) = (kernels.pack(&q), kernels.pack(&k)) {
///     let mut act = ActivationBuffer::for_matmul(2, 32, 32);
///     let (mut yq, mut yk) = (vec![0.0; 2 * 32], vec![0.0; 2 * 16]);
///     matmul_packed_shared(&[&q, &k], &[1.0; 2 * 32], 2, &mut act, &mut [&mut yq, &mut yk])?;
///     assert!(yq.iter().chain(&yk).all(|&y| y == 0.0));
/// }
/// # Ok::<(), rinfer_kernels::KernelError>(())
/// ```
pub fn matmul_packed_shared(
    ws: &[&PackedMatrix],
    x: &[f32],
    n_tokens: usize,
    act: &mut ActivationBuffer,
    ys: &mut [&mut [f32]],
) -> Result<(), KernelError> {
    let Some(first) = ws.first() else {
        return Ok(());
    };
    let cols = first.cols;
    for w in ws {
        if !w.reads_input_like(first) {
            return Err(KernelError::Unsupported {
                ty: w.ty,
                op: "a shared-input product of matrices of different widths or activation formats",
            });
        }
    }
    let outputs = ws.iter().zip(ys.iter());
    let checks = [
        ("activations", n_tokens * cols, x.len()),
        ("shared-input outputs", ws.len(), ys.len()),
    ]
    .into_iter()
    .chain(outputs.map(|(w, y)| ("output", n_tokens * w.rows, y.len())));
    for (what, expected, actual) in checks {
        if expected != actual {
            return Err(KernelError::LengthMismatch {
                what,
                expected,
                actual,
            });
        }
    }
    if n_tokens == 0 {
        return Ok(());
    }
    let most_rows = ws.iter().map(|w| w.rows).max().unwrap_or(0);
    let ScratchParts {
        bytes,
        summaries,
        tile,
    } = quantize_input(first, x, n_tokens, most_rows, act)?;
    if n_tokens > 1 {
        for (w, y) in ws.iter().zip(ys.iter_mut()) {
            w.data
                .matmul_quantized(0..w.rows, cols, bytes, summaries, n_tokens, tile, y);
        }
        return Ok(());
    }
    // One token: every matrix's row ranges are tasks of one parallel region.
    let (a, s) = (&*bytes, &*summaries);
    ys.par_iter_mut()
        .zip(ws.par_iter())
        .with_max_len(1)
        .flat_map(|(y, w)| {
            let chunk = rows_per_task(w.rows, w.data.bytes_per_row(cols)).next_multiple_of(ROWS);
            y.par_chunks_mut(chunk)
                .with_max_len(1)
                .enumerate()
                .map(move |(c, out)| (w, c * chunk, out))
        })
        .for_each(|(w, first, out)| {
            for (g, out) in out.chunks_mut(ROWS).enumerate() {
                w.data.dot_one(first / ROWS + g, cols, a, s, out);
            }
        });
    Ok(())
}
