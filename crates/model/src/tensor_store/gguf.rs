//! The tensors of a GGUF model, borrowed from the memory maps of its file or, for a split
//! model, of each of its shards (which `rinfer_formats::gguf::open_shards` has checked to hold
//! every tensor once).

use std::sync::Arc;

use rinfer_formats::gguf::GgufFile;

use super::{StoredTensor, TensorStore};
use crate::error::ModelError;
use crate::weights::ByteSource;

/// A GGUF model's tensors, from one file or several shards.
pub(crate) struct GgufStore {
    shards: Vec<Arc<GgufFile>>,
}

impl GgufStore {
    /// The tensors of a whole file, or of every shard of a split model (no name in two).
    pub fn new(shards: &[Arc<GgufFile>]) -> Self {
        Self {
            shards: shards.to_vec(),
        }
    }
}

impl TensorStore for GgufStore {
    fn tensor(&self, name: &str) -> Result<Option<StoredTensor>, ModelError> {
        let Some((file, view)) = self
            .shards
            .iter()
            .find_map(|file| file.tensor(name).map(|view| (file, view)))
        else {
            return Ok(None);
        };
        let start = view.data.as_ptr() as usize - file.bytes().as_ptr() as usize;
        let source: Arc<dyn ByteSource> = file.clone();
        Ok(Some(StoredTensor {
            name: name.into(),
            ty: view.ty(),
            dims: view.dims().to_vec(),
            source,
            range: start..start + view.data.len(),
        }))
    }

    fn contains(&self, name: &str) -> bool {
        self.shards.iter().any(|file| file.tensor(name).is_some())
    }

    fn names(&self) -> Vec<String> {
        self.shards
            .iter()
            .flat_map(|file| file.tensors().map(|t| t.name().to_string()))
            .collect()
    }
}
