//! TQ2_0 repacked sixteen rows at a time for AVX-512: the codes in the two-bit layout
//! (`two_bits`, which TQ2_0 shares with Q2_K down to where each value's bits sit in the source)
//! and the rows' f16 scales side by side, in the source's size.
//!
//! The arithmetic, which the SIMD kernel reproduces bit for bit: per row and super-block the
//! exact integer `S = Σ q·a − Σa` (codes `q` in `0..4` standing for `q − 1`; `Σa` from Q8_K's
//! `bsums`), then `acc = acc + S · (d_w · d_a)` with the multiply and the add rounded apart,
//! super-blocks in order. That is the row-major reference's arithmetic, so a packed product
//! gives each row the bits the reference dot product gives it.

use super::two_bits::{self, GroupCodes};
#[cfg(test)]
use crate::operands::BlockSummary;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::tq2_0::BlockTq2_0;

packed_format! {
    /// One super-block of sixteen rows.
    BlockTq2_0x16: BlockTq2_0 => BlockQ8K, scale d {
        /// The codes.
        qs: GroupCodes,
    }
    fn pack_row(&mut self, i, block) {
        two_bits::pack_codes(|v| two_bits::source_bits(&block.qs, v), i, &mut self.qs);
    }
}

/// The scalar reference (tests only), which the SIMD kernel reproduces bit for bit.
#[cfg(test)]
impl super::reference::RowReference for BlockTq2_0x16 {
    fn fold_row(&self, acc: f32, i: usize, y: &BlockQ8K, _: &[BlockSummary]) -> f32 {
        let dot: i32 = (0..256)
            .map(|v| two_bits::code(&self.qs, i, v / 16, v % 16) * y.qs[v] as i32)
            .sum();
        let a_sum: i32 = y.bsums.iter().map(|&s| s as i32).sum();
        let d = half::f16::from_bits(self.d[i]).to_f32() * y.d;
        acc + (dot - a_sum) as f32 * d
    }
}
