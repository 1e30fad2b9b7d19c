//! Q3_K: 256-value super-blocks of sixteen 16-value groups, 3-bit codes (2 low bits plus a
//! high-bit mask), signed 6-bit group scales and an f16 super-scale: `x = d * (sc_g - 32) * q`
//! with `q` in `-4..4`.

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
    /// One Q3_K super-block. Value `i` has low bits `2j..2j+2` of `qs[32n + l]` and its high bit
    /// (set means "no -4") in bit `4n + j` of `hmask[l]`, where `n = i / 128`, `j = i % 128 / 32`,
    /// `l = i % 32`.
    BlockQ3K, 110 bytes {
        /// High bits.
        hmask: [u8; QK_K / 8],
        /// Low 2 bits.
        qs: [u8; QK_K / 4],
        /// Sixteen 6-bit scales, packed.
        scales: [u8; 12],
        /// Super-block scale.
        d: f16,
    }
}

impl BlockQ3K {
    /// The sixteen group scales, already minus 32.
    pub(crate) fn group_scales(&self) -> [i8; 16] {
        const KMASK1: u32 = 0x0303_0303;
        const KMASK2: u32 = 0x0f0f_0f0f;
        let word = |k: usize| {
            u32::from_le_bytes(self.scales[4 * k..4 * k + 4].try_into().expect("4 bytes"))
        };
        let (a0, a1, tmp) = (word(0), word(1), word(2));
        let aux = [
            (a0 & KMASK2) | ((tmp & KMASK1) << 4),
            (a1 & KMASK2) | (((tmp >> 2) & KMASK1) << 4),
            ((a0 >> 4) & KMASK2) | (((tmp >> 4) & KMASK1) << 4),
            ((a1 >> 4) & KMASK2) | (((tmp >> 6) & KMASK1) << 4),
        ];
        let bytes: [u8; 16] = bytemuck::cast(aux.map(u32::to_le));
        bytes.map(|b| b as i8 - 32)
    }

    /// Code of value `i`, in `-4..4`.
    #[inline]
    fn code(&self, i: usize) -> i32 {
        let (n, j, l) = (i / 128, i % 128 / 32, i % 32);
        let low = ((self.qs[32 * n + l] >> (2 * j)) & 3) as i32;
        let high = self.hmask[l] & (1 << (4 * n + j)) != 0;
        if high { low } else { low - 4 }
    }
}

impl BlockFormat for BlockQ3K {
    const TYPE: GgmlType = GgmlType::Q3K;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        let scales = self.group_scales();
        for (g, o) in out.chunks_exact_mut(16).enumerate() {
            let dl = d * scales[g] as f32;
            for (k, o) in o.iter_mut().enumerate() {
                *o = dl * self.code(16 * g + k) as f32;
            }
        }
    }
}

impl VecDot for BlockQ3K {
    type Activation = BlockQ8K;

    fn vec_dot(w: &[Self], a: &[BlockQ8K]) -> f32 {
        sum_blocks(w, a, |x, y| {
            let scales = x.group_scales();
            let mut sumi = 0i32;
            for (g, yg) in y.qs.chunks_exact(16).enumerate() {
                let s: i32 = yg
                    .iter()
                    .enumerate()
                    .map(|(k, &v)| x.code(16 * g + k) * v as i32)
                    .sum();
                sumi += scales[g] as i32 * s;
            }
            y.d * x.d.to_f32() * sumi as f32
        })
    }
}
