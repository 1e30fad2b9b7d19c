//! TQ1_0: ternary weights (BitNet b1.58, TriLMs), 256-value super-blocks at 1.69 bits per
//! value. Five trits are packed per byte as a fixed-point fraction of 3⁵ (`qs`, then four per
//! byte in `qh`); trit `n` of byte `q` is `⌊3 · (q · 3ⁿ mod 256) / 256⌋`, and the value is
//! `d · (trit − 1)`.
//!
//! Value order (ggml's): the first 32 bytes give values `32n + m` (trit `n` of byte `m`), the
//! next 16 values `160 + 16n + m`, and the four `qh` bytes values `240 + 4n + j`.
//!
//! The dot product against Q8_K is ggml's: an integer sum per super-block times `d_w · d_a`.

use half::f16;
use rinfer_formats::QK_K;

use super::q8_k::BlockQ8K;
use super::ternary::Ternary;

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

block_struct! {
    /// One TQ1_0 super-block.
    BlockTq1_0, 54 bytes {
        /// Five trits per byte.
        qs: [u8; (QK_K - 4 * QK_K / 64) / 5],
        /// Four trits per byte.
        qh: [u8; QK_K / 64],
        /// Super-block scale.
        d: f16,
    }
}

/// `3ⁿ` for the trits of a byte.
pub(crate) const POW3: [u8; 5] = [1, 3, 9, 27, 81];

/// Trit `n` of byte `q`, minus one: −1, 0 or 1.
#[inline]
pub(crate) fn trit(q: u8, n: usize) -> i8 {
    ((q.wrapping_mul(POW3[n]) as u16 * 3) >> 8) as i8 - 1
}

impl Ternary for BlockTq1_0 {
    fn d(&self) -> f16 {
        self.d
    }

    /// The 256 values `trit − 1`, in order.
    fn values(&self) -> [i8; QK_K] {
        let mut out = [0i8; QK_K];
        let (head, tail) = out.split_at_mut(160);
        let (middle, last) = tail.split_at_mut(80);
        for n in 0..5 {
            for (o, &q) in head[32 * n..32 * n + 32].iter_mut().zip(&self.qs[..32]) {
                *o = trit(q, n);
            }
            for (o, &q) in middle[16 * n..16 * n + 16].iter_mut().zip(&self.qs[32..]) {
                *o = trit(q, n);
            }
        }
        for (n, o) in last.chunks_exact_mut(4).enumerate() {
            for (o, &q) in o.iter_mut().zip(&self.qh) {
                *o = trit(q, n);
            }
        }
        out
    }
}

family_reference!(BlockTq1_0: TQ1_0, QK_K, ternary, BlockQ8K);
