//! The tensors of a GGUF file, borrowed from its memory map.

use std::sync::Arc;

use rinfer_formats::gguf::GgufFile;

use super::{StoredTensor, TensorStore};
use crate::error::ModelError;
use crate::weights::ByteSource;

/// A GGUF file's tensors.
pub(crate) struct GgufStore {
    file: Arc<GgufFile>,
}

impl GgufStore {
    pub fn new(file: &Arc<GgufFile>) -> Self {
        Self { file: file.clone() }
    }
}

impl TensorStore for GgufStore {
    fn tensor(&self, name: &str) -> Result<Option<StoredTensor>, ModelError> {
        let Some(view) = self.file.tensor(name) else {
            return Ok(None);
        };
        let start = view.data.as_ptr() as usize - self.file.bytes().as_ptr() as usize;
        let source: Arc<dyn ByteSource> = self.file.clone();
        Ok(Some(StoredTensor {
            name: name.into(),
            ty: view.ty(),
            dims: view.dims().to_vec(),
            source,
            range: start..start + view.data.len(),
        }))
    }

    fn contains(&self, name: &str) -> bool {
        self.file.tensor(name).is_some()
    }

    fn names(&self) -> Vec<String> {
        self.file.tensors().map(|t| t.name().to_string()).collect()
    }
}
