//! Q5_K: as Q4_K with a fifth code bit per value: `x = d * sc_j * q - dmin * m_j`, `q < 32`.

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
    /// One Q5_K super-block. Low nibbles are packed as Q4_K; the fifth bit of value `l` of
    /// sub-block `j` is bit `j` of `qh[l]`.
    BlockQ5K, 176 bytes {
        /// Super-block scale of the sub-block scales.
        d: f16,
        /// Super-block scale of the sub-block mins.
        dmin: f16,
        /// Eight 6-bit scales and eight 6-bit mins, packed as Q4_K.
        scales: [u8; 12],
        /// Fifth bits.
        qh: [u8; QK_K / 8],
        /// Low 4 bits.
        qs: [u8; QK_K / 2],
    }
}

impl ScaleMinK for BlockQ5K {
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
        let lo = (self.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
        lo | (((self.qh[l] >> j) & 1) << 4)
    }
}

family_reference!(BlockQ5K: Q5K, QK_K, scale_min_k, BlockQ8K);

/// ggml's search settings for this format.
const SEARCH: Search = Search {
    nmax: 31,
    rmin: -0.5,
    nstep: 15,
};

impl Quantize for BlockQ5K {
    fn quantize(x: &[f32]) -> Self {
        let mut b = BlockQ5K::zeroed();
        let (d, dmin, l) = scale_min_k::quantize(x, &SEARCH, &mut b.scales);
        (b.d, b.dmin) = (d, dmin);
        for (i, &q) in l.iter().enumerate() {
            let (j, k) = (i / 32, i % 32);
            b.qs[32 * (j / 2) + k] |= (q & 0xF) << (4 * (j % 2));
            b.qh[k] |= (q >> 4) << j;
        }
        b
    }
}
