//! Q4_K: 256-value super-blocks of eight 32-value sub-blocks, 4-bit codes, 6-bit sub-block
//! scales and mins, f16 super-scales: `x = d * sc_j * q - dmin * m_j`.

use bytemuck::{Pod, Zeroable};
use half::f16;
use rinfer_formats::{GgmlType, QK_K};

use super::q8_k::BlockQ8K;
use super::util::{make_qkx2_quants, nearest_int, scale_min_k4};
use super::{BlockFormat, Quantize, VecDot};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

/// One Q4_K super-block. Codes of sub-blocks `2c` and `2c + 1` share bytes `32c..32c + 32` of
/// `qs` (low and high nibble).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ4K {
    /// Super-block scale of the sub-block scales.
    pub d: f16,
    /// Super-block scale of the sub-block mins.
    pub dmin: f16,
    /// Eight 6-bit scales and eight 6-bit mins, packed.
    pub scales: [u8; 12],
    /// Packed codes.
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(size_of::<BlockQ4K>() == 144);

impl BlockQ4K {
    /// Code `l` (0..32) of sub-block `j`.
    #[inline]
    fn code(&self, j: usize, l: usize) -> u8 {
        (self.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF
    }
}

impl BlockFormat for BlockQ4K {
    const TYPE: GgmlType = GgmlType::Q4K;
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

impl Quantize for BlockQ4K {
    fn quantize(x: &[f32]) -> Self {
        let mut b = BlockQ4K::zeroed();
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
            (scales[j], mins[j]) = make_qkx2_quants(15, xs, &weights, lj, -1.0, 0.1, 20, false);
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
                l[i] = nearest_int((x[i] + dm) / d).clamp(0, 15) as u8;
            }
        }
        for (c, q) in b.qs.chunks_exact_mut(32).enumerate() {
            for (k, q) in q.iter_mut().enumerate() {
                *q = l[64 * c + k] | (l[64 * c + 32 + k] << 4);
            }
        }
        b
    }
}

/// Quantizes eight sub-block scales and mins to 6 bits and packs them as Q4_K/Q5_K store them.
pub(crate) fn pack_scales_mins(
    out: &mut [u8; 12],
    scales: &[f32; 8],
    mins: &[f32; 8],
    max_scale: f32,
    max_min: f32,
) {
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    for j in 0..8 {
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            out[j] = ls;
            out[j + 4] = lm;
        } else {
            out[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            out[j - 4] |= (ls >> 4) << 6;
            out[j] |= (lm >> 4) << 6;
        }
    }
}

impl VecDot for BlockQ4K {
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
