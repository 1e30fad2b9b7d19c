//! Q2_K: 256-value super-blocks of sixteen 16-value groups, 2-bit codes, 4-bit group scales and
//! mins, f16 super-scales: `x = d * sc_g * q - dmin * m_g`.

use half::f16;
use rinfer_formats::{GgmlType, QK_K};

use super::q8_k::BlockQ8K;
use super::{BlockFormat, VecDot, sum_blocks};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

mod quantize;
mod quantize_weighted;
#[cfg(test)]
mod tests;

block_struct! {
    /// One Q2_K super-block. Value `i` is bits `2j..2j+2` of `qs[32n + l]` where `n = i / 128`,
    /// `j = i % 128 / 32`, `l = i % 32`; group `g = i / 16` has scale `scales[g] & 0xF` and min
    /// `scales[g] >> 4`.
    BlockQ2K, 84 bytes {
        /// Group scales (low nibble) and mins (high nibble).
        scales: [u8; QK_K / 16],
        /// Packed codes.
        qs: [u8; QK_K / 4],
        /// Super-block scale of the group scales.
        d: f16,
        /// Super-block scale of the group mins.
        dmin: f16,
    }
}

impl BlockQ2K {
    /// Code of value `i`.
    #[inline]
    fn code(&self, i: usize) -> u8 {
        let (n, j, l) = (i / 128, i % 128 / 32, i % 32);
        (self.qs[32 * n + l] >> (2 * j)) & 3
    }
}

impl BlockFormat for BlockQ2K {
    const TYPE: GgmlType = GgmlType::Q2K;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, out: &mut [f32]) {
        let (d, min) = (self.d.to_f32(), self.dmin.to_f32());
        for (g, o) in out.chunks_exact_mut(16).enumerate() {
            let sc = self.scales[g];
            let (dl, ml) = (d * (sc & 0xF) as f32, min * (sc >> 4) as f32);
            for (k, o) in o.iter_mut().enumerate() {
                *o = dl * self.code(16 * g + k) as f32 - ml;
            }
        }
    }
}

impl VecDot for BlockQ2K {
    type Activation = BlockQ8K;

    fn vec_dot(w: &[Self], a: &[BlockQ8K]) -> f32 {
        sum_blocks(w, a, |x, y| {
            let (mut sumi, mut sum_mins) = (0i32, 0i32);
            for (g, yg) in y.qs.chunks_exact(16).enumerate() {
                let sc = x.scales[g];
                let s: i32 = yg
                    .iter()
                    .enumerate()
                    .map(|(k, &v)| x.code(16 * g + k) as i32 * v as i32)
                    .sum();
                sumi += (sc & 0xF) as i32 * s;
                sum_mins += (sc >> 4) as i32 * y.bsums[g] as i32;
            }
            y.d * x.d.to_f32() * sumi as f32 - y.d * x.dmin.to_f32() * sum_mins as f32
        })
    }
}
