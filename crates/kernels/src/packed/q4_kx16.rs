//! Q4_K repacked sixteen rows at a time for AVX-512, like `q5_0x16`.
//!
//! A [`BlockQ4Kx16`] holds one 256-value super-block of each of sixteen rows: per 32-value
//! sub-block, four 64-byte vectors give every row (one 32-bit lane each) four consecutive
//! codes per nibble half; the 6-bit scales are unpacked to bytes and the mins to i16 pairs
//! (`vpdpwssd` against the activation block sums).
//!
//! The arithmetic, which the SIMD kernel reproduces bit for bit: per row and super-block, the
//! exact integers `S = Σ_j sc_j · Σ q·a` and `M = Σ_j m_j · Σ a` over the sub-blocks `j`, then
//! `acc = fma(d_w·d_a, S, acc)` and `acc = fma(−(dmin_w·d_a), M, acc)`, super-blocks in order.

use half::f16;

use super::ROWS;
#[cfg(test)]
use crate::operands::BlockSummary;
use crate::quant::q4_k::BlockQ4K;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::util::scales_mins_k4;

packed_format! {
    /// One super-block of sixteen rows.
    BlockQ4Kx16: BlockQ4K => BlockQ8K, extra row bytes 12 {
        /// Each row's f16 super-block scale (bits).
        d: [u16; ROWS],
        /// Each row's f16 super-block min scale (bits).
        dmin: [u16; ROWS],
        /// `sc[j][i]`: row `i`'s 6-bit scale of sub-block `j`.
        sc: [[u8; ROWS]; 8],
        /// `m[k][2i + h]`: row `i`'s 6-bit min of sub-block `2k + h`.
        m: [[i16; 2 * ROWS]; 4],
        /// Codes: vector `4j + v`, byte `4i + jj` holds row `i`'s code `32j + 8v + jj` in its low
        /// nibble and code `32j + 8v + 4 + jj` in its high nibble.
        qs: [[u8; 64]; 32],
    }
    fn pack_row(&mut self, i, block) {
        self.pack_row_parts(i, block.d, block.dmin, &block.scales, &block.qs);
    }
}

impl BlockQ4Kx16 {
    /// Packs row `i` from a super-block's scales, mins and four-bit codes (laid out as
    /// Q4_K's, which Q5_K shares). Each packed byte is gathered from its source bytes in one
    /// go (this runs over every weight at load).
    pub(super) fn pack_row_parts(
        &mut self,
        i: usize,
        d: f16,
        dmin: f16,
        scales: &[u8; 12],
        qs: &[u8; 128],
    ) {
        self.d[i] = d.to_bits();
        self.dmin[i] = dmin.to_bits();
        let scales_mins = scales_mins_k4(scales);
        for j in 0..8 {
            self.sc[j][i] = scales_mins[j];
            self.m[j / 2][2 * i + j % 2] = scales_mins[8 + j] as i16;
            // Sub-block `j`'s codes are nibble `j % 2` of bytes `32 (j / 2)..`; four bytes at
            // a time.
            let src = &qs[32 * (j / 2)..32 * (j / 2) + 32];
            for v in 0..4 {
                let a = word(&src[8 * v..]);
                let b = word(&src[8 * v + 4..]);
                let packed = if j % 2 == 0 {
                    (a & LOW) | (b & LOW) << 4
                } else {
                    (a >> 4 & LOW) | (b & !LOW)
                };
                self.qs[4 * j + v][4 * i..4 * i + 4].copy_from_slice(&packed.to_le_bytes());
            }
        }
    }

    /// Row `i`'s code `l` of sub-block `j` (`0..16`).
    #[cfg(test)]
    pub(crate) fn code(&self, i: usize, j: usize, l: usize) -> i32 {
        let (g, jj) = (l / 4, l % 4);
        ((self.qs[4 * j + g / 2][4 * i + jj] >> (4 * (g % 2))) & 0xF) as i32
    }
}

/// The low nibble of every byte of a word.
const LOW: u32 = 0x0F0F_0F0F;

/// The little-endian word at the start of `b`.
fn word(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// The scalar reference (tests only), which the SIMD kernel reproduces bit for bit.
#[cfg(test)]
impl super::reference::RowReference for BlockQ4Kx16 {
    fn fold_row(&self, acc: f32, i: usize, y: &BlockQ8K, s: &[BlockSummary]) -> f32 {
        fold_k_row(self, |j, l| self.code(i, j, l), acc, i, y, s)
    }
}

/// The reference of the Q4_K-shaped formats: row `i` of a block whose scales and mins are
/// `x`'s and whose code `l` of sub-block `j` is `code(j, l)`, folded into `acc`.
#[cfg(test)]
pub(super) fn fold_k_row(
    x: &BlockQ4Kx16,
    code: impl Fn(usize, usize) -> i32,
    acc: f32,
    i: usize,
    y: &BlockQ8K,
    s: &[BlockSummary],
) -> f32 {
    let (mut sumi, mut summ) = (0i32, 0i32);
    for (j, s) in s.iter().enumerate() {
        let dot: i32 = (0..32).map(|l| code(j, l) * y.qs[32 * j + l] as i32).sum();
        sumi += x.sc[j][i] as i32 * dot;
        summ += x.m[j / 2][2 * i + j % 2] as i32 * s.sum;
    }
    let d = half::f16::from_bits(x.d[i]).to_f32() * y.d;
    let dmin = half::f16::from_bits(x.dmin[i]).to_f32() * y.d;
    (-dmin).mul_add(summ as f32, d.mul_add(sumi as f32, acc))
}
