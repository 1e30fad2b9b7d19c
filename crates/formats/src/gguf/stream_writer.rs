//! Writing a GGUF file tensor by tensor: the header (metadata and tensor table) first, then each
//! tensor's bytes as they are produced, so a writer never holds more than one tensor.

use std::io::Write;

use crate::dtype::GgmlType;
use crate::error::{GgufError, Result};

use super::header::{
    ALIGNMENT_KEY, DEFAULT_ALIGNMENT, GGUF_MAGIC, MAX_DIMS, align_up, tensor_bytes,
};
use super::metadata::{Metadata, MetadataValue, write_string};

/// A tensor announced in the header: its name, type and dimensions (innermost first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorHeader {
    /// The name.
    pub name: String,
    /// The element or block type.
    pub ty: GgmlType,
    /// The dimensions, innermost first.
    pub dims: Vec<u64>,
}

/// Streams a GGUF v3 file to `out`: [`GgufStreamWriter::new`] writes the metadata and the table
/// of every tensor, [`GgufStreamWriter::write_tensor`] then takes the tensors' bytes in that
/// order, each aligned to the file's alignment (32 unless `general.alignment` is set).
///
/// ```
/// use rinfer_formats::GgmlType;
/// use rinfer_formats::gguf::{GgufFile, GgufStreamWriter, Metadata, TensorHeader};
///
/// let tensors = [TensorHeader { name: "t".into(), ty: GgmlType::F32, dims: vec![2] }];
/// let mut w = GgufStreamWriter::new(Vec::new(), &Metadata::default(), &tensors)?;
/// w.write_tensor(&[0u8; 8])?;
/// let file = GgufFile::from_bytes(w.finish()?)?;
/// assert_eq!(file.tensor("t").unwrap().data, &[0u8; 8]);
/// # Ok::<(), rinfer_formats::gguf::GgufError>(())
/// ```
pub struct GgufStreamWriter<W: Write> {
    out: W,
    /// Each tensor's name and byte size, in order.
    sizes: Vec<(String, u64)>,
    /// Tensors written so far.
    next: usize,
    /// Bytes written so far.
    position: u64,
    alignment: u64,
}

fn write_error(source: std::io::Error) -> GgufError {
    GgufError::Write { source }
}

impl<W: Write> GgufStreamWriter<W> {
    /// Writes the header of a file holding `metadata` and `tensors`.
    ///
    /// # Errors
    /// [`GgufError::TooManyDims`] or [`GgufError::DimsOverflow`] for a tensor shape GGUF cannot
    /// hold, [`GgufError::Write`] when `out` fails.
    pub fn new(mut out: W, metadata: &Metadata, tensors: &[TensorHeader]) -> Result<Self> {
        let alignment = metadata
            .get(ALIGNMENT_KEY)
            .and_then(MetadataValue::as_i128)
            .and_then(|a| u64::try_from(a).ok())
            .filter(|a| a.is_power_of_two())
            .unwrap_or(DEFAULT_ALIGNMENT);
        let mut head = Vec::new();
        head.extend_from_slice(&GGUF_MAGIC);
        head.extend_from_slice(&3u32.to_le_bytes());
        head.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
        head.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
        for (key, value) in metadata.iter() {
            write_string(key, &mut head);
            head.extend_from_slice(&(value.value_type() as u32).to_le_bytes());
            value.write(&mut head);
        }
        let mut sizes = Vec::with_capacity(tensors.len());
        let mut offset = 0u64;
        for t in tensors {
            if t.dims.len() > MAX_DIMS as usize {
                return Err(GgufError::TooManyDims {
                    tensor: t.name.clone(),
                    n_dims: t.dims.len() as u32,
                });
            }
            let size = tensor_bytes(&t.name, t.ty, &t.dims)?;
            write_string(&t.name, &mut head);
            head.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                head.extend_from_slice(&d.to_le_bytes());
            }
            head.extend_from_slice(&t.ty.id().to_le_bytes());
            head.extend_from_slice(&offset.to_le_bytes());
            offset = align_up(offset + size, alignment);
            sizes.push((t.name.clone(), size));
        }
        out.write_all(&head).map_err(write_error)?;
        Ok(Self {
            out,
            sizes,
            next: 0,
            position: head.len() as u64,
            alignment,
        })
    }

    fn pad(&mut self) -> Result<()> {
        let padding = align_up(self.position, self.alignment) - self.position;
        self.out
            .write_all(&vec![0u8; padding as usize])
            .map_err(write_error)?;
        self.position += padding;
        Ok(())
    }

    /// Writes the next tensor's bytes.
    ///
    /// # Errors
    /// [`GgufError::TensorSize`] when `data` is not exactly the next tensor's size, or every
    /// tensor was written already; [`GgufError::Write`] when `out` fails.
    pub fn write_tensor(&mut self, data: &[u8]) -> Result<()> {
        let Some((name, size)) = self.sizes.get(self.next).cloned() else {
            return Err(GgufError::TensorSize {
                tensor: "(none left)".into(),
                ty: "",
                dims: Vec::new(),
                expected: 0,
                got: data.len() as u64,
            });
        };
        if size != data.len() as u64 {
            return Err(GgufError::TensorSize {
                tensor: name,
                ty: "",
                dims: Vec::new(),
                expected: size,
                got: data.len() as u64,
            });
        }
        self.pad()?;
        self.out.write_all(data).map_err(write_error)?;
        self.position += size;
        self.next += 1;
        Ok(())
    }

    /// Pads the end of the data and hands back the output.
    ///
    /// # Errors
    /// [`GgufError::MissingTensorData`] when tensors announced in the header were not written;
    /// [`GgufError::Write`] when `out` fails.
    pub fn finish(mut self) -> Result<W> {
        if let Some((name, _)) = self.sizes.get(self.next) {
            return Err(GgufError::MissingTensorData {
                tensor: name.clone(),
            });
        }
        if !self.sizes.is_empty() {
            self.pad()?;
        }
        self.out.flush().map_err(write_error)?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_tensors() -> Vec<TensorHeader> {
        ["a", "b"]
            .map(|name| TensorHeader {
                name: name.into(),
                ty: GgmlType::F32,
                dims: vec![3],
            })
            .to_vec()
    }

    #[test]
    fn a_tensor_of_the_wrong_size_or_one_too_many_is_refused() {
        let mut w =
            GgufStreamWriter::new(Vec::new(), &Metadata::default(), &two_tensors()).unwrap();
        assert!(matches!(
            w.write_tensor(&[0; 8]),
            Err(GgufError::TensorSize { .. })
        ));
        w.write_tensor(&[0; 12]).unwrap();
        w.write_tensor(&[0; 12]).unwrap();
        assert!(matches!(
            w.write_tensor(&[0; 12]),
            Err(GgufError::TensorSize { .. })
        ));
    }

    #[test]
    fn finishing_before_every_tensor_is_written_names_the_first_missing() {
        let mut w =
            GgufStreamWriter::new(Vec::new(), &Metadata::default(), &two_tensors()).unwrap();
        w.write_tensor(&[0; 12]).unwrap();
        match w.finish() {
            Err(GgufError::MissingTensorData { tensor }) => assert_eq!(tensor, "b"),
            other => panic!("{:?}", other.map(|v| v.len())),
        }
    }
}
