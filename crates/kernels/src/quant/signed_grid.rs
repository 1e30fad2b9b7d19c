//! What the grid formats IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S share: a 256-value
//! super-block is an f16 scale `d` times 32 groups of eight signed grid coordinates, and each
//! run of groups (16 or 32 values) has a small integer scale.
//!
//! The reference dot product against Q8_K is ggml's for all of them: per scale run the exact
//! integer sum of the group products times the run's integer multiplier, one float multiply-add
//! per super-block, and the format's constant factor at the end. The formats differ only in
//! how a group and a scale are stored, which [`SignedGrid`] reads.

use half::f16;

use super::q8_k::BlockQ8K;
use super::sum_blocks;

/// A super-block of 32 signed eight-value grid groups.
pub(crate) trait SignedGrid {
    /// Groups that share one scale (2: 16 values, 4: 32 values).
    const GROUPS_PER_SCALE: usize;
    /// The factor of the values' scale `d · (0.5 + l) · VALUE_FACTOR` of a run at level `l`.
    const VALUE_FACTOR: f32;
    /// The factor the dot product's sum is multiplied by at the end: half the value factor,
    /// as the dot's integer multiplier `2l + 1` is twice the values' `0.5 + l`.
    const DOT_FACTOR: f32 = Self::VALUE_FACTOR / 2.0;

    /// Super-block scale.
    fn d(&self) -> f16;
    /// Group `g` (eight values, 0..32), signed.
    fn group(&self, g: usize) -> [i8; 8];
    /// The 4-bit scale level `l` of scale run `s`.
    fn level(&self, s: usize) -> u8;

    /// The integer multiplier `2l + 1` of scale run `s` in the dot product.
    #[inline]
    fn multiplier(&self, s: usize) -> i32 {
        2 * self.level(s) as i32 + 1
    }
}

/// The reference dequantizer of a [`SignedGrid`] block.
pub(crate) fn dequantize<B: SignedGrid>(b: &B, out: &mut [f32]) {
    let d = b.d().to_f32();
    for (g, o) in out.chunks_exact_mut(8).enumerate() {
        let db = d * (0.5 + b.level(g / B::GROUPS_PER_SCALE) as f32) * B::VALUE_FACTOR;
        // `db · (−g)` is `−(db · g)` exactly: the sign may go with the magnitude.
        for (o, &v) in o.iter_mut().zip(&b.group(g)) {
            *o = db * v as f32;
        }
    }
}

/// The reference dot product of [`SignedGrid`] blocks with Q8_K activations.
pub(crate) fn vec_dot<B: SignedGrid>(w: &[B], a: &[BlockQ8K]) -> f32 {
    let sumf = sum_blocks(w, a, |x, y| {
        let d = x.d().to_f32() * y.d;
        let mut bsum = 0i32;
        for (s, q8) in y.qs.chunks_exact(8 * B::GROUPS_PER_SCALE).enumerate() {
            let mut sumi = 0i32;
            for (k, q8) in q8.chunks_exact(8).enumerate() {
                let g = x.group(B::GROUPS_PER_SCALE * s + k);
                sumi += g
                    .iter()
                    .zip(q8)
                    .map(|(&g, &q)| g as i32 * q as i32)
                    .sum::<i32>();
            }
            bsum += sumi * x.multiplier(s);
        }
        d * bsum as f32
    });
    B::DOT_FACTOR * sumf
}
