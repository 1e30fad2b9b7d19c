//! Why a safetensors model could not be opened or a tensor could not be read.

use std::path::PathBuf;

/// Why a safetensors model could not be opened, or a tensor in it could not be read.
///
/// Every variant names the file (and the tensor, where there is one) so the message alone tells a
/// user which file to fix or fetch again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SafetensorsError {
    /// A file could not be opened, read or mapped.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A directory that holds neither `model.safetensors` nor `model.safetensors.index.json`.
    #[error("{dir}: no model.safetensors or model.safetensors.index.json here{hint}")]
    NoWeights {
        /// The directory searched.
        dir: PathBuf,
        /// Extra advice, e.g. when only PyTorch `.bin` weights are present.
        hint: &'static str,
    },
    /// The file ends before the data its header describes.
    #[error(
        "{path}: file is truncated: its header describes {expected} bytes, the file has {actual}; \
         download it again"
    )]
    Truncated {
        /// The file.
        path: PathBuf,
        /// The length the header implies.
        expected: u64,
        /// The file's length.
        actual: u64,
    },
    /// The header is not a valid safetensors header (bad length, JSON, offsets or shapes).
    #[error("{path}: invalid safetensors header: {source}")]
    Header {
        /// The file.
        path: PathBuf,
        /// What the `safetensors` crate found wrong.
        source: ::safetensors::SafeTensorError,
    },
    /// A tensor whose element type this version of rinfer does not know.
    #[error("{path}: tensor {tensor:?} has element type {dtype}, which rinfer does not support")]
    UnsupportedDtype {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// The type's name as the file spells it.
        dtype: String,
    },
    /// `model.safetensors.index.json` is not valid JSON or lacks a `weight_map` of strings.
    #[error("{path}: invalid shard index: {source}")]
    Index {
        /// The index file.
        path: PathBuf,
        /// The JSON error, with line and column.
        source: serde_json::Error,
    },
    /// The index names a shard by a path that leaves the model's directory.
    #[error("{index}: shard name {shard:?} is not a plain file name inside the model directory")]
    InvalidShardName {
        /// The index file.
        index: PathBuf,
        /// The name found in `weight_map`.
        shard: String,
    },
    /// The index names a shard file that does not exist.
    #[error(
        "{path}: shard file is missing (tensor {tensor:?} and others are listed in {index}); \
         download it again"
    )]
    MissingShard {
        /// The index file.
        index: PathBuf,
        /// The missing shard.
        path: PathBuf,
        /// One tensor the index places in that shard.
        tensor: String,
    },
    /// The index places a tensor in a shard whose header does not list it.
    #[error(
        "tensor {tensor:?} is listed in {index} as stored in {shard}, but that file does not contain it"
    )]
    TensorNotInShard {
        /// The tensor.
        tensor: String,
        /// The shard the index names.
        shard: PathBuf,
        /// The index file.
        index: PathBuf,
    },
    /// The same tensor name in two shard files.
    #[error("tensor {tensor:?} is stored twice: in {first} and in {second}")]
    DuplicateTensor {
        /// The tensor.
        tensor: String,
        /// The first file that holds it.
        first: PathBuf,
        /// The second file that holds it.
        second: PathBuf,
    },
    /// A tensor name asked for that the model does not have.
    #[error("tensor {tensor:?} is not in {location}")]
    TensorNotFound {
        /// The tensor asked for.
        tensor: String,
        /// The file or index that was opened.
        location: PathBuf,
    },
}

/// Results of this module's functions.
pub type Result<T, E = SafetensorsError> = std::result::Result<T, E>;
