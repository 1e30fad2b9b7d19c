//! Whole rows between f32 and any type the registry can decode or encode, with the scalar
//! reference kernels (for embeddings, checks and tools; the products never convert weights).

use rinfer_formats::GgmlType;

use crate::error::KernelError;
use crate::registry;

/// Decodes a row of `ty` (`bytes`) into `out`, which must hold exactly the row's elements.
///
/// Accepts any alignment of `bytes`.
///
/// # Errors
/// [`KernelError::Unsupported`] for types without a dequantizer, [`KernelError::PartialBlock`]
/// when `bytes` is not a whole number of blocks, and [`KernelError::LengthMismatch`] when `out`
/// does not have one slot per element.
pub fn dequantize_row(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
    let f = registry::traits(ty)
        .map(|t| t.dequantize)
        .ok_or(KernelError::Unsupported {
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
///
/// ```
/// use rinfer_formats::GgmlType;
///
/// let x: Vec<f32> = (0..32).map(|i| i as f32).collect();
/// let mut q8 = vec![0u8; 34];
/// rinfer_kernels::quantize_row(GgmlType::Q8_0, &x, &mut q8)?;
/// let mut back = vec![0.0f32; 32];
/// rinfer_kernels::dequantize_row(GgmlType::Q8_0, &q8, &mut back)?;
/// assert!(back.iter().zip(&x).all(|(b, x)| (b - x).abs() <= 0.25));
/// # Ok::<(), rinfer_kernels::KernelError>(())
/// ```
pub fn quantize_row(ty: GgmlType, x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
    let f = registry::traits(ty)
        .and_then(|t| t.quantize)
        .ok_or(KernelError::Unsupported { ty, op: "quantize" })?;
    check_row(ty, out.len(), x.len())?;
    f(x, out);
    Ok(())
}

fn check_row(ty: GgmlType, bytes: usize, elems: usize) -> Result<(), KernelError> {
    KernelError::check_whole_blocks(ty, bytes, ty.type_size(), "bytes")?;
    KernelError::check_len("f32 row", bytes / ty.type_size() * ty.block_size(), elems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_unknown_types_and_partial_blocks_are_refused() {
        let mut out = [0.0f32; 32];
        assert!(matches!(
            dequantize_row(GgmlType::NVFP4, &[0; 36], &mut [0.0; 64]),
            Err(KernelError::Unsupported { .. })
        ));
        assert!(matches!(
            quantize_row(GgmlType::Iq2Xxs, &[0.0; 256], &mut [0; 66]),
            Err(KernelError::Unsupported { .. })
        ));
        assert!(matches!(
            dequantize_row(GgmlType::Q8_0, &[0; 33], &mut out),
            Err(KernelError::PartialBlock { .. })
        ));
        assert!(matches!(
            dequantize_row(GgmlType::Q8_0, &[0; 34], &mut out[..31]),
            Err(KernelError::LengthMismatch { .. })
        ));
    }
}
