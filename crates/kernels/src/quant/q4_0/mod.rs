//! Q4_0: 32 values per block, 4-bit codes and one f16 scale: `x = d * (q - 8)`.

use half::f16;
use rinfer_formats::GgmlType;

use super::q8_0::BlockQ8_0;
use super::util::{centred_code, pack_split_nibbles, scale_codes, split_nibbles};
use super::{BlockFormat, Quantize, VecDot, sum_blocks};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

block_struct! {
    /// One Q4_0 block: element `j` in the low nibble of `qs[j]`, element `j + 16` in the high one.
    BlockQ4_0, 18 bytes {
        /// Scale.
        d: f16,
        /// Packed codes.
        qs: [u8; 16],
    }
}

impl BlockFormat for BlockQ4_0 {
    const TYPE: GgmlType = GgmlType::Q4_0;
    const ELEMS: usize = 32;

    fn dequantize(&self, out: &mut [f32]) {
        let codes = split_nibbles(&self.qs).map(|q| q as i32 - 8);
        scale_codes(self.d.to_f32(), codes, out);
    }
}

impl Quantize for BlockQ4_0 {
    fn quantize(x: &[f32]) -> Self {
        let (d, code) = centred_code(x, 8);
        let l: [u8; 32] = std::array::from_fn(|j| code(x[j]) as u8);
        let mut qs = [0u8; 16];
        pack_split_nibbles(&l, &mut qs);
        BlockQ4_0 {
            d: f16::from_f32(d),
            qs,
        }
    }
}

impl VecDot for BlockQ4_0 {
    type Activation = BlockQ8_0;

    fn vec_dot(w: &[Self], a: &[BlockQ8_0]) -> f32 {
        sum_blocks(w, a, |x, y| {
            y.scaled_dot(x.d.to_f32(), split_nibbles(&x.qs).map(|q| q as i32 - 8))
        })
    }
}
