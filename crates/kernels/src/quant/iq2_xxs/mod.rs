//! IQ2_XXS: 256-value super-blocks of eight 32-value sub-blocks, 2.06 bits per value. Each
//! sub-block stores four 8-bit indices into [`IQ2XXS_GRID`] (eight magnitudes each), four
//! 7-bit sign groups ([`KSIGNS`]) and a 4-bit scale `s`: `x = d · (0.5 + s) / 4 · grid · sign`.
//!
//! The dot product against Q8_K is ggml's: integer sums per sub-block times `2s + 1`, one
//! float multiply-add per super-block, and the factor 1/8 at the end.

use bytemuck::{Pod, Zeroable};
use half::f16;
use rinfer_formats::{GgmlType, QK_K};

use super::iq_grids::{IQ2XXS_GRID, KSIGNS, signed8};
use super::q8_k::BlockQ8K;
use super::{BlockFormat, VecDot};

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

/// One IQ2_XXS super-block.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockIq2Xxs {
    /// Super-block scale.
    pub d: f16,
    /// Per sub-block four words: two of grid indices (one byte each), two of four 7-bit sign
    /// groups and the 4-bit scale in the top bits.
    pub qs: [u16; QK_K / 8],
}

const _: () = assert!(size_of::<BlockIq2Xxs>() == 66);

impl BlockIq2Xxs {
    /// Sub-block `ib`'s grid indices (bytes) and its sign-and-scale word.
    #[inline]
    pub(crate) fn sub_block(&self, ib: usize) -> (u32, u32) {
        let q = &self.qs[4 * ib..4 * ib + 4];
        let word = |lo: u16, hi: u16| lo as u32 | (hi as u32) << 16;
        (word(q[0], q[1]), word(q[2], q[3]))
    }

    /// Group `l` (eight values) of sub-block `ib`, signed.
    #[inline]
    fn group(&self, ib: usize, l: usize) -> [i8; 8] {
        let (grid, signs) = self.sub_block(ib);
        let index = (grid >> (8 * l)) as u8 as usize;
        signed8(
            IQ2XXS_GRID[index],
            KSIGNS[(signs >> (7 * l)) as usize & 127],
        )
    }
}

impl BlockFormat for BlockIq2Xxs {
    const TYPE: GgmlType = GgmlType::Iq2Xxs;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (ib, o) in out.chunks_exact_mut(32).enumerate() {
            let db = d * (0.5 + (self.sub_block(ib).1 >> 28) as f32) * 0.25;
            for (l, o) in o.chunks_exact_mut(8).enumerate() {
                // `db · (−g)` is `−(db · g)` exactly: the sign may go with the magnitude.
                for (o, &v) in o.iter_mut().zip(&self.group(ib, l)) {
                    *o = db * v as f32;
                }
            }
        }
    }
}

impl VecDot for BlockIq2Xxs {
    type Activation = BlockQ8K;

    fn vec_dot(w: &[Self], a: &[BlockQ8K]) -> f32 {
        let mut sumf = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let d = x.d.to_f32() * y.d;
            let mut bsum = 0i32;
            for (ib, q8) in y.qs.chunks_exact(32).enumerate() {
                let ls = 2 * (x.sub_block(ib).1 >> 28) as i32 + 1;
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
        0.125 * sumf
    }
}
