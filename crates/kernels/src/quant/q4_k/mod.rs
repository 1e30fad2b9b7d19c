//! Q4_K: 256-value super-blocks of eight 32-value sub-blocks, 4-bit codes, 6-bit sub-block
//! scales and mins, f16 super-scales: `x = d * sc_j * q - dmin * m_j`.

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::Quantize;
use super::q8_k::BlockQ8K;
use super::scale_min_k::{self, ScaleMinK, Search};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

mod quantize;

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
    fn d(&self) -> f16 {
        self.d
    }
    fn dmin(&self) -> f16 {
        self.dmin
    }
    fn scales(&self) -> &[u8; 12] {
        &self.scales
    }
    #[inline]
    fn code(&self, j: usize, l: usize) -> u8 {
        (self.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF
    }
}

family_reference!(BlockQ4K: Q4K, QK_K, scale_min_k, BlockQ8K);

/// ggml's search settings for this format.
const SEARCH: Search = Search {
    nmax: 15,
    rmin: -1.0,
    nstep: 20,
};

impl Quantize for BlockQ4K {
    fn quantize(x: &[f32]) -> Self {
        let mut b = BlockQ4K::zeroed();
        let (d, dmin, l) = scale_min_k::quantize(x, &SEARCH, &mut b.scales);
        (b.d, b.dmin) = (d, dmin);
        for (c, q) in b.qs.chunks_exact_mut(32).enumerate() {
            for (k, q) in q.iter_mut().enumerate() {
                *q = l[64 * c + k] | (l[64 * c + 32 + k] << 4);
            }
        }
        b
    }
}
