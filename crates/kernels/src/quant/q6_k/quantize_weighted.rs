//! ggml's Q6_K quantizer with importance weights (`quantize_row_q6_K_impl`): the reference
//! quantizer with each group's scale searched against the importance matrix directly (ggml
//! does not scale it by the values here, unlike the other K-quants).

use super::BlockQ6K;
use crate::quant::weighted::make_qx_quants;
use crate::quant::{Quantize, QuantizeWeighted};

impl QuantizeWeighted for BlockQ6K {
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
        let Some(qw) = weights else {
            return BlockQ6K::quantize(x);
        };
        BlockQ6K::quantize_groups(x, |g, xg, l| {
            make_qx_quants(32, xg, l, Some(&qw[16 * g..16 * g + 16]))
        })
    }
}
