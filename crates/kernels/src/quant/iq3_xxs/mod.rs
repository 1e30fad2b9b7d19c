//! IQ3_XXS: 256-value super-blocks of eight 32-value sub-blocks, 3.06 bits per value. Each
//! group of four values is an 8-bit index into [`IQ3XXS_GRID`]; per sub-block one 32-bit word
//! holds four 7-bit sign groups ([`KSIGNS`], one per eight values) and a 4-bit scale `s`:
//! `x = d · (0.5 + s) / 2 · grid · sign`.
//!
//! The dot product against Q8_K is ggml's: integer sums per sub-block times `2s + 1`, one
//! float multiply-add per super-block, and the factor 1/4 at the end.

use bytemuck::{Pod, Zeroable};
use half::f16;
use rinfer_formats::{GgmlType, QK_K};

use super::iq_grids::{IQ3XXS_GRID, KSIGNS, signed8};
use super::q8_k::BlockQ8K;
use super::{BlockFormat, VecDot};

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

/// One IQ3_XXS super-block.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockIq3Xxs {
    /// Super-block scale.
    pub d: f16,
    /// The 64 grid indices, then per sub-block a little-endian word of signs and scale.
    pub qs: [u8; 3 * QK_K / 8],
}

const _: () = assert!(size_of::<BlockIq3Xxs>() == 98);

impl BlockIq3Xxs {
    /// Sub-block `ib`'s sign-and-scale word.
    #[inline]
    pub(crate) fn signs_and_scale(&self, ib: usize) -> u32 {
        let at = QK_K / 4 + 4 * ib;
        u32::from_le_bytes([
            self.qs[at],
            self.qs[at + 1],
            self.qs[at + 2],
            self.qs[at + 3],
        ])
    }

    /// The eight values `l` (0..4) of sub-block `ib`: two grid entries, signed.
    #[inline]
    pub(crate) fn group(&self, ib: usize, l: usize) -> [i8; 8] {
        let entry = |k: usize| IQ3XXS_GRID[self.qs[8 * ib + 2 * l + k] as usize] as u64;
        let signs = KSIGNS[(self.signs_and_scale(ib) >> (7 * l)) as usize & 127];
        signed8(entry(0) | entry(1) << 32, signs)
    }
}

impl BlockFormat for BlockIq3Xxs {
    const TYPE: GgmlType = GgmlType::Iq3Xxs;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (ib, o) in out.chunks_exact_mut(32).enumerate() {
            let db = d * (0.5 + (self.signs_and_scale(ib) >> 28) as f32) * 0.5;
            for (l, o) in o.chunks_exact_mut(8).enumerate() {
                // `db · (−g)` is `−(db · g)` exactly: the sign may go with the magnitude.
                for (o, &v) in o.iter_mut().zip(&self.group(ib, l)) {
                    *o = db * v as f32;
                }
            }
        }
    }
}

impl VecDot for BlockIq3Xxs {
    type Activation = BlockQ8K;

    fn vec_dot(w: &[Self], a: &[BlockQ8K]) -> f32 {
        let mut sumf = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let d = x.d.to_f32() * y.d;
            let mut bsum = 0i32;
            for (ib, q8) in y.qs.chunks_exact(32).enumerate() {
                let ls = 2 * (x.signs_and_scale(ib) >> 28) as i32 + 1;
                let mut sumi = 0i32;
                for (l, q8) in q8.chunks_exact(8).enumerate() {
                    let g = x.group(ib, l);
                    sumi += g
                        .iter()
                        .zip(q8)
                        .map(|(&g, &q)| g as i32 * q as i32)
                        .sum::<i32>();
                }
                bsum += sumi * ls;
            }
            sumf += d * bsum as f32;
        }
        0.25 * sumf
    }
}
