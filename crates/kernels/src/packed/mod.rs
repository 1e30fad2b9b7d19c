//! Weights repacked once at load time into the layout a faster kernel reads: an explicit
//! transform with its own type, [`PackedMatrix`].
//!
//! Q5_0, Q8_0, Q4_K and Q6_K are packed sixteen rows at a time for AVX-512 VNNI (see `q5_0x16`,
//! `q8_0x16`, `q4_kx16` and `q6_kx16`): one instruction dots four codes of sixteen rows, each weight block is decoded
//! once for several tokens, and no horizontal sum is needed. Decode and prefill both use the packed kernel, so a token's outputs
//! are the same whether it is multiplied alone or in a batch, and on any number of threads.

use std::borrow::Cow;
use std::ops::Range;

use bytemuck::Pod;
use rayon::prelude::*;
use rinfer_formats::GgmlType;

use crate::cpu::{self, Isa};
use crate::dispatch::Kernels;
use crate::error::KernelError;
use crate::matmul::{TOKEN_TILE, for_row_ranges};
use crate::matvec::{ActivationBuffer, ScratchParts, WeightMatrix, rows_per_task};
use crate::quant::q4_k::BlockQ4K;
use crate::quant::q5_0::BlockQ5_0;
use crate::quant::q6_k::BlockQ6K;
use crate::quant::q8_0::BlockQ8_0;
use crate::quant::q8_k::BlockQ8K;

#[cfg(target_arch = "x86_64")]
mod byte_codes_avx512;
mod q4_kx16;
#[cfg(target_arch = "x86_64")]
mod q4_kx16_avx512;
mod q5_0x16;
#[cfg(target_arch = "x86_64")]
mod q5_0x16_avx512;
mod q6_kx16;
#[cfg(target_arch = "x86_64")]
mod q6_kx16_avx512;
mod q8_0x16;
#[cfg(target_arch = "x86_64")]
mod q8_0x16_avx512;
#[cfg(test)]
mod tests;

use q4_kx16::BlockQ4Kx16;
pub(crate) use q5_0x16::BlockSummary;
use q5_0x16::{BlockQ5_0x16, ROWS};
use q6_kx16::BlockQ6Kx16;
use q8_0x16::BlockQ8_0x16;

/// A packed block format: sixteen rows of one block column, packed from the stored blocks,
/// multiplied against activations quantized to `Act` and summarized per 32 values.
trait PackedFormat: Pod + Send + Sync {
    /// The stored block it is packed from.
    type Source: Pod;
    /// The activation block format.
    type Act: Pod + Sync;
    /// The type of [`Self::Source`], whose kernels quantize the activations.
    const SOURCE_TYPE: GgmlType;
    /// Values per block.
    const COLS: usize;
    /// Packs one block of each of up to sixteen rows into `self` (zeroed).
    fn pack_into(&mut self, rows: &[&Self::Source]);
    /// The summaries of the 32-value groups of one activation block.
    fn summarize(a: &Self::Act, out: &mut [BlockSummary]);
}

impl PackedFormat for BlockQ5_0x16 {
    type Source = BlockQ5_0;
    type Act = BlockQ8_0;
    const SOURCE_TYPE: GgmlType = GgmlType::Q5_0;
    const COLS: usize = 32;
    fn pack_into(&mut self, rows: &[&BlockQ5_0]) {
        BlockQ5_0x16::pack_into(self, rows);
    }
    fn summarize(a: &BlockQ8_0, out: &mut [BlockSummary]) {
        out[0] = BlockSummary::of(a);
    }
}

impl PackedFormat for BlockQ8_0x16 {
    type Source = BlockQ8_0;
    type Act = BlockQ8_0;
    const SOURCE_TYPE: GgmlType = GgmlType::Q8_0;
    const COLS: usize = 32;
    fn pack_into(&mut self, rows: &[&BlockQ8_0]) {
        BlockQ8_0x16::pack_into(self, rows);
    }
    fn summarize(a: &BlockQ8_0, out: &mut [BlockSummary]) {
        out[0] = BlockSummary::of(a);
    }
}

impl PackedFormat for BlockQ4Kx16 {
    type Source = BlockQ4K;
    type Act = BlockQ8K;
    const SOURCE_TYPE: GgmlType = GgmlType::Q4K;
    const COLS: usize = 256;
    fn pack_into(&mut self, rows: &[&BlockQ4K]) {
        BlockQ4Kx16::pack_into(self, rows);
    }
    fn summarize(a: &BlockQ8K, out: &mut [BlockSummary]) {
        q4_kx16::summarize_q8k(a.d, &a.bsums, out);
    }
}

impl PackedFormat for BlockQ6Kx16 {
    type Source = BlockQ6K;
    type Act = BlockQ8K;
    const SOURCE_TYPE: GgmlType = GgmlType::Q6K;
    const COLS: usize = 256;
    fn pack_into(&mut self, rows: &[&BlockQ6K]) {
        BlockQ6Kx16::pack_into(self, rows);
    }
    fn summarize(a: &BlockQ8K, out: &mut [BlockSummary]) {
        q4_kx16::summarize_q8k(a.d, &a.bsums, out);
    }
}

/// A packed kernel: the sixteen rows of one row group against several tokens.
///
/// `unsafe` because SIMD entries need the instruction set they were selected for; only
/// [`PackedMatrix::pack`] picks one, after checking it.
type GroupDotFn<P> =
    unsafe fn(&[P], &[<P as PackedFormat>::Act], &[BlockSummary], &mut [[f32; ROWS]]);

/// The packed blocks, `[row group][block column]`, and their kernel.
struct PackedRows<P: PackedFormat> {
    blocks: Vec<P>,
    dot: GroupDotFn<P>,
}

/// The packed data of each format.
enum PackedData {
    Q5_0(PackedRows<BlockQ5_0x16>),
    Q8_0(PackedRows<BlockQ8_0x16>),
    Q4K(PackedRows<BlockQ4Kx16>),
    Q6K(PackedRows<BlockQ6Kx16>),
}

/// A weight matrix repacked for this CPU's fastest kernel; multiply with [`matmul_packed`].
///
/// ```
/// use rinfer_formats::GgmlType;
/// use rinfer_kernels::{PackedMatrix, WeightMatrix};
///
/// let data = vec![0u8; 64 * 22]; // 64 rows of one Q5_0 block
/// let w = WeightMatrix::new(GgmlType::Q5_0, 64, 32, &data)?;
/// // `None` where the CPU has no packed kernel (no AVX-512 VNNI): multiply `w` as it is.
/// if let Some(packed) = PackedMatrix::pack(&w) {
///     assert_eq!((packed.rows(), packed.cols()), (64, 32));
/// }
/// # Ok::<(), rinfer_kernels::KernelError>(())
/// ```
pub struct PackedMatrix {
    ty: GgmlType,
    rows: usize,
    cols: usize,
    data: PackedData,
}

impl std::fmt::Debug for PackedMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedMatrix")
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .finish_non_exhaustive()
    }
}

impl PackedMatrix {
    /// Repacks `w` when this CPU has a packed kernel for its type, else `None` (the row-major
    /// kernels are then the fastest there are).
    pub fn pack(w: &WeightMatrix<'_>) -> Option<Self> {
        Self::pack_releasing(w, |_| {})
    }

    /// [`PackedMatrix::pack`], calling `release` with each byte range of `w`'s data as soon as
    /// it is packed and will not be read again here (so that a caller can give a mapped file's
    /// pages back while a large matrix is packed, instead of holding both copies at the end).
    pub fn pack_releasing(
        w: &WeightMatrix<'_>,
        release: impl Fn(Range<usize>) + Sync,
    ) -> Option<Self> {
        let data = match (cpu::detected(), w.ty()) {
            #[cfg(target_arch = "x86_64")]
            (isa, GgmlType::Q5_0) if isa >= Isa::Avx512 => {
                PackedData::Q5_0(pack_rows(w, avx512_q5_0x16, &release))
            }
            #[cfg(target_arch = "x86_64")]
            (isa, GgmlType::Q8_0) if isa >= Isa::Avx512 => {
                PackedData::Q8_0(pack_rows(w, avx512_q8_0x16, &release))
            }
            #[cfg(target_arch = "x86_64")]
            (isa, GgmlType::Q4K) if isa >= Isa::Avx512 => {
                PackedData::Q4K(pack_rows(w, avx512_q4_kx16, &release))
            }
            #[cfg(target_arch = "x86_64")]
            (isa, GgmlType::Q6K) if isa >= Isa::Avx512 => {
                PackedData::Q6K(pack_rows(w, avx512_q6_kx16, &release))
            }
            _ => return None,
        };
        Some(Self::new(w, data))
    }

    fn new(w: &WeightMatrix<'_>, data: PackedData) -> Self {
        PackedMatrix {
            ty: w.ty(),
            rows: w.rows(),
            cols: w.cols(),
            data,
        }
    }

    /// The type the matrix was packed from.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// Number of rows (outputs).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns (inputs).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes the packed weights occupy.
    pub fn size_bytes(&self) -> usize {
        match &self.data {
            PackedData::Q5_0(p) => size_of_val(p.blocks.as_slice()),
            PackedData::Q8_0(p) => size_of_val(p.blocks.as_slice()),
            PackedData::Q4K(p) => size_of_val(p.blocks.as_slice()),
            PackedData::Q6K(p) => size_of_val(p.blocks.as_slice()),
        }
    }
}

/// Rows packed between two calls of the release callback: about this many source bytes.
const RELEASE_BYTES: usize = 4 << 20;

/// Packs `w` (whose type is `P::Source`'s) for the kernel `dot`, row groups in parallel, in
/// slabs of about [`RELEASE_BYTES`], each released once packed.
fn pack_rows<P: PackedFormat>(
    w: &WeightMatrix<'_>,
    dot: GroupDotFn<P>,
    release: &(impl Fn(Range<usize>) + Sync),
) -> PackedRows<P> {
    let nb = w.cols() / P::COLS;
    let size = size_of::<P::Source>();
    let mut blocks = vec![P::zeroed(); w.rows().div_ceil(ROWS) * nb];
    let slab_groups = (RELEASE_BYTES / (ROWS * w.row_bytes()).max(1)).max(1);
    for (s, slab) in blocks.chunks_mut((slab_groups * nb).max(1)).enumerate() {
        let first_group = s * slab_groups;
        slab.par_chunks_mut(nb.max(1))
            .enumerate()
            .for_each(|(g, out)| {
                let g = first_group + g;
                // Each row as blocks: borrowed where the data is aligned for them (a GGUF file's
                // always is), copied otherwise.
                let rows: Vec<Cow<'_, [P::Source]>> = (g * ROWS..((g + 1) * ROWS).min(w.rows()))
                    .map(|r| match bytemuck::try_cast_slice(w.row(r)) {
                        Ok(blocks) => Cow::Borrowed(blocks),
                        Err(_) => Cow::Owned(
                            w.row(r)
                                .chunks_exact(size)
                                .map(bytemuck::pod_read_unaligned)
                                .collect(),
                        ),
                    })
                    .collect();
                let mut column = Vec::with_capacity(ROWS);
                for (b, out) in out.iter_mut().enumerate() {
                    column.clear();
                    column.extend(rows.iter().map(|row| &row[b]));
                    out.pack_into(&column);
                }
            });
        let rows = first_group * ROWS..((first_group + slab_groups) * ROWS).min(w.rows());
        release(rows.start * w.row_bytes()..rows.end * w.row_bytes());
    }
    PackedRows { blocks, dot }
}

/// The AVX-512 entry of the kernel table.
///
/// # Safety
/// The CPU must support AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
unsafe fn avx512_q5_0x16(
    w: &[BlockQ5_0x16],
    a: &[BlockQ8_0],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    // SAFETY: the caller checked the CPU features (the table is built after detection).
    unsafe { q5_0x16_avx512::dot_group(w, a, s, out) }
}

/// The AVX-512 entry of the Q8_0 kernel.
///
/// # Safety
/// The CPU must support AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
unsafe fn avx512_q8_0x16(
    w: &[BlockQ8_0x16],
    a: &[BlockQ8_0],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    // SAFETY: the caller checked the CPU features (the table is built after detection).
    unsafe { q8_0x16_avx512::dot_group(w, a, s, out) }
}

/// The AVX-512 entry of the Q4_K kernel.
///
/// # Safety
/// The CPU must support AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
unsafe fn avx512_q4_kx16(
    w: &[BlockQ4Kx16],
    a: &[BlockQ8K],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    // SAFETY: the caller checked the CPU features (the table is built after detection).
    unsafe { q4_kx16_avx512::dot_group(w, a, s, out) }
}

/// The AVX-512 entry of the Q6_K kernel.
///
/// # Safety
/// The CPU must support AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
unsafe fn avx512_q6_kx16(
    w: &[BlockQ6Kx16],
    a: &[BlockQ8K],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    // SAFETY: the caller checked the CPU features (the table is built after detection).
    unsafe { q6_kx16_avx512::dot_group(w, a, s, out) }
}

/// `Y = W·X` for packed `w`: `x` holds `n_tokens` rows of `w.cols()` values, `y` receives
/// `n_tokens` rows of `w.rows()` values (one token is a matvec). Activations are quantized to
/// Q8_0 once into `act`.
///
/// # Errors
/// [`KernelError::LengthMismatch`] when `x` or `y` do not fit the matrix and
/// [`KernelError::ScratchTooSmall`] when `act` was sized for fewer tokens, columns or rows.
pub fn matmul_packed(
    w: &PackedMatrix,
    x: &[f32],
    n_tokens: usize,
    act: &mut ActivationBuffer,
    y: &mut [f32],
) -> Result<(), KernelError> {
    for (what, expected, actual) in [
        ("activations", n_tokens * w.cols, x.len()),
        ("output", n_tokens * w.rows, y.len()),
    ] {
        if expected != actual {
            return Err(KernelError::LengthMismatch {
                what,
                expected,
                actual,
            });
        }
    }
    if n_tokens == 0 {
        return Ok(());
    }
    match &w.data {
        PackedData::Q5_0(p) => matmul_rows(p, w.rows, w.cols, x, n_tokens, act, y),
        PackedData::Q8_0(p) => matmul_rows(p, w.rows, w.cols, x, n_tokens, act, y),
        PackedData::Q4K(p) => matmul_rows(p, w.rows, w.cols, x, n_tokens, act, y),
        PackedData::Q6K(p) => matmul_rows(p, w.rows, w.cols, x, n_tokens, act, y),
    }
}

/// [`matmul_packed`] for one packed format.
fn matmul_rows<P: PackedFormat>(
    p: &PackedRows<P>,
    rows: usize,
    cols: usize,
    x: &[f32],
    n_tokens: usize,
    act: &mut ActivationBuffer,
    y: &mut [f32],
) -> Result<(), KernelError> {
    let nb = cols / P::COLS;
    let per_block = P::COLS / 32;
    let quantizer = Kernels::detected().get(P::SOURCE_TYPE)?;
    let row_bytes = nb * size_of::<P::Act>();
    let tile_needed = if n_tokens > 1 {
        rows * TOKEN_TILE.min(n_tokens)
    } else {
        0
    };
    let ScratchParts {
        bytes,
        summaries,
        tile,
    } = act.parts(n_tokens * row_bytes, n_tokens * cols / 32, tile_needed)?;
    bytes
        .par_chunks_mut(row_bytes)
        .zip(x.par_chunks(cols))
        .for_each(|(out, x)| quantizer.quantize_activation(x, out));
    let blocks: &[P::Act] = bytemuck::cast_slice(bytes);
    summaries
        .par_chunks_mut(cols / 32)
        .zip(blocks.par_chunks(nb))
        .for_each(|(s, b)| {
            for (s, b) in s.chunks_mut(per_block).zip(b) {
                P::summarize(b, s);
            }
        });
    let group = (tile.len() / rows.max(1) / TOKEN_TILE * TOKEN_TILE).max(TOKEN_TILE);
    let bytes_per_row = nb * size_of::<P>() / ROWS;
    for g0 in (0..n_tokens).step_by(group) {
        let n = group.min(n_tokens - g0);
        let a = &blocks[g0 * nb..(g0 + n) * nb];
        let s = &summaries[g0 * nb * per_block..(g0 + n) * nb * per_block];
        let chunk = rows_per_task(rows, bytes_per_row * n).next_multiple_of(ROWS);
        let dot = |first: usize, out: &mut [f32]| {
            let len = out.len() / n;
            let mut dots = [[0.0; ROWS]; TOKEN_TILE];
            for r0 in (first..first + len).step_by(ROWS) {
                let wg = &p.blocks[r0 / ROWS * nb..(r0 / ROWS + 1) * nb];
                let valid = ROWS.min(first + len - r0);
                for t0 in (0..n).step_by(TOKEN_TILE) {
                    let nt = TOKEN_TILE.min(n - t0);
                    let dots = &mut dots[..nt];
                    let (a, s) = (&a[t0 * nb..], &s[t0 * nb * per_block..]);
                    // SAFETY: `p.dot` was chosen for this CPU by `PackedMatrix::pack`.
                    unsafe { (p.dot)(wg, a, s, dots) };
                    for (t, d) in dots.iter().enumerate() {
                        let at = (t0 + t) * len + r0 - first;
                        out[at..at + valid].copy_from_slice(&d[..valid]);
                    }
                }
            }
        };
        for_row_ranges(n, chunk, tile, &mut y[g0 * rows..(g0 + n) * rows], dot);
    }
    Ok(())
}
