//! Q5_0 repacked sixteen rows at a time for the integer dot products of AVX-512.
//!
//! A [`BlockQ5_0x16`] holds one 32-value block of each of sixteen consecutive rows, arranged so
//! that each 64-byte vector gives every row (one 32-bit lane per row) four consecutive codes:
//! `vpdpbusd` against four activation bytes broadcast to every lane then dots sixteen rows at
//! once, and no horizontal sum is ever needed.
//!
//! The arithmetic, which the SIMD kernel reproduces bit for bit: per row and block, the exact
//! integer `Σ q·a − 16·Σa` (codes `q` in `0..32`, so the products fit `vpdpbusd`'s unsigned
//! operand), converted to f32, times `d_w · d_a`, added to the running sum with one fused
//! multiply-add, blocks in order. It never depends on how many tokens or rows a call takes.

use crate::quant::q5_0::BlockQ5_0;
use crate::quant::q8_0::BlockQ8_0;

packed_format! {
    /// One 32-value block of sixteen rows.
    BlockQ5_0x16: BlockQ5_0 => BlockQ8_0, scale d {
        /// Low four bits: in vector `k`, byte `4i + j` holds row `i`'s code `8k + j` in its low
        /// nibble and code `8k + 4 + j` in its high nibble.
        qs: [[u8; 64]; 4],
        /// Fifth bits: byte `4i + j`, bit `g` is the fifth bit of row `i`'s code `4g + j`.
        qh: [u8; 64],
    }
    /// The low four bits are laid out as Q4_0's (`nibbles`); each fifth-bit byte is gathered
    /// from its source bits in one go (this runs over every weight at load).
    fn pack_row(&mut self, i, block) {
        super::nibbles::pack_indices(&block.qs, i, &mut self.qs);
        let high = u32::from_le_bytes(block.qh);
        for jj in 0..4 {
            self.qh[4 * i + jj] = (0..8)
                .map(|g| (((high >> (4 * g + jj)) & 1) as u8) << g)
                .fold(0, |a, b| a | b);
        }
    }
}

#[cfg(test)]
impl super::byte_codes_reference::ByteCodeRows for BlockQ5_0x16 {
    const CODE_OFFSET: i32 = 16;

    /// Row `i`'s code `j` (`0..32`).
    fn code(&self, i: usize, j: usize) -> i32 {
        let (g, jj) = (j / 4, j % 4);
        let low = (self.qs[g / 2][4 * i + jj] >> (4 * (g % 2))) & 0xF;
        let high = (self.qh[4 * i + jj] >> g) & 1;
        (low | high << 4) as i32
    }

    fn scale(&self, i: usize) -> f32 {
        half::f16::from_bits(self.d[i]).to_f32()
    }
}
