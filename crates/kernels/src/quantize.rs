//! Whole tensors from f32 to a block type, row by row in parallel: the offline quantizer behind
//! `rinfer quantize`, byte for byte what ggml's quantizer writes, without an importance matrix
//! ([`quantize_rows`]) and with one ([`quantize_rows_weighted`]).
//!
//! The quantizers that take importance weights are listed here rather than in the registry:
//! they are whole-row, offline functions that no kernel table needs, and a type may have one
//! without a plain quantizer (IQ2_XXS and IQ1_S cannot be quantized without weights).

use rayon::prelude::*;
use rinfer_formats::GgmlType;

use crate::error::KernelError;
use crate::quant::{
    QuantizeWeighted, QuantizeWeightedBytesFn, iq1_m, iq1_s, iq2_s, iq2_xs, iq2_xxs, iq3_s,
    iq3_xxs, iq4_nl, iq4_xs, q2_k, q3_k, q4_k, q5_k, q6_k, quantize_weighted_bytes, tq2_0,
};
use crate::registry;

/// ggml's quantizer of one type that takes importance weights, and whether it needs them.
#[derive(Clone, Copy)]
struct WeightedQuantizer {
    quantize: QuantizeWeightedBytesFn,
    needs_weights: bool,
}

impl WeightedQuantizer {
    const fn of<B: QuantizeWeighted>() -> Self {
        WeightedQuantizer {
            quantize: quantize_weighted_bytes::<B>,
            needs_weights: B::NEEDS_WEIGHTS,
        }
    }
}

/// The importance-weighted quantizer of `ty`, where rinfer has one.
fn weighted_quantizer(ty: GgmlType) -> Option<WeightedQuantizer> {
    Some(match ty {
        GgmlType::Q2K => WeightedQuantizer::of::<q2_k::BlockQ2K>(),
        GgmlType::Q3K => WeightedQuantizer::of::<q3_k::BlockQ3K>(),
        GgmlType::Q4K => WeightedQuantizer::of::<q4_k::BlockQ4K>(),
        GgmlType::Q5K => WeightedQuantizer::of::<q5_k::BlockQ5K>(),
        GgmlType::Q6K => WeightedQuantizer::of::<q6_k::BlockQ6K>(),
        GgmlType::Iq1S => WeightedQuantizer::of::<iq1_s::BlockIq1S>(),
        GgmlType::Iq1M => WeightedQuantizer::of::<iq1_m::BlockIq1M>(),
        GgmlType::Iq2Xxs => WeightedQuantizer::of::<iq2_xxs::BlockIq2Xxs>(),
        GgmlType::Iq2Xs => WeightedQuantizer::of::<iq2_xs::BlockIq2Xs>(),
        GgmlType::Iq2S => WeightedQuantizer::of::<iq2_s::BlockIq2S>(),
        GgmlType::Iq3Xxs => WeightedQuantizer::of::<iq3_xxs::BlockIq3Xxs>(),
        GgmlType::Iq3S => WeightedQuantizer::of::<iq3_s::BlockIq3S>(),
        GgmlType::Iq4Nl => WeightedQuantizer::of::<iq4_nl::BlockIq4Nl>(),
        GgmlType::Iq4Xs => WeightedQuantizer::of::<iq4_xs::BlockIq4Xs>(),
        GgmlType::TQ2_0 => WeightedQuantizer::of::<tq2_0::BlockTq2_0>(),
        _ => return None,
    })
}

/// Whether ggml's quantizer of `ty` ignores importance weights, so the plain quantizer writes
/// what `llama-quantize --imatrix` does.
fn ignores_weights(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::F32
            | GgmlType::F16
            | GgmlType::BF16
            | GgmlType::Q8_0
            | GgmlType::MXFP4
            | GgmlType::TQ1_0
            | GgmlType::TQ2_0
    )
}

/// Whether [`quantize_rows_weighted`] can write `ty`, with importance weights
/// (`with_weights`) or without.
///
/// ```
/// use rinfer_formats::GgmlType;
///
/// assert!(rinfer_kernels::can_quantize_weighted(GgmlType::Iq2Xxs, true));
/// assert!(!rinfer_kernels::can_quantize_weighted(GgmlType::Iq2Xxs, false));
/// assert!(rinfer_kernels::can_quantize_weighted(GgmlType::Q8_0, true));
/// ```
pub fn can_quantize_weighted(ty: GgmlType, with_weights: bool) -> bool {
    match weighted_quantizer(ty) {
        Some(q) => with_weights || !q.needs_weights,
        None => can_quantize(ty) && (!with_weights || ignores_weights(ty)),
    }
}

/// Whether ggml refuses to quantize `ty` without importance weights (IQ1_S, IQ2_XXS, …).
pub fn needs_weights(ty: GgmlType) -> bool {
    weighted_quantizer(ty).is_some_and(|q| q.needs_weights)
}

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
    let row_bytes = check_rows(ty, x, row_len, out)?;
    out.par_chunks_mut(row_bytes)
        .zip(x.par_chunks(row_len))
        // SAFETY: the quantizer was chosen for the instruction set this CPU was detected to have.
        .for_each(|(o, x)| unsafe { quantize(x, o) });
    Ok(())
}

/// [`quantize_rows`] as ggml's `ggml_quantize_chunk` does it, with the importance `weights` of
/// the row's columns (`weights.len() == row_len`) or without (`None`): bit for bit what
/// `llama-quantize` writes for a tensor with or without an importance-matrix entry.
///
/// # Errors
/// Those of [`quantize_rows`]; [`KernelError::Unsupported`] when `ty` has no quantizer that
/// takes weights (and ggml's would use them) or needs weights and got none, and
/// [`KernelError::LengthMismatch`] when `weights` is not one per column.
pub fn quantize_rows_weighted(
    ty: GgmlType,
    x: &[f32],
    row_len: usize,
    weights: Option<&[f32]>,
    out: &mut [u8],
) -> Result<(), KernelError> {
    let Some(q) = weighted_quantizer(ty) else {
        if weights.is_some() && !ignores_weights(ty) {
            return Err(KernelError::Unsupported {
                ty,
                op: "quantize with importance weights",
            });
        }
        return quantize_rows(ty, x, row_len, out);
    };
    if weights.is_none() {
        if q.needs_weights {
            return Err(KernelError::Unsupported {
                ty,
                op: "quantize without importance weights",
            });
        }
        if can_quantize(ty) {
            return quantize_rows(ty, x, row_len, out);
        }
    }
    let row_bytes = check_rows(ty, x, row_len, out)?;
    if let Some(w) = weights {
        KernelError::check_len("importance weights", row_len, w.len())?;
    }
    out.par_chunks_mut(row_bytes)
        .zip(x.par_chunks(row_len))
        .for_each(|(o, x)| (q.quantize)(x, weights, o));
    Ok(())
}

/// Checks that `x` is whole rows of `row_len` values, whole blocks of `ty`, and `out` their
/// quantized size; gives the bytes of a row.
fn check_rows(ty: GgmlType, x: &[f32], row_len: usize, out: &[u8]) -> Result<usize, KernelError> {
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
    KernelError::check_len("quantized rows", x.len() / row_len * row_bytes, out.len())?;
    Ok(row_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testing::spread_values;

    #[test]
    fn rows_quantize_as_each_row_alone() {
        let x = spread_values(4 * 256, 37, 101, 50.0, 7.0);
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
        let refusal = |e: KernelError| match e {
            KernelError::PartialBlock { .. } => "partial block",
            KernelError::LengthMismatch { .. } => "length mismatch",
            KernelError::Unsupported { .. } => "unsupported",
            _ => "another error",
        };
        for (ty, row_len, out_len, expected) in [
            (GgmlType::Q4K, 96, 0, "partial block"),
            (GgmlType::Q8_0, 64, 0, "partial block"),
            (GgmlType::Q8_0, 32, 34, "length mismatch"),
            (GgmlType::Iq2Xxs, 32, 0, "unsupported"),
        ] {
            let got = quantize_rows(ty, &x, row_len, &mut vec![0u8; out_len]).map_err(refusal);
            assert_eq!(got, Err(expected), "{ty} rows of {row_len}");
        }
    }
}
