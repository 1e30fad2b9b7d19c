//! The model's calls into the kernels, in the shapes the forward pass uses.

use rinfer_kernels::ops::{self, Activation};
use rinfer_kernels::{Kernels, PackedMatrix, WeightMatrix, matmul_packed_shared};

use crate::error::ModelError;
use crate::observe::Products;
use crate::rows;
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
    products: &mut Products,
) -> Result<(), ModelError> {
    let (x, y) = (&x[..n * w.cols], &mut out[..n * w.rows]);
    products.observe(w, x, n);
    let act = &mut products.buffer;
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
    products: &mut Products,
) -> Result<(), ModelError> {
    matmul(&l.weight, x, n, out, products)?;
    add_bias(l, n, out);
    Ok(())
}

/// Adds `l`'s bias, if it has one, to each of the `n` output rows in `out`.
fn add_bias(l: &Linear, n: usize, out: &mut [f32]) {
    if let Some(bias) = &l.bias {
        let width = l.weight.rows;
        rows::each(&mut out[..n * width], width, |row| {
            ops::add_inplace(row, bias)
        });
    }
}

/// `outs[i] = Lᵢ · x + bᵢ` for layers that read the same input (a block's q, k and v; an FFN's
/// gate and up). Where every weight is a whole packed matrix quantizing its input the same
/// way, the input is quantized once and a one-token step multiplies them all in one parallel
/// region; otherwise each is multiplied alone. The outputs are the same bits either way.
pub(crate) fn linear_shared<'l, const N: usize>(
    ls: [&'l Linear; N],
    x: &[f32],
    n: usize,
    outs: [&mut [f32]; N],
    products: &mut Products,
) -> Result<(), ModelError> {
    let whole = |l: &'l Linear| -> Option<&'l PackedMatrix> {
        let (packed, rows) = l.weight.packed()?;
        (rows == (0..packed.rows())).then_some(packed)
    };
    let one_input = |ws: &[&PackedMatrix; N]| ws.iter().all(|w| w.reads_input_like(ws[0]));
    match all_some(ls.map(whole)) {
        Some(ws) if N > 0 && one_input(&ws) => {
            let mut ys = outs;
            for (y, w) in ys.iter_mut().zip(&ws) {
                *y = &mut std::mem::take(y)[..n * w.rows()];
            }
            for l in ls {
                products.observe(&l.weight, x, n);
            }
            let x = &x[..n * ws[0].cols()];
            matmul_packed_shared(&ws, x, n, &mut products.buffer, &mut ys)?;
            for (l, out) in ls.iter().zip(ys) {
                add_bias(l, n, out);
            }
        }
        _ => {
            for (l, out) in ls.iter().zip(outs) {
                linear(l, x, n, out, products)?;
            }
        }
    }
    Ok(())
}

/// Every element of `a`, or `None` if one is missing.
fn all_some<T, const N: usize>(a: [Option<T>; N]) -> Option<[T; N]> {
    if a.iter().any(Option::is_none) {
        return None;
    }
    Some(a.map(|t| t.expect("every element was checked")))
}

/// The activation the FFN applies: GELU is the tanh form every GELU model here uses.
pub(crate) const GELU: Activation = Activation::GeluTanh;
