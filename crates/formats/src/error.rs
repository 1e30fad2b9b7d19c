//! The errors of reading and writing GGUF files.

use std::path::PathBuf;

/// Why a GGUF file could not be read or written.
///
/// Every variant names where the problem is (a byte offset, a tensor or a metadata key) so the
/// message alone tells a user what is wrong with their file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GgufError {
    /// The file could not be opened, mapped or written.
    #[error("cannot access {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file ends before a value that must be there.
    #[error(
        "file is truncated: {what} at offset {offset} needs {needed} bytes, {available} remain"
    )]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Where it starts.
        offset: u64,
        /// Bytes it needs.
        needed: u64,
        /// Bytes left in the file.
        available: u64,
    },
    /// The first four bytes are not `GGUF`.
    #[error("not a GGUF file: magic is {found:?}, expected \"GGUF\"")]
    BadMagic {
        /// The bytes found, printed lossily.
        found: String,
    },
    /// A big-endian GGUF file: rinfer reads little-endian files only.
    #[error(
        "big-endian GGUF (version {version}) is not supported: convert the model on a little-endian machine"
    )]
    BigEndian {
        /// The version, read big-endian.
        version: u32,
    },
    /// A GGUF version other than 2 or 3.
    #[error("GGUF version {version} is not supported (rinfer reads versions 2 and 3{hint})")]
    UnsupportedVersion {
        /// The version in the header.
        version: u32,
        /// Extra advice for known old versions.
        hint: &'static str,
    },
    /// A count or length larger than the rest of the file could possibly hold.
    #[error(
        "{what} of {count} at offset {offset} cannot fit in the {available} bytes left in the file"
    )]
    ImpossibleCount {
        /// What was counted.
        what: &'static str,
        /// The count claimed by the file.
        count: u64,
        /// Where the count is stored.
        offset: u64,
        /// Bytes left after it.
        available: u64,
    },
    /// A count that the file could hold but rinfer refuses, so that a small (or sparse) file
    /// cannot make it allocate without bound.
    #[error(
        "{what} of {count} at offset {offset} is over rinfer's limit of {limit}; no model needs that many"
    )]
    CountOverLimit {
        /// What was counted.
        what: &'static str,
        /// The count claimed by the file (for a total, the count reached so far).
        count: u64,
        /// Where the count is stored.
        offset: u64,
        /// The largest count accepted.
        limit: u64,
    },
    /// A string that is not UTF-8.
    #[error("{what} at offset {offset} is not valid UTF-8")]
    InvalidUtf8 {
        /// What string.
        what: &'static str,
        /// Where it starts.
        offset: u64,
    },
    /// A metadata value type id outside the GGUF specification.
    #[error("unknown metadata value type {type_id} at offset {offset}")]
    UnknownValueType {
        /// The id found.
        type_id: u32,
        /// Where it is stored.
        offset: u64,
    },
    /// A boolean stored as something other than 0 or 1.
    #[error("invalid boolean byte {value} at offset {offset}")]
    InvalidBool {
        /// The byte found.
        value: u8,
        /// Where it is stored.
        offset: u64,
    },
    /// Arrays nested deeper than rinfer accepts.
    #[error("metadata arrays nested more than {limit} deep at offset {offset}")]
    NestingTooDeep {
        /// The limit.
        limit: usize,
        /// Where the innermost array starts.
        offset: u64,
    },
    /// The same metadata key twice.
    #[error("duplicate metadata key {key:?}")]
    DuplicateKey {
        /// The key.
        key: String,
    },
    /// `general.alignment` is zero, not a power of two, or absurdly large.
    #[error("general.alignment = {value} is not a power of two between 1 and 2^30")]
    BadAlignment {
        /// The value found.
        value: u64,
    },
    /// A tensor type id that no ggml type has.
    #[error("tensor {tensor:?} has unknown type id {type_id}")]
    UnknownTensorType {
        /// The tensor.
        tensor: String,
        /// The id found.
        type_id: u32,
    },
    /// More dimensions than ggml's four.
    #[error("tensor {tensor:?} has {n_dims} dimensions; GGUF allows at most 4")]
    TooManyDims {
        /// The tensor.
        tensor: String,
        /// The count found.
        n_dims: u32,
    },
    /// Dimensions whose product (or byte size) overflows.
    #[error("tensor {tensor:?} has dimensions {dims:?} whose size overflows")]
    DimsOverflow {
        /// The tensor.
        tensor: String,
        /// Its dimensions.
        dims: Vec<u64>,
    },
    /// A first dimension that is not a whole number of blocks of the tensor's type.
    #[error(
        "tensor {tensor:?}: first dimension {dim0} is not a multiple of the {ty} block size {block}"
    )]
    PartialBlock {
        /// The tensor.
        tensor: String,
        /// The first dimension.
        dim0: u64,
        /// The type's name.
        ty: &'static str,
        /// The type's block size.
        block: usize,
    },
    /// The same tensor name twice.
    #[error("duplicate tensor name {tensor:?}")]
    DuplicateTensor {
        /// The tensor.
        tensor: String,
    },
    /// A tensor offset that is not a multiple of the file's alignment.
    #[error(
        "tensor {tensor:?} data offset {offset} is not a multiple of the alignment {alignment}"
    )]
    MisalignedTensor {
        /// The tensor.
        tensor: String,
        /// Its offset inside the data section.
        offset: u64,
        /// The file's alignment.
        alignment: u64,
    },
    /// Tensor data that reaches past the end of the file.
    #[error(
        "tensor {tensor:?} data [{start}, {end}) reaches past the end of the file ({file_len} bytes)"
    )]
    TensorPastEnd {
        /// The tensor.
        tensor: String,
        /// Its first byte in the file.
        start: u64,
        /// One past its last byte in the file.
        end: u64,
        /// The file's length.
        file_len: u64,
    },
    /// Two tensors whose data overlaps.
    #[error("tensors {first:?} and {second:?} overlap in the data section")]
    OverlappingTensors {
        /// The tensor that starts first.
        first: String,
        /// The tensor that starts inside it.
        second: String,
    },
    /// A metadata key that must be present is not.
    #[error("metadata key {key:?} is missing")]
    MissingKey {
        /// The key.
        key: String,
    },
    /// A metadata key holds a value of another type than asked for.
    #[error("metadata key {key:?} is {found}, expected {expected}")]
    WrongType {
        /// The key.
        key: String,
        /// The type asked for.
        expected: &'static str,
        /// The type found.
        found: &'static str,
    },
    /// A tensor handed to the writer whose bytes do not match its type and shape.
    #[error("tensor {tensor:?}: {ty} {dims:?} needs {expected} bytes, got {got}")]
    TensorSize {
        /// The tensor.
        tensor: String,
        /// Its type's name.
        ty: &'static str,
        /// Its dimensions.
        dims: Vec<u64>,
        /// Bytes needed.
        expected: u64,
        /// Bytes given.
        got: u64,
    },
    /// A streamed file's output failed.
    #[error("cannot write the GGUF file")]
    Write {
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A shard of a split model that is not on disk beside the others.
    #[error(
        "shard {index} of {count} of the split model is missing: {path} does not exist (download every shard into the same directory)"
    )]
    MissingShard {
        /// The shard's number, from 1.
        index: u32,
        /// How many shards the model has.
        count: u32,
        /// Where it should be.
        path: std::path::PathBuf,
    },
    /// A split model's shard whose `split.*` metadata disagrees with its name or the first shard.
    #[error(
        "{path} is not shard {index} of a {count}-shard split model: {key} is {found}, expected {expected} (are its shards from different splits?)"
    )]
    ShardMismatch {
        /// The shard.
        path: std::path::PathBuf,
        /// Its number from its name, from 1.
        index: u32,
        /// How many shards the first one announces.
        count: u32,
        /// The metadata key that disagrees.
        key: &'static str,
        /// Its value there (or "missing").
        found: String,
        /// The value it should have.
        expected: String,
    },
    /// A file whose metadata says it is one shard of several but whose name does not say which.
    #[error(
        "{path} says it is shard {no} of {count} of a split model, but its name does not end in -NNNNN-of-NNNNN.gguf, so its siblings cannot be found (keep the names llama-gguf-split gave them)"
    )]
    UnnamedShard {
        /// The file.
        path: std::path::PathBuf,
        /// Its `split.no`, from 1.
        no: u32,
        /// Its `split.count`.
        count: u32,
    },
    /// The same tensor in two shards of a split model.
    #[error("tensor {tensor:?} is in both {first} and {second}")]
    DuplicateShardTensor {
        /// The tensor.
        tensor: String,
        /// The shard that holds it first.
        first: std::path::PathBuf,
        /// The other shard.
        second: std::path::PathBuf,
    },
    /// Shards that together hold another number of tensors than the split announces.
    #[error(
        "the {count} shards starting at {path} hold {found} tensors, but split.tensors.count says {expected}"
    )]
    ShardTensorCount {
        /// The first shard.
        path: std::path::PathBuf,
        /// How many shards.
        count: u32,
        /// Tensors found across the shards.
        found: u64,
        /// `split.tensors.count`.
        expected: u64,
    },
    /// A streamed file was finished before every tensor announced in its header was written.
    #[error("tensor {tensor:?} was announced but its data never written")]
    MissingTensorData {
        /// The first tensor not written.
        tensor: String,
    },
}

/// Results of this crate's GGUF functions.
pub type Result<T, E = GgufError> = std::result::Result<T, E>;
