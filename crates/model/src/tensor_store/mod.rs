//! Where the loader finds tensors: a GGUF file (or every shard of a split one) or a safetensors
//! checkpoint, both seen through GGUF's tensor names and dimension order.

mod gguf;
mod safetensors;

use std::ops::Range;
use std::sync::Arc;

use rinfer_formats::GgmlType;

use crate::error::ModelError;
use crate::weights::ByteSource;

pub(crate) use gguf::GgufStore;
pub(crate) use safetensors::SafetensorsStore;

/// One tensor of a store: type, GGUF-order dimensions (innermost first) and where its bytes
/// live.
pub(crate) struct StoredTensor {
    /// The GGUF name.
    pub name: String,
    /// Element or block type.
    pub ty: GgmlType,
    /// Dimensions, innermost first.
    pub dims: Vec<u64>,
    /// The owner of the bytes.
    pub source: Arc<dyn ByteSource>,
    /// The tensor's bytes within `source`.
    pub range: Range<usize>,
}

impl StoredTensor {
    /// The tensor's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.source.bytes()[self.range.clone()]
    }
}

/// A set of named tensors.
pub(crate) trait TensorStore {
    /// The tensor named `name` (GGUF naming), if present.
    fn tensor(&self, name: &str) -> Result<Option<StoredTensor>, ModelError>;

    /// Whether a tensor named `name` is present.
    fn contains(&self, name: &str) -> bool;

    /// Every tensor's GGUF name.
    fn names(&self) -> Vec<String>;
}
