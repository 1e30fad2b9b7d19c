//! Whole tensors from f32 to a block type, row by row in parallel: the offline quantizer behind
//! `rinfer quantize`, byte for byte what ggml's quantizer writes without an importance matrix.

use rayon::prelude::*;
use rinfer_formats::GgmlType;

use crate::error::KernelError;
use crate::registry;

/// Whether [`quantize_rows`] can write `ty`.
///
/// ```
/// use rinfer_formats::GgmlType;
///
/// assert!(rinfer_kernels::can_quantize(GgmlType::Q4K));
/// assert!(!rinfer_kernels::can_quantize(GgmlType::Iq2Xxs));
/// ```
pub fn can_quantize(ty: GgmlType) -> bool {
    registry::traits(ty).is_some_and(|t| t.quantize.is_some())
}

/// Encodes `x`, rows of `row_len` values each, as rows of `ty` into `out`, spreading the rows
/// over the rayon pool. Rows are independent, so the bytes do not depend on the thread count.
///
/// # Errors
/// [`KernelError::Unsupported`] when `ty` has no quantizer, [`KernelError::PartialBlock`] when
/// `row_len` is not a whole number of blocks (or `x` not a whole number of rows), and
/// [`KernelError::LengthMismatch`] when `out` is not exactly the quantized size.
///
/// ```
/// use rinfer_formats::GgmlType;
///
/// let x: Vec<f32> = (0..64).map(|i| i as f32 / 8.0).collect();
/// let mut q = vec![0u8; 2 * 34];
/// rinfer_kernels::quantize_rows(GgmlType::Q8_0, &x, 32, &mut q)?;
/// let mut row = vec![0u8; 34];
/// rinfer_kernels::quantize_row(GgmlType::Q8_0, &x[32..], &mut row)?;
/// assert_eq!(&q[34..], &row[..]);
/// # Ok::<(), rinfer_kernels::KernelError>(())
/// ```
pub fn quantize_rows(
    ty: GgmlType,
    x: &[f32],
    row_len: usize,
    out: &mut [u8],
) -> Result<(), KernelError> {
    let quantize = registry::traits(ty)
        .and_then(|t| t.quantizer(crate::cpu::detected()))
        .ok_or(KernelError::Unsupported { ty, op: "quantize" })?;
    let partial = |len| KernelError::PartialBlock {
        ty,
        len,
        unit: "elements",
    };
    if row_len == 0 || !row_len.is_multiple_of(ty.block_size()) {
        return Err(partial(row_len));
    }
    if !x.len().is_multiple_of(row_len) {
        return Err(partial(x.len()));
    }
    let row_bytes = row_len / ty.block_size() * ty.type_size();
    let expected = x.len() / row_len * row_bytes;
    if out.len() != expected {
        return Err(KernelError::LengthMismatch {
            what: "quantized rows",
            expected,
            actual: out.len(),
        });
    }
    out.par_chunks_mut(row_bytes)
        .zip(x.par_chunks(row_len))
        // SAFETY: the quantizer was chosen for the instruction set this CPU was detected to have.
        .for_each(|(o, x)| unsafe { quantize(x, o) });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_quantize_as_each_row_alone() {
        let x: Vec<f32> = (0..4 * 256)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        for ty in [
            GgmlType::Q4_0,
            GgmlType::Q2K,
            GgmlType::Q6K,
            GgmlType::Iq4Xs,
        ] {
            let row_bytes = 256 / ty.block_size() * ty.type_size();
            let mut all = vec![0u8; 4 * row_bytes];
            quantize_rows(ty, &x, 256, &mut all).unwrap();
            for (r, chunk) in all.chunks_exact(row_bytes).enumerate() {
                let mut one = vec![0u8; row_bytes];
                crate::quantize_row(ty, &x[256 * r..256 * (r + 1)], &mut one).unwrap();
                assert_eq!(chunk, &one[..], "{ty} row {r}");
            }
        }
    }

    #[test]
    fn partial_rows_and_unknown_types_are_refused() {
        let x = [0.0f32; 96];
        assert!(matches!(
            quantize_rows(GgmlType::Q4K, &x, 96, &mut [0u8; 0]),
            Err(KernelError::PartialBlock { .. })
        ));
        assert!(matches!(
            quantize_rows(GgmlType::Q8_0, &x, 64, &mut [0u8; 0]),
            Err(KernelError::PartialBlock { .. })
        ));
        assert!(matches!(
            quantize_rows(GgmlType::Q8_0, &x, 32, &mut [0u8; 34]),
            Err(KernelError::LengthMismatch { .. })
        ));
        assert!(matches!(
            quantize_rows(GgmlType::Iq2Xxs, &x, 32, &mut [0u8; 0]),
            Err(KernelError::Unsupported { .. })
        ));
    }
}
