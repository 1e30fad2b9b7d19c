//! Q8_0: 32 values per block, signed 8-bit codes and one f16 scale: `x = d * q`.
//!
//! Also the activation format of Q4_0, Q5_0, Q8_0 and IQ4_NL weights.

use half::f16;

use super::Quantize;
use super::util::{dot_codes, round_away};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
mod quantize_avx512;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

block_struct! {
    /// One Q8_0 block.
    BlockQ8_0, 34 bytes {
        /// Scale.
        d: f16,
        /// Codes.
        qs: [i8; 32],
    }
}

codes32_format!(BlockQ8_0: Q8_0, |b| b.qs.map(i32::from));

impl BlockQ8_0 {
    /// The dot product of a weight block, its 32 integer values `codes` at scale `d`, with
    /// this block: the exact integer sum times `d · d_a` (ggml's per-block step).
    #[inline]
    pub(crate) fn scaled_dot(&self, d: f32, codes: [i32; 32]) -> f32 {
        dot_codes(codes, &self.qs) as f32 * (d * self.d.to_f32())
    }
}

/// The scale (as f32) and the codes of 32 values in a Q8_0 or Q8_1 block: `d = max|x| / 127`,
/// each code rounded half away from zero as ggml's `roundf`.
pub(crate) fn quantize_codes(x: &[f32]) -> (f32, [i8; 32]) {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut qs = [0i8; 32];
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = round_away(v * id) as i8;
    }
    (d, qs)
}

impl Quantize for BlockQ8_0 {
    #[cfg(target_arch = "x86_64")]
    const ROW_AVX512: Option<super::QuantizeRowFn<Self>> = Some(quantize_avx512::quantize_row);

    fn quantize(x: &[f32]) -> Self {
        let (d, qs) = quantize_codes(x);
        BlockQ8_0 {
            d: f16::from_f32(d),
            qs,
        }
    }
}
