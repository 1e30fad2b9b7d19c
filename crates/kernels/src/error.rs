//! The one error type of this crate, returned only at API boundaries (shape and type checks).

use rinfer_formats::GgmlType;
use thiserror::Error;

/// Why a kernel entry point refused its arguments. Inner kernels never fail: every shape,
/// length and alignment is checked once here, before any work starts.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KernelError {
    /// The tensor type has no kernel for the requested operation.
    #[error("{op} is not implemented for {ty}")]
    Unsupported {
        /// The tensor type.
        ty: GgmlType,
        /// The operation that was asked for (`"dequantize"`, `"quantize"`, `"vec_dot"`).
        op: &'static str,
    },
    /// A length is not a whole number of blocks of the type.
    #[error("{len} {unit} is not a whole number of {ty} blocks")]
    PartialBlock {
        /// The tensor type.
        ty: GgmlType,
        /// The offending length.
        len: usize,
        /// What `len` counts (`"bytes"` or `"elements"`).
        unit: &'static str,
    },
    /// Two lengths that must agree do not.
    #[error("{what}: expected {expected}, got {actual}")]
    LengthMismatch {
        /// Which buffer was wrong.
        what: &'static str,
        /// The length the other arguments imply.
        expected: usize,
        /// The length that was passed.
        actual: usize,
    },
    /// Weight data does not start at an address aligned for the block type.
    #[error("{ty} data must be aligned to {align} bytes")]
    Misaligned {
        /// The tensor type.
        ty: GgmlType,
        /// The alignment its blocks need.
        align: usize,
    },
    /// A caller-provided scratch buffer is smaller than the call needs.
    #[error("scratch too small for {what}: need {needed}, have {capacity}")]
    ScratchTooSmall {
        /// Which part of the scratch was too small.
        what: &'static str,
        /// What the call needs.
        needed: usize,
        /// What the buffer holds.
        capacity: usize,
    },
    /// A row range of a packed matrix that does not fall on its packed row groups.
    #[error(
        "rows {start}..{end} of a packed matrix of {rows} rows: a range must start on a \
         16-row group and end on one or at the last row"
    )]
    RowRange {
        /// First row asked for.
        start: usize,
        /// One past the last row asked for.
        end: usize,
        /// Rows of the matrix.
        rows: usize,
    },
}

impl KernelError {
    /// `Ok` when the buffer `what` is `expected` long, else [`KernelError::LengthMismatch`].
    pub(crate) fn check_len(
        what: &'static str,
        expected: usize,
        actual: usize,
    ) -> Result<(), Self> {
        if actual == expected {
            return Ok(());
        }
        Err(KernelError::LengthMismatch {
            what,
            expected,
            actual,
        })
    }

    /// `Ok` when `len` (counted in `unit`s, of which a block of `ty` holds `per_block`) is a
    /// whole number of blocks, else [`KernelError::PartialBlock`].
    pub(crate) fn check_whole_blocks(
        ty: GgmlType,
        len: usize,
        per_block: usize,
        unit: &'static str,
    ) -> Result<(), Self> {
        if len.is_multiple_of(per_block) {
            return Ok(());
        }
        Err(KernelError::PartialBlock { ty, len, unit })
    }
}
