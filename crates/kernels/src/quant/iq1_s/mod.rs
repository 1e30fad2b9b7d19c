//! IQ1_S: 256-value super-blocks of eight 32-value sub-blocks, 1.56 bits per value. Each
//! group of eight values is an 11-bit index into [`IQ1S_GRID`] (values −1, 0, 1; eight bits in
//! `qs`, three in `qh`); each sub-block has a 3-bit scale `s` and the sign of a shift `δ` of
//! 1/8: `x = d · (2s + 1) · (grid ± δ)`.
//!
//! The dot product against Q8_K is ggml's: the grid part and the shift part (from the
//! activations' sums of 16) as integers per super-block, then
//! `d_w · d_a · (grid sum + δ · shift sum)` in float.

use half::f16;
use rinfer_formats::{GgmlType, QK_K};

use super::iq_grids::IQ1S_GRID;
use super::q8_k::BlockQ8K;
use super::{BlockFormat, VecDot, sum_blocks};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

pub(super) mod quantize;

#[cfg(test)]
mod tests;

/// The shift `δ` of IQ1_S and IQ1_M groups (ggml's `IQ1S_DELTA`, `IQ1M_DELTA`).
pub(crate) const DELTA: f32 = 0.125;

block_struct! {
    /// One IQ1_S super-block.
    BlockIq1S, 50 bytes {
        /// Super-block scale.
        d: f16,
        /// The low 8 bits of the 32 grid indices.
        qs: [u8; QK_K / 8],
        /// Per sub-block: the high 3 bits of its four indices (group `l` at bits `3l`), its scale
        /// (bits 12–14) and the sign of its shift (bit 15: negative).
        qh: [u16; QK_K / 32],
    }
}

impl BlockIq1S {
    /// The grid entry of group `l` (0..4) of sub-block `ib`: eight bytes −1, 0 or 1.
    #[inline]
    pub(crate) fn entry(&self, ib: usize, l: usize) -> u64 {
        let high = (self.qh[ib] as usize >> (3 * l)) & 7;
        IQ1S_GRID[self.qs[4 * ib + l] as usize | high << 8]
    }

    /// Sub-block `ib`'s multiplier `2s + 1`.
    #[inline]
    pub(crate) fn scale(&self, ib: usize) -> i32 {
        2 * ((self.qh[ib] >> 12) & 7) as i32 + 1
    }

    /// The sign of sub-block `ib`'s shift.
    #[inline]
    pub(crate) fn delta_sign(&self, ib: usize) -> i32 {
        if self.qh[ib] & 0x8000 != 0 { -1 } else { 1 }
    }

    /// `Σ scale · sign · (activation sum)` over the sub-blocks: the shift part of the dot.
    #[inline]
    pub(crate) fn shift_sum(&self, y: &BlockQ8K) -> i32 {
        (0..QK_K / 32)
            .map(|ib| {
                let sum = y.bsums[2 * ib] as i32 + y.bsums[2 * ib + 1] as i32;
                self.scale(ib) * self.delta_sign(ib) * sum
            })
            .sum()
    }
}

impl BlockFormat for BlockIq1S {
    const TYPE: GgmlType = GgmlType::Iq1S;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (ib, o) in out.chunks_exact_mut(32).enumerate() {
            let dl = d * self.scale(ib) as f32;
            let delta = DELTA * self.delta_sign(ib) as f32;
            for (l, o) in o.chunks_exact_mut(8).enumerate() {
                for (o, g) in o.iter_mut().zip(self.entry(ib, l).to_le_bytes()) {
                    *o = dl * (g as i8 as f32 + delta);
                }
            }
        }
    }
}

impl VecDot for BlockIq1S {
    type Activation = BlockQ8K;

    fn vec_dot(w: &[Self], a: &[BlockQ8K]) -> f32 {
        sum_blocks(w, a, |x, y| {
            let mut sumi = 0i32;
            for (ib, q8) in y.qs.chunks_exact(32).enumerate() {
                let mut lsum = 0i32;
                for (l, q8) in q8.chunks_exact(8).enumerate() {
                    let g = x.entry(ib, l).to_le_bytes();
                    lsum += g
                        .iter()
                        .zip(q8)
                        .map(|(&g, &q)| g as i8 as i32 * q as i32)
                        .sum::<i32>();
                }
                sumi += x.scale(ib) * lsum;
            }
            x.d.to_f32() * y.d * (sumi as f32 + DELTA * x.shift_sum(y) as f32)
        })
    }
}
