//! Q5_K: as Q4_K with a fifth code bit per value: `x = d * sc_j * q - dmin * m_j`, `q < 32`.

use bytemuck::{Pod, Zeroable};
use half::f16;
use rinfer_formats::{GgmlType, QK_K};

use super::q4_k::pack_scales_mins;
use super::q8_k::BlockQ8K;
use super::util::{make_qkx2_quants, nearest_int, scale_min_k4};
use super::{BlockFormat, Quantize, VecDot};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

/// One Q5_K super-block. Low nibbles are packed as Q4_K; the fifth bit of value `l` of
/// sub-block `j` is bit `j` of `qh[l]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ5K {
    /// Super-block scale of the sub-block scales.
    pub d: f16,
    /// Super-block scale of the sub-block mins.
    pub dmin: f16,
    /// Eight 6-bit scales and eight 6-bit mins, packed as Q4_K.
    pub scales: [u8; 12],
    /// Fifth bits.
    pub qh: [u8; QK_K / 8],
    /// Low 4 bits.
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(size_of::<BlockQ5K>() == 176);

impl BlockQ5K {
    /// Code `l` (0..32) of sub-block `j`.
    #[inline]
    fn code(&self, j: usize, l: usize) -> u8 {
        let lo = (self.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
        lo | (((self.qh[l] >> j) & 1) << 4)
    }
}

impl BlockFormat for BlockQ5K {
    const TYPE: GgmlType = GgmlType::Q5K;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, out: &mut [f32]) {
        let (d, min) = (self.d.to_f32(), self.dmin.to_f32());
        for (j, o) in out.chunks_exact_mut(32).enumerate() {
            let (sc, m) = scale_min_k4(j, &self.scales);
            let (dl, ml) = (d * sc as f32, min * m as f32);
            for (l, o) in o.iter_mut().enumerate() {
                *o = dl * self.code(j, l) as f32 - ml;
            }
        }
    }
}

impl Quantize for BlockQ5K {
    fn quantize(x: &[f32]) -> Self {
        let mut b = BlockQ5K::zeroed();
        let mut l = [0u8; QK_K];
        let mut weights = [0.0f32; 32];
        let (mut scales, mut mins) = ([0.0f32; 8], [0.0f32; 8]);
        let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
        for j in 0..8 {
            let xs = &x[32 * j..32 * j + 32];
            let sum_x2 = xs.iter().fold(0.0f32, |s, v| s + v * v);
            let av_x = (sum_x2 / 32.0).sqrt();
            for (w, v) in weights.iter_mut().zip(xs) {
                *w = av_x + v.abs();
            }
            let lj = &mut l[32 * j..32 * j + 32];
            (scales[j], mins[j]) = make_qkx2_quants(31, xs, &weights, lj, -0.5, 0.1, 15, false);
            max_scale = max_scale.max(scales[j]);
            max_min = max_min.max(mins[j]);
        }
        pack_scales_mins(&mut b.scales, &scales, &mins, max_scale, max_min);
        b.d = f16::from_f32(max_scale / 63.0);
        b.dmin = f16::from_f32(max_min / 63.0);
        for j in 0..8 {
            let (sc, m) = scale_min_k4(j, &b.scales);
            let d = b.d.to_f32() * sc as f32;
            if d == 0.0 {
                continue;
            }
            let dm = b.dmin.to_f32() * m as f32;
            for i in 32 * j..32 * j + 32 {
                l[i] = nearest_int((x[i] + dm) / d).clamp(0, 31) as u8;
            }
        }
        for (i, &q) in l.iter().enumerate() {
            let (j, k) = (i / 32, i % 32);
            b.qs[32 * (j / 2) + k] |= (q & 0xF) << (4 * (j % 2));
            b.qh[k] |= (q >> 4) << j;
        }
        b
    }
}

impl VecDot for BlockQ5K {
    type Activation = BlockQ8K;

    fn vec_dot(w: &[Self], a: &[BlockQ8K]) -> f32 {
        let (mut sumf, mut summ) = (0.0f32, 0.0f32);
        for (x, y) in w.iter().zip(a) {
            let (mut sumi, mut sum_mins) = (0i32, 0i32);
            for j in 0..8 {
                let (sc, m) = scale_min_k4(j, &x.scales);
                let ys = &y.qs[32 * j..32 * j + 32];
                let s: i32 = ys
                    .iter()
                    .enumerate()
                    .map(|(l, &v)| x.code(j, l) as i32 * v as i32)
                    .sum();
                sumi += sc as i32 * s;
                sum_mins += m as i32 * (y.bsums[2 * j] as i32 + y.bsums[2 * j + 1] as i32);
            }
            sumf += y.d * x.d.to_f32() * sumi as f32;
            summ += y.d * x.dmin.to_f32() * sum_mins as f32;
        }
        sumf - summ
    }
}
