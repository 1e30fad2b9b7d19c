//! The summaries packed kernels read beside each quantized activation block: the block's f32
//! scale and the code sum of each of its 32-value groups.

use crate::operands::BlockSummary;
use crate::quant::Quantize;
use crate::quant::q8_0::BlockQ8_0;
use crate::quant::q8_k::BlockQ8K;

/// An activation format of the packed kernels, with the summaries they read beside a block.
pub(crate) trait Summarized: Quantize {
    /// The summaries of this block's 32-value groups, into `out`.
    fn summarize(&self, out: &mut [BlockSummary]);
}

impl Summarized for BlockQ8_0 {
    fn summarize(&self, out: &mut [BlockSummary]) {
        out[0] = q8_0(self);
    }
}

impl Summarized for BlockQ8K {
    fn summarize(&self, out: &mut [BlockSummary]) {
        q8_k(self, out);
    }
}

/// The summary of one Q8_0 block.
fn q8_0(block: &BlockQ8_0) -> BlockSummary {
    BlockSummary {
        d: block.d.to_f32(),
        sum: block.qs.iter().map(|&q| q as i32).sum(),
    }
}

/// The summaries of the eight 32-value sub-blocks of a Q8_K block: its scale and each
/// sub-block's code sum (from the block's sums of 16).
fn q8_k(block: &BlockQ8K, out: &mut [BlockSummary]) {
    for (j, out) in out.iter_mut().enumerate().take(8) {
        *out = BlockSummary {
            d: block.d,
            sum: block.bsums[2 * j] as i32 + block.bsums[2 * j + 1] as i32,
        };
    }
}
