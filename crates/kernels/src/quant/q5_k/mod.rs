//! Q5_K: as Q4_K with a fifth code bit per value: `x = d * sc_j * q - dmin * m_j`, `q < 32`.

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
    const SEARCH: Search = Search {
        nmax: 31,
        rmin: -0.5,
        nstep: 15,
    };

    fn header(&self) -> (f16, f16, &[u8; 12]) {
        (self.d, self.dmin, &self.scales)
    }
    #[inline]
    fn code(&self, j: usize, l: usize) -> u8 {
        let lo = (self.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
        lo | (((self.qh[l] >> j) & 1) << 4)
    }
    fn from_parts(d: f16, dmin: f16, scales: [u8; 12], codes: &[u8; QK_K]) -> Self {
        let (mut qs, mut qh) = ([0u8; QK_K / 2], [0u8; QK_K / 8]);
        for (i, &q) in codes.iter().enumerate() {
            let (j, k) = (i / 32, i % 32);
            qs[32 * (j / 2) + k] |= (q & 0xF) << (4 * (j % 2));
            qh[k] |= (q >> 4) << j;
        }
        BlockQ5K {
            d,
            dmin,
            scales,
            qh,
            qs,
        }
    }
}

family_reference!(BlockQ5K: Q5K, QK_K, scale_min_k, BlockQ8K);
family_quantizers!(BlockQ5K, scale_min_k);
