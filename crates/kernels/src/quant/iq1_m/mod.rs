//! IQ1_M: 256-value super-blocks of eight 32-value sub-blocks, 1.75 bits per value. Each
//! group of eight values has an 11-bit index into [`IQ1S_GRID`] (eight bits in `qs`, three in
//! `qh`) and the sign of its own shift `δ` of 1/8 (the fourth bit in `qh`); each half sub-block
//! of 16 values a 3-bit scale `s`; the f16 super-block scale is spread over the top nibbles of
//! the four scale words: `x = d · (2s + 1) · (grid ± δ)`.
//!
//! The dot product against Q8_K is ggml's: the grid part and the shift part as integers per
//! super-block, then `d_w · d_a · (grid sum + δ · shift sum)` in float.

use half::f16;
use rinfer_formats::{GgmlType, QK_K};

use super::iq_grids::IQ1S_GRID;
use super::iq1_s::DELTA;
use super::q8_k::BlockQ8K;
use super::{BlockFormat, VecDot, sum_blocks};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

mod quantize;

#[cfg(test)]
mod tests;

block_struct! {
    /// One IQ1_M super-block.
    BlockIq1M, 56 bytes {
        /// The low 8 bits of the 32 grid indices.
        qs: [u8; QK_K / 8],
        /// Per pair of groups, a nibble each (first group low): the high 3 index bits and the sign
        /// of the group's shift (bit 3: negative).
        qh: [u8; QK_K / 16],
        /// Four little-endian words: the 3-bit scales of the 16 half sub-blocks (four per word,
        /// bits 0–11) and a nibble of the f16 super-block scale each (bits 12–15, lowest first).
        scales: [u8; QK_K / 32],
    }
}

impl BlockIq1M {
    /// Scale word `k` (0..4).
    #[inline]
    fn word(&self, k: usize) -> u16 {
        u16::from_le_bytes([self.scales[2 * k], self.scales[2 * k + 1]])
    }

    /// The super-block scale, gathered from the top nibbles of the scale words.
    #[inline]
    pub(crate) fn d(&self) -> f16 {
        f16::from_bits((0..4).fold(0, |d, k| d | (self.word(k) >> 12) << (4 * k)))
    }

    /// Sets the super-block scale (keeping the sub-block scales).
    #[cfg(test)]
    pub(crate) fn set_d(&mut self, d: f16) {
        for k in 0..4 {
            let word = (self.word(k) & 0x0FFF) | ((d.to_bits() >> (4 * k)) & 0xF) << 12;
            self.scales[2 * k..2 * k + 2].copy_from_slice(&word.to_le_bytes());
        }
    }

    /// The nibble of `qh` that belongs to group `g` (eight values, 0..32).
    #[inline]
    fn nibble(&self, g: usize) -> usize {
        super::util::nibble(&self.qh, g) as usize
    }

    /// The grid entry of group `g`: eight bytes −1, 0 or 1.
    #[inline]
    pub(crate) fn entry(&self, g: usize) -> u64 {
        IQ1S_GRID[self.qs[g] as usize | (self.nibble(g) & 7) << 8]
    }

    /// The sign of group `g`'s shift.
    #[inline]
    pub(crate) fn delta_sign(&self, g: usize) -> i32 {
        if self.nibble(g) & 8 != 0 { -1 } else { 1 }
    }

    /// The multiplier `2s + 1` of half sub-block `h` (16 values, 0..16).
    #[inline]
    pub(crate) fn scale(&self, h: usize) -> i32 {
        2 * ((self.word(h / 4) >> (3 * (h % 4))) & 7) as i32 + 1
    }
}

impl BlockFormat for BlockIq1M {
    const TYPE: GgmlType = GgmlType::Iq1M;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d().to_f32();
        for (g, o) in out.chunks_exact_mut(8).enumerate() {
            let dl = d * self.scale(g / 2) as f32;
            let delta = DELTA * self.delta_sign(g) as f32;
            for (o, v) in o.iter_mut().zip(self.entry(g).to_le_bytes()) {
                *o = dl * (v as i8 as f32 + delta);
            }
        }
    }
}

impl VecDot for BlockIq1M {
    type Activation = BlockQ8K;

    fn vec_dot(w: &[Self], a: &[BlockQ8K]) -> f32 {
        sum_blocks(w, a, |x, y| {
            let (mut grid_sum, mut shift_sum) = (0i32, 0i32);
            for (g, q8) in y.qs.chunks_exact(8).enumerate() {
                let v = x.entry(g).to_le_bytes();
                let lsum1: i32 = v
                    .iter()
                    .zip(q8)
                    .map(|(&v, &q)| v as i8 as i32 * q as i32)
                    .sum();
                let lsum2: i32 = q8.iter().map(|&q| q as i32).sum();
                grid_sum += lsum1 * x.scale(g / 2);
                shift_sum += lsum2 * x.delta_sign(g) * x.scale(g / 2);
            }
            x.d().to_f32() * y.d * (grid_sum as f32 + DELTA * shift_sum as f32)
        })
    }
}
