//! GGUF, llama.cpp's model file format: reading (memory-mapped, zero-copy) and writing.
//!
//! Versions 2 and 3, little-endian. The layout is: magic `GGUF`, version, tensor count,
//! metadata count, the metadata entries, the tensor infos, padding to the alignment, then the
//! tensor data, each tensor at an aligned offset from the start of the data section. A model
//! may also be split across several such files (see [`open_shards`]).

mod cursor;
mod file;
mod header;
mod metadata;
mod split;
mod stream_writer;
mod tensor_info;
mod writer;

pub use crate::error::GgufError;
pub use file::GgufFile;
pub use header::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, GGUF_MAGIC, GgufHeader, MAX_DIMS, MAX_TENSORS};
pub use metadata::{MAX_METADATA_VALUES, Metadata, MetadataValue, ValueType};
pub use split::{
    SPLIT_COUNT_KEY, SPLIT_NO_KEY, SPLIT_TENSORS_COUNT_KEY, ShardName, open_shards, shard_path,
};
pub use stream_writer::{GgufStreamWriter, TensorHeader};
pub use tensor_info::{TensorInfo, TensorView};
pub use writer::GgufWriter;
