//! ggml's Q4_K quantizer with importance weights (`quantize_row_q4_K_impl`), through
//! [`scale_min_k::quantize_weighted`].

use bytemuck::Zeroable;

use super::BlockQ4K;
use crate::quant::scale_min_k;
use crate::quant::{Quantize, QuantizeWeighted};

impl QuantizeWeighted for BlockQ4K {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let Some(qw) = weights else {
            return BlockQ4K::quantize(x);
        };
        let mut b = BlockQ4K::zeroed();
        let (d, dmin, l) = scale_min_k::quantize_weighted(x, qw, 15, &mut b.scales);
        (b.d, b.dmin) = (d, dmin);
        for (c, q) in b.qs.chunks_exact_mut(32).enumerate() {
            for (k, q) in q.iter_mut().enumerate() {
                *q = l[64 * c + k] | (l[64 * c + 32 + k] << 4);
            }
        }
        b
    }
}
