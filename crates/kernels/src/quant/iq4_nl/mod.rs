//! IQ4_NL: 32 values per block, 4-bit indices into a fixed non-linear table and one f16 scale:
//! `x = d * KVALUES[q]`. Codes are packed as in Q4_0.

use half::f16;
use rinfer_formats::GgmlType;

use super::q8_0::BlockQ8_0;
use super::util::{scale_codes, split_nibbles};
use super::{BlockFormat, VecDot, sum_blocks};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

mod quantize;
#[cfg(test)]
mod tests;

pub use super::iq4_codes::KVALUES;

block_struct! {
    /// One IQ4_NL block.
    BlockIq4Nl, 18 bytes {
        /// Scale.
        d: f16,
        /// Packed table indices.
        qs: [u8; 16],
    }
}

impl BlockFormat for BlockIq4Nl {
    const TYPE: GgmlType = GgmlType::Iq4Nl;
    const ELEMS: usize = 32;

    fn dequantize(&self, out: &mut [f32]) {
        let codes = split_nibbles(&self.qs).map(|q| KVALUES[q as usize] as i32);
        scale_codes(self.d.to_f32(), codes, out);
    }
}

impl VecDot for BlockIq4Nl {
    type Activation = BlockQ8_0;

    fn vec_dot(w: &[Self], a: &[BlockQ8_0]) -> f32 {
        sum_blocks(w, a, |x, y| {
            y.scaled_dot(
                x.d.to_f32(),
                split_nibbles(&x.qs).map(|q| KVALUES[q as usize] as i32),
            )
        })
    }
}
