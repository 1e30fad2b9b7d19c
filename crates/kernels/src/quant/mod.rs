//! Block formats: one module per tensor type, each holding its `#[repr(C)]` block struct, the
//! scalar reference dequantizer / quantizer / dot product and, beside it, its SIMD variants
//! (`x86`: AVX2, FMA and F16C; `avx512`: AVX-512 VNNI, where a type's row-major dot gains from
//! it; `aarch64`: NEON, with and without the dot-product extension).
//!
//! The traits here describe a format; [`crate::registry`] lists every format with its kernels,
//! and [`crate::dispatch`] turns that list into the function table of one instruction set, so
//! the drivers never switch on the type.

use bytemuck::Pod;
use rinfer_formats::GgmlType;

/// Declares a block format's struct as ggml stores it: `#[repr(C)]`, plain old data
/// (`bytemuck`), every field public, and `$bytes` bytes long (checked at compile time).
macro_rules! block_struct {
    (
        $(#[$meta:meta])*
        $name:ident, $bytes:literal bytes {
            $($(#[$field_meta:meta])* $field:ident: $ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        #[allow(non_camel_case_types)]
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        const _: () = assert!(size_of::<$name>() == $bytes);
    };
}

/// Implements [`BlockFormat`] and [`VecDot`] for a block type of a family of formats whose
/// scalar references are written once, in module `$family` (its `dequantize` and `vec_dot`).
macro_rules! family_reference {
    ($block:ty: $ty:ident, $elems:expr, $family:ident, $act:ty) => {
        impl $crate::quant::BlockFormat for $block {
            const TYPE: rinfer_formats::GgmlType = rinfer_formats::GgmlType::$ty;
            const ELEMS: usize = $elems;

            fn dequantize(&self, out: &mut [f32]) {
                $crate::quant::$family::dequantize(self, out);
            }
        }

        impl $crate::quant::VecDot for $block {
            type Activation = $act;

            fn vec_dot(w: &[Self], a: &[$act]) -> f32 {
                $crate::quant::$family::vec_dot(w, a)
            }
        }
    };
}

/// Implements [`BlockFormat`] and [`VecDot`] for a format of 32-value blocks whose values are
/// its integer codes `|$b| $codes` (an `[i32; 32]` of block `$b`) at the f16 scale field `d`:
/// `x = d · code`, dotted against Q8_0 activations ([`q8_0::BlockQ8_0::scaled_dot`]); with
/// `affine`, plus the f16 min field `m`: `x = d · code + m`, dotted against Q8_1 activations
/// ([`q8_1::BlockQ8_1::affine_dot`]).
macro_rules! codes32_format {
    ($block:ident: $ty:ident, |$b:ident| $codes:expr) => {
        impl $crate::quant::BlockFormat for $block {
            const TYPE: rinfer_formats::GgmlType = rinfer_formats::GgmlType::$ty;
            const ELEMS: usize = 32;

            fn dequantize(&self, out: &mut [f32]) {
                let $b = self;
                $crate::quant::util::scale_codes(self.d.to_f32(), $codes, out);
            }
        }

        impl $crate::quant::VecDot for $block {
            type Activation = $crate::quant::q8_0::BlockQ8_0;

            fn vec_dot(w: &[Self], a: &[Self::Activation]) -> f32 {
                $crate::quant::sum_blocks(w, a, |$b, y| y.scaled_dot($b.d.to_f32(), $codes))
            }
        }
    };
    ($block:ident: $ty:ident, affine, |$b:ident| $codes:expr) => {
        impl $crate::quant::BlockFormat for $block {
            const TYPE: rinfer_formats::GgmlType = rinfer_formats::GgmlType::$ty;
            const ELEMS: usize = 32;

            fn dequantize(&self, out: &mut [f32]) {
                let $b = self;
                let (d, m) = (self.d.to_f32(), self.m.to_f32());
                $crate::quant::util::scale_codes_min(d, m, $codes, out);
            }
        }

        impl $crate::quant::VecDot for $block {
            type Activation = $crate::quant::q8_1::BlockQ8_1;

            fn vec_dot(w: &[Self], a: &[Self::Activation]) -> f32 {
                $crate::quant::sum_blocks(w, a, |$b, y| {
                    y.affine_dot($b.d.to_f32(), $b.m.to_f32(), $codes)
                })
            }
        }
    };
}

/// Implements [`signed_grid::SignedGrid`] for a grid format's block `$block` (GGUF type `$ty`,
/// its super-block scale in field `d`) with `$groups` groups per scale and the value factor
/// `$factor`, reading a group and a scale level as `group` and `level` say; and, through
/// [`family_reference!`], the family's reference dequantizer and dot product against Q8_K.
macro_rules! signed_grid_format {
    (
        $block:ident: $ty:ident, $groups:literal groups per scale, value factor $factor:literal;

        fn group(&$group_self:ident, $g:ident: usize) -> [i8; 8] $group:block
        fn level(&$level_self:ident, $s:ident: usize) -> u8 $level:block
    ) => {
        impl $crate::quant::signed_grid::SignedGrid for $block {
            const GROUPS_PER_SCALE: usize = $groups;
            const VALUE_FACTOR: f32 = $factor;

            #[inline]
            fn d(&self) -> half::f16 {
                self.d
            }
            #[inline]
            fn group(&$group_self, $g: usize) -> [i8; 8] $group
            #[inline]
            fn level(&$level_self, $s: usize) -> u8 $level
        }

        family_reference!(
            $block: $ty,
            rinfer_formats::QK_K,
            signed_grid,
            $crate::quant::q8_k::BlockQ8K
        );
    };
}

/// Implements [`Quantize`] and [`QuantizeWeighted`] for a block type of a family of formats
/// whose quantizers are written once, in module `$family` (its `quantize` and
/// `quantize_weighted`).
macro_rules! family_quantizers {
    ($block:ty, $family:ident) => {
        impl $crate::quant::Quantize for $block {
            fn quantize(x: &[f32]) -> Self {
                $crate::quant::$family::quantize(x)
            }
        }

        impl $crate::quant::QuantizeWeighted for $block {
            fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self {
                $crate::quant::$family::quantize_weighted(x, weights)
            }
        }
    };
}

pub mod float;
pub mod iq1_m;
pub mod iq1_s;
pub mod iq2_s;
pub mod iq2_xs;
pub mod iq2_xxs;
pub mod iq3_s;
pub mod iq3_xxs;
pub mod iq4_nl;
pub mod iq4_xs;
pub mod mxfp4;
pub mod q2_k;
pub mod q3_k;
pub mod q4_0;
pub mod q4_1;
pub mod q4_k;
pub mod q5_0;
pub mod q5_1;
pub mod q5_k;
pub mod q6_k;
pub mod q8_0;
pub mod q8_1;
pub mod q8_k;
pub mod tq1_0;
pub mod tq2_0;

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
pub(crate) mod grid_fit;
pub(crate) mod grid_search;
mod iq4_codes;
pub(crate) mod iq_grids;
mod scale_min_k;
pub(crate) mod signed_grid;
mod ternary;
pub(crate) mod util;
mod weighted;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
pub(crate) mod testing;

/// The layout of one block of a tensor type and its scalar reference dequantizer.
///
/// Plain float types are blocks of one element.
pub trait BlockFormat: Pod + Send + Sync {
    /// The GGUF type this block encodes.
    const TYPE: GgmlType;
    /// Elements per block.
    const ELEMS: usize;
    /// Bytes per block.
    const BYTES: usize = size_of::<Self>();

    /// Decodes this block into `out` (`out.len() == Self::ELEMS`).
    fn dequantize(&self, out: &mut [f32]);
}

/// A block format that can be produced from f32 values, matching ggml's reference quantizer.
pub trait Quantize: BlockFormat {
    /// A row quantizer of whole blocks that needs AVX-512 F, BW and VL, with the bits of
    /// [`Quantize::quantize`] block by block, where the format has one ([`crate::registry`]
    /// picks it for tables of that instruction set).
    const ROW_AVX512: Option<QuantizeRowFn<Self>> = None;

    /// Encodes `x` (`x.len() == Self::ELEMS`) into one block.
    fn quantize(x: &[f32]) -> Self;
}

/// A block format with ggml's quantizer that takes importance weights (`quantize_<type>` with
/// `quant_weights`), the one `llama-quantize --imatrix` runs.
pub trait QuantizeWeighted: BlockFormat {
    /// Whether ggml refuses to quantize the format without weights (IQ1_S, IQ2_XXS and IQ2_XS
    /// assert them; llama.cpp's file-level refusals are the model crate's).
    const NEEDS_WEIGHTS: bool = false;

    /// Encodes `x` (`x.len() == Self::ELEMS`) into one block, weighting each value's error by
    /// the importance `weights` of its column (`None`: ggml's quantizer without an importance
    /// matrix; for a format that [needs weights](Self::NEEDS_WEIGHTS), equal weights).
    fn quantize_weighted(x: &[f32], weights: Option<&[f32]>) -> Self;
}

/// A row quantizer with optional importance weights (one per value of the row), writing raw
/// bytes.
pub(crate) type QuantizeWeightedBytesFn = fn(&[f32], Option<&[f32]>, &mut [u8]);

/// Quantizes whole blocks of a row with [`QuantizeWeighted::quantize_weighted`], each block
/// with its slice of `weights`; `out.len()` must be `x.len() / B::ELEMS * B::BYTES`, `weights`
/// as long as `x`.
pub(crate) fn quantize_weighted_bytes<B: QuantizeWeighted>(
    x: &[f32],
    weights: Option<&[f32]>,
    out: &mut [u8],
) {
    for (i, (o, x)) in out
        .chunks_exact_mut(B::BYTES)
        .zip(x.chunks_exact(B::ELEMS))
        .enumerate()
    {
        let w = weights.map(|w| &w[i * B::ELEMS..(i + 1) * B::ELEMS]);
        o.copy_from_slice(bytemuck::bytes_of(&B::quantize_weighted(x, w)));
    }
}

/// A row quantizer of whole blocks.
///
/// `unsafe` because SIMD entries need the instruction set they were selected for.
pub(crate) type QuantizeRowFn<B> = unsafe fn(&[f32], &mut [B]);

/// A weight format with a fused dot product against activations quantized once per row.
pub trait VecDot: BlockFormat {
    /// The format activations are quantized to before the dot product (ggml's `vec_dot_type`).
    type Activation: Quantize;

    /// Scalar reference: the dot product of `w` with `a`, block by block
    /// (`w.len() * Self::ELEMS == a.len() * Self::Activation::ELEMS`).
    fn vec_dot(w: &[Self], a: &[Self::Activation]) -> f32;
}

/// `Σ block_dot(wᵢ, aᵢ)` over the block pairs of a weight row and an activation row, added in
/// order from 0: the outer loop of the scalar reference dot products.
#[inline]
pub(crate) fn sum_blocks<W, A>(w: &[W], a: &[A], block_dot: impl Fn(&W, &A) -> f32) -> f32 {
    w.iter()
        .zip(a)
        .fold(0.0, |sum, (x, y)| sum + block_dot(x, y))
}

/// A row dequantizer working on raw bytes.
pub(crate) type DequantizeBytesFn = fn(&[u8], &mut [f32]);
/// A row quantizer writing raw bytes.
pub(crate) type QuantizeBytesFn = fn(&[f32], &mut [u8]);
/// A row quantizer writing raw bytes that may need an instruction set (hence `unsafe`).
pub(crate) type QuantizeBytesSimdFn = unsafe fn(&[f32], &mut [u8]);

/// Dequantizes whole blocks; `out.len()` must be `bytes.len() / B::BYTES * B::ELEMS`.
pub(crate) fn dequantize_bytes<B: BlockFormat>(bytes: &[u8], out: &mut [f32]) {
    let outs = out.chunks_exact_mut(B::ELEMS);
    match bytemuck::try_cast_slice::<u8, B>(bytes) {
        Ok(blocks) => blocks.iter().zip(outs).for_each(|(b, o)| b.dequantize(o)),
        Err(_) => bytes
            .chunks_exact(B::BYTES)
            .zip(outs)
            .for_each(|(c, o)| bytemuck::pod_read_unaligned::<B>(c).dequantize(o)),
    }
}

/// Quantizes whole blocks with the scalar reference; `out.len()` must be
/// `x.len() / B::ELEMS * B::BYTES`.
pub(crate) fn quantize_bytes<B: Quantize>(x: &[f32], out: &mut [u8]) {
    for (o, x) in out.chunks_exact_mut(B::BYTES).zip(x.chunks_exact(B::ELEMS)) {
        match bytemuck::try_from_bytes_mut::<B>(o) {
            Ok(block) => *block = B::quantize(x),
            Err(_) => o.copy_from_slice(bytemuck::bytes_of(&B::quantize(x))),
        }
    }
}

/// [`quantize_bytes`] with the format's [`Quantize::ROW_AVX512`] quantizer (bit-identical).
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VL.
pub(crate) unsafe fn quantize_bytes_avx512<B: Quantize>(x: &[f32], out: &mut [u8]) {
    let (Some(row), Ok(blocks)) = (B::ROW_AVX512, bytemuck::try_cast_slice_mut::<u8, B>(out))
    else {
        return quantize_bytes::<B>(x, out);
    };
    assert_eq!(x.len(), blocks.len() * B::ELEMS, "whole blocks of values");
    // SAFETY: the caller guarantees AVX-512.
    unsafe { row(x, blocks) }
}
