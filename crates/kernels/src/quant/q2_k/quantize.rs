//! ggml's reference Q2_K quantizer (`quantize_row_q2_K_ref`), the one `llama-quantize` runs
//! without an importance matrix.

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::BlockQ2K;
use crate::quant::Quantize;
use crate::quant::util::{make_qkx2_quants, nearest_int, pack_two_bit_codes};

/// The 4-bit range of the group scales and mins.
const Q4SCALE: f32 = 15.0;

impl Quantize for BlockQ2K {
    fn quantize(x: &[f32]) -> Self {
        let mut b = BlockQ2K::zeroed();
        let mut l = [0u8; QK_K];
        let mut scales = [0.0f32; QK_K / 16];
        let mut mins = [0.0f32; QK_K / 16];
        let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
        for g in 0..QK_K / 16 {
            let xg = &x[16 * g..16 * g + 16];
            let weights: [f32; 16] = std::array::from_fn(|k| xg[k].abs());
            let (scale, min) = make_qkx2_quants(
                3,
                xg,
                &weights,
                &mut l[16 * g..16 * g + 16],
                -0.5,
                0.1,
                15,
                true,
            );
            (scales[g], mins[g]) = (scale, min);
            if scale > max_scale {
                max_scale = scale;
            }
            if min > max_min {
                max_min = min;
            }
        }
        if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for (s, &scale) in b.scales.iter_mut().zip(&scales) {
                *s = nearest_int(iscale * scale) as u8;
            }
            b.d = f16::from_f32(max_scale / Q4SCALE);
        }
        if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for (s, &min) in b.scales.iter_mut().zip(&mins) {
                *s |= (nearest_int(iscale * min) << 4) as u8;
            }
            b.dmin = f16::from_f32(max_min / Q4SCALE);
        }
        b.pack_codes(x, l)
    }
}

impl BlockQ2K {
    /// Rounds `x` again against the stored scales and mins (where `l` keeps the codes of groups
    /// whose scale is zero) and packs the codes, as ggml's Q2_K quantizers finish.
    pub(super) fn pack_codes(mut self, x: &[f32], mut l: [u8; QK_K]) -> Self {
        let (dm, mm) = (self.d.to_f32(), self.dmin.to_f32());
        for g in 0..QK_K / 16 {
            let d = dm * (self.scales[g] & 0xF) as f32;
            if d == 0.0 {
                continue;
            }
            let m = mm * (self.scales[g] >> 4) as f32;
            for i in 16 * g..16 * g + 16 {
                l[i] = nearest_int((x[i] + m) / d).clamp(0, 3) as u8;
            }
        }
        pack_two_bit_codes(&l, &mut self.qs);
        self
    }
}
