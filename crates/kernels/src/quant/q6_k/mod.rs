//! Q6_K: 256-value super-blocks of sixteen 16-value groups, 6-bit codes, signed 8-bit group
//! scales and an f16 super-scale: `x = d * sc_g * (q - 32)`.

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::{GgmlType, QK_K};

use super::q8_k::BlockQ8K;
use super::util::{GROUP_MAX_EPS, nearest_int};
use super::weighted::make_qx_quants;
use super::{BlockFormat, Quantize, VecDot, sum_blocks};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

mod quantize_weighted;
#[cfg(test)]
mod tests;

block_struct! {
    /// One Q6_K super-block. Per 128 values `n`: low nibbles of values `l` and `l + 64` share
    /// `ql[64n + l]`, of `l + 32` and `l + 96` share `ql[64n + 32 + l]`; their high 2 bits are the
    /// four bit pairs of `qh[32n + l]`.
    BlockQ6K, 210 bytes {
        /// Low 4 bits.
        ql: [u8; QK_K / 2],
        /// High 2 bits.
        qh: [u8; QK_K / 4],
        /// Group scales.
        scales: [i8; QK_K / 16],
        /// Super-block scale.
        d: f16,
    }
}

impl BlockQ6K {
    /// The 256 codes minus 32, in `-32..32`.
    #[inline]
    pub(crate) fn codes(&self) -> [i8; QK_K] {
        let mut q = [0i8; QK_K];
        for n in 0..2 {
            let (ql, qh) = (&self.ql[64 * n..64 * n + 64], &self.qh[32 * n..32 * n + 32]);
            let q = &mut q[128 * n..128 * n + 128];
            for l in 0..32 {
                q[l] = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
                q[l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
                q[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
                q[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            }
        }
        q
    }
}

impl BlockFormat for BlockQ6K {
    const TYPE: GgmlType = GgmlType::Q6K;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (i, (o, q)) in out.iter_mut().zip(self.codes()).enumerate() {
            *o = d * self.scales[i / 16] as f32 * q as f32;
        }
    }
}

impl Quantize for BlockQ6K {
    fn quantize(x: &[f32]) -> Self {
        BlockQ6K::quantize_groups(x, |_, xg, l| make_qx_quants(32, xg, l, None))
    }
}

impl BlockQ6K {
    /// ggml's Q6_K quantizer with `group_scale(g, x_g, l_g)` finding group `g`'s scale and
    /// codes (offset by 32): the scales to signed 8 bits of the largest, then the codes again.
    pub(crate) fn quantize_groups(
        x: &[f32],
        mut group_scale: impl FnMut(usize, &[f32], &mut [i8]) -> f32,
    ) -> Self {
        let mut b = BlockQ6K::zeroed();
        let mut l = [0i8; QK_K];
        let mut scales = [0.0f32; QK_K / 16];
        let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
        for (g, s) in scales.iter_mut().enumerate() {
            *s = group_scale(g, &x[16 * g..16 * g + 16], &mut l[16 * g..16 * g + 16]);
            if s.abs() > max_abs_scale {
                max_abs_scale = s.abs();
                max_scale = *s;
            }
        }
        if max_abs_scale < GROUP_MAX_EPS {
            return b;
        }
        let iscale = -128.0 / max_scale;
        b.d = f16::from_f32(1.0 / iscale);
        for (bs, &s) in b.scales.iter_mut().zip(&scales) {
            *bs = nearest_int(iscale * s).min(127) as i8;
        }
        for g in 0..QK_K / 16 {
            let d = b.d.to_f32() * b.scales[g] as f32;
            if d == 0.0 {
                continue;
            }
            for i in 16 * g..16 * g + 16 {
                l[i] = (nearest_int(x[i] / d).clamp(-32, 31) + 32) as i8;
            }
        }
        let l: [u8; QK_K] = bytemuck::cast(l);
        for n in 0..2 {
            let l = &l[128 * n..128 * n + 128];
            for k in 0..32 {
                b.ql[64 * n + k] = (l[k] & 0xF) | ((l[k + 64] & 0xF) << 4);
                b.ql[64 * n + 32 + k] = (l[k + 32] & 0xF) | ((l[k + 96] & 0xF) << 4);
                b.qh[32 * n + k] = (l[k] >> 4)
                    | ((l[k + 32] >> 4) << 2)
                    | ((l[k + 64] >> 4) << 4)
                    | ((l[k + 96] >> 4) << 6);
            }
        }
        b
    }
}

impl VecDot for BlockQ6K {
    type Activation = BlockQ8K;

    fn vec_dot(w: &[Self], a: &[BlockQ8K]) -> f32 {
        sum_blocks(w, a, |x, y| {
            let q = x.codes();
            let mut sumi = 0i32;
            for (g, (qg, yg)) in q.chunks_exact(16).zip(y.qs.chunks_exact(16)).enumerate() {
                let s: i32 = qg.iter().zip(yg).map(|(&q, &v)| q as i32 * v as i32).sum();
                sumi += x.scales[g] as i32 * s;
            }
            y.d * x.d.to_f32() * sumi as f32
        })
    }
}
