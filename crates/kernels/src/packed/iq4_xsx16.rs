//! IQ4_XS repacked sixteen rows at a time for AVX-512: each 32-value sub-block's indices
//! laid out as IQ4_NL's (`nibbles`), looked up as the table value plus 128, and each row's
//! signed sub-block scales unpacked to bytes.
//!
//! The arithmetic, which the SIMD kernel reproduces bit for bit: per row and super-block the
//! exact integer `S = Σ_j sc_j · (Σ c·a − 128·Σa)` over the sub-blocks `j` (byte codes `c`,
//! scales `sc_j = ls_j − 32`), then `acc = fma(d_w·d_a, S, acc)`, super-blocks in order. That
//! is IQ4_XS's own integer sum; only the order of the float steps is the packed kernels'.

use super::ROWS;
use super::nibbles::pack_indices;
#[cfg(test)]
use crate::operands::BlockSummary;
use crate::quant::iq4_xs::BlockIq4Xs;
use crate::quant::q8_k::BlockQ8K;

packed_format! {
    /// One super-block of sixteen rows.
    BlockIq4Xsx16: BlockIq4Xs => BlockQ8K, scale d, extra row bytes 2 {
        /// `sc[j][i]`: row `i`'s scale of sub-block `j`, minus 32 (`-32..32`).
        sc: [[i8; ROWS]; 8],
        /// Sub-block `j`'s indices, laid out as IQ4_NL's packed indices (`nibbles`).
        qs: [[[u8; 64]; 4]; 8],
    }
    fn pack_row(&mut self, i, block) {
        for (j, qs) in self.qs.iter_mut().enumerate() {
            self.sc[j][i] = block.scale(j) as i8;
            let src: &[u8; 16] = block.qs[16 * j..16 * j + 16]
                .try_into()
                .expect("sixteen bytes per sub-block");
            pack_indices(src, i, qs);
        }
    }
}

impl BlockIq4Xsx16 {
    /// How far the byte codes lie above the table values.
    pub(crate) const OFFSET: i32 = 128;

    /// Row `i`'s byte code `l` of sub-block `j` (the table value plus 128).
    #[cfg(test)]
    pub(crate) fn code(&self, i: usize, j: usize, l: usize) -> i32 {
        let (g, jj) = (l / 4, l % 4);
        let index = (self.qs[j][g / 2][4 * i + jj] >> (4 * (g % 2))) & 0xF;
        super::nibbles::BlockIq4Nlx16::CODES[index as usize] as i32
    }
}

/// The scalar reference (tests only), which the SIMD kernel reproduces bit for bit.
#[cfg(test)]
impl super::reference::RowReference for BlockIq4Xsx16 {
    fn fold_row(&self, acc: f32, i: usize, y: &BlockQ8K, s: &[BlockSummary]) -> f32 {
        let mut sumi = 0i32;
        for (j, s) in s.iter().enumerate() {
            let dot: i32 = (0..32)
                .map(|l| self.code(i, j, l) * y.qs[32 * j + l] as i32)
                .sum();
            let isum = dot - BlockIq4Xsx16::OFFSET * s.sum;
            sumi += self.sc[j][i] as i32 * isum;
        }
        let d = half::f16::from_bits(self.d[i]).to_f32() * y.d;
        d.mul_add(sumi as f32, acc)
    }
}
