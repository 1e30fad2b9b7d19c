//! The packed rows of one format: packing them from a row-major matrix, slab by slab, and the
//! product driver that runs their kernel over row groups and token tiles.

use std::borrow::Cow;
use std::ops::Range;

use rayon::prelude::*;
use rinfer_formats::GgmlType;

use super::summary::Summarized;
use super::{GroupDotFn, PackedFormat, PackedProduct, ROWS, Release};
use crate::operands::{BlockSummary, TOKEN_TILE, WeightMatrix};
use crate::parallel::{for_row_ranges, rows_per_task};
use crate::quant::{BlockFormat, quantize_bytes, quantize_bytes_avx512};

/// Rows packed between two calls of the release callback: about this many source bytes.
const RELEASE_BYTES: usize = 4 << 20;

/// The packed blocks, `[row group][block column]`, and their kernel.
pub(super) struct PackedRows<P: PackedFormat> {
    pub(super) blocks: Vec<P>,
    dot: GroupDotFn<P>,
}

/// Packs `w` (whose type is `P::Source`'s) for the kernel `dot`, row groups in parallel, in
/// slabs of about [`RELEASE_BYTES`], each released once packed.
pub(super) fn pack_rows<P: PackedFormat>(
    w: &WeightMatrix<'_>,
    dot: GroupDotFn<P>,
    release: Release<'_>,
) -> PackedRows<P> {
    let nb = w.cols() / P::Source::ELEMS;
    let size = size_of::<P::Source>();
    let mut blocks = super::allocation::zeroed_blocks::<P>(w.rows().div_ceil(ROWS) * nb);
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

impl<P: PackedFormat> PackedProduct for PackedRows<P> {
    fn matmul_quantized(
        &self,
        range: Range<usize>,
        cols: usize,
        bytes: &[u8],
        summaries: &[BlockSummary],
        n_tokens: usize,
        tile: &mut [f32],
        y: &mut [f32],
    ) {
        let nb = cols / P::Source::ELEMS;
        let rows = range.len();
        let groups = &self.blocks[range.start / ROWS * nb..range.end.div_ceil(ROWS) * nb];
        let per_block = P::Source::ELEMS / 32;
        let blocks: &[P::Act] = bytemuck::cast_slice(bytes);
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
                    let wg = &groups[r0 / ROWS * nb..(r0 / ROWS + 1) * nb];
                    let valid = ROWS.min(first + len - r0);
                    for t0 in (0..n).step_by(TOKEN_TILE) {
                        let nt = TOKEN_TILE.min(n - t0);
                        let dots = &mut dots[..nt];
                        let (a, s) = (&a[t0 * nb..], &s[t0 * nb * per_block..]);
                        // SAFETY: `self.dot` runs on this CPU: the registry's packer that built
                        // these rows was called only where its instruction set was detected.
                        unsafe { (self.dot)(wg, a, s, dots) };
                        for (t, d) in dots.iter().enumerate() {
                            let at = (t0 + t) * len + r0 - first;
                            // A whole group as a fixed-size copy (no call to `memcpy`).
                            match <&mut [f32; ROWS]>::try_from(&mut out[at..at + valid]) {
                                Ok(whole) => *whole = *d,
                                Err(_) => out[at..at + valid].copy_from_slice(&d[..valid]),
                            }
                        }
                    }
                }
            };
            for_row_ranges(n, chunk, tile, &mut y[g0 * rows..(g0 + n) * rows], dot);
        }
    }

    fn activation_row_bytes(&self, cols: usize) -> usize {
        cols / P::Source::ELEMS * size_of::<P::Act>()
    }

    fn quantize(&self, cols: usize, x: &[f32], bytes: &mut [u8], summaries: &mut [BlockSummary]) {
        quantize_summarized::<P>(cols, x, bytes, summaries);
    }

    fn dot_one(&self, group: usize, cols: usize, a: &[u8], s: &[BlockSummary], out: &mut [f32]) {
        let nb = cols / P::Source::ELEMS;
        let mut dots = [[0.0; ROWS]; 1];
        let a: &[P::Act] = bytemuck::cast_slice(a);
        // SAFETY: `self.dot` runs on this CPU: the registry's packer that built these rows was
        // called only where its instruction set was detected.
        unsafe { (self.dot)(&self.blocks[group * nb..(group + 1) * nb], a, s, &mut dots) };
        out.copy_from_slice(&dots[0][..out.len()]);
    }

    fn bytes_per_row(&self, cols: usize) -> usize {
        cols / P::Source::ELEMS * size_of::<P>() / ROWS
    }

    fn activation_type(&self) -> GgmlType {
        P::Act::TYPE
    }
}

/// Quantizes the rows of `x` (`cols` values each) to `P::Act` into `bytes`, with their
/// summaries.
fn quantize_summarized<P: PackedFormat>(
    cols: usize,
    x: &[f32],
    bytes: &mut [u8],
    summaries: &mut [BlockSummary],
) {
    let nb = cols / P::Source::ELEMS;
    let per_block = P::Source::ELEMS / 32;
    let row_bytes = nb * size_of::<P::Act>();
    bytes
        .par_chunks_mut(row_bytes)
        .zip(x.par_chunks(cols))
        .for_each(|(out, x)| match crate::cpu::has_avx512() {
            // SAFETY: this CPU has AVX-512.
            true => unsafe { quantize_bytes_avx512::<P::Act>(x, out) },
            false => quantize_bytes::<P::Act>(x, out),
        });
    let blocks: &[P::Act] = bytemuck::cast_slice(bytes);
    summaries
        .par_chunks_mut(cols / 32)
        .zip(blocks.par_chunks(nb))
        .for_each(|(s, b)| {
            for (s, b) in s.chunks_mut(per_block).zip(b) {
                b.summarize(s);
            }
        });
}
