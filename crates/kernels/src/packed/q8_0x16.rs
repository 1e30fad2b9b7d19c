//! Q8_0 repacked sixteen rows at a time for AVX-512, like `q5_0x16`.
//!
//! A [`BlockQ8_0x16`] holds one 32-value block of each of sixteen rows: vector `g` gives every
//! row (one 32-bit lane each) its codes `4g..4g + 4`, stored as `q + 128` so that they are the
//! unsigned operand of `vpdpbusd`.
//!
//! The arithmetic, which the SIMD kernel reproduces bit for bit: per row and block, the exact
//! integer `Σ (q + 128)·a − 128·Σa`, converted to f32, times `d_w · d_a`, added to the running
//! sum with one fused multiply-add, blocks in order.

use crate::quant::q8_0::BlockQ8_0;

packed_format! {
    /// One 32-value block of sixteen rows.
    BlockQ8_0x16: BlockQ8_0 => BlockQ8_0, scale d {
        /// Vector `g`, byte `4i + jj`: row `i`'s code `4g + jj`, plus 128.
        qs: [[u8; 64]; 8],
    }
    fn pack_row(&mut self, i, block) {
        for (g, qs) in self.qs.iter_mut().enumerate() {
            for jj in 0..4 {
                qs[4 * i + jj] = (block.qs[4 * g + jj] as u8) ^ 0x80;
            }
        }
    }
}

#[cfg(test)]
impl super::byte_codes_reference::ByteCodeRows for BlockQ8_0x16 {
    const CODE_OFFSET: i32 = 128;

    /// Row `i`'s code `j`, plus 128.
    fn code(&self, i: usize, j: usize) -> i32 {
        self.qs[j / 4][4 * i + j % 4] as i32
    }

    fn scale(&self, i: usize) -> f32 {
        half::f16::from_bits(self.d[i]).to_f32()
    }
}
