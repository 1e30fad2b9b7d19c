//! TQ2_0: ternary weights at 2.06 bits per value, 256-value super-blocks of 2-bit codes `q`
//! (0..=3; 3 is never written) and an f16 scale: `x = d · (q − 1)`. Byte `j + k` of each half
//! (`j` = 0 or 32) holds the codes of values `4j + 32l + k` at bits `2l`.
//!
//! The dot product against Q8_K is ggml's: an integer sum per super-block times `d_a · d_w`.

use bytemuck::{Pod, Zeroable};
use half::f16;
use rinfer_formats::{GgmlType, QK_K};

use super::q8_k::BlockQ8K;
use super::{BlockFormat, VecDot};

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

/// One TQ2_0 super-block.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockTq2_0 {
    /// Four 2-bit codes per byte.
    pub qs: [u8; QK_K / 4],
    /// Super-block scale.
    pub d: f16,
}

const _: () = assert!(size_of::<BlockTq2_0>() == 66);

impl BlockTq2_0 {
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

impl BlockFormat for BlockTq2_0 {
    const TYPE: GgmlType = GgmlType::TQ2_0;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (o, &v) in out.iter_mut().zip(&self.values()) {
            *o = v as f32 * d;
        }
    }
}

impl VecDot for BlockTq2_0 {
    type Activation = BlockQ8K;

    fn vec_dot(w: &[Self], a: &[BlockQ8K]) -> f32 {
        let mut sumf = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let sum: i32 = x
                .values()
                .iter()
                .zip(&y.qs)
                .map(|(&v, &q)| v as i32 * q as i32)
                .sum();
            sumf += sum as f32 * (y.d * x.d.to_f32());
        }
        sumf
    }
}
