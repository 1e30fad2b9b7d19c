//! Importance matrices as `llama-imatrix` writes them and `llama-quantize --imatrix` reads them
//! (llama.cpp's GGUF imatrix format).
//!
//! The file is a GGUF file of `general.type = "imatrix"` holding, for each matrix `NAME` of the
//! model, two F32 tensors: `NAME.in_sum2`, the sums over the calibration tokens of the squared
//! activations entering each input column (`ne0` values per expert, experts one after the
//! other), and `NAME.counts`, how many tokens each expert saw. Metadata gives the datasets
//! (`imatrix.datasets`), the chunks (`imatrix.chunk_count`) and their length in tokens
//! (`imatrix.chunk_size`). The importance of a column is its mean square, `in_sum2 / count`
//! (llama.cpp rounds the count to an integer first; an expert that saw no token gets 1 for
//! every column).
//!
//! Every length comes from the validated GGUF header, so a truncated or lying file is an error
//! and nothing is allocated beyond the file's own size.

use std::collections::HashMap;
use std::path::Path;

use rinfer_formats::GgmlType;
use rinfer_formats::gguf::{GgufFile, TensorView};

/// Why an importance matrix could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImatrixError {
    /// The file is not a readable GGUF file.
    #[error(transparent)]
    Gguf(#[from] rinfer_formats::GgufError),
    /// The file holds no tensors.
    #[error("the importance matrix holds no entries")]
    Empty,
    /// One of the metadata keys llama.cpp requires is missing or of the wrong type.
    #[error(
        "the importance matrix lacks {key:?} (llama-quantize refuses it too); write it again \
         with a current llama-imatrix or `rinfer imatrix`"
    )]
    MissingMetadata {
        /// The key.
        key: &'static str,
    },
    /// A matrix has sums without counts or counts without sums.
    #[error("the importance matrix has {present:?} but no {missing:?}")]
    Unpaired {
        /// The tensor that is there.
        present: String,
        /// The one that is missing.
        missing: String,
    },
    /// A tensor of the matrix is not F32, or its sums are not whole rows of its counts.
    #[error("importance matrix tensor {tensor:?}: {problem}")]
    Malformed {
        /// The tensor.
        tensor: String,
        /// What is wrong.
        problem: String,
    },
    /// A value is NaN or infinite.
    #[error("the importance matrix of {tensor:?} holds a non-finite value")]
    NonFinite {
        /// The matrix.
        tensor: String,
    },
}

/// An importance matrix: per weight matrix of a model, the importance of each input column.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportanceMatrix {
    /// Per matrix name, its columns' importances (`ne0` per expert, experts in order).
    entries: HashMap<String, Vec<f32>>,
    /// The calibration datasets.
    datasets: Vec<String>,
    /// How many chunks of calibration text were run.
    chunk_count: u32,
    /// Tokens per chunk.
    chunk_size: u32,
}

const SUMS: &str = ".in_sum2";
const COUNTS: &str = ".counts";

impl ImportanceMatrix {
    /// Reads the importance matrix at `path`.
    ///
    /// # Errors
    /// [`ImatrixError`] for a file that is unreadable or not an importance matrix.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ImatrixError> {
        Self::from_gguf(&GgufFile::open(path)?)
    }

    /// Reads an importance matrix held in memory.
    ///
    /// # Errors
    /// As [`ImportanceMatrix::open`].
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, ImatrixError> {
        Self::from_gguf(&GgufFile::from_bytes(bytes)?)
    }

    /// Reads the importance matrix of an opened GGUF file.
    ///
    /// # Errors
    /// As [`ImportanceMatrix::open`].
    pub fn from_gguf(file: &GgufFile) -> Result<Self, ImatrixError> {
        if file.tensors().next().is_none() {
            return Err(ImatrixError::Empty);
        }
        let meta = file.metadata();
        let datasets = meta
            .get("imatrix.datasets")
            .and_then(|v| v.as_array())
            .ok_or(ImatrixError::MissingMetadata {
                key: "imatrix.datasets",
            })?
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or(ImatrixError::MissingMetadata {
                key: "imatrix.datasets",
            })?;
        let number = |key: &'static str| {
            meta.get_u32(key)
                .map_err(|_| ImatrixError::MissingMetadata { key })
        };
        let chunk_count = number("imatrix.chunk_count")?;
        let chunk_size = number("imatrix.chunk_size")?;

        let mut pairs: HashMap<&str, (Option<TensorView<'_>>, Option<TensorView<'_>>)> =
            HashMap::new();
        for t in file.tensors() {
            if let Some(name) = t.name().strip_suffix(SUMS) {
                pairs.entry(name).or_default().0 = Some(t);
            } else if let Some(name) = t.name().strip_suffix(COUNTS) {
                pairs.entry(name).or_default().1 = Some(t);
            }
        }
        let mut entries = HashMap::with_capacity(pairs.len());
        for (name, pair) in pairs {
            let (sums, counts) = match pair {
                (Some(s), Some(c)) => (s, c),
                (Some(_), None) => return Err(unpaired(name, SUMS, COUNTS)),
                (None, _) => return Err(unpaired(name, COUNTS, SUMS)),
            };
            entries.insert(name.to_string(), importances(name, &sums, &counts)?);
        }
        Ok(ImportanceMatrix {
            entries,
            datasets,
            chunk_count,
            chunk_size,
        })
    }

    /// The importances of the input columns of matrix `tensor` (`ne0` per expert), if the
    /// matrix has an entry.
    pub fn get(&self, tensor: &str) -> Option<&[f32]> {
        self.entries.get(tensor).map(Vec::as_slice)
    }

    /// How many matrices have an entry.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no matrix has an entry (never, for a matrix that was read).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The calibration datasets.
    pub fn datasets(&self) -> &[String] {
        &self.datasets
    }

    /// How many chunks of calibration text were run.
    pub fn chunk_count(&self) -> u32 {
        self.chunk_count
    }

    /// Tokens per chunk.
    pub fn chunk_size(&self) -> u32 {
        self.chunk_size
    }
}

fn unpaired(name: &str, present: &str, missing: &str) -> ImatrixError {
    ImatrixError::Unpaired {
        present: format!("{name}{present}"),
        missing: format!("{name}{missing}"),
    }
}

/// The values of an F32 tensor.
fn f32_values(t: &TensorView<'_>) -> Result<Vec<f32>, ImatrixError> {
    if t.ty() != GgmlType::F32 {
        return Err(ImatrixError::Malformed {
            tensor: t.name().into(),
            problem: format!("is {}, not F32", t.ty()),
        });
    }
    Ok(t.data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// The importances of matrix `name` from its sums and counts, as llama-quantize computes them.
fn importances(
    name: &str,
    sums: &TensorView<'_>,
    counts: &TensorView<'_>,
) -> Result<Vec<f32>, ImatrixError> {
    let (mut values, counts_f) = (f32_values(sums)?, f32_values(counts)?);
    if counts_f.is_empty() || !values.len().is_multiple_of(counts_f.len()) {
        return Err(ImatrixError::Malformed {
            tensor: counts.name().into(),
            problem: format!(
                "{} counts do not divide {} sums into experts",
                counts_f.len(),
                values.len()
            ),
        });
    }
    if values.iter().chain(&counts_f).any(|v| !v.is_finite()) {
        return Err(ImatrixError::NonFinite {
            tensor: name.into(),
        });
    }
    let ne0 = values.len() / counts_f.len();
    for (expert, &count) in values.chunks_exact_mut(ne0).zip(&counts_f) {
        // llama.cpp's `lround` to an integer count, then back to float.
        let count = count.round() as i64 as f32;
        for v in expert {
            *v = if count > 0.0 { *v / count } else { 1.0 };
        }
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use rinfer_formats::gguf::{GgufWriter, MetadataValue};

    use super::*;

    /// An imatrix file with the given metadata switches and tensors `(name, type, values)`.
    fn file(with_meta: bool, tensors: &[(&str, GgmlType, Vec<f32>)]) -> Vec<u8> {
        let mut w = GgufWriter::new();
        w.add_metadata("general.type", MetadataValue::String("imatrix".into()))
            .unwrap();
        if with_meta {
            w.add_metadata(
                "imatrix.datasets",
                MetadataValue::Array {
                    element: rinfer_formats::gguf::ValueType::String,
                    items: vec![MetadataValue::String("text.txt".into())],
                },
            )
            .unwrap();
            w.add_metadata("imatrix.chunk_count", MetadataValue::U32(3))
                .unwrap();
            w.add_metadata("imatrix.chunk_size", MetadataValue::U32(128))
                .unwrap();
        }
        for (name, ty, values) in tensors {
            let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            w.add_tensor(name, *ty, &[values.len() as u64], bytes)
                .unwrap();
        }
        w.to_bytes()
    }

    #[test]
    fn importances_are_sums_over_rounded_counts_per_expert() {
        let bytes = file(
            true,
            &[
                ("m.in_sum2", GgmlType::F32, vec![2.0, 4.0, 6.0, 8.0]),
                ("m.counts", GgmlType::F32, vec![1.6, 0.0]),
            ],
        );
        let m = ImportanceMatrix::from_bytes(bytes).unwrap();
        assert_eq!(m.get("m"), Some(&[1.0, 2.0, 1.0, 1.0][..]));
        assert_eq!((m.len(), m.chunk_count(), m.chunk_size()), (1, 3, 128));
        assert_eq!(m.datasets(), ["text.txt"]);
    }

    #[test]
    fn a_file_without_llama_cpp_metadata_is_refused() {
        let bytes = file(
            false,
            &[
                ("m.in_sum2", GgmlType::F32, vec![1.0]),
                ("m.counts", GgmlType::F32, vec![1.0]),
            ],
        );
        let err = ImportanceMatrix::from_bytes(bytes).unwrap_err();
        assert!(matches!(err, ImatrixError::MissingMetadata { .. }), "{err}");
    }

    #[test]
    fn unpaired_mistyped_ragged_and_non_finite_entries_are_refused() {
        let cases: Vec<Vec<(&str, GgmlType, Vec<f32>)>> = vec![
            vec![("m.in_sum2", GgmlType::F32, vec![1.0])],
            vec![("m.counts", GgmlType::F32, vec![1.0])],
            vec![
                ("m.in_sum2", GgmlType::F32, vec![1.0, 2.0, 3.0]),
                ("m.counts", GgmlType::F32, vec![1.0, 1.0]),
            ],
            vec![
                ("m.in_sum2", GgmlType::F32, vec![f32::NAN]),
                ("m.counts", GgmlType::F32, vec![1.0]),
            ],
            vec![
                ("m.in_sum2", GgmlType::F32, vec![1.0]),
                ("m.counts", GgmlType::F32, vec![]),
            ],
        ];
        for tensors in cases {
            let names: Vec<&str> = tensors.iter().map(|t| t.0).collect();
            assert!(
                ImportanceMatrix::from_bytes(file(true, &tensors)).is_err(),
                "{names:?} accepted"
            );
        }
        assert!(matches!(
            ImportanceMatrix::from_bytes(file(true, &[])),
            Err(ImatrixError::Empty)
        ));
    }

    #[test]
    fn truncated_files_give_errors_at_every_length() {
        let bytes = file(
            true,
            &[
                (
                    "blk.0.ffn_down.weight.in_sum2",
                    GgmlType::F32,
                    vec![1.0; 64],
                ),
                ("blk.0.ffn_down.weight.counts", GgmlType::F32, vec![4.0]),
            ],
        );
        assert!(ImportanceMatrix::from_bytes(bytes.clone()).is_ok());
        // Only the alignment padding after the last tensor's data may be missing.
        let accepted: Vec<usize> = (0..bytes.len())
            .filter(|&len| ImportanceMatrix::from_bytes(bytes[..len].to_vec()).is_ok())
            .collect();
        if let Some(&shortest) = accepted.first() {
            assert!(
                bytes.len() - shortest < 32,
                "accepted {shortest} of {} bytes",
                bytes.len()
            );
            assert_eq!(
                accepted.len(),
                bytes.len() - shortest,
                "a gap in the lengths"
            );
        }
    }

    #[test]
    fn corrupted_bytes_never_panic() {
        let bytes = file(
            true,
            &[
                ("m.in_sum2", GgmlType::F32, vec![1.0; 16]),
                ("m.counts", GgmlType::F32, vec![2.0]),
            ],
        );
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2000 {
            let mut b = bytes.clone();
            for _ in 0..4 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let i = (state % b.len() as u64) as usize;
                b[i] = (state >> 32) as u8;
            }
            let _ = ImportanceMatrix::from_bytes(b);
        }
    }
}
