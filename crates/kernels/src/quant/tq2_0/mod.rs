//! TQ2_0: ternary weights at 2.06 bits per value, 256-value super-blocks of 2-bit codes `q`
//! (0..=3; 3 is never written) and an f16 scale: `x = d · (q − 1)`. Byte `j + k` of each half
//! (`j` = 0 or 32) holds the codes of values `4j + 32l + k` at bits `2l`.
//!
//! The dot product against Q8_K is ggml's: an integer sum per super-block times `d_a · d_w`.

use half::f16;
use rinfer_formats::QK_K;

use super::q8_k::BlockQ8K;
use super::ternary::Ternary;

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

mod quantize;

#[cfg(test)]
mod tests;

block_struct! {
    /// One TQ2_0 super-block.
    BlockTq2_0, 66 bytes {
        /// Four 2-bit codes per byte.
        qs: [u8; QK_K / 4],
        /// Super-block scale.
        d: f16,
    }
}

impl Ternary for BlockTq2_0 {
    fn d(&self) -> f16 {
        self.d
    }

    /// The 256 values `q − 1`, in order.
    fn values(&self) -> [i8; QK_K] {
        let mut out = [0i8; QK_K];
        for j in [0, 32] {
            for l in 0..4 {
                for k in 0..32 {
                    out[4 * j + 32 * l + k] = ((self.qs[j + k] >> (2 * l)) & 3) as i8 - 1;
                }
            }
        }
        out
    }
}

family_reference!(BlockTq2_0: TQ2_0, QK_K, ternary, BlockQ8K);
