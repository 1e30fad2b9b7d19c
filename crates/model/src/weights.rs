//! The neutral weights every format loads into: the architecture's transformer tree with CPU
//! handles ([`Cpu`]). Matrices stay in their stored block format, borrowed from the
//! memory-mapped file; norms and biases are small f32 vectors.

use std::ops::Range;
use std::sync::Arc;

use rinfer_formats::GgmlType;
use rinfer_kernels::{Kernels, PackedMatrix, WeightMatrix};
use rinfer_transformer::{Handles, Mapper, Tensor, Transformer};

/// Something that owns the bytes matrices borrow: a memory-mapped file or a buffer.
pub trait ByteSource: Send + Sync {
    /// All the bytes.
    fn bytes(&self) -> &[u8];

    /// Hints that `range` will not be read again soon, so its memory may be given back (a
    /// mapped file's pages are read back in if it is).
    fn release(&self, _range: Range<usize>) {}
}

impl ByteSource for rinfer_formats::gguf::GgufFile {
    fn bytes(&self) -> &[u8] {
        rinfer_formats::gguf::GgufFile::bytes(self)
    }

    fn release(&self, range: Range<usize>) {
        self.release_pages(range);
    }
}

impl ByteSource for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

/// A 2-D weight matrix of `rows` rows of `cols` elements, each row stored in `ty`'s blocks.
#[derive(Clone)]
pub struct Matrix {
    /// Block format of every row.
    pub ty: GgmlType,
    /// Output features.
    pub rows: usize,
    /// Input features (elements per row).
    pub cols: usize,
    source: Arc<dyn ByteSource>,
    range: Range<usize>,
    /// The rows repacked for this CPU's fastest kernel, where it has one for `ty`.
    packed: Option<PackedSlab>,
}

/// A matrix's packed rows: rows `first..first + rows` of a packed matrix, its own or one that
/// stacks every expert of a tensor.
#[derive(Clone)]
struct PackedSlab {
    matrix: Arc<PackedMatrix>,
    first: usize,
}

impl Matrix {
    /// A matrix over `source.bytes()[range]`, which must hold exactly `rows` rows of `cols` `ty`
    /// elements (checked by the loader).
    pub(crate) fn new(
        ty: GgmlType,
        rows: usize,
        cols: usize,
        source: Arc<dyn ByteSource>,
        range: Range<usize>,
    ) -> Self {
        Self {
            ty,
            rows,
            cols,
            source,
            range,
            packed: None,
        }
    }

    /// A matrix owning `data`.
    pub fn from_owned(ty: GgmlType, rows: usize, cols: usize, data: Vec<u8>) -> Self {
        let len = data.len();
        Self::new(ty, rows, cols, Arc::new(data), 0..len)
    }

    /// All rows' bytes.
    pub fn data(&self) -> &[u8] {
        &self.source.bytes()[self.range.clone()]
    }

    /// Repacks the rows for this CPU's fastest kernel if it has one for this type; the
    /// products then use it (the stored rows stay for everything else).
    pub(crate) fn pack(&mut self) -> Result<(), rinfer_kernels::KernelError> {
        let view = WeightMatrix::new(self.ty, self.rows, self.cols, self.data())?;
        // The products read the packed copy; the stored rows are read again only by embedding
        // lookups and a GPU upload, which map the pages they need back in.
        let start = self.range.start;
        let release = |r: Range<usize>| self.source.release(start + r.start..start + r.end);
        let packed = Kernels::detected().pack_releasing(&view, release);
        self.packed = packed.map(|matrix| PackedSlab {
            matrix: Arc::new(matrix),
            first: 0,
        });
        Ok(())
    }

    /// Splits this packed matrix into `count` matrices of `rows / count` consecutive rows each
    /// (the experts of a stacked expert tensor), every one sharing this one's packed rows when
    /// they split at each part, else packing its own.
    pub(crate) fn split_rows(
        &self,
        count: usize,
    ) -> Result<Vec<Matrix>, rinfer_kernels::KernelError> {
        let rows = self.rows / count.max(1);
        let bytes = rows * self.row_bytes();
        let shared = self
            .packed
            .as_ref()
            .filter(|slab| (0..=count).all(|e| slab.matrix.splits_at(e * rows)));
        (0..count)
            .map(|e| {
                let start = self.range.start + e * bytes;
                let source = self.source.clone();
                let mut part = Matrix::new(self.ty, rows, self.cols, source, start..start + bytes);
                match shared {
                    Some(slab) => {
                        part.packed = Some(PackedSlab {
                            matrix: slab.matrix.clone(),
                            first: e * rows,
                        });
                    }
                    None if self.packed.is_some() => part.pack()?,
                    None => {}
                }
                Ok(part)
            })
            .collect()
    }

    /// The repacked rows, if [`Matrix::pack`] made them: a packed matrix and this matrix's rows
    /// of it.
    pub(crate) fn packed(&self) -> Option<(&PackedMatrix, Range<usize>)> {
        let slab = self.packed.as_ref()?;
        Some((&slab.matrix, slab.first..slab.first + self.rows))
    }

    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.cols / self.ty.block_size() * self.ty.type_size()
    }

    /// The bytes of `matrices` as one slice when they lie back to back in one source, in
    /// order (the experts of one 3-D tensor do).
    pub(crate) fn contiguous<'m>(
        matrices: impl IntoIterator<Item = &'m Matrix>,
    ) -> Option<&'m [u8]> {
        let mut matrices = matrices.into_iter();
        let first = matrices.next()?;
        let mut end = first.range.end;
        for m in matrices {
            if !Arc::ptr_eq(&m.source, &first.source) || m.range.start != end {
                return None;
            }
            end = m.range.end;
        }
        Some(&first.source.bytes()[first.range.start..end])
    }

    /// The bytes of row `r`.
    pub fn row(&self, r: usize) -> &[u8] {
        let n = self.row_bytes();
        &self.data()[r * n..(r + 1) * n]
    }
}

impl std::fmt::Debug for Matrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Matrix")
            .field("ty", &self.ty)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .field("packed", &self.packed.is_some())
            .finish()
    }
}

/// The CPU's weight handles: matrices in their stored block format (packed where the CPU has a
/// kernel for it), f32 vectors, and each expert's own linear layer.
#[derive(Clone, Copy, Debug)]
pub struct Cpu;

impl Handles for Cpu {
    type Matrix = Matrix;
    type Vector = Vec<f32>;
    type Experts = Vec<Linear>;
}

/// A linear layer `y = W·x + b` on the CPU.
pub type Linear = rinfer_transformer::Linear<Cpu>;

/// A norm's weights on the CPU.
pub type NormWeights = rinfer_transformer::NormWeights<Cpu>;

/// All weights of a model: the transformer its architecture declares, with the loaded matrices
/// and vectors in place.
#[derive(Clone, Debug)]
pub struct Weights {
    /// The tree the forward pass walks.
    pub transformer: Transformer<Cpu>,
}

impl Weights {
    /// Every matrix, each once (a tied LM head is the embedding table).
    pub fn matrices(&self) -> Vec<&Matrix> {
        let mut all = Matrices(Vec::new());
        let Ok(_) = self.transformer.map(&mut all);
        all.0
    }

    /// Bytes of the matrices per block format, largest first. They stay in the file's memory
    /// map; only norms and biases are copied (as f32).
    pub fn bytes_by_type(&self) -> Vec<(GgmlType, usize)> {
        let mut totals: Vec<(GgmlType, usize)> = Vec::new();
        for m in self.matrices() {
            match totals.iter_mut().find(|(ty, _)| *ty == m.ty) {
                Some((_, bytes)) => *bytes += m.data().len(),
                None => totals.push((m.ty, m.data().len())),
            }
        }
        totals.sort_by_key(|&(_, bytes)| std::cmp::Reverse(bytes));
        totals
    }

    /// The matrix that produces logits.
    pub fn lm_head(&self) -> &Matrix {
        self.transformer.lm_head()
    }
}

/// Collects every matrix of a tree, in the tree's order.
struct Matrices<'t>(Vec<&'t Matrix>);

impl<'t> Mapper<'t, Cpu, ()> for Matrices<'t> {
    type Error = std::convert::Infallible;

    fn matrix(&mut self, _: &Tensor, m: &'t Matrix) -> Result<(), Self::Error> {
        self.0.push(m);
        Ok(())
    }

    fn vector(&mut self, _: &Tensor, _: &'t Vec<f32>) -> Result<(), Self::Error> {
        Ok(())
    }

    fn experts(&mut self, _: &Tensor, e: &'t Vec<Linear>) -> Result<(), Self::Error> {
        self.0.extend(e.iter().map(|l| &l.weight));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rinfer_kernels::ActivationBuffer;

    use super::*;
    use crate::compute::matmul;
    use crate::observe::Products;

    /// `rows × cols` Q8_0 weights from a fixed sequence.
    fn q8_0_rows(rows: usize, cols: usize) -> Vec<u8> {
        let x: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
            .collect();
        let mut out = vec![0u8; rows * cols / 32 * 34];
        rinfer_kernels::quantize_row(GgmlType::Q8_0, &x, &mut out).unwrap();
        out
    }

    #[test]
    fn split_experts_multiply_as_each_expert_alone() {
        // 32-row experts share the stacked packing; 24-row ones start inside a packed row group
        // and pack their own.
        let (count, cols) = (3, 64);
        for (rows, shared) in [(32, true), (24, false)] {
            let data = q8_0_rows(rows * count, cols);
            let mut stacked = Matrix::from_owned(GgmlType::Q8_0, rows * count, cols, data.clone());
            stacked.pack().unwrap();
            let parts = stacked.split_rows(count).unwrap();
            let slab = data.len() / count;
            let x: Vec<f32> = (0..2 * cols).map(|i| (i % 7) as f32 - 3.0).collect();
            for (e, part) in parts.iter().enumerate() {
                let bytes = data[e * slab..(e + 1) * slab].to_vec();
                let mut alone = Matrix::from_owned(GgmlType::Q8_0, rows, cols, bytes);
                alone.pack().unwrap();
                assert_eq!(part.data(), alone.data());
                if let Some((_, range)) = part.packed() {
                    let first = if shared { e * rows } else { 0 };
                    assert_eq!(range, first..first + rows);
                }
                let mut act = Products::new(ActivationBuffer::for_matmul(2, cols, rows * count));
                let (mut got, mut want) = (vec![0.0; 2 * rows], vec![0.0; 2 * rows]);
                matmul(part, &x, 2, &mut got, &mut act).unwrap();
                matmul(&alone, &x, 2, &mut want, &mut act).unwrap();
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "expert {e} of {rows} rows");
            }
        }
    }
}
