//! Q8_K: 256 values per super-block, signed 8-bit codes, an f32 scale and the sums of each
//! 16 codes. The activation format of the K-quants and IQ4_XS; never stored in files.

use std::sync::OnceLock;

use bytemuck::{Pod, Zeroable};
use rinfer_formats::{GgmlType, QK_K};

use super::util::nearest_int;
use super::{BlockFormat, Quantize};

#[cfg(target_arch = "x86_64")]
pub(crate) mod quantize_avx512;
#[cfg(test)]
mod tests;

/// A row quantizer of whole blocks.
///
/// `unsafe` because SIMD entries need the instruction set they were selected for.
type QuantizeRowFn = unsafe fn(&[f32], &mut [BlockQ8K]);

/// The row quantizer of this CPU, chosen on first use.
fn row_quantizer() -> QuantizeRowFn {
    static QUANTIZER: OnceLock<QuantizeRowFn> = OnceLock::new();
    *QUANTIZER.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::detected() >= crate::cpu::Isa::Avx512 {
            return quantize_avx512::quantize_row;
        }
        quantize_row_reference
    })
}

/// The scalar row quantizer: [`Quantize::quantize`] block by block.
fn quantize_row_reference(x: &[f32], out: &mut [BlockQ8K]) {
    for (b, x) in out.iter_mut().zip(x.chunks_exact(QK_K)) {
        *b = BlockQ8K::quantize(x);
    }
}

/// One Q8_K super-block.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ8K {
    /// Scale.
    pub d: f32,
    /// Codes, in `-127..=127` when produced by [`Quantize::quantize`].
    pub qs: [i8; QK_K],
    /// Sum of each group of 16 codes.
    pub bsums: [i16; QK_K / 16],
}

const _: () = assert!(size_of::<BlockQ8K>() == 292);

impl BlockFormat for BlockQ8K {
    const TYPE: GgmlType = GgmlType::Q8K;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, out: &mut [f32]) {
        for (o, &q) in out.iter_mut().zip(&self.qs) {
            *o = self.d * q as f32;
        }
    }
}

impl Quantize for BlockQ8K {
    fn quantize(x: &[f32]) -> Self {
        let mut b = BlockQ8K::zeroed();
        let (mut max, mut amax) = (0.0f32, 0.0f32);
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            return b;
        }
        let iscale = -127.0 / max;
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, g) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
            *s = g.iter().map(|&q| q as i16).sum();
        }
        b.d = 1.0 / iscale;
        b
    }

    fn quantize_row(x: &[f32], out: &mut [Self]) {
        assert_eq!(x.len(), out.len() * QK_K, "whole blocks of values");
        // SAFETY: the quantizer was chosen for this CPU's detected instruction set.
        unsafe { row_quantizer()(x, out) }
    }
}
