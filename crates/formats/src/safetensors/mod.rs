//! Safetensors weights: one `model.safetensors`, or the shards that
//! `model.safetensors.index.json` lists, memory-mapped, with zero-copy tensor views.
//!
//! Headers are parsed by the `safetensors` crate, which checks that every tensor's offsets,
//! shape and element type agree and that the tensors exactly cover the data section. On top of
//! that this module checks what spans files: every shard the index names exists, holds the
//! tensors the index places in it, and no tensor is stored twice.
//!
//! Tensor bytes are little-endian and row-major as the format defines, and are **not**
//! necessarily aligned to their element size: readers must not cast them to `&[f32]` without
//! checking alignment.

mod dtype;
mod error;

use std::collections::BTreeMap;
use std::ops::Deref;
use std::path::{Component, Path, PathBuf};

use ::safetensors::{SafeTensorError, SafeTensors};
use memmap2::Mmap;
use serde::Deserialize;

pub use dtype::Dtype;
pub use error::{Result, SafetensorsError};

/// The file name of an unsharded model's weights.
pub const SINGLE_FILE: &str = "model.safetensors";

/// The file name of the index of a sharded model's weights.
pub const INDEX_FILE: &str = "model.safetensors.index.json";

/// Bytes of the little-endian header length that starts every safetensors file.
const LEN_PREFIX: usize = 8;

/// Where a model's safetensors weights are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WeightFiles {
    /// One file holds every tensor.
    Single(PathBuf),
    /// An index (`model.safetensors.index.json`) maps each tensor to a shard file beside it.
    Sharded(PathBuf),
}

impl WeightFiles {
    /// Finds the weights in a model directory: `model.safetensors` if present (as
    /// `transformers` does), otherwise `model.safetensors.index.json`.
    pub fn find(dir: &Path) -> Result<Self> {
        let single = dir.join(SINGLE_FILE);
        if single.is_file() {
            return Ok(WeightFiles::Single(single));
        }
        let index = dir.join(INDEX_FILE);
        if index.is_file() {
            return Ok(WeightFiles::Sharded(index));
        }
        let hint = if dir.join("pytorch_model.bin").exists()
            || dir.join("pytorch_model.bin.index.json").exists()
        {
            " (only PyTorch .bin weights were found: convert them to safetensors)"
        } else if !dir.is_dir() {
            " (the directory does not exist)"
        } else {
            ""
        };
        Err(SafetensorsError::NoWeights {
            dir: dir.to_path_buf(),
            hint,
        })
    }

    /// The weights at `path`: a model directory (see [`WeightFiles::find`]), an index file
    /// (any name ending in `.index.json`), or a single safetensors file.
    pub fn from_path(path: &Path) -> Result<Self> {
        if path.is_dir() {
            Self::find(path)
        } else if path.to_string_lossy().ends_with(".index.json") {
            Ok(WeightFiles::Sharded(path.to_path_buf()))
        } else {
            Ok(WeightFiles::Single(path.to_path_buf()))
        }
    }
}

/// The bytes of one safetensors file, mapped or owned.
#[derive(Debug)]
enum Bytes {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(map) => map,
            Bytes::Owned(vec) => vec,
        }
    }
}

/// One opened safetensors file.
#[derive(Debug)]
struct Shard {
    path: PathBuf,
    bytes: Bytes,
}

/// Where one tensor lies. `start..end` is checked against its shard's length when the shard
/// is parsed, so slicing with it cannot fail.
#[derive(Debug)]
struct Entry {
    shard: usize,
    dtype: Dtype,
    shape: Vec<usize>,
    start: usize,
    end: usize,
}

/// A borrowed view of one tensor: its type, shape and bytes, straight from the mapped file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SafetensorView<'a> {
    /// The tensor's name, e.g. `model.layers.0.self_attn.q_proj.weight`.
    pub name: &'a str,
    /// The element type.
    pub dtype: Dtype,
    /// The dimensions, outermost first (row-major, as PyTorch writes them).
    pub shape: &'a [usize],
    /// The raw little-endian elements; not necessarily aligned to the element size.
    pub bytes: &'a [u8],
}

impl SafetensorView<'_> {
    /// The number of elements (1 for a scalar, whose shape is empty).
    pub fn n_elements(&self) -> usize {
        // The header check proved that the product times the element size fits in the file.
        self.shape.iter().product()
    }
}

/// The tensors of a safetensors model, from one file or several shards, memory-mapped.
///
/// Opening validates every header; afterwards looking up a tensor is a map search and its
/// bytes are a slice of the mapping, never a copy.
#[derive(Debug)]
pub struct SafetensorsModel {
    /// The file or index that was opened, for messages.
    location: PathBuf,
    shards: Vec<Shard>,
    tensors: BTreeMap<String, Entry>,
    metadata: BTreeMap<String, String>,
}

/// The part of `model.safetensors.index.json` that rinfer reads.
#[derive(Deserialize)]
struct IndexFile {
    weight_map: BTreeMap<String, String>,
}

impl SafetensorsModel {
    /// Opens the weights at `path`: a model directory, a `model.safetensors.index.json`, or a
    /// single `.safetensors` file (see [`WeightFiles::from_path`]).
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_files(&WeightFiles::from_path(path)?)
    }

    /// Opens weights already located with [`WeightFiles`].
    pub fn open_files(files: &WeightFiles) -> Result<Self> {
        match files {
            WeightFiles::Single(path) => Self::open_single(path),
            WeightFiles::Sharded(index) => Self::open_sharded(index),
        }
    }

    /// Parses a whole safetensors file held in memory (used by the fuzzer and by tests).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        let mut model = Self::empty(PathBuf::from("<memory>"));
        model.add_shard(PathBuf::from("<memory>"), Bytes::Owned(bytes))?;
        Ok(model)
    }

    fn empty(location: PathBuf) -> Self {
        SafetensorsModel {
            location,
            shards: Vec::new(),
            tensors: BTreeMap::new(),
            metadata: BTreeMap::new(),
        }
    }

    fn open_single(path: &Path) -> Result<Self> {
        let mut model = Self::empty(path.to_path_buf());
        let bytes = map_file(path)?;
        model.add_shard(path.to_path_buf(), Bytes::Mapped(bytes))?;
        Ok(model)
    }

    fn open_sharded(index: &Path) -> Result<Self> {
        let text = std::fs::read(index).map_err(|source| SafetensorsError::Io {
            path: index.to_path_buf(),
            source,
        })?;
        let parsed: IndexFile =
            serde_json::from_slice(&text).map_err(|source| SafetensorsError::Index {
                path: index.to_path_buf(),
                source,
            })?;
        let dir = index.parent().unwrap_or(Path::new(""));

        // Shard name → the tensors the index places in it, shards in name order (which is
        // numeric order for the usual `model-00001-of-00004.safetensors`).
        let mut by_shard: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (tensor, shard) in &parsed.weight_map {
            by_shard.entry(shard).or_default().push(tensor);
        }

        let mut model = Self::empty(index.to_path_buf());
        for (shard, tensors) in &by_shard {
            if !is_plain_relative(shard) {
                return Err(SafetensorsError::InvalidShardName {
                    index: index.to_path_buf(),
                    shard: (*shard).to_owned(),
                });
            }
            let path = dir.join(shard);
            let bytes = match map_file(&path) {
                Err(SafetensorsError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    return Err(SafetensorsError::MissingShard {
                        index: index.to_path_buf(),
                        path,
                        tensor: tensors
                            .first()
                            .map_or_else(String::new, |t| (*t).to_owned()),
                    });
                }
                other => other?,
            };
            let shard_index = model.add_shard(path, Bytes::Mapped(bytes))?;
            for tensor in tensors {
                if model.tensors.get(*tensor).map(|e| e.shard) != Some(shard_index) {
                    return Err(SafetensorsError::TensorNotInShard {
                        tensor: (*tensor).to_owned(),
                        shard: model.shards[shard_index].path.clone(),
                        index: index.to_path_buf(),
                    });
                }
            }
        }
        Ok(model)
    }

    /// Parses `bytes` as one safetensors file and adds its tensors; returns the shard's index.
    fn add_shard(&mut self, path: PathBuf, bytes: Bytes) -> Result<usize> {
        let (header_len, header) =
            SafeTensors::read_metadata(&bytes).map_err(|e| header_error(&path, &bytes, e))?;
        let data_start = header_len.saturating_add(LEN_PREFIX);
        let shard = self.shards.len();

        let mut infos: Vec<_> = header.tensors().into_iter().collect();
        // `tensors()` is a hash map: sort so that errors are the same on every run.
        infos.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, info) in infos {
            let Some(dtype) = Dtype::from_safetensors(info.dtype) else {
                return Err(SafetensorsError::UnsupportedDtype {
                    path,
                    tensor: name,
                    dtype: info.dtype.to_string(),
                });
            };
            let (start, end) = info.data_offsets;
            let (Some(start), Some(end)) =
                (data_start.checked_add(start), data_start.checked_add(end))
            else {
                return Err(header_error(
                    &path,
                    &bytes,
                    SafeTensorError::ValidationOverflow,
                ));
            };
            if start > end || end > bytes.len() {
                // `read_metadata` already rejects this; checked again so that the slicing in
                // `tensor` relies on nothing outside this function.
                return Err(header_error(
                    &path,
                    &bytes,
                    SafeTensorError::InvalidOffset(name),
                ));
            }
            if let Some(previous) = self.tensors.get(&name) {
                return Err(SafetensorsError::DuplicateTensor {
                    tensor: name,
                    first: self.shards[previous.shard].path.clone(),
                    second: path,
                });
            }
            let entry = Entry {
                shard,
                dtype,
                shape: info.shape.clone(),
                start,
                end,
            };
            self.tensors.insert(name, entry);
        }
        if let Some(metadata) = header.metadata() {
            for (key, value) in metadata {
                self.metadata
                    .entry(key.clone())
                    .or_insert_with(|| value.clone());
            }
        }
        self.shards.push(Shard { path, bytes });
        Ok(shard)
    }

    /// The file or index this model was opened from (`<memory>` for [`Self::from_bytes`]).
    pub fn location(&self) -> &Path {
        &self.location
    }

    /// The safetensors files, in the order they were opened.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.shards.iter().map(|s| s.path.as_path())
    }

    /// The number of tensors.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether the model has no tensors.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// Whether a tensor of this name exists.
    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// The tensor names, sorted.
    pub fn tensor_names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    /// The tensor called `name`, or [`SafetensorsError::TensorNotFound`].
    pub fn tensor(&self, name: &str) -> Result<SafetensorView<'_>> {
        match self.tensors.get_key_value(name) {
            Some((name, entry)) => Ok(self.view(name, entry)),
            None => Err(SafetensorsError::TensorNotFound {
                tensor: name.to_owned(),
                location: self.location.clone(),
            }),
        }
    }

    /// Every tensor, sorted by name.
    pub fn tensors(&self) -> impl Iterator<Item = SafetensorView<'_>> {
        self.tensors
            .iter()
            .map(|(name, entry)| self.view(name, entry))
    }

    /// The string pairs of the files' `__metadata__` headers (e.g. `format = pt`); where
    /// shards disagree on a key, the first shard's value.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    fn view<'a>(&'a self, name: &'a str, entry: &'a Entry) -> SafetensorView<'a> {
        // Both indexes were checked when the shard was parsed (see `add_shard`).
        let bytes = &self.shards[entry.shard].bytes[entry.start..entry.end];
        SafetensorView {
            name,
            dtype: entry.dtype,
            shape: &entry.shape,
            bytes,
        }
    }
}

/// Whether an index's shard name is a relative path that stays inside the model directory.
fn is_plain_relative(name: &str) -> bool {
    let path = Path::new(name);
    !name.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Wraps a header error with the file's path, and turns the crate's errors for a file that
/// ends early into [`SafetensorsError::Truncated`], which says what to do about it.
fn header_error(path: &Path, bytes: &[u8], source: SafeTensorError) -> SafetensorsError {
    let actual = bytes.len() as u64;
    let header_len = bytes
        .get(..LEN_PREFIX)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes);
    let truncated_at = match (&source, header_len) {
        (SafeTensorError::HeaderTooSmall, _) => Some(LEN_PREFIX as u64),
        (SafeTensorError::InvalidHeaderLength, Some(n)) => {
            Some(n.saturating_add(LEN_PREFIX as u64))
        }
        (SafeTensorError::MetadataIncompleteBuffer, Some(n)) => described_data_len(bytes, n)
            .map(|d| d.saturating_add(n).saturating_add(LEN_PREFIX as u64)),
        _ => None,
    };
    match truncated_at {
        Some(expected) if expected > actual => SafetensorsError::Truncated {
            path: path.to_path_buf(),
            expected,
            actual,
        },
        _ => SafetensorsError::Header {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// The data length a header of `header_len` bytes describes: the largest end offset of its
/// tensors. Only called on the error path, so it re-reads the JSON rather than keep it.
fn described_data_len(bytes: &[u8], header_len: u64) -> Option<u64> {
    let end = usize::try_from(header_len).ok()?.checked_add(LEN_PREFIX)?;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(bytes.get(LEN_PREFIX..end)?).ok()?;
    header
        .iter()
        .filter(|(key, _)| *key != "__metadata__")
        .filter_map(|(_, info)| info.get("data_offsets")?.get(1)?.as_u64())
        .max()
}

/// Maps `path` read-only, naming the file in the error.
fn map_file(path: &Path) -> Result<Mmap> {
    crate::mmap::map_file(path).map_err(|source| SafetensorsError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_names_round_trip_through_the_safetensors_crate() {
        for &dtype in Dtype::ALL {
            let theirs = dtype.to_safetensors();
            assert_eq!(Dtype::from_safetensors(theirs), Some(dtype));
            assert_eq!(theirs.bitsize(), dtype.bits(), "{dtype}");
        }
    }

    #[test]
    fn shard_names_must_stay_inside_the_model_directory() {
        assert!(is_plain_relative("model-00001-of-00002.safetensors"));
        assert!(is_plain_relative("sub/model.safetensors"));
        for bad in [
            "",
            "/etc/passwd",
            "../model.safetensors",
            "a/../../b",
            "./x",
        ] {
            assert!(!is_plain_relative(bad), "{bad}");
        }
    }
}
