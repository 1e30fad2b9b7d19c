//! ggml's IQ4_XS quantizer: IQ4_NL's scale search per sub-block, the sub-block scales
//! quantized to six bits against the super-block scale, then the nearest table codes; with
//! importance weights or, without them, the squares of the values as weights.

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::BlockIq4Xs;
use crate::quant::iq4_codes::{best_index, sub_block_scale, value_weights};
use crate::quant::util::{max_by_magnitude, nearest_int, pack_split_nibbles};
use crate::quant::{Quantize, QuantizeWeighted};

impl Quantize for BlockIq4Xs {
    fn quantize(x: &[f32]) -> Self {
        Self::quantize_weighted(x, None)
    }
}

impl QuantizeWeighted for BlockIq4Xs {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let mut b = BlockIq4Xs::zeroed();
        let mut weight = [0.0f32; QK_K];
        value_weights(&x[..QK_K], weights, &mut weight);
        let mut l = [0u8; QK_K];
        let mut scales = [0.0f32; QK_K / 32];
        for (ib, s) in scales.iter_mut().enumerate() {
            let at = 32 * ib..32 * ib + 32;
            *s = sub_block_scale(&x[at.clone()], &weight[at.clone()], &mut l[at]);
        }
        let max_scale = max_by_magnitude(&scales);
        let d = -max_scale / 32.0;
        b.d = f16::from_f32(d);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        for (ib, &s) in scales.iter().enumerate() {
            let ls = nearest_int(id * s).clamp(-32, 31);
            let dl = d * ls as f32;
            let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
            for j in 32 * ib..32 * ib + 32 {
                l[j] = best_index(idl * x[j]);
            }
            let ls = (ls + 32) as u8;
            b.scales_l[ib / 2] |= (ls & 0xF) << (4 * (ib % 2));
            b.scales_h |= ((ls >> 4) as u16) << (2 * ib);
        }
        pack_split_nibbles(&l, &mut b.qs);
        b
    }
}
