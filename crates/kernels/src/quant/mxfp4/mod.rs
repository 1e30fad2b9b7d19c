//! MXFP4 (OCP microscaling FP4): 32 values per block, 4-bit E2M1 codes and one shared E8M0
//! exponent: `x = KVALUES[q] * 2^(e - 128)`. Codes are packed as in Q4_0.

use rinfer_formats::GgmlType;

use super::q8_0::BlockQ8_0;
use super::util::{pack_split_nibbles, scale_codes, split_nibbles};
use super::{BlockFormat, Quantize, VecDot, sum_blocks};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

/// The 16 code values of MXFP4: E2M1 doubled (ggml's `kvalues_mxfp4`), so that the block's
/// scale is half the E8M0 one.
pub const KVALUES: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

block_struct! {
    /// One MXFP4 block.
    BlockMxfp4, 17 bytes {
        /// Shared exponent (E8M0).
        e: u8,
        /// Packed codes: value `j` in the low nibble of `qs[j]`, value `j + 16` in the high.
        qs: [u8; 16],
    }
}

/// `2^(e - 128)`, half the E8M0 scale `2^(e - 127)`, exactly (ggml's
/// `GGML_E8M0_TO_FP32_HALF`: subnormal for `e < 2`).
#[inline]
pub fn e8m0_to_f32_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        (e as u32 - 1) << 23
    };
    f32::from_bits(bits)
}

impl BlockFormat for BlockMxfp4 {
    const TYPE: GgmlType = GgmlType::MXFP4;
    const ELEMS: usize = 32;

    fn dequantize(&self, out: &mut [f32]) {
        let codes = split_nibbles(&self.qs).map(|q| KVALUES[q as usize] as i32);
        scale_codes(e8m0_to_f32_half(self.e), codes, out);
    }
}

impl Quantize for BlockMxfp4 {
    /// ggml's `quantize_row_mxfp4_ref`: the exponent puts the largest magnitude in the top
    /// binade of the codes (`floor(log2(amax)) − 2`), and each value takes the code nearest it
    /// (the first of equally near ones).
    fn quantize(x: &[f32]) -> Self {
        let amax = x
            .iter()
            .fold(0.0f32, |m, v| if m < v.abs() { v.abs() } else { m });
        let e = if amax > 0.0 {
            (amax.log2().floor() - 2.0 + 127.0).clamp(0.0, 255.0) as u8
        } else {
            0
        };
        let d = e8m0_to_f32_half(e);
        let nearest = |v: f32| {
            let err = |i: usize| (KVALUES[i] as f32 * d - v).abs();
            (1..16).fold(0, |best, i| if err(i) < err(best) { i } else { best }) as u8
        };
        let l: [u8; 32] = std::array::from_fn(|j| nearest(x[j]));
        let mut qs = [0u8; 16];
        pack_split_nibbles(&l, &mut qs);
        BlockMxfp4 { e, qs }
    }
}

impl VecDot for BlockMxfp4 {
    type Activation = BlockQ8_0;

    fn vec_dot(w: &[Self], a: &[BlockQ8_0]) -> f32 {
        sum_blocks(w, a, |x, y| {
            y.scaled_dot(
                e8m0_to_f32_half(x.e),
                split_nibbles(&x.qs).map(|q| KVALUES[q as usize] as i32),
            )
        })
    }
}
