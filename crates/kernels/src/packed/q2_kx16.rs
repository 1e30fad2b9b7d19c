//! Q2_K repacked sixteen rows at a time for AVX-512: the codes in the two-bit layout
//! (`two_bits`) and each row's group scale-and-min bytes side by side for two groups, in the
//! source's size.
//!
//! The arithmetic, which the SIMD kernel reproduces bit for bit: per row and super-block the
//! exact integers `S = Σ_g sc_g · Σ q·a` and `M = Σ_g m_g · Σa` over the sixteen groups `g` (the
//! activation sums of 16 are Q8_K's `bsums`), then `acc = fma(d_w·d_a, S, acc)` and
//! `acc = fma(−(dmin_w·d_a), M, acc)`, super-blocks in order.

use super::ROWS;
use super::two_bits::{self, GROUPS, GroupCodes};
#[cfg(test)]
use crate::operands::BlockSummary;
use crate::quant::q2_k::BlockQ2K;
use crate::quant::q8_k::BlockQ8K;

packed_format! {
    /// One super-block of sixteen rows.
    BlockQ2Kx16: BlockQ2K => BlockQ8K, scale d {
        /// Each row's f16 super-block min scale (bits).
        dmin: [u16; ROWS],
        /// `scales[p][2i + e]`: row `i`'s byte of group `2p + e`, its scale in the low nibble and
        /// its min in the high one (as Q2_K stores them).
        scales: [[u8; 2 * ROWS]; GROUPS / 2],
        /// The codes.
        qs: GroupCodes,
    }
    fn pack_row(&mut self, i, block) {
        self.dmin[i] = block.dmin.to_bits();
        for (g, &byte) in block.scales.iter().enumerate() {
            self.scales[g / 2][2 * i + g % 2] = byte;
        }
        two_bits::pack_codes(|v| two_bits::source_bits(&block.qs, v), i, &mut self.qs);
    }
}

impl BlockQ2Kx16 {
    /// Row `i`'s scale and min of group `g`.
    #[cfg(test)]
    pub(crate) fn scale_min(&self, i: usize, g: usize) -> (i32, i32) {
        let byte = self.scales[g / 2][2 * i + g % 2];
        ((byte & 0xF) as i32, (byte >> 4) as i32)
    }
}

/// The scalar reference (tests only), which the SIMD kernel reproduces bit for bit.
#[cfg(test)]
impl super::reference::RowReference for BlockQ2Kx16 {
    fn fold_row(&self, acc: f32, i: usize, y: &BlockQ8K, _: &[BlockSummary]) -> f32 {
        let (mut sumi, mut summ) = (0i32, 0i32);
        for g in 0..GROUPS {
            let dot: i32 = (0..16)
                .map(|l| two_bits::code(&self.qs, i, g, l) * y.qs[16 * g + l] as i32)
                .sum();
            let (sc, m) = self.scale_min(i, g);
            sumi += sc * dot;
            summ += m * y.bsums[g] as i32;
        }
        let d = half::f16::from_bits(self.d[i]).to_f32() * y.d;
        let dmin = half::f16::from_bits(self.dmin[i]).to_f32() * y.d;
        (-dmin).mul_add(summ as f32, d.mul_add(sumi as f32, acc))
    }
}
