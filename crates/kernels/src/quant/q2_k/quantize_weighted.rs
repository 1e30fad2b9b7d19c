//! ggml's Q2_K quantizer with importance weights (`quantize_row_q2_K_impl`): each 16-value
//! group's scale and min by a weighted search ([`make_qkx3_quants`]), the sixteen scales and
//! the sixteen mins to 4 bits by another weighted search ([`make_qp_quants`]), then the codes
//! again against the stored scales.

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::BlockQ2K;
use crate::quant::weighted::{importance_weights, make_qkx3_quants, make_qp_quants, sum_squares};
use crate::quant::{Quantize, QuantizeWeighted};

impl QuantizeWeighted for BlockQ2K {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let Some(qw) = weights else {
            return BlockQ2K::quantize(x);
        };
        let mut b = BlockQ2K::zeroed();
        let mut l = [0u8; QK_K];
        let (mut ls, mut lm) = ([0u8; QK_K / 16], [0u8; QK_K / 16]);
        let (mut sw, mut mins, mut scales) = ([0.0f32; 16], [0.0f32; 16], [0.0f32; 16]);
        let sigma2 = sum_squares(&x[..QK_K]) / QK_K as f32;
        let mut w = [0.0f32; 16];
        for j in 0..QK_K / 16 {
            let xs = &x[16 * j..16 * j + 16];
            importance_weights(&qw[16 * j..16 * j + 16], xs, sigma2, &mut w);
            sw[j] = w.iter().fold(0.0f32, |s, v| s + v);
            (scales[j], mins[j]) = make_qkx3_quants(
                3,
                xs,
                Some(&w),
                &mut l[16 * j..16 * j + 16],
                -0.9,
                0.05,
                36,
                false,
            );
        }
        b.d = f16::from_f32(make_qp_quants(15, &scales, &mut ls, &sw));
        b.dmin = f16::from_f32(make_qp_quants(15, &mins, &mut lm, &sw));
        for j in 0..QK_K / 16 {
            b.scales[j] = ls[j] | (lm[j] << 4);
        }
        b.pack_codes(x, l)
    }
}
