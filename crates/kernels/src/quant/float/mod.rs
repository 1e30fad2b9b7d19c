//! Plain float tensors (F32, F16, BF16) as one-element blocks. Their dot products run against
//! f32 activations, so no activation rounding happens (ggml rounds activations to F16 for F16
//! weights; this is at least as accurate).

use half::{bf16, f16};
use rinfer_formats::GgmlType;

use super::{BlockFormat, Quantize, VecDot};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

/// Rounds to bf16 as ggml does: to nearest even, NaN kept quiet.
pub fn f32_to_bf16(x: f32) -> bf16 {
    let u = x.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return bf16::from_bits(((u >> 16) | 64) as u16);
    }
    bf16::from_bits(((u + (0x7fff + ((u >> 16) & 1))) >> 16) as u16)
}

impl BlockFormat for f32 {
    const TYPE: GgmlType = GgmlType::F32;
    const ELEMS: usize = 1;

    fn dequantize(&self, out: &mut [f32]) {
        out[0] = *self;
    }
}

impl Quantize for f32 {
    fn quantize(x: &[f32]) -> Self {
        x[0]
    }
}

impl BlockFormat for f16 {
    const TYPE: GgmlType = GgmlType::F16;
    const ELEMS: usize = 1;

    fn dequantize(&self, out: &mut [f32]) {
        out[0] = self.to_f32();
    }
}

impl Quantize for f16 {
    fn quantize(x: &[f32]) -> Self {
        f16::from_f32(x[0])
    }
}

impl BlockFormat for bf16 {
    const TYPE: GgmlType = GgmlType::BF16;
    const ELEMS: usize = 1;

    fn dequantize(&self, out: &mut [f32]) {
        out[0] = f32::from_bits((self.to_bits() as u32) << 16);
    }
}

impl Quantize for bf16 {
    fn quantize(x: &[f32]) -> Self {
        f32_to_bf16(x[0])
    }
}

impl VecDot for f32 {
    type Activation = f32;

    fn vec_dot(w: &[Self], a: &[f32]) -> f32 {
        w.iter().zip(a).fold(0.0, |s, (x, y)| s + x * y)
    }
}

impl VecDot for f16 {
    type Activation = f32;

    fn vec_dot(w: &[Self], a: &[f32]) -> f32 {
        w.iter().zip(a).fold(0.0, |s, (x, y)| s + x.to_f32() * y)
    }
}

impl VecDot for bf16 {
    type Activation = f32;

    fn vec_dot(w: &[Self], a: &[f32]) -> f32 {
        w.iter().zip(a).fold(0.0, |s, (x, y)| {
            s + f32::from_bits((x.to_bits() as u32) << 16) * y
        })
    }
}
