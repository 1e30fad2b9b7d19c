//! ggml's TQ2_0 quantizer (`quantize_row_tq2_0_ref`): the scale is the largest magnitude and
//! each value rounds (half away from zero) to −1, 0 or 1 of it. ggml ignores importance
//! weights for this format, so `llama-quantize --imatrix` writes the same bytes as without.

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::BlockTq2_0;
use crate::quant::QuantizeWeighted;
use crate::quant::util::round_away;

impl QuantizeWeighted for BlockTq2_0 {
    fn quantize_weighted(x: &[f32], _weights: Option<&[f32]>) -> Self {
        let mut b = BlockTq2_0::zeroed();
        let d = x[..QK_K]
            .iter()
            .fold(0.0f32, |m, v| if m > v.abs() { m } else { v.abs() });
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        b.d = f16::from_f32(d);
        for j in [0, 32] {
            for m in 0..32 {
                let mut q = 0u8;
                for n in 0..4 {
                    let xi = round_away(x[4 * j + m + 32 * n] * id) as i32 + 1;
                    q += ((xi & 3) as u8) << (2 * n);
                }
                b.qs[j + m] = q;
            }
        }
        b
    }
}
