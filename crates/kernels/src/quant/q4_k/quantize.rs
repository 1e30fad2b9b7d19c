//! ggml's Q4_K quantizer with importance weights (`quantize_row_q4_K_impl`): each sub-block's
//! scale and min by a weighted search ([`make_qkx3_quants`]), then the eight scales and the
//! eight mins to 6 bits by another weighted search ([`make_qp_quants`]) rather than by the
//! largest one, then the codes again against the stored scales.

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::BlockQ4K;
use crate::quant::util::{nearest_int, scale_min_k4};
use crate::quant::weighted::{importance_weights, make_qkx3_quants, make_qp_quants, sum_squares};
use crate::quant::{Quantize, QuantizeWeighted};

impl QuantizeWeighted for BlockQ4K {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let Some(qw) = weights else {
            return BlockQ4K::quantize(x);
        };
        let mut b = BlockQ4K::zeroed();
        let mut l = [0u8; QK_K];
        let (mut ls, mut lm) = ([0u8; 8], [0u8; 8]);
        let (mut sw, mut mins, mut scales) = ([0.0f32; 8], [0.0f32; 8], [0.0f32; 8]);
        let sigma2 = 2.0 * sum_squares(&x[..QK_K]) / QK_K as f32;
        let mut w = [0.0f32; 32];
        for j in 0..8 {
            let xs = &x[32 * j..32 * j + 32];
            importance_weights(&qw[32 * j..32 * j + 32], xs, sigma2, &mut w);
            sw[j] = w.iter().fold(0.0f32, |s, v| s + v);
            (scales[j], mins[j]) = make_qkx3_quants(
                15,
                xs,
                Some(&w),
                &mut l[32 * j..32 * j + 32],
                -0.9,
                0.05,
                36,
                false,
            );
        }
        let d_block = make_qp_quants(63, &scales, &mut ls, &sw);
        let m_block = make_qp_quants(63, &mins, &mut lm, &sw);
        for j in 0..8 {
            let (s, m) = (ls[j], lm[j]);
            if j < 4 {
                b.scales[j] = s;
                b.scales[j + 4] = m;
            } else {
                b.scales[j + 4] = (s & 0xF) | ((m & 0xF) << 4);
                b.scales[j - 4] |= (s >> 4) << 6;
                b.scales[j] |= (m >> 4) << 6;
            }
        }
        b.d = f16::from_f32(d_block);
        b.dmin = f16::from_f32(m_block);
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
