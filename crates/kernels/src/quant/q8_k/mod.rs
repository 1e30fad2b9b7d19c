//! Q8_K: 256 values per super-block, signed 8-bit codes, an f32 scale and the sums of each
//! 16 codes. The activation format of the K-quants and IQ4_XS; never stored in files.

use bytemuck::Zeroable;
use rinfer_formats::{GgmlType, QK_K};

use super::util::{max_by_magnitude, nearest_int};
use super::{BlockFormat, Quantize};

#[cfg(target_arch = "x86_64")]
pub(crate) mod quantize_avx512;
#[cfg(test)]
mod tests;

block_struct! {
    /// One Q8_K super-block.
    BlockQ8K, 292 bytes {
        /// Scale.
        d: f32,
        /// Codes, in `-127..=127` when produced by [`Quantize::quantize`].
        qs: [i8; QK_K],
        /// Sum of each group of 16 codes.
        bsums: [i16; QK_K / 16],
    }
}

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
    #[cfg(target_arch = "x86_64")]
    const ROW_AVX512: Option<super::QuantizeRowFn<Self>> = Some(quantize_avx512::quantize_row);

    fn quantize(x: &[f32]) -> Self {
        let mut b = BlockQ8K::zeroed();
        let max = max_by_magnitude(x);
        if max == 0.0 {
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
}
