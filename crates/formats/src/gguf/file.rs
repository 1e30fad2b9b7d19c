//! An opened GGUF file: the validated header plus the bytes it describes.

use std::path::Path;

use memmap2::Mmap;

use crate::error::{GgufError, Result};
use crate::mmap::map_file;

use super::header::GgufHeader;
use super::metadata::Metadata;
use super::tensor_info::{TensorInfo, TensorView};

enum Storage {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(map) => map,
            Storage::Owned(bytes) => bytes,
        }
    }
}

/// A GGUF file whose header has been validated, giving zero-copy views of its tensors.
///
/// ```
/// use rinfer_formats::gguf::{GgufFile, GgufWriter, MetadataValue};
/// use rinfer_formats::GgmlType;
///
/// let mut writer = GgufWriter::new();
/// writer.add_metadata("general.architecture", MetadataValue::String("llama".into()))?;
/// let values: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
/// writer.add_tensor("t", GgmlType::F32, &[2], values)?;
/// let file = GgufFile::from_bytes(writer.to_bytes())?;
///
/// assert_eq!(file.header().architecture(), Some("llama"));
/// let t = file.tensor("t").unwrap();
/// assert_eq!((t.ty(), t.dims()), (GgmlType::F32, &[2u64][..]));
/// assert_eq!(t.data.len(), 8);
/// # Ok::<(), rinfer_formats::gguf::GgufError>(())
/// ```
pub struct GgufFile {
    storage: Storage,
    header: GgufHeader,
}

impl GgufFile {
    /// Memory-maps and validates the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let map = map_file(path).map_err(|source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let header = GgufHeader::parse(&map)?;
        Ok(Self {
            storage: Storage::Mapped(map),
            header,
        })
    }

    /// Validates a GGUF file held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        let header = GgufHeader::parse(&bytes)?;
        Ok(Self {
            storage: Storage::Owned(bytes),
            header,
        })
    }

    /// The validated header.
    pub fn header(&self) -> &GgufHeader {
        &self.header
    }

    /// The metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.header.metadata
    }

    /// The metadata, to remove entries once they are read (see [`Metadata::remove`]).
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.header.metadata
    }

    /// The whole file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.storage.bytes()
    }

    /// Hints that `range` of the file's bytes will not be read again soon (say, after the
    /// tensor there was copied into another layout): the whole pages inside it leave this
    /// process's resident memory, and are read back from the file if they are touched again.
    /// Files held in memory ([`GgufFile::from_bytes`]) are unaffected.
    pub fn release_pages(&self, range: std::ops::Range<usize>) {
        if let Storage::Mapped(map) = &self.storage {
            crate::mmap::release_pages(map, range);
        }
    }

    fn view<'a>(&'a self, info: &'a TensorInfo) -> TensorView<'a> {
        // In bounds: `GgufHeader::parse` checked every tensor against the file length.
        let start = (self.header.data_offset + info.offset) as usize;
        TensorView {
            info,
            data: &self.bytes()[start..start + info.size as usize],
        }
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<TensorView<'_>> {
        self.header.tensor(name).map(|info| self.view(info))
    }

    /// All tensors, in file order.
    pub fn tensors(&self) -> impl ExactSizeIterator<Item = TensorView<'_>> {
        self.header.tensors.iter().map(|info| self.view(info))
    }
}
