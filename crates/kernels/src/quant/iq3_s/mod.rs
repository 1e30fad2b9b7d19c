//! IQ3_S: 256-value super-blocks of eight 32-value sub-blocks, 3.44 bits per value. Each
//! group of four values has a 9-bit index into [`IQ3S_GRID`] (eight bits in `qs`, one in
//! `qh`); each value a sign bit; each sub-block a 4-bit scale `s`: `x = d · (1 + 2s) · grid ·
//! sign`.
//!
//! The dot product against Q8_K is ggml's: integer sums per sub-block times `2s + 1` and one
//! float multiply-add per super-block.

use bytemuck::{Pod, Zeroable};
use half::f16;
use rinfer_formats::{GgmlType, QK_K};

use super::iq_grids::{IQ3S_GRID, signed8};
use super::q8_k::BlockQ8K;
use super::{BlockFormat, VecDot};

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

/// One IQ3_S super-block.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockIq3S {
    /// Super-block scale.
    pub d: f16,
    /// The low 8 bits of the 64 grid indices.
    pub qs: [u8; QK_K / 4],
    /// Per sub-block, the high bits of its eight grid indices (entry `k` at bit `k`).
    pub qh: [u8; QK_K / 32],
    /// One sign bit per value.
    pub signs: [u8; QK_K / 8],
    /// Per pair of sub-blocks, their 4-bit scales (low nibble first).
    pub scales: [u8; QK_K / 64],
}

const _: () = assert!(size_of::<BlockIq3S>() == 110);

impl BlockIq3S {
    /// The grid index of entry `k` (four values, 0..8) of sub-block `ib`.
    #[inline]
    pub(crate) fn index(&self, ib: usize, k: usize) -> usize {
        self.qs[8 * ib + k] as usize | ((self.qh[ib] as usize >> k) & 1) << 8
    }

    /// The eight values `l` (0..4) of sub-block `ib`: two grid entries, signed.
    #[inline]
    fn group(&self, ib: usize, l: usize) -> [i8; 8] {
        let entry = |k: usize| IQ3S_GRID[self.index(ib, 2 * l + k)] as u64;
        signed8(entry(0) | entry(1) << 32, self.signs[4 * ib + l])
    }

    /// Sub-block `ib`'s multiplier `1 + 2s`.
    #[inline]
    pub(crate) fn scale(&self, ib: usize) -> i32 {
        1 + 2 * ((self.scales[ib / 2] >> (4 * (ib % 2))) & 0xF) as i32
    }
}

impl BlockFormat for BlockIq3S {
    const TYPE: GgmlType = GgmlType::Iq3S;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (ib, o) in out.chunks_exact_mut(32).enumerate() {
            let db = d * self.scale(ib) as f32;
            for (l, o) in o.chunks_exact_mut(8).enumerate() {
                // `db · (−g)` is `−(db · g)` exactly: the sign may go with the magnitude.
                for (o, &v) in o.iter_mut().zip(&self.group(ib, l)) {
                    *o = db * v as f32;
                }
            }
        }
    }
}

impl VecDot for BlockIq3S {
    type Activation = BlockQ8K;

    fn vec_dot(w: &[Self], a: &[BlockQ8K]) -> f32 {
        let mut sumf = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let d = x.d.to_f32() * y.d;
            let mut bsum = 0i32;
            for (ib, q8) in y.qs.chunks_exact(32).enumerate() {
                let mut sumi = 0i32;
                for (l, q8) in q8.chunks_exact(8).enumerate() {
                    let g = x.group(ib, l);
                    sumi += g
                        .iter()
                        .zip(q8)
                        .map(|(&g, &q)| g as i32 * q as i32)
                        .sum::<i32>();
                }
                bsum += sumi * x.scale(ib);
            }
            sumf += d * bsum as f32;
        }
        sumf
    }
}
