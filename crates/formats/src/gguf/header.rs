//! Parsing and validating the GGUF header: magic, version, metadata, tensor infos, layout.

use std::collections::HashMap;

use crate::dtype::GgmlType;
use crate::error::{GgufError, Result};

use super::cursor::Cursor;
use super::metadata::{Metadata, MetadataValue, ValueBudget, read_value_type};
use super::tensor_info::TensorInfo;

/// The four bytes every GGUF file starts with.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// The alignment of tensor data when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The metadata key that overrides the alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";
/// ggml's limit on tensor dimensions.
pub const MAX_DIMS: u32 = 4;
/// Most tensors one file may describe (the largest mixture-of-experts files hold a few
/// thousand), so that a crafted count cannot make the reader allocate without bound.
pub const MAX_TENSORS: u64 = 1 << 20;
/// Tensor infos reserved up front; more grow the list as they are read.
const TENSOR_RESERVE: u64 = 1024;

/// Bytes a tensor info takes at least: name length, dims count, type, offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;
/// Bytes a metadata entry takes at least: key length, type, one byte of value.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;

/// Everything in a GGUF file except the tensor data, validated against the file's length.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufHeader {
    /// The format version (2 or 3).
    pub version: u32,
    /// The metadata, in file order.
    pub metadata: Metadata,
    /// The tensors, in file order.
    pub tensors: Vec<TensorInfo>,
    /// The alignment of tensor data.
    pub alignment: u64,
    /// Where the data section starts in the file.
    pub data_offset: u64,
    by_name: HashMap<String, usize>,
}

impl GgufHeader {
    /// Parses and validates the header of the GGUF file held in `bytes` (the whole file).
    ///
    /// Checks every count against the bytes that remain before allocating for it, and every
    /// tensor against the file's length, alignment and the other tensors.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let mut cursor = Cursor::new(bytes);
        let magic = cursor.take(4, "magic")?;
        if magic != GGUF_MAGIC {
            return Err(GgufError::BadMagic {
                found: String::from_utf8_lossy(magic).into_owned(),
            });
        }
        let version = read_version(&mut cursor)?;
        let tensor_count = cursor.count("tensor count", MIN_TENSOR_INFO_BYTES)?;
        if tensor_count > MAX_TENSORS {
            return Err(GgufError::CountOverLimit {
                what: "tensor count",
                count: tensor_count,
                offset: 8,
                limit: MAX_TENSORS,
            });
        }
        let kv_count = cursor.count("metadata entry count", MIN_KV_BYTES)?;

        let mut metadata = Metadata::default();
        let mut budget = ValueBudget::new();
        for _ in 0..kv_count {
            let key = cursor.string("metadata key")?;
            let ty = read_value_type(&mut cursor)?;
            let value = MetadataValue::read(&mut cursor, ty, 0, &mut budget)?;
            metadata.insert(key, value)?;
        }
        let alignment = alignment_of(&metadata)?;

        let reserve = tensor_count.min(TENSOR_RESERVE) as usize;
        let mut tensors = Vec::with_capacity(reserve);
        let mut by_name = HashMap::with_capacity(reserve);
        for index in 0..tensor_count as usize {
            let info = read_tensor_info(&mut cursor)?;
            if by_name.insert(info.name.clone(), index).is_some() {
                return Err(GgufError::DuplicateTensor { tensor: info.name });
            }
            tensors.push(info);
        }

        let data_offset = align_up(cursor.offset(), alignment);
        check_layout(&tensors, alignment, data_offset, bytes.len() as u64)?;
        Ok(Self {
            version,
            metadata,
            tensors,
            alignment,
            data_offset,
            by_name,
        })
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.by_name.get(name).map(|&i| &self.tensors[i])
    }

    /// `general.architecture`, if present and a string.
    pub fn architecture(&self) -> Option<&str> {
        self.metadata.get("general.architecture")?.as_str()
    }
}

fn read_version(cursor: &mut Cursor<'_>) -> Result<u32> {
    let version = cursor.u32("version")?;
    match version {
        2 | 3 => Ok(version),
        1 => Err(GgufError::UnsupportedVersion {
            version,
            hint: "; version 1 files predate 64-bit counts: re-convert the model with a current llama.cpp",
        }),
        v if v & 0xffff == 0 && matches!(v.swap_bytes(), 1..=3) => Err(GgufError::BigEndian {
            version: v.swap_bytes(),
        }),
        _ => Err(GgufError::UnsupportedVersion { version, hint: "" }),
    }
}

fn alignment_of(metadata: &Metadata) -> Result<u64> {
    let Some(value) = metadata.get(ALIGNMENT_KEY) else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    let alignment = value
        .as_i128()
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| GgufError::WrongType {
            key: ALIGNMENT_KEY.into(),
            expected: "non-negative integer",
            found: value.value_type().name(),
        })?;
    if !alignment.is_power_of_two() || alignment > 1 << 30 {
        return Err(GgufError::BadAlignment { value: alignment });
    }
    Ok(alignment)
}

fn read_tensor_info(cursor: &mut Cursor<'_>) -> Result<TensorInfo> {
    let name = cursor.string("tensor name")?;
    let n_dims = cursor.u32("tensor dimension count")?;
    if n_dims > MAX_DIMS {
        return Err(GgufError::TooManyDims {
            tensor: name,
            n_dims,
        });
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        dims.push(cursor.u64("tensor dimension")?);
    }
    let type_id = cursor.u32("tensor type")?;
    let offset = cursor.u64("tensor offset")?;
    let Some(ty) = GgmlType::from_id(type_id) else {
        return Err(GgufError::UnknownTensorType {
            tensor: name,
            type_id,
        });
    };
    let size = tensor_bytes(&name, ty, &dims)?;
    Ok(TensorInfo {
        name,
        ty,
        dims,
        offset,
        size,
    })
}

/// Bytes of a tensor of type `ty` and shape `dims`, checking blocks and overflow.
pub(crate) fn tensor_bytes(name: &str, ty: GgmlType, dims: &[u64]) -> Result<u64> {
    let overflow = || GgufError::DimsOverflow {
        tensor: name.into(),
        dims: dims.to_vec(),
    };
    // The element count must fit in i64, as ggml stores it.
    let elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= i64::MAX as u64)
        .ok_or_else(overflow)?;
    let dim0 = dims.first().copied().unwrap_or(1);
    let block = ty.block_size() as u64;
    if dim0 % block != 0 {
        return Err(GgufError::PartialBlock {
            tensor: name.into(),
            dim0,
            ty: ty.name(),
            block: ty.block_size(),
        });
    }
    (elements / block)
        .checked_mul(ty.type_size() as u64)
        .ok_or_else(overflow)
}

fn check_layout(
    tensors: &[TensorInfo],
    alignment: u64,
    data_offset: u64,
    file_len: u64,
) -> Result<()> {
    for t in tensors {
        if t.offset % alignment != 0 {
            return Err(GgufError::MisalignedTensor {
                tensor: t.name.clone(),
                offset: t.offset,
                alignment,
            });
        }
        let start = data_offset.checked_add(t.offset);
        let end = start.and_then(|s| s.checked_add(t.size));
        match (start, end) {
            (Some(_), Some(end)) if end <= file_len => {}
            _ => {
                return Err(GgufError::TensorPastEnd {
                    tensor: t.name.clone(),
                    start: start.unwrap_or(u64::MAX),
                    end: end.unwrap_or(u64::MAX),
                    file_len,
                });
            }
        }
    }
    let mut order: Vec<&TensorInfo> = tensors.iter().collect();
    order.sort_by_key(|t| t.offset);
    for pair in order.windows(2) {
        if pair[0].offset + pair[0].size > pair[1].offset {
            return Err(GgufError::OverlappingTensors {
                first: pair[0].name.clone(),
                second: pair[1].name.clone(),
            });
        }
    }
    Ok(())
}

/// Rounds `offset` up to a multiple of `alignment` (a power of two).
pub(crate) fn align_up(offset: u64, alignment: u64) -> u64 {
    offset.div_ceil(alignment) * alignment
}
