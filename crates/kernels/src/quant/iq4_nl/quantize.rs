//! ggml's IQ4_NL quantizer: one sub-block's scale search and the nearest table codes, with
//! importance weights or, without them, the squares of the values as weights.

use half::f16;

use super::BlockIq4Nl;
use crate::quant::iq4_codes::{best_index, sub_block_scale, value_weights};
use crate::quant::util::pack_split_nibbles;
use crate::quant::{Quantize, QuantizeWeighted};

impl Quantize for BlockIq4Nl {
    fn quantize(x: &[f32]) -> Self {
        Self::quantize_weighted(x, None)
    }
}

impl QuantizeWeighted for BlockIq4Nl {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let mut weight = [0.0f32; 32];
        value_weights(x, weights, &mut weight);
        let mut l = [0u8; 32];
        let scale = sub_block_scale(x, &weight, &mut l);
        let id = if scale != 0.0 { 1.0 / scale } else { 0.0 };
        for (c, &v) in l.iter_mut().zip(x) {
            *c = best_index(id * v);
        }
        let mut b = BlockIq4Nl {
            d: f16::from_f32(scale),
            qs: [0; 16],
        };
        pack_split_nibbles(&l, &mut b.qs);
        b
    }
}
