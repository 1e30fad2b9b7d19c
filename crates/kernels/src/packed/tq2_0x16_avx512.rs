//! AVX-512 kernel of [`BlockTq2_0x16`]: each group's codes are decoded once (`two_bits`)
//! and dotted with every token of the call, sixteen rows per instruction, into four
//! accumulators per token (one per code vector, so that no chain of multiply-adds waits on
//! another); the activations' sum is subtracted once per super-block.

use std::arch::x86_64::*;

use super::ROWS;
use super::byte_dot::broadcast_quad;
use super::fold_avx512::row_scales;
use super::tq2_0x16::BlockTq2_0x16;
use super::two_bits::GROUPS;
use super::two_bits_avx512::group_codes;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::prefetch_ahead;

super_block_dot_group!(BlockTq2_0x16, add_block);

super_block_adder!(fn add_block(d, x: &BlockTq2_0x16, tokens, acc) {
    prefetch_ahead(x);
    let mut sumi = [[_mm512_setzero_si512(); 4]; N];
    for g in 0..GROUPS {
        let codes = group_codes(&x.qs[g]);
        for (t, sumi) in sumi.iter_mut().enumerate() {
            let q = &tokens.block(t).qs[16 * g..16 * g + 16];
            for (k, sumi) in sumi.iter_mut().enumerate() {
                *sumi = d.dpbusd_7bit(*sumi, codes[k], broadcast_quad(q, k));
            }
        }
    }
    add_super_block(acc, &sumi, &x.d, |t| tokens.block(t));
});

/// Adds one super-block of sixteen rows to each token's accumulators: `(Σ code·a − Σa)·d_w·d_a`
/// (a ternary code is its value plus one), from the four partial sums of each token and the
/// rows' f16 scales `d`; `act(t)` is token `t`'s activation block (a closure, so that each
/// kernel has its own copy, which the compiler inlines). The float steps are the reference's:
/// a product, then a sum, no fused multiply-add.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn add_super_block<'a, const N: usize>(
    acc: &mut [__m512; N],
    sumi: &[[__m512i; 4]; N],
    d: &[u16; ROWS],
    act: impl Fn(usize) -> &'a BlockQ8K,
) {
    let dw = row_scales(d);
    for (t, (acc, &[s0, s1, s2, s3])) in acc.iter_mut().zip(sumi).enumerate() {
        let y = act(t);
        let a_sum: i32 = y.bsums.iter().map(|&s| s as i32).sum();
        let dot = _mm512_add_epi32(_mm512_add_epi32(s0, s1), _mm512_add_epi32(s2, s3));
        let sum = _mm512_cvtepi32_ps(_mm512_sub_epi32(dot, _mm512_set1_epi32(a_sum)));
        let d = _mm512_mul_ps(dw, _mm512_set1_ps(y.d));
        *acc = _mm512_add_ps(*acc, _mm512_mul_ps(sum, d));
    }
}
