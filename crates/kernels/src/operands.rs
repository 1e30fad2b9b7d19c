//! The operands every product driver shares: the weight-matrix view, the caller-owned
//! activation scratch, the summaries of quantized activation blocks that packed kernels read,
//! and the token tile the batched kernels work in.
//!
//! This module sits below the block formats and the drivers: it names no format.

use rinfer_formats::GgmlType;

use crate::error::KernelError;

/// Tokens dotted with one weight row before moving to the next row (and the most activation
/// rows a tile kernel takes at once).
pub(crate) const TOKEN_TILE: usize = 8;

/// A row-major weight matrix of `rows × cols` values of one type, checked once on creation.
///
/// ```
/// use rinfer_formats::GgmlType;
/// use rinfer_kernels::WeightMatrix;
///
/// let data = vec![0u8; 2 * 34]; // two rows of one Q8_0 block
/// let w = WeightMatrix::new(GgmlType::Q8_0, 2, 32, &data)?;
/// assert_eq!((w.rows(), w.cols(), w.row(1).len()), (2, 32, 34));
/// # Ok::<(), rinfer_kernels::KernelError>(())
/// ```
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
        KernelError::check_whole_blocks(ty, cols, ty.block_size(), "elements")?;
        let row_bytes = cols / ty.block_size() * ty.type_size();
        KernelError::check_len("weight data", rows * row_bytes, data.len())?;
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

    /// The raw bytes of the `n` rows from row `r` on, one after the other.
    #[inline]
    pub(crate) fn row_range(&self, r: usize, n: usize) -> &'a [u8] {
        &self.data[r * self.row_bytes..(r + n) * self.row_bytes]
    }

    /// Checks that the data starts at a multiple of `align` (that of the type's blocks).
    pub(crate) fn check_align(&self, align: usize) -> Result<(), KernelError> {
        if !(self.data.as_ptr() as usize).is_multiple_of(align) {
            return Err(KernelError::Misaligned { ty: self.ty, align });
        }
        Ok(())
    }
}

/// The f32 scale and the code sum of one 32-value group of a quantized activation row, computed
/// once per product for the packed kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct BlockSummary {
    /// The group's scale.
    pub(crate) d: f32,
    /// The sum of its 32 codes.
    pub(crate) sum: i32,
}

/// Caller-owned scratch of the product drivers: the quantized activation rows, their block
/// summaries and, for batches, the outputs grouped by task. Sized once; the drivers never
/// allocate.
///
/// ```
/// use rinfer_kernels::ActivationBuffer;
///
/// // Enough for products of up to 128 tokens of 640 values into up to 2048 outputs each.
/// let act = ActivationBuffer::for_matmul(128, 640, 2048);
/// # drop(act);
/// ```
#[derive(Default)]
pub struct ActivationBuffer {
    /// Quantized activations; `u64` storage keeps every activation format aligned.
    words: Vec<u64>,
    /// Batched products' outputs, `[row range of a task][token][row]`.
    pub(crate) tile: Vec<f32>,
    /// Scale and code sum of each quantized activation block, for packed weights.
    summaries: Vec<BlockSummary>,
}

impl ActivationBuffer {
    /// Scratch for one-token products ([`crate::matvec()`]) on rows of up to `max_cols` values.
    pub fn for_matvec(max_cols: usize) -> Self {
        Self::for_matmul(1, max_cols, 0)
    }

    /// Scratch for products of up to `max_tokens` rows of `max_cols` values into up to
    /// `max_rows` outputs per token ([`crate::matmul()`], [`crate::matmul_packed()`]), and for
    /// one-token products on rows of up to `max_cols`.
    pub fn for_matmul(max_tokens: usize, max_cols: usize, max_rows: usize) -> Self {
        // F32 activations are the largest format: 4 bytes per value.
        let bytes = max_tokens * max_cols * 4;
        let tile = if max_tokens > 1 {
            max_rows * TOKEN_TILE.min(max_tokens)
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
