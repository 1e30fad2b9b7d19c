//! IQ4_XS: 256-value super-blocks of eight 32-value sub-blocks, 4-bit indices into the IQ4_NL
//! table, signed 6-bit sub-block scales and an f16 super-scale: `x = d * (ls_j - 32) * KVALUES[q]`.

use half::f16;
use rinfer_formats::{GgmlType, QK_K};

use super::iq4_codes::KVALUES;
use super::q8_k::BlockQ8K;
use super::util::nibble;
use super::{BlockFormat, VecDot, sum_blocks};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

mod quantize;
#[cfg(test)]
mod tests;

block_struct! {
    /// One IQ4_XS super-block; each sub-block's 16 bytes of `qs` are packed as IQ4_NL.
    BlockIq4Xs, 136 bytes {
        /// Super-block scale.
        d: f16,
        /// High 2 bits of the eight sub-block scales.
        scales_h: u16,
        /// Low 4 bits of the eight sub-block scales.
        scales_l: [u8; QK_K / 64],
        /// Packed table indices.
        qs: [u8; QK_K / 2],
    }
}

impl BlockIq4Xs {
    /// Scale of sub-block `j`, minus 32.
    #[inline]
    pub(crate) fn scale(&self, j: usize) -> i32 {
        let low = nibble(&self.scales_l, j);
        let high = ((self.scales_h >> (2 * j)) & 3) as u8;
        (low | (high << 4)) as i32 - 32
    }

    /// Table value `l` (0..32) of sub-block `j`.
    #[inline]
    fn value(&self, j: usize, l: usize) -> i8 {
        let b = self.qs[16 * j + l % 16];
        KVALUES[if l < 16 { b & 0xF } else { b >> 4 } as usize]
    }
}

impl BlockFormat for BlockIq4Xs {
    const TYPE: GgmlType = GgmlType::Iq4Xs;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (j, o) in out.chunks_exact_mut(32).enumerate() {
            let dl = d * self.scale(j) as f32;
            for (l, o) in o.iter_mut().enumerate() {
                *o = dl * self.value(j, l) as f32;
            }
        }
    }
}

impl VecDot for BlockIq4Xs {
    type Activation = BlockQ8K;

    fn vec_dot(w: &[Self], a: &[BlockQ8K]) -> f32 {
        sum_blocks(w, a, |x, y| {
            let mut sumi = 0i32;
            for (j, yj) in y.qs.chunks_exact(32).enumerate() {
                let s: i32 = yj
                    .iter()
                    .enumerate()
                    .map(|(l, &v)| x.value(j, l) as i32 * v as i32)
                    .sum();
                sumi += x.scale(j) * s;
            }
            x.d.to_f32() * y.d * sumi as f32
        })
    }
}
