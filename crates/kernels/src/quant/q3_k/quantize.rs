//! ggml's reference Q3_K quantizer (`quantize_row_q3_K_ref`), the one `llama-quantize` runs
//! without an importance matrix.

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::BlockQ3K;
use crate::quant::Quantize;
use crate::quant::util::{make_q3_quants, max_by_magnitude, nearest_int, pack_two_bit_codes};

impl BlockQ3K {
    /// Stores the 6-bit scale code `l` (`0..64`) of group `g` in ggml's split layout.
    pub(super) fn set_scale_code(&mut self, g: usize, l: u8) {
        if g < 8 {
            self.scales[g] = l & 0xF;
        } else {
            self.scales[g - 8] |= (l & 0xF) << 4;
        }
        self.scales[g % 4 + 8] |= (l >> 4) << (2 * (g / 4));
    }

    /// The 6-bit scale code of group `g`, minus 32.
    fn scale_code(&self, g: usize) -> i32 {
        let low = if g < 8 {
            self.scales[g] & 0xF
        } else {
            self.scales[g - 8] >> 4
        };
        let high = (self.scales[8 + g % 4] >> (2 * (g / 4))) & 3;
        (low | (high << 4)) as i32 - 32
    }
}

impl Quantize for BlockQ3K {
    fn quantize(x: &[f32]) -> Self {
        let mut b = BlockQ3K::zeroed();
        let mut l = [0i8; QK_K];
        let mut scales = [0.0f32; QK_K / 16];
        for (g, s) in scales.iter_mut().enumerate() {
            *s = make_q3_quants(4, &x[16 * g..16 * g + 16], &mut l[16 * g..16 * g + 16]);
        }
        let max_scale = max_by_magnitude(&scales);
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for (g, &s) in scales.iter().enumerate() {
                let code = nearest_int(iscale * s).clamp(-32, 31) + 32;
                b.set_scale_code(g, code as u8);
            }
            b.d = f16::from_f32(1.0 / iscale);
        }
        b.pack_codes(x, l)
    }
}

impl BlockQ3K {
    /// Rounds `x` again against the stored scales (where `l` keeps the codes of groups whose
    /// scale is zero) and packs the codes, as ggml's Q3_K quantizers finish.
    pub(super) fn pack_codes(mut self, x: &[f32], mut l: [i8; QK_K]) -> Self {
        let b = &mut self;
        for g in 0..QK_K / 16 {
            let d = b.d.to_f32() * b.scale_code(g) as f32;
            if d == 0.0 {
                continue;
            }
            for i in 16 * g..16 * g + 16 {
                l[i] = (nearest_int(x[i] / d).clamp(-4, 3) + 4) as i8;
            }
        }
        let mut l: [u8; QK_K] = bytemuck::cast(l);
        for (j, v) in l.iter_mut().enumerate() {
            if *v > 3 {
                b.hmask[j % (QK_K / 8)] |= 1 << (j / (QK_K / 8));
                *v -= 4;
            }
        }
        pack_two_bit_codes(&l, &mut b.qs);
        self
    }
}
