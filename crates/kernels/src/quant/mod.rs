//! Block formats: one module per tensor type, each holding its `#[repr(C)]` block struct, the
//! scalar reference dequantizer / quantizer / dot product and, beside it, SIMD variants
//! (`x86`: AVX2; `avx512`: AVX-512 with VNNI, for the types where it beats AVX2).
//!
//! The traits here describe a format; [`crate::dispatch`] turns them into a table of function
//! pointers so the matvec/matmul drivers never switch on the type.

use bytemuck::Pod;
use rinfer_formats::GgmlType;

use crate::error::KernelError;

pub mod float;
pub mod iq4_nl;
pub mod iq4_xs;
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

#[cfg(target_arch = "x86_64")]
mod avx512;
pub(crate) mod util;
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
    /// Encodes `x` (`x.len() == Self::ELEMS`) into one block.
    fn quantize(x: &[f32]) -> Self;
}

/// A weight format with a fused dot product against activations quantized once per row.
pub trait VecDot: BlockFormat {
    /// The format activations are quantized to before the dot product (ggml's `vec_dot_type`).
    type Activation: Quantize;

    /// Scalar reference: the dot product of `w` with `a`, block by block
    /// (`w.len() * Self::ELEMS == a.len() * Self::Activation::ELEMS`).
    fn vec_dot(w: &[Self], a: &[Self::Activation]) -> f32;
}

/// Decodes a row of `ty` (`bytes`) into `out`, which must hold exactly the row's elements.
///
/// Accepts any alignment of `bytes`.
///
/// # Errors
/// [`KernelError::Unsupported`] for types without a dequantizer, [`KernelError::PartialBlock`]
/// when `bytes` is not a whole number of blocks, and [`KernelError::LengthMismatch`] when `out`
/// does not have one slot per element.
pub fn dequantize_row(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
    let f = dequantize_fn(ty).ok_or(KernelError::Unsupported {
        ty,
        op: "dequantize",
    })?;
    check_row(ty, bytes.len(), out.len())?;
    f(bytes, out);
    Ok(())
}

/// Encodes `x` as a row of `ty` into `out` with ggml's reference quantizer.
///
/// Accepts any alignment of `out`.
///
/// # Errors
/// [`KernelError::Unsupported`] for types without a quantizer, [`KernelError::PartialBlock`]
/// when `x` is not a whole number of blocks, and [`KernelError::LengthMismatch`] when `out`
/// is not exactly the row's size in bytes.
pub fn quantize_row(ty: GgmlType, x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
    let f = quantize_fn(ty).ok_or(KernelError::Unsupported { ty, op: "quantize" })?;
    check_row(ty, out.len(), x.len())?;
    f(x, out);
    Ok(())
}

fn check_row(ty: GgmlType, bytes: usize, elems: usize) -> Result<(), KernelError> {
    if !bytes.is_multiple_of(ty.type_size()) {
        return Err(KernelError::PartialBlock {
            ty,
            len: bytes,
            unit: "bytes",
        });
    }
    let expected = bytes / ty.type_size() * ty.block_size();
    if elems != expected {
        return Err(KernelError::LengthMismatch {
            what: "f32 row",
            expected,
            actual: elems,
        });
    }
    Ok(())
}

/// A row dequantizer working on raw bytes.
pub(crate) type DequantizeBytesFn = fn(&[u8], &mut [f32]);
/// A row quantizer writing raw bytes.
pub(crate) type QuantizeBytesFn = fn(&[f32], &mut [u8]);

/// The scalar row dequantizer of `ty`, if it has one.
pub(crate) fn dequantize_fn(ty: GgmlType) -> Option<DequantizeBytesFn> {
    use GgmlType as T;
    Some(match ty {
        T::F32 => dequantize_bytes::<f32>,
        T::F16 => dequantize_bytes::<half::f16>,
        T::BF16 => dequantize_bytes::<half::bf16>,
        T::Q4_0 => dequantize_bytes::<q4_0::BlockQ4_0>,
        T::Q4_1 => dequantize_bytes::<q4_1::BlockQ4_1>,
        T::Q5_0 => dequantize_bytes::<q5_0::BlockQ5_0>,
        T::Q5_1 => dequantize_bytes::<q5_1::BlockQ5_1>,
        T::Q8_0 => dequantize_bytes::<q8_0::BlockQ8_0>,
        T::Q8_1 => dequantize_bytes::<q8_1::BlockQ8_1>,
        T::Q2K => dequantize_bytes::<q2_k::BlockQ2K>,
        T::Q3K => dequantize_bytes::<q3_k::BlockQ3K>,
        T::Q4K => dequantize_bytes::<q4_k::BlockQ4K>,
        T::Q5K => dequantize_bytes::<q5_k::BlockQ5K>,
        T::Q6K => dequantize_bytes::<q6_k::BlockQ6K>,
        T::Q8K => dequantize_bytes::<q8_k::BlockQ8K>,
        T::Iq4Nl => dequantize_bytes::<iq4_nl::BlockIq4Nl>,
        T::Iq4Xs => dequantize_bytes::<iq4_xs::BlockIq4Xs>,
        _ => return None,
    })
}

/// The scalar reference row quantizer of `ty`, if it has one.
pub(crate) fn quantize_fn(ty: GgmlType) -> Option<QuantizeBytesFn> {
    use GgmlType as T;
    Some(match ty {
        T::F32 => quantize_bytes::<f32>,
        T::F16 => quantize_bytes::<half::f16>,
        T::BF16 => quantize_bytes::<half::bf16>,
        T::Q4_0 => quantize_bytes::<q4_0::BlockQ4_0>,
        T::Q4_1 => quantize_bytes::<q4_1::BlockQ4_1>,
        T::Q5_0 => quantize_bytes::<q5_0::BlockQ5_0>,
        T::Q5_1 => quantize_bytes::<q5_1::BlockQ5_1>,
        T::Q8_0 => quantize_bytes::<q8_0::BlockQ8_0>,
        T::Q8_1 => quantize_bytes::<q8_1::BlockQ8_1>,
        T::Q4K => quantize_bytes::<q4_k::BlockQ4K>,
        T::Q5K => quantize_bytes::<q5_k::BlockQ5K>,
        T::Q6K => quantize_bytes::<q6_k::BlockQ6K>,
        T::Q8K => quantize_bytes::<q8_k::BlockQ8K>,
        _ => return None,
    })
}

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

/// Quantizes whole blocks; `out.len()` must be `x.len() / B::ELEMS * B::BYTES`.
pub(crate) fn quantize_bytes<B: Quantize>(x: &[f32], out: &mut [u8]) {
    let xs = x.chunks_exact(B::ELEMS);
    match bytemuck::try_cast_slice_mut::<u8, B>(out) {
        Ok(blocks) => blocks
            .iter_mut()
            .zip(xs)
            .for_each(|(b, x)| *b = B::quantize(x)),
        Err(_) => out
            .chunks_exact_mut(B::BYTES)
            .zip(xs)
            .for_each(|(o, x)| o.copy_from_slice(bytemuck::bytes_of(&B::quantize(x)))),
    }
}
