//! IQ2_XS: 256-value super-blocks of eight 32-value sub-blocks, 2.31 bits per value. Each
//! group of eight values is one 16-bit word: a 9-bit index into [`IQ2XS_GRID`] and a 7-bit sign
//! group ([`KSIGNS`]); each half sub-block of 16 values has a 4-bit scale `s`:
//! `x = d · (0.5 + s) / 4 · grid · sign`.
//!
//! The dot product against Q8_K is ggml's: integer sums per half sub-block times `2s + 1`, one
//! float multiply-add per super-block, and the factor 1/8 at the end.

use bytemuck::{Pod, Zeroable};
use half::f16;
use rinfer_formats::{GgmlType, QK_K};

use super::iq_grids::{IQ2XS_GRID, KSIGNS, signed8};
use super::q8_k::BlockQ8K;
use super::{BlockFormat, VecDot};

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

/// One IQ2_XS super-block.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockIq2Xs {
    /// Super-block scale.
    pub d: f16,
    /// Per group of eight values: grid index (low 9 bits) and sign group (high 7 bits).
    pub qs: [u16; QK_K / 8],
    /// Per sub-block: the scales of its first (low nibble) and second (high) 16 values.
    pub scales: [u8; QK_K / 32],
}

const _: () = assert!(size_of::<BlockIq2Xs>() == 74);

impl BlockIq2Xs {
    /// Group `g` (eight values, 0..32), signed.
    #[inline]
    fn group(&self, g: usize) -> [i8; 8] {
        let q = self.qs[g];
        signed8(IQ2XS_GRID[(q & 511) as usize], KSIGNS[(q >> 9) as usize])
    }

    /// The 4-bit scale of the 16 values `h` (0..16).
    #[inline]
    pub(crate) fn scale(&self, h: usize) -> u8 {
        (self.scales[h / 2] >> (4 * (h % 2))) & 0xF
    }
}

impl BlockFormat for BlockIq2Xs {
    const TYPE: GgmlType = GgmlType::Iq2Xs;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (g, o) in out.chunks_exact_mut(8).enumerate() {
            let db = d * (0.5 + self.scale(g / 2) as f32) * 0.25;
            // `db · (−g)` is `−(db · g)` exactly: the sign may go with the magnitude.
            for (o, &v) in o.iter_mut().zip(&self.group(g)) {
                *o = db * v as f32;
            }
        }
    }
}

impl VecDot for BlockIq2Xs {
    type Activation = BlockQ8K;

    fn vec_dot(w: &[Self], a: &[BlockQ8K]) -> f32 {
        let mut sumf = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let d = x.d.to_f32() * y.d;
            let mut bsum = 0i32;
            for (h, q8) in y.qs.chunks_exact(16).enumerate() {
                let ls = 2 * x.scale(h) as i32 + 1;
                let mut sumi = 0i32;
                for (k, q8) in q8.chunks_exact(8).enumerate() {
                    let g = x.group(2 * h + k);
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
