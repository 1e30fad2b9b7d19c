//! ggml's Q3_K quantizer with importance weights (`quantize_row_q3_K_impl`): each 16-value
//! group's scale by an importance-weighted search, the sixteen scales to 6 bits by another
//! weighted search (weighted by the groups' total weights), then the codes again against the
//! stored scales.

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::BlockQ3K;
use crate::quant::weighted::{importance_weights, make_qx_quants, sum_squares};
use crate::quant::{Quantize, QuantizeWeighted};

impl QuantizeWeighted for BlockQ3K {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let Some(qw) = weights else {
            return BlockQ3K::quantize(x);
        };
        let mut b = BlockQ3K::zeroed();
        let mut l = [0i8; QK_K];
        let (mut scales, mut sw) = ([0.0f32; QK_K / 16], [0.0f32; QK_K / 16]);
        let sigma2 = 2.0 * sum_squares(&x[..QK_K]) / QK_K as f32;
        let mut w = [0.0f32; 16];
        for g in 0..QK_K / 16 {
            let xs = &x[16 * g..16 * g + 16];
            importance_weights(&qw[16 * g..16 * g + 16], xs, sigma2, &mut w);
            sw[g] = w.iter().fold(0.0f32, |s, v| s + v);
            scales[g] = make_qx_quants(4, xs, &mut l[16 * g..16 * g + 16], Some(&w));
        }
        let mut ls = [0i8; QK_K / 16];
        let d_block = make_qx_quants(32, &scales, &mut ls, Some(&sw));
        for (g, &code) in ls.iter().enumerate() {
            b.set_scale_code(g, code as u8);
        }
        b.d = f16::from_f32(d_block);
        b.pack_codes(x, l)
    }
}
