//! Writing GGUF version 3 files.

use std::io::Write;
use std::path::Path;

use crate::dtype::GgmlType;
use crate::error::{GgufError, Result};

use super::GgufFile;
use super::header::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, GGUF_MAGIC, align_up, tensor_bytes};
use super::metadata::{Metadata, MetadataValue, write_string};

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
        let mut writer = Self::new();
        for (key, value) in file.metadata().iter() {
            writer.add_metadata(key, value.clone())?;
        }
        for t in file.tensors() {
            writer.add_tensor(t.name(), t.ty(), t.dims(), t.data.to_vec())?;
        }
        Ok(writer)
    }

    /// Adds a metadata entry; a key added twice is an error.
    pub fn add_metadata(&mut self, key: &str, value: MetadataValue) -> Result<()> {
        self.metadata.insert(key, value)
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

    fn alignment(&self) -> u64 {
        self.metadata
            .get(ALIGNMENT_KEY)
            .and_then(MetadataValue::as_i128)
            .and_then(|a| u64::try_from(a).ok())
            .filter(|a| a.is_power_of_two())
            .unwrap_or(DEFAULT_ALIGNMENT)
    }

    /// The whole file as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let alignment = self.alignment();
        let mut out = Vec::new();
        out.extend_from_slice(&GGUF_MAGIC);
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in self.metadata.iter() {
            write_string(key, &mut out);
            out.extend_from_slice(&(value.value_type() as u32).to_le_bytes());
            value.write(&mut out);
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            write_string(&t.name, &mut out);
            out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.ty.id().to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offset = align_up(offset + t.data.len() as u64, alignment);
        }
        for t in &self.tensors {
            out.resize(align_up(out.len() as u64, alignment) as usize, 0);
            out.extend_from_slice(&t.data);
        }
        if !self.tensors.is_empty() {
            out.resize(align_up(out.len() as u64, alignment) as usize, 0);
        }
        out
    }

    /// Writes the file to `path`.
    pub fn write_file(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let io = |source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = std::fs::File::create(path).map_err(io)?;
        file.write_all(&self.to_bytes()).map_err(io)?;
        file.sync_all().map_err(io)
    }
}
