//! ggml's Q5_K quantizer with importance weights (`quantize_row_q5_K_impl`), through
//! [`scale_min_k::quantize_weighted`].

use bytemuck::Zeroable;

use super::BlockQ5K;
use crate::quant::scale_min_k;
use crate::quant::{Quantize, QuantizeWeighted};

impl QuantizeWeighted for BlockQ5K {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let Some(qw) = weights else {
            return BlockQ5K::quantize(x);
        };
        let mut b = BlockQ5K::zeroed();
        let (d, dmin, l) = scale_min_k::quantize_weighted(x, qw, 31, &mut b.scales);
        (b.d, b.dmin) = (d, dmin);
        for (i, &q) in l.iter().enumerate() {
            let (j, k) = (i / 32, i % 32);
            b.qs[32 * (j / 2) + k] |= (q & 0xF) << (4 * (j % 2));
            b.qh[k] |= (q >> 4) << j;
        }
        b
    }
}
