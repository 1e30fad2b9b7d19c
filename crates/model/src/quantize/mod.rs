//! `rinfer quantize`: a GGUF model rewritten with its weights in another type, tensor for tensor
//! and byte for byte what llama.cpp's `llama-quantize` writes, without an importance matrix or
//! with one (`--imatrix`): same tensor order, types, data, metadata and alignment.
//!
//! [`FileType`] names the targets as `llama-quantize` does; [`TypePlanner`] holds llama.cpp's
//! per-tensor rules of the mixes; [`quantize_model`] runs them over a file, and
//! [`quantize_model_with`] with an [`ImportanceMatrix`], whose entry for a tensor weights the
//! rounding error of each of its input columns.

mod file_type;
mod imatrix;
mod tensor_types;

use std::cmp::Ordering;
use std::io::Write;

use rinfer_formats::GgmlType;
use rinfer_formats::gguf::{
    GgufFile, GgufStreamWriter, Metadata, MetadataValue, TensorHeader, TensorView,
};
use rinfer_kernels::KernelError;

pub use file_type::{FileType, UnknownFileType};
pub use imatrix::{ImatrixError, ImportanceMatrix};
pub use tensor_types::{MixParams, TypePlanner, allows_quantization};

/// The quantization format version llama.cpp writes as `general.quantization_version`.
const QUANTIZATION_VERSION: u32 = 2;

/// Why a model could not be quantized.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QuantizeError {
    /// The input file is malformed or the output could not be assembled.
    #[error(transparent)]
    Gguf(#[from] rinfer_formats::GgufError),
    /// The mix puts a tensor in a type rinfer cannot write yet.
    #[error("tensor {tensor:?} would be {ty}, which rinfer cannot write yet")]
    UnsupportedType {
        /// The tensor.
        tensor: String,
        /// The type the mix chose.
        ty: GgmlType,
    },
    /// A tensor is already quantized: quantizing it again loses precision twice.
    #[error(
        "tensor {tensor:?} is already {ty}; quantize from an F32, F16 or BF16 file (convert the \
         Hugging Face checkpoint with `rinfer convert`)"
    )]
    AlreadyQuantized {
        /// The tensor.
        tensor: String,
        /// Its type.
        ty: GgmlType,
    },
    /// A tensor holds NaN or infinity, which no block format can encode.
    #[error("tensor {tensor:?} holds a NaN or infinite value at element {index}")]
    NonFinite {
        /// The tensor.
        tensor: String,
        /// The first such element.
        index: usize,
    },
    /// A kernel refused the tensor's shape.
    #[error("tensor {tensor:?}: {source}")]
    Kernel {
        /// The tensor.
        tensor: String,
        /// Why.
        source: KernelError,
    },
    /// A tensor is larger than the memory available (its file may be sparse).
    #[error("{0}")]
    Memory(String),
    /// The type of a tensor cannot be written without an importance matrix (llama.cpp
    /// refuses it too), and there is no entry for the tensor.
    #[error(
        "tensor {tensor:?} would be {ty}, which needs an importance matrix entry for it; pass \
         one with --imatrix (from `llama-imatrix` or `rinfer imatrix`)"
    )]
    MissingImatrix {
        /// The tensor.
        tensor: String,
        /// The type the mix chose.
        ty: GgmlType,
    },
    /// The importance matrix entry of a tensor has another number of columns than the tensor.
    #[error(
        "the importance matrix entry of tensor {tensor:?} has {entry} values, the tensor \
         {expected} columns (times experts): the matrix was computed for another model"
    )]
    ImatrixSize {
        /// The tensor.
        tensor: String,
        /// Values in the entry.
        entry: usize,
        /// Columns times experts of the tensor.
        expected: usize,
    },
}

/// An importance matrix for [`quantize_model_with`], with the name of its file, which
/// llama.cpp records in the output (`quantize.imatrix.file`).
#[derive(Clone, Copy, Debug)]
pub struct Imatrix<'a> {
    /// The matrix.
    pub matrix: &'a ImportanceMatrix,
    /// Its file, as the user named it.
    pub file: &'a str,
}

/// How far [`quantize_model`] got: called after each tensor.
#[derive(Clone, Copy, Debug)]
pub struct Progress<'a> {
    /// Tensors written so far.
    pub done: usize,
    /// Tensors in the model.
    pub total: usize,
    /// The tensor just written.
    pub tensor: &'a str,
    /// The type it was written in.
    pub ty: GgmlType,
}

/// The hyperparameters of `file` that llama.cpp's mixes read.
pub fn mix_params(file: &GgufFile) -> MixParams {
    let meta = file.metadata();
    let arch = file.header().architecture().unwrap_or_default();
    let first = |key: &str| {
        meta.get(&format!("{arch}.{key}"))
            .and_then(|v| match v.as_array() {
                Some(items) => items.first().and_then(MetadataValue::as_i128),
                None => v.as_i128(),
            })
    };
    let count = |v: Option<i128>| v.and_then(|v| usize::try_from(v).ok()).unwrap_or(0);
    let n_layer = count(first("block_count"));
    let n_head = count(first("attention.head_count"));
    let n_head_kv = first("attention.head_count_kv").map_or(n_head, |v| count(Some(v)));
    MixParams {
        falcon: arch == "falcon",
        llama_70b: arch == "llama" && n_layer == 80 && n_head != n_head_kv,
        n_layer,
        n_gqa: n_head.checked_div(n_head_kv).unwrap_or(0),
        n_expert: count(first("expert_count")),
    }
}

/// llama.cpp's tensor order: tensors outside the layers first, then layer by layer, each group
/// by name.
pub(crate) fn llama_order(a: &str, b: &str) -> Ordering {
    let layer = |n: &str| tensor_types::layer_of(n).map_or(-1, |l| l as i64);
    layer(a).cmp(&layer(b)).then_with(|| a.cmp(b))
}

/// The tensors of `input` in llama.cpp's output order, each with the type `file_type` gives it
/// (`pure`: every quantizable weight in the file type's default type, no mix rules): what
/// `llama-quantize --dry-run` shows.
pub fn plan_types<'f>(
    input: &'f GgufFile,
    file_type: FileType,
    pure: bool,
) -> Vec<(TensorView<'f>, GgmlType)> {
    plan_types_with(input, file_type, pure, false)
}

/// [`plan_types`] with the rules llama.cpp applies when an importance matrix is given
/// (`has_imatrix`).
pub fn plan_types_with<'f>(
    input: &'f GgufFile,
    file_type: FileType,
    pure: bool,
    has_imatrix: bool,
) -> Vec<(TensorView<'f>, GgmlType)> {
    let mut tensors: Vec<TensorView<'f>> = input.tensors().collect();
    tensors.sort_by(|a, b| llama_order(a.name(), b.name()));
    let mut planner = TypePlanner::new(
        file_type,
        pure,
        mix_params(input),
        tensors.iter().map(|t| t.name()),
    )
    .with_imatrix(has_imatrix);
    tensors
        .into_iter()
        .map(|t| {
            let ty = planner.tensor_type(t.name(), t.dims(), t.ty());
            (t, ty)
        })
        .collect()
}

/// Writes `input` to `out` with its weights in `file_type` as [`plan_types`] chooses, one tensor
/// at a time, calling `progress` after each tensor; gives `out` back.
///
/// # Errors
/// [`QuantizeError::AlreadyQuantized`] for quantized input tensors,
/// [`QuantizeError::UnsupportedType`] when a tensor's chosen type has no quantizer in rinfer,
/// [`QuantizeError::NonFinite`] for NaN or infinite weights, and [`QuantizeError::Kernel`] for
/// shapes the quantizer cannot take (the last two after part of the file is written), and
/// [`QuantizeError::Gguf`] when `out` fails.
pub fn quantize_model<W: Write>(
    input: &GgufFile,
    file_type: FileType,
    pure: bool,
    out: W,
    progress: impl FnMut(Progress<'_>),
) -> Result<W, QuantizeError> {
    quantize_model_with(input, file_type, pure, None, out, progress)
}

/// [`quantize_model`] with an importance matrix, as `llama-quantize --imatrix`: each tensor
/// with an entry is quantized minimising its importance-weighted error, and the output records
/// the matrix (`quantize.imatrix.*`).
///
/// # Errors
/// Those of [`quantize_model`]; [`QuantizeError::MissingImatrix`] when a tensor's type needs an
/// importance matrix (the IQ1 and IQ2 types and IQ3_XXS) and has no entry, and [`QuantizeError::ImatrixSize`] when
/// an entry does not fit its tensor.
pub fn quantize_model_with<W: Write>(
    input: &GgufFile,
    file_type: FileType,
    pure: bool,
    imatrix: Option<Imatrix<'_>>,
    out: W,
    mut progress: impl FnMut(Progress<'_>),
) -> Result<W, QuantizeError> {
    let planned = plan_types_with(input, file_type, pure, imatrix.is_some());
    for (t, ty) in &planned {
        if *ty == t.ty() {
            continue;
        }
        if t.ty().is_quantized() {
            return Err(QuantizeError::AlreadyQuantized {
                tensor: t.name().into(),
                ty: t.ty(),
            });
        }
        let weighted = tensor_imatrix(t, imatrix)?.is_some();
        if !weighted && tensor_types::requires_imatrix(t.name(), *ty) {
            return Err(QuantizeError::MissingImatrix {
                tensor: t.name().into(),
                ty: *ty,
            });
        }
        if !rinfer_kernels::can_quantize_weighted(*ty, weighted) {
            return Err(QuantizeError::UnsupportedType {
                tensor: t.name().into(),
                ty: *ty,
            });
        }
    }

    let mut metadata = Metadata::default();
    for (key, value) in input.metadata().iter() {
        if key != "general.quantization_version" && key != "general.file_type" {
            metadata.insert(key, value.clone())?;
        }
    }
    metadata.insert(
        "general.quantization_version",
        MetadataValue::U32(QUANTIZATION_VERSION),
    )?;
    metadata.insert("general.file_type", MetadataValue::U32(file_type.id()))?;
    if let Some(imatrix) = imatrix {
        record_imatrix(&mut metadata, imatrix)?;
    }
    let headers: Vec<TensorHeader> = planned
        .iter()
        .map(|(t, ty)| TensorHeader {
            name: t.name().into(),
            ty: *ty,
            dims: t.dims().to_vec(),
        })
        .collect();
    let mut stream = GgufStreamWriter::new(out, &metadata, &headers)?;

    let total = planned.len();
    for (done, (t, ty)) in planned.into_iter().enumerate() {
        if ty == t.ty() {
            stream.write_tensor(t.data)?;
        } else {
            let weights = tensor_imatrix(&t, imatrix)?;
            stream.write_tensor(&convert_in_slabs(&t, ty, weights, SLAB_VALUES)?)?;
        }
        progress(Progress {
            done: done + 1,
            total,
            tensor: t.name(),
            ty,
        });
    }
    Ok(stream.finish()?)
}

/// The importance-matrix entry of `t`, if the matrix has one (`ne0` values per expert).
///
/// # Errors
/// [`QuantizeError::ImatrixSize`] for an entry of another size, except on the token
/// embeddings, whose entry llama.cpp ignores then.
fn tensor_imatrix<'m>(
    t: &TensorView<'_>,
    imatrix: Option<Imatrix<'m>>,
) -> Result<Option<&'m [f32]>, QuantizeError> {
    let Some(entry) = imatrix.and_then(|m| m.matrix.get(t.name())) else {
        return Ok(None);
    };
    let dim = |i: usize| t.dims().get(i).copied().unwrap_or(1) as usize;
    let expected = dim(0) * dim(2);
    if entry.len() == expected {
        Ok(Some(entry))
    } else if matches!(
        t.name(),
        "token_embd.weight" | "per_layer_token_embd.weight"
    ) {
        Ok(None)
    } else {
        Err(QuantizeError::ImatrixSize {
            tensor: t.name().into(),
            entry: entry.len(),
            expected,
        })
    }
}

/// llama.cpp's longest recorded string (`llama_model_kv_override::val_str` less its NUL).
const MAX_RECORDED_STRING: usize = 127;

/// Records `imatrix` in the output's metadata as `llama-quantize` does.
fn record_imatrix(metadata: &mut Metadata, imatrix: Imatrix<'_>) -> Result<(), QuantizeError> {
    let text = |s: &str| {
        let mut end = s.len().min(MAX_RECORDED_STRING);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        MetadataValue::String(s[..end].to_string())
    };
    let m = imatrix.matrix;
    let mut set = |key: &str, value| {
        metadata.remove(key);
        metadata.insert(key, value)
    };
    set("quantize.imatrix.file", text(imatrix.file))?;
    if let Some(dataset) = m.datasets().first() {
        set("quantize.imatrix.dataset", text(dataset))?;
    }
    set(
        "quantize.imatrix.entries_count",
        MetadataValue::U32(m.len() as u32),
    )?;
    if m.chunk_count() > 0 {
        set(
            "quantize.imatrix.chunks_count",
            MetadataValue::U32(m.chunk_count()),
        )?;
    }
    Ok(())
}

/// f32 values converted at a time: the rows of a slab of about this many values go through f32
/// together, so a large tensor never exists in f32 whole.
const SLAB_VALUES: usize = 1 << 22;

/// The data of `t` in type `ty` through f32, a slab of about `slab_values` values at a time,
/// each row quantized with its expert's slice of the importance `weights` (`ne0` values per
/// expert) where given.
fn convert_in_slabs(
    t: &TensorView<'_>,
    ty: GgmlType,
    weights: Option<&[f32]>,
    slab_values: usize,
) -> Result<Vec<u8>, QuantizeError> {
    let kernel = |source| QuantizeError::Kernel {
        tensor: t.name().into(),
        source,
    };
    let row_len = t.dims().first().copied().unwrap_or(1).max(1) as usize;
    let rows = t.info.element_count() as usize / row_len;
    let (in_row, out_row) = (
        row_len / t.ty().block_size() * t.ty().type_size(),
        row_len / ty.block_size() * ty.type_size(),
    );
    if !row_len.is_multiple_of(ty.block_size()) {
        return Err(kernel(KernelError::PartialBlock {
            ty,
            len: row_len,
            unit: "elements",
        }));
    }
    // Rows of one expert share its slice of the weights; a slab never crosses experts.
    let group_rows = match weights {
        Some(w) if w.len() > row_len => t.dims().get(1).copied().unwrap_or(1).max(1) as usize,
        _ => rows.max(1),
    };
    let slab_rows = (slab_values / row_len).clamp(1, group_rows);
    let bytes = (rows as u64).checked_mul(out_row as u64);
    crate::limits::check_allocation(
        || format!("quantizing tensor {} ({:?}) to {ty}", t.name(), t.dims()),
        bytes,
    )
    .map_err(|e| QuantizeError::Memory(e.to_string()))?;
    let mut values = vec![0.0f32; slab_rows.min(rows) * row_len];
    let mut out = vec![0u8; rows * out_row];
    let groups = t
        .data
        .chunks(group_rows * in_row)
        .zip(out.chunks_mut(group_rows * out_row));
    for (group, (input, output)) in groups.enumerate() {
        let weights = weights.map(|w| &w[(group * row_len) % w.len()..][..row_len]);
        let slabs = input
            .chunks(slab_rows * in_row)
            .zip(output.chunks_mut(slab_rows * out_row));
        for (slab, (input, output)) in slabs.enumerate() {
            let values = &mut values[..input.len() / in_row * row_len];
            rinfer_kernels::dequantize_row(t.ty(), input, values).map_err(kernel)?;
            if let Some(i) = values.iter().position(|v| !v.is_finite()) {
                return Err(QuantizeError::NonFinite {
                    tensor: t.name().into(),
                    index: (group * group_rows + slab * slab_rows) * row_len + i,
                });
            }
            rinfer_kernels::quantize_rows_weighted(ty, values, row_len, weights, output)
                .map_err(kernel)?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use rinfer_formats::gguf::GgufWriter;

    use super::*;

    /// A file with one F32 matrix of 8 rows of 64 values.
    fn one_matrix(values: &[f32]) -> GgufFile {
        let mut w = GgufWriter::new();
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        w.add_tensor("m.weight", GgmlType::F32, &[64, 8], bytes)
            .unwrap();
        GgufFile::from_bytes(w.to_bytes()).unwrap()
    }

    #[test]
    fn slabs_of_rows_give_the_bytes_of_the_whole_tensor() {
        let values: Vec<f32> = (0..512)
            .map(|i| ((i * 29 % 97) as f32 - 48.0) / 9.0)
            .collect();
        let file = one_matrix(&values);
        let t = file.tensor("m.weight").unwrap();
        let whole = convert_in_slabs(&t, GgmlType::Q4_0, None, 512).unwrap();
        for slab in [64, 100, 192] {
            assert_eq!(
                convert_in_slabs(&t, GgmlType::Q4_0, None, slab).unwrap(),
                whole
            );
        }
    }

    #[test]
    fn a_nan_in_a_later_slab_is_reported_at_its_index_in_the_tensor() {
        let mut values = vec![1.0f32; 512];
        values[300] = f32::INFINITY;
        let file = one_matrix(&values);
        let t = file.tensor("m.weight").unwrap();
        let err = convert_in_slabs(&t, GgmlType::Q8_0, None, 128).unwrap_err();
        assert!(
            matches!(err, QuantizeError::NonFinite { index: 300, .. }),
            "{err}"
        );
    }
}
