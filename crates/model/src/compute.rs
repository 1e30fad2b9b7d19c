//! The model's calls into the kernels, in the shapes the forward pass uses.

use rinfer_kernels::ops::{self, Activation};
use rinfer_kernels::{ActivationBuffer, Kernels, WeightMatrix};

use crate::error::ModelError;
use crate::weights::{Linear, Matrix};

/// The kernel view of a weight matrix.
pub(crate) fn weight_matrix(m: &Matrix) -> Result<WeightMatrix<'_>, ModelError> {
    Ok(WeightMatrix::new(m.ty, m.rows, m.cols, m.data())?)
}

/// Row `row` of `m` as f32 into `out`.
pub(crate) fn dequantize(m: &Matrix, row: usize, out: &mut [f32]) -> Result<(), ModelError> {
    Ok(rinfer_kernels::dequantize_row(m.ty, m.row(row), out)?)
}

/// `out[i] = W · x[i]` for the `n` rows of `x`.
pub(crate) fn matmul(
    w: &Matrix,
    x: &[f32],
    n: usize,
    out: &mut [f32],
    act: &mut ActivationBuffer,
) -> Result<(), ModelError> {
    let (x, y) = (&x[..n * w.cols], &mut out[..n * w.rows]);
    if let Some((packed, rows)) = w.packed() {
        return Ok(rinfer_kernels::matmul_packed_rows(
            packed, rows, x, n, act, y,
        )?);
    }
    let wm = weight_matrix(w)?;
    Ok(rinfer_kernels::matmul(
        Kernels::detected(),
        &wm,
        x,
        n,
        act,
        y,
    )?)
}

/// `out[i] = W · x[i] + b`.
pub(crate) fn linear(
    l: &Linear,
    x: &[f32],
    n: usize,
    out: &mut [f32],
    act: &mut ActivationBuffer,
) -> Result<(), ModelError> {
    matmul(&l.weight, x, n, out, act)?;
    if let Some(bias) = &l.bias {
        for row in out[..n * l.weight.rows].chunks_exact_mut(l.weight.rows) {
            ops::add_inplace(row, bias);
        }
    }
    Ok(())
}

/// The activation the FFN applies: GELU is the tanh form every GELU model here uses.
pub(crate) const GELU: Activation = Activation::GeluTanh;
