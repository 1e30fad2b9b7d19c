//! Q8_0: 32 values per block, signed 8-bit codes and one f16 scale: `x = d * q`.
//!
//! Also the activation format of Q4_0, Q5_0, Q8_0 and IQ4_NL weights.

use bytemuck::{Pod, Zeroable};
use half::f16;
use rinfer_formats::GgmlType;

use super::util::round_away;
use super::{BlockFormat, Quantize, VecDot};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
mod quantize_avx512;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

/// One Q8_0 block.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ8_0 {
    /// Scale.
    pub d: f16,
    /// Codes.
    pub qs: [i8; 32],
}

const _: () = assert!(size_of::<BlockQ8_0>() == 34);

impl BlockFormat for BlockQ8_0 {
    const TYPE: GgmlType = GgmlType::Q8_0;
    const ELEMS: usize = 32;

    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (o, &q) in out.iter_mut().zip(&self.qs) {
            *o = q as f32 * d;
        }
    }
}

impl Quantize for BlockQ8_0 {
    #[cfg(target_arch = "x86_64")]
    const ROW_AVX512: Option<super::QuantizeRowFn<Self>> = Some(quantize_avx512::quantize_row);

    fn quantize(x: &[f32]) -> Self {
        let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut qs = [0i8; 32];
        for (q, &v) in qs.iter_mut().zip(x) {
            *q = round_away(v * id) as i8;
        }
        BlockQ8_0 {
            d: f16::from_f32(d),
            qs,
        }
    }
}

impl VecDot for BlockQ8_0 {
    type Activation = BlockQ8_0;

    fn vec_dot(w: &[Self], a: &[BlockQ8_0]) -> f32 {
        let mut sumf = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let sumi: i32 =
                x.qs.iter()
                    .zip(&y.qs)
                    .map(|(&p, &q)| p as i32 * q as i32)
                    .sum();
            sumf += sumi as f32 * (x.d.to_f32() * y.d.to_f32());
        }
        sumf
    }
}
