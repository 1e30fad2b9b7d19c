//! `y = W·x` for one activation row (decode), parallel over output rows, plus the weight-matrix
//! view and the activation scratch both drivers share.
//!
//! Determinism: every output value is one [`TypeKernels::vec_dot`] call on one thread, so the
//! result does not depend on the number of threads or on how rows are split among them.

use rayon::prelude::*;
use rinfer_formats::GgmlType;

use crate::dispatch::{Kernels, TypeKernels};
use crate::error::KernelError;
use crate::packed::BlockSummary;

/// Weight bytes below which a task is not worth handing to another thread: handing it over
/// and joining it costs about a microsecond, the time to stream this much.
const MIN_TASK_BYTES: usize = 16 << 10;

/// Tasks per thread of the pool: contiguous row ranges, few enough that scheduling costs
/// nothing, several so that a thread the OS delays does not hold up the whole product.
const TASKS_PER_THREAD: usize = 4;

/// Rows per task when `rows` outputs each cost `bytes_per_row` weight bytes, or `rows` when the
/// whole product should run on the calling thread.
pub(crate) fn rows_per_task(rows: usize, bytes_per_row: usize) -> usize {
    let by_size = rows * bytes_per_row / MIN_TASK_BYTES;
    let tasks = by_size.min(rayon::current_num_threads() * TASKS_PER_THREAD);
    rows.div_ceil(tasks.max(1)).max(1)
}

/// A row-major weight matrix of `rows × cols` values of one type, checked once on creation.
#[derive(Clone, Copy, Debug)]
pub struct WeightMatrix<'a> {
    ty: GgmlType,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    data: &'a [u8],
}

impl<'a> WeightMatrix<'a> {
    /// Views `data` as `rows` rows of `cols` values of type `ty`.
    ///
    /// # Errors
    /// [`KernelError::PartialBlock`] when `cols` is not a whole number of blocks and
    /// [`KernelError::LengthMismatch`] when `data` is not exactly `rows` rows long.
    pub fn new(
        ty: GgmlType,
        rows: usize,
        cols: usize,
        data: &'a [u8],
    ) -> Result<Self, KernelError> {
        if !cols.is_multiple_of(ty.block_size()) {
            return Err(KernelError::PartialBlock {
                ty,
                len: cols,
                unit: "elements",
            });
        }
        let row_bytes = cols / ty.block_size() * ty.type_size();
        let expected = rows * row_bytes;
        if data.len() != expected {
            return Err(KernelError::LengthMismatch {
                what: "weight data",
                expected,
                actual: data.len(),
            });
        }
        Ok(WeightMatrix {
            ty,
            rows,
            cols,
            row_bytes,
            data,
        })
    }

    /// The element type.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// Number of rows (outputs).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns (inputs).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes of one row.
    pub(crate) fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    /// The raw bytes of row `r`.
    #[inline]
    pub fn row(&self, r: usize) -> &'a [u8] {
        &self.data[r * self.row_bytes..(r + 1) * self.row_bytes]
    }

    /// Checks the data alignment against the type's kernels.
    pub(crate) fn check_align(&self, k: &TypeKernels) -> Result<(), KernelError> {
        if !(self.data.as_ptr() as usize).is_multiple_of(k.align()) {
            return Err(KernelError::Misaligned {
                ty: self.ty,
                align: k.align(),
            });
        }
        Ok(())
    }
}

/// Caller-owned scratch of the drivers: the quantized activation rows and, for
/// [`crate::matmul()`], its outputs grouped by task. Sized once; the drivers never allocate.
pub struct ActivationBuffer {
    /// Quantized activations; `u64` storage keeps every activation format aligned.
    words: Vec<u64>,
    /// [`crate::matmul()`]'s outputs, `[row range of a task][token][row]`.
    pub(crate) tile: Vec<f32>,
    /// Scale and code sum of each quantized activation block, for packed weights.
    pub(crate) summaries: Vec<BlockSummary>,
}

impl ActivationBuffer {
    /// Scratch for [`matvec`] on rows of up to `max_cols` values.
    pub fn for_matvec(max_cols: usize) -> Self {
        Self::for_matmul(1, max_cols, 0)
    }

    /// Scratch for [`crate::matmul()`] on up to `max_tokens` rows of `max_cols` values into up to
    /// `max_rows` outputs per token (and for [`matvec`] on rows of up to `max_cols`).
    pub fn for_matmul(max_tokens: usize, max_cols: usize, max_rows: usize) -> Self {
        // F32 activations are the largest format: 4 bytes per value.
        let bytes = max_tokens * max_cols * 4;
        let tile = if max_tokens > 1 {
            max_rows * crate::matmul::TOKEN_TILE.min(max_tokens)
        } else {
            0
        };
        ActivationBuffer {
            words: vec![0; bytes.div_ceil(8)],
            tile: vec![0.0; tile],
            summaries: vec![BlockSummary::default(); max_tokens * max_cols / 32],
        }
    }

    /// The first `bytes` bytes of activation storage, `blocks` block summaries and at least
    /// `tile` values of output tile (all the tile there is), borrowed together.
    ///
    /// # Errors
    /// [`KernelError::ScratchTooSmall`] when the buffer holds less.
    pub(crate) fn parts(
        &mut self,
        bytes: usize,
        blocks: usize,
        tile: usize,
    ) -> Result<ScratchParts<'_>, KernelError> {
        let too_small = |what, needed, capacity| KernelError::ScratchTooSmall {
            what,
            needed,
            capacity,
        };
        let words: &mut [u8] = bytemuck::cast_slice_mut(&mut self.words);
        let capacity = words.len();
        let words = words
            .get_mut(..bytes)
            .ok_or(too_small("activations", bytes, capacity))?;
        let capacity = self.summaries.len();
        let summaries = self.summaries.get_mut(..blocks).ok_or(too_small(
            "activation block summaries",
            blocks,
            capacity,
        ))?;
        if self.tile.len() < tile {
            return Err(too_small("matmul tile", tile, self.tile.len()));
        }
        Ok(ScratchParts {
            bytes: words,
            summaries,
            tile: &mut self.tile,
        })
    }

    /// The first `len` bytes of activation storage.
    ///
    /// # Errors
    /// [`KernelError::ScratchTooSmall`] when the buffer holds fewer bytes.
    pub(crate) fn bytes_mut(&mut self, len: usize) -> Result<&mut [u8], KernelError> {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.words);
        let capacity = bytes.len();
        bytes.get_mut(..len).ok_or(KernelError::ScratchTooSmall {
            what: "activations",
            needed: len,
            capacity,
        })
    }
}

/// The pieces of an [`ActivationBuffer`] a packed product borrows at once.
pub(crate) struct ScratchParts<'a> {
    /// Quantized activation storage.
    pub(crate) bytes: &'a mut [u8],
    /// Activation block summaries.
    pub(crate) summaries: &'a mut [BlockSummary],
    /// The whole output tile.
    pub(crate) tile: &'a mut [f32],
}

/// Checks `x` against the matrix and quantizes it into `act`; returns the quantized row.
pub(crate) fn quantize_activations<'b>(
    k: &TypeKernels,
    w: &WeightMatrix<'_>,
    x: &[f32],
    n_tokens: usize,
    act: &'b mut ActivationBuffer,
) -> Result<&'b [u8], KernelError> {
    let act_ty = k.activation_type();
    if !w.cols.is_multiple_of(act_ty.block_size()) {
        return Err(KernelError::PartialBlock {
            ty: act_ty,
            len: w.cols,
            unit: "elements",
        });
    }
    let expected = n_tokens * w.cols;
    if x.len() != expected {
        return Err(KernelError::LengthMismatch {
            what: "activations",
            expected,
            actual: x.len(),
        });
    }
    let row_bytes = k.activation_row_bytes(w.cols);
    let bytes = act.bytes_mut(n_tokens * row_bytes)?;
    if n_tokens > 0 && row_bytes > 0 {
        bytes
            .par_chunks_mut(row_bytes)
            .zip(x.par_chunks(w.cols))
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
pub fn matvec(
    kernels: &Kernels,
    w: &WeightMatrix<'_>,
    x: &[f32],
    act: &mut ActivationBuffer,
    y: &mut [f32],
) -> Result<(), KernelError> {
    let k = kernels.get(w.ty)?;
    w.check_align(k)?;
    if y.len() != w.rows {
        return Err(KernelError::LengthMismatch {
            what: "output",
            expected: w.rows,
            actual: y.len(),
        });
    }
    let a = quantize_activations(k, w, x, 1, act)?;
    let dot_rows = |first: usize, ys: &mut [f32]| {
        for (r, y) in (first..).zip(ys) {
            *y = k.vec_dot(w.row(r), a);
        }
    };
    // One chunk (a small matrix) runs on the calling thread without involving the pool.
    let chunk = rows_per_task(w.rows, w.row_bytes);
    y.par_chunks_mut(chunk)
        .with_max_len(1)
        .enumerate()
        .for_each(|(i, ys)| dot_rows(i * chunk, ys));
    Ok(())
}

#[cfg(test)]
mod tests;
