//! ggml's IQ4_NL quantizer: one sub-block's scale search and the nearest table codes.

use half::f16;

use super::BlockIq4Nl;
use crate::quant::Quantize;
use crate::quant::iq4_codes::{best_index, pack, sub_block_scale};

impl Quantize for BlockIq4Nl {
    fn quantize(x: &[f32]) -> Self {
        let mut l = [0u8; 32];
        let scale = sub_block_scale(x, &mut l);
        let id = if scale != 0.0 { 1.0 / scale } else { 0.0 };
        for (c, &v) in l.iter_mut().zip(x) {
            *c = best_index(id * v);
        }
        let mut b = BlockIq4Nl {
            d: f16::from_f32(scale),
            qs: [0; 16],
        };
        pack(&l, &mut b.qs);
        b
    }
}
