//! Q3_K repacked sixteen rows at a time for AVX-512: the low two bits of every code in the
//! two-bit layout (`two_bits`), the high bits beside them, and each row's signed group scales
//! unpacked to bytes.
//!
//! A code `c = low + 4·high` in `0..8` stands for `c − 4`. The arithmetic, which the SIMD
//! kernel reproduces bit for bit: per row and super-block the exact integer
//! `S = Σ_g sc_g · (Σ c·a − 4·Σa)` over the sixteen groups `g` (the activation sums of 16 are
//! Q8_K's `bsums`), then `acc = fma(d_w·d_a, S, acc)`, super-blocks in order. That is Q3_K's own
//! integer sum.

use super::ROWS;
use super::two_bits::{self, GROUPS, GroupCodes};
#[cfg(test)]
use crate::operands::BlockSummary;
use crate::quant::q3_k::BlockQ3K;
use crate::quant::q8_k::BlockQ8K;

packed_format! {
    /// One super-block of sixteen rows.
    BlockQ3Kx16: BlockQ3K => BlockQ8K, scale d, extra row bytes 4 {
        /// `sc[g][i]`: row `i`'s scale of group `g`, minus 32 (`-32..32`).
        sc: [[i8; ROWS]; GROUPS],
        /// The low two bits of every code.
        low: GroupCodes,
        /// High bits: `high[p]`, byte `4i + jj`, bit `4e + k` is the high bit of row `i`'s code
        /// `4k + jj` of group `2p + e`.
        high: [[u8; 64]; GROUPS / 2],
    }
    fn pack_row(&mut self, i, block) {
        for (g, &sc) in block.group_scales().iter().enumerate() {
            self.sc[g][i] = sc;
        }
        two_bits::pack_codes(|v| two_bits::source_bits(&block.qs, v), i, &mut self.low);
        let high = |v: usize| {
            let (n, j, l) = (v / 128, v % 128 / 32, v % 32);
            (block.hmask[l] >> (4 * n + j)) & 1
        };
        for (p, vector) in self.high.iter_mut().enumerate() {
            for jj in 0..4 {
                vector[4 * i + jj] = (0..8)
                    .map(|b| high(16 * (2 * p + b / 4) + 4 * (b % 4) + jj) << b)
                    .fold(0, |a, b| a | b);
            }
        }
    }
}

impl BlockQ3Kx16 {
    /// How far the codes lie above the values they stand for.
    pub(crate) const OFFSET: i32 = 4;

    /// Row `i`'s code `l` of group `g` (`0..8`).
    #[cfg(test)]
    pub(crate) fn code(&self, i: usize, g: usize, l: usize) -> i32 {
        let (k, jj) = (l / 4, l % 4);
        let high = (self.high[g / 2][4 * i + jj] >> (4 * (g % 2) + k)) & 1;
        two_bits::code(&self.low, i, g, l) | (high as i32) << 2
    }
}

/// The scalar reference (tests only), which the SIMD kernel reproduces bit for bit.
#[cfg(test)]
impl super::reference::RowReference for BlockQ3Kx16 {
    fn fold_row(&self, acc: f32, i: usize, y: &BlockQ8K, _: &[BlockSummary]) -> f32 {
        let mut sumi = 0i32;
        for g in 0..GROUPS {
            let dot: i32 = (0..16)
                .map(|l| self.code(i, g, l) * y.qs[16 * g + l] as i32)
                .sum();
            let isum = dot - BlockQ3Kx16::OFFSET * y.bsums[g] as i32;
            sumi += self.sc[g][i] as i32 * isum;
        }
        let d = half::f16::from_bits(self.d[i]).to_f32() * y.d;
        d.mul_add(sumi as f32, acc)
    }
}
