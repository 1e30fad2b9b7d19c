//! Q6_K repacked sixteen rows at a time for AVX-512, like `q4_kx16`.
//!
//! A [`BlockQ6Kx16`] holds one 256-value super-block of each of sixteen rows. The low four bits
//! of the codes are arranged as in `q4_kx16`; the high two bits of each 32-value sub-block come
//! in two 64-byte vectors, four bit pairs per byte, so one shift and one bitwise select complete
//! the 6-bit codes (`0..64`) for `vpdpbusd`. Group scales stay signed bytes.
//!
//! The arithmetic, which the SIMD kernel reproduces bit for bit: per row and super-block the
//! exact integer `S = Σ_g sc_g · (Σ q·a − 32·Σ a)` over the sixteen 16-value groups `g`, then
//! `acc = fma(d_w·d_a, S, acc)`, super-blocks in order.

use super::ROWS;
#[cfg(test)]
use crate::operands::BlockSummary;
use crate::quant::q6_k::BlockQ6K;
use crate::quant::q8_k::BlockQ8K;

packed_format! {
    /// One super-block of sixteen rows.
    BlockQ6Kx16: BlockQ6K => BlockQ8K, scale d {
        /// `sc[g][i]`: row `i`'s scale of 16-value group `g`.
        sc: [[i8; ROWS]; 16],
        /// Low four bits: vector `4j + v`, byte `4i + jj` holds those of row `i`'s code
        /// `32j + 8v + jj` in its low nibble and of code `32j + 8v + 4 + jj` in its high nibble.
        ql: [[u8; 64]; 32],
        /// High two bits: vector `2j + h`, byte `4i + jj`, bits `2k..2k + 2` hold those of row
        /// `i`'s code `32j + 4(4h + k) + jj`.
        qh: [[u8; 64]; 16],
    }
    /// Each packed byte is gathered from the codes in one go (this runs over every weight at
    /// load).
    fn pack_row(&mut self, i, block) {
        for (g, &sc) in block.scales.iter().enumerate() {
            self.sc[g][i] = sc;
        }
        let q = block.codes().map(|q| (q + 32) as u8);
        let word = |at: usize| u32::from_le_bytes([q[at], q[at + 1], q[at + 2], q[at + 3]]);
        const LOW: u32 = 0x0F0F_0F0F;
        for j in 0..8 {
            for v in 0..4 {
                let (a, b) = (word(32 * j + 8 * v), word(32 * j + 8 * v + 4));
                let packed = (a & LOW) | (b & LOW) << 4;
                self.ql[4 * j + v][4 * i..4 * i + 4].copy_from_slice(&packed.to_le_bytes());
            }
            for h in 0..2 {
                let packed = (0..4)
                    .map(|k| (word(32 * j + 16 * h + 4 * k) >> 4 & 0x0303_0303) << (2 * k))
                    .fold(0, |a, b| a | b);
                self.qh[2 * j + h][4 * i..4 * i + 4].copy_from_slice(&packed.to_le_bytes());
            }
        }
    }
}

impl BlockQ6Kx16 {
    /// Row `i`'s code `c` (`0..64`).
    #[cfg(test)]
    pub(crate) fn code(&self, i: usize, c: usize) -> i32 {
        let (j, l) = (c / 32, c % 32);
        let (g, jj) = (l / 4, l % 4);
        let low = (self.ql[4 * j + g / 2][4 * i + jj] >> (4 * (g % 2))) & 0xF;
        let high = (self.qh[2 * j + g / 4][4 * i + jj] >> (2 * (g % 4))) & 3;
        (low | high << 4) as i32
    }
}

/// The scalar reference (tests only), which the SIMD kernel reproduces bit for bit.
#[cfg(test)]
impl super::reference::RowReference for BlockQ6Kx16 {
    fn fold_row(&self, acc: f32, i: usize, y: &BlockQ8K, _: &[BlockSummary]) -> f32 {
        let mut sumi = 0i32;
        for g in 0..16 {
            let dot: i32 = (16 * g..16 * g + 16)
                .map(|c| self.code(i, c) * y.qs[c] as i32)
                .sum();
            sumi += self.sc[g][i] as i32 * (dot - 32 * y.bsums[g] as i32);
        }
        let d = half::f16::from_bits(self.d[i]).to_f32() * y.d;
        d.mul_add(sumi as f32, acc)
    }
}
