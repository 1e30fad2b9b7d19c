//! Q4_K: 256-value super-blocks of eight 32-value sub-blocks, 4-bit codes, 6-bit sub-block
//! scales and mins, f16 super-scales: `x = d * sc_j * q - dmin * m_j`.

use half::f16;
use rinfer_formats::QK_K;

use super::q8_k::BlockQ8K;
use super::scale_min_k::{ScaleMinK, Search};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

block_struct! {
    /// One Q4_K super-block. Codes of sub-blocks `2c` and `2c + 1` share bytes `32c..32c + 32` of
    /// `qs` (low and high nibble).
    BlockQ4K, 144 bytes {
        /// Super-block scale of the sub-block scales.
        d: f16,
        /// Super-block scale of the sub-block mins.
        dmin: f16,
        /// Eight 6-bit scales and eight 6-bit mins, packed.
        scales: [u8; 12],
        /// Packed codes.
        qs: [u8; QK_K / 2],
    }
}

impl ScaleMinK for BlockQ4K {
    const SEARCH: Search = Search {
        nmax: 15,
        rmin: -1.0,
        nstep: 20,
    };

    fn header(&self) -> (f16, f16, &[u8; 12]) {
        (self.d, self.dmin, &self.scales)
    }
    #[inline]
    fn code(&self, j: usize, l: usize) -> u8 {
        (self.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF
    }
    fn from_parts(d: f16, dmin: f16, scales: [u8; 12], codes: &[u8; QK_K]) -> Self {
        let mut qs = [0u8; QK_K / 2];
        for (c, q) in qs.chunks_exact_mut(32).enumerate() {
            for (k, q) in q.iter_mut().enumerate() {
                *q = codes[64 * c + k] | (codes[64 * c + 32 + k] << 4);
            }
        }
        BlockQ4K {
            d,
            dmin,
            scales,
            qs,
        }
    }
}

family_reference!(BlockQ4K: Q4K, QK_K, scale_min_k, BlockQ8K);
family_quantizers!(BlockQ4K, scale_min_k);
