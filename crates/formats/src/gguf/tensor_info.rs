//! Tensor descriptions from a GGUF header and zero-copy views of their data.

use crate::dtype::GgmlType;

/// Where a tensor lives in a GGUF file and what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// The tensor's name (`blk.0.attn_q.weight` …).
    pub name: String,
    /// The element type.
    pub ty: GgmlType,
    /// Dimensions in ggml order: `dims[0]` is the contiguous (row) dimension.
    pub dims: Vec<u64>,
    /// Offset of the data from the start of the data section.
    pub offset: u64,
    /// Bytes of data.
    pub size: u64,
}

impl TensorInfo {
    /// The number of elements.
    pub fn element_count(&self) -> u64 {
        // Validated at parse time not to overflow.
        self.dims.iter().product()
    }
}

/// A tensor's description together with its bytes, borrowed from the file.
#[derive(Clone, Copy, Debug)]
pub struct TensorView<'a> {
    /// The description.
    pub info: &'a TensorInfo,
    /// The data, `info.size` bytes.
    pub data: &'a [u8],
}

impl<'a> TensorView<'a> {
    /// The tensor's name.
    pub fn name(&self) -> &'a str {
        &self.info.name
    }

    /// The element type.
    pub fn ty(&self) -> GgmlType {
        self.info.ty
    }

    /// Dimensions in ggml order.
    pub fn dims(&self) -> &'a [u64] {
        &self.info.dims
    }
}
