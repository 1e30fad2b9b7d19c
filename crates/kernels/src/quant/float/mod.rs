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

/// A float weight type, widened exactly to f32.
pub(crate) trait Widen: Copy {
    /// The value as f32 (a bf16's bits shifted into place, its NaNs kept as they are).
    fn widen(self) -> f32;
}

/// `init + Σ wᵢ·aᵢ`, added in order: the scalar reference dot product (from 0) and the tail of
/// the SIMD kernels.
#[inline]
pub(crate) fn dot_from<T: Widen>(init: f32, w: &[T], a: &[f32]) -> f32 {
    w.iter().zip(a).fold(init, |s, (x, y)| s + x.widen() * y)
}

/// Implements [`Widen`], [`BlockFormat`], [`Quantize`] (with `$from_f32`) and [`VecDot`] for
/// the float type `$t` of GGUF type `$ty`, widened by `$widen`.
macro_rules! float_format {
    ($t:ty: $ty:ident, $widen:expr, $from_f32:expr) => {
        impl Widen for $t {
            #[inline]
            fn widen(self) -> f32 {
                $widen(self)
            }
        }

        impl BlockFormat for $t {
            const TYPE: GgmlType = GgmlType::$ty;
            const ELEMS: usize = 1;

            fn dequantize(&self, out: &mut [f32]) {
                out[0] = self.widen();
            }
        }

        impl Quantize for $t {
            fn quantize(x: &[f32]) -> Self {
                $from_f32(x[0])
            }
        }

        impl VecDot for $t {
            type Activation = f32;

            fn vec_dot(w: &[Self], a: &[f32]) -> f32 {
                dot_from(0.0, w, a)
            }
        }
    };
}

float_format!(f32: F32, |x: f32| x, |x: f32| x);
float_format!(f16: F16, f16::to_f32, f16::from_f32);
float_format!(
    bf16: BF16,
    |x: bf16| f32::from_bits((x.to_bits() as u32) << 16),
    f32_to_bf16
);
