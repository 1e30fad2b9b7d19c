//! Weights repacked once at load time into the layout a faster kernel reads: an explicit
//! transform with its own type, [`PackedMatrix`].
//!
//! Q5_0 is packed sixteen rows at a time for AVX-512 VNNI (see `q5_0x16`): one instruction dots
//! four codes of sixteen rows, each weight block is decoded once for up to eight tokens, and no
//! horizontal sum is needed. Decode and prefill both use the packed kernel, so a token's outputs
//! are the same whether it is multiplied alone or in a batch, and on any number of threads.

use rayon::prelude::*;
use rinfer_formats::GgmlType;

use crate::cpu::{self, Isa};
use crate::dispatch::Kernels;
use crate::error::KernelError;
use crate::matmul::{TOKEN_TILE, for_row_ranges};
use crate::matvec::{ActivationBuffer, WeightMatrix, rows_per_task};
use crate::quant::q5_0::BlockQ5_0;
use crate::quant::q8_0::BlockQ8_0;

mod q5_0x16;
#[cfg(target_arch = "x86_64")]
mod q5_0x16_avx512;
#[cfg(test)]
mod tests;

pub(crate) use q5_0x16::BlockSummary;
use q5_0x16::{BlockQ5_0x16, ROWS};

/// A packed kernel: the sixteen rows of one row group against several tokens.
///
/// `unsafe` because SIMD entries need the instruction set they were selected for; only
/// [`PackedMatrix::pack`] picks one, after checking it.
type GroupDotFn = unsafe fn(&[BlockQ5_0x16], &[BlockQ8_0], &[BlockSummary], &mut [[f32; ROWS]]);

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
    rows: usize,
    cols: usize,
    /// `[row group][block]`.
    blocks: Vec<BlockQ5_0x16>,
    dot: GroupDotFn,
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
        let dot = packed_kernel(cpu::detected(), w.ty())?;
        Some(Self::pack_with(w, dot))
    }

    /// Repacks a Q5_0 `w` for the kernel `dot`.
    fn pack_with(w: &WeightMatrix<'_>, dot: GroupDotFn) -> Self {
        let nb = w.cols() / 32;
        let groups = w.rows().div_ceil(ROWS);
        let mut blocks = vec![BlockQ5_0x16::zeroed(); groups * nb];
        blocks
            .par_chunks_mut(nb.max(1))
            .enumerate()
            .for_each(|(g, out)| {
                let rows: Vec<&[u8]> = (g * ROWS..((g + 1) * ROWS).min(w.rows()))
                    .map(|r| w.row(r))
                    .collect();
                for (b, out) in out.iter_mut().enumerate() {
                    let bytes =
                        |row: &&[u8]| bytemuck::pod_read_unaligned(&row[b * 22..b * 22 + 22]);
                    let column: Vec<BlockQ5_0> = rows.iter().map(bytes).collect();
                    *out = BlockQ5_0x16::pack(&column);
                }
            });
        PackedMatrix {
            rows: w.rows(),
            cols: w.cols(),
            blocks,
            dot,
        }
    }

    /// The type the matrix was packed from.
    pub fn ty(&self) -> GgmlType {
        GgmlType::Q5_0
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
        size_of_val(self.blocks.as_slice())
    }
}

use bytemuck::Zeroable;

/// The packed kernel for `ty` at `isa`, if there is one.
fn packed_kernel(isa: Isa, ty: GgmlType) -> Option<GroupDotFn> {
    match ty {
        #[cfg(target_arch = "x86_64")]
        GgmlType::Q5_0 if isa >= Isa::Avx512 => Some(avx512_q5_0x16),
        _ => None,
    }
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
    let (rows, cols, nb) = (w.rows, w.cols, w.cols / 32);
    for (what, expected, actual) in [
        ("activations", n_tokens * cols, x.len()),
        ("output", n_tokens * rows, y.len()),
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
    let q8 = Kernels::detected().get(GgmlType::Q8_0)?;
    let row_bytes = nb * size_of::<BlockQ8_0>();
    let tile_needed = if n_tokens > 1 {
        rows * TOKEN_TILE.min(n_tokens)
    } else {
        0
    };
    let (bytes, summaries, tile) = act.parts(n_tokens * row_bytes, n_tokens * nb, tile_needed)?;
    bytes
        .par_chunks_mut(row_bytes)
        .zip(x.par_chunks(cols))
        .for_each(|(out, x)| q8.quantize_activation(x, out));
    let blocks: &[BlockQ8_0] = bytemuck::cast_slice(bytes);
    summaries
        .par_chunks_mut(nb)
        .zip(blocks.par_chunks(nb))
        .for_each(|(s, b)| {
            s.iter_mut()
                .zip(b)
                .for_each(|(s, b)| *s = BlockSummary::of(b))
        });
    let group = (tile.len() / rows.max(1) / TOKEN_TILE * TOKEN_TILE).max(TOKEN_TILE);
    for g0 in (0..n_tokens).step_by(group) {
        let n = group.min(n_tokens - g0);
        let (a, s) = (
            &blocks[g0 * nb..(g0 + n) * nb],
            &summaries[g0 * nb..(g0 + n) * nb],
        );
        let chunk = rows_per_task(rows, w.size_bytes() / rows.max(1) * n).next_multiple_of(ROWS);
        let dot = |first: usize, out: &mut [f32]| {
            let len = out.len() / n;
            let mut dots = [[0.0; ROWS]; TOKEN_TILE];
            for r0 in (first..first + len).step_by(ROWS) {
                let wg = &w.blocks[r0 / ROWS * nb..(r0 / ROWS + 1) * nb];
                let valid = ROWS.min(first + len - r0);
                for t0 in (0..n).step_by(TOKEN_TILE) {
                    let nt = TOKEN_TILE.min(n - t0);
                    let dots = &mut dots[..nt];
                    // SAFETY: `w.dot` was chosen for this CPU by `PackedMatrix::pack`.
                    unsafe { (w.dot)(wg, &a[t0 * nb..], &s[t0 * nb..], dots) };
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
