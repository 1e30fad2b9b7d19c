//! Writing GGUF version 3 files.

use std::io::Write;
use std::path::Path;

use crate::dtype::GgmlType;
use crate::error::{GgufError, Result};

use super::GgufFile;
use super::header::tensor_bytes;
use super::metadata::{Metadata, MetadataValue};
use super::stream_writer::{GgufStreamWriter, TensorHeader};

struct PendingTensor {
    name: String,
    ty: GgmlType,
    dims: Vec<u64>,
    data: Vec<u8>,
}

/// Builds a GGUF v3 file: metadata in insertion order, then tensors laid out in insertion order,
/// each aligned to the file's alignment (32 unless `general.alignment` is set).
#[derive(Default)]
pub struct GgufWriter {
    metadata: Metadata,
    tensors: Vec<PendingTensor>,
}

impl GgufWriter {
    /// An empty file.
    pub fn new() -> Self {
        Self::default()
    }

    /// A writer holding everything in `file`: writing it reproduces the file's layout.
    pub fn from_file(file: &GgufFile) -> Result<Self> {
        let mut writer = Self::with_metadata_of(file)?;
        for t in file.tensors() {
            writer.add_tensor(t.name(), t.ty(), t.dims(), t.data.to_vec())?;
        }
        Ok(writer)
    }

    /// A writer holding the metadata of `file`, in its order, and none of its tensors.
    pub fn with_metadata_of(file: &GgufFile) -> Result<Self> {
        let mut writer = Self::new();
        for (key, value) in file.metadata().iter() {
            writer.add_metadata(key, value.clone())?;
        }
        Ok(writer)
    }

    /// Adds a metadata entry; a key added twice is an error.
    pub fn add_metadata(&mut self, key: &str, value: MetadataValue) -> Result<()> {
        self.metadata.insert(key, value)
    }

    /// Sets a metadata entry: replaces the value of a key already added, in its place.
    pub fn set_metadata(&mut self, key: &str, value: MetadataValue) {
        self.metadata.set(key, value);
    }

    /// Removes the tensor `name`; whether there was one.
    pub fn remove_tensor(&mut self, name: &str) -> bool {
        let before = self.tensors.len();
        self.tensors.retain(|t| t.name != name);
        self.tensors.len() < before
    }

    /// Adds a tensor whose `data` must be exactly the bytes its type and shape need.
    pub fn add_tensor(
        &mut self,
        name: &str,
        ty: GgmlType,
        dims: &[u64],
        data: Vec<u8>,
    ) -> Result<()> {
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(GgufError::DuplicateTensor {
                tensor: name.into(),
            });
        }
        if dims.len() > 4 {
            return Err(GgufError::TooManyDims {
                tensor: name.into(),
                n_dims: dims.len() as u32,
            });
        }
        let expected = tensor_bytes(name, ty, dims)?;
        if expected != data.len() as u64 {
            return Err(GgufError::TensorSize {
                tensor: name.into(),
                ty: ty.name(),
                dims: dims.to_vec(),
                expected,
                got: data.len() as u64,
            });
        }
        self.tensors.push(PendingTensor {
            name: name.into(),
            ty,
            dims: dims.to_vec(),
            data,
        });
        Ok(())
    }

    /// Writes the whole file to `out`.
    pub fn write_to<W: Write>(&self, out: W) -> Result<W> {
        let headers: Vec<TensorHeader> = self
            .tensors
            .iter()
            .map(|t| TensorHeader {
                name: t.name.clone(),
                ty: t.ty,
                dims: t.dims.clone(),
            })
            .collect();
        let mut stream = GgufStreamWriter::new(out, &self.metadata, &headers)?;
        for t in &self.tensors {
            stream.write_tensor(&t.data)?;
        }
        stream.finish()
    }

    /// The whole file as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Every tensor was checked against its shape when added, so writing to memory cannot fail.
        self.write_to(Vec::new()).unwrap_or_default()
    }

    /// Writes the file to `path`.
    pub fn write_file(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let io = |source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::create(path).map_err(io)?;
        let file = self
            .write_to(std::io::BufWriter::new(file))?
            .into_inner()
            .map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)
    }
}
