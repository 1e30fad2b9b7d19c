//! MXFP4 repacked sixteen rows at a time for AVX-512, like `q8_0x16` but with the codes
//! kept as nibbles (decoded to bytes by a table lookup in the kernel) and each row's power-of-two
//! scale as an f32 (an E8M0 scale does not fit an f16).
//!
//! A [`BlockMxfp4x16`] holds one 32-value block of each of sixteen rows: vector `h` gives every
//! row (one 32-bit lane each) its codes `8h..8h + 4` in the low nibbles of its four bytes and
//! `8h + 4..8h + 8` in the high ones.
//!
//! The arithmetic, which the SIMD kernel reproduces bit for bit: per row and block, the exact
//! integer `Σ k·a` (`k` the code's value), converted to f32, times `d_w · d_a`, added to the
//! running sum with one fused multiply-add, blocks in order.

use super::ROWS;
use crate::quant::mxfp4::{BlockMxfp4, e8m0_to_f32_half};
use crate::quant::q8_0::BlockQ8_0;

packed_format! {
    /// One 32-value block of sixteen rows.
    BlockMxfp4x16: BlockMxfp4 => BlockQ8_0, extra row bytes 3 {
        /// Each row's scale, `2^(e - 128)`.
        d: [f32; ROWS],
        /// Vector `h`, byte `4i + jj`: row `i`'s code `8h + jj` (low nibble) and `8h + 4 + jj`
        /// (high nibble).
        qs: [[u8; 64]; 4],
    }
    /// Missing rows stay zero: code 0 is the value 0.
    fn pack_row(&mut self, i, block) {
        self.d[i] = e8m0_to_f32_half(block.e);
        super::nibbles::pack_indices(&block.qs, i, &mut self.qs);
    }
}

impl BlockMxfp4x16 {
    /// Row `i`'s code `j` as its table index.
    #[cfg(test)]
    pub(crate) fn index(&self, i: usize, j: usize) -> u8 {
        let byte = self.qs[j / 8][4 * i + j % 4];
        if j % 8 < 4 { byte & 0xF } else { byte >> 4 }
    }
}

#[cfg(test)]
impl super::byte_codes_reference::ByteCodeRows for BlockMxfp4x16 {
    const CODE_OFFSET: i32 = 0;

    /// Row `i`'s code `j` as its value.
    fn code(&self, i: usize, j: usize) -> i32 {
        crate::quant::mxfp4::KVALUES[self.index(i, j) as usize] as i32
    }

    fn scale(&self, i: usize) -> f32 {
        self.d[i]
    }
}
