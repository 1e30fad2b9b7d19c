//! AVX-512 VNNI TQ2_0 × Q8_K dot product: the whole super-block's codes in one 64-byte
//! register, each of the four bit pairs dotted with its 64 activations by one `vpdpbusd`
//! (codes 0..=3 as unsigned bytes), and the activations' sum subtracted once, which is
//! `Σ (q − 1) · a` exactly. A quarter of the AVX2 kernel's vector instructions for the codes
//! (one multiply-add for 64 values instead of a `vpmaddubsw`, `vpmaddwd` and add for 32), in a
//! format light enough (2 bits a value) for the arithmetic, not the memory, to bound it. The
//! float step is the reference's, so the result is bit-identical to it.

use std::arch::x86_64::*;

use super::BlockTq2_0;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::prefetch_ahead;

/// The 64 activations that one bit pair `l` of the 64 code bytes multiplies: values
/// `32l..32l + 32` (the first half's bytes) and `128 + 32l..128 + 32l + 32` (the second's).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn activations(y: &BlockQ8K, l: usize) -> __m512i {
    let (q8, _) = y.qs.as_chunks::<32>();
    // SAFETY: each load reads exactly the 32 bytes of one chunk; unaligned loads are allowed.
    let (lo, hi) = unsafe {
        (
            _mm256_loadu_si256(q8[l].as_ptr().cast()),
            _mm256_loadu_si256(q8[4 + l].as_ptr().cast()),
        )
    };
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

/// AVX-512 version of [`BlockTq2_0`]'s `vec_dot`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockTq2_0], a: &[BlockQ8K]) -> f32 {
    let m3 = _mm512_set1_epi8(3);
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        // SAFETY: reads exactly the 64 bytes of `qs`; unaligned loads are allowed.
        let bits = unsafe { _mm512_loadu_si512(x.qs.as_ptr().cast()) };
        let codes = [
            _mm512_and_si512(bits, m3),
            _mm512_and_si512(_mm512_srli_epi16::<2>(bits), m3),
            _mm512_and_si512(_mm512_srli_epi16::<4>(bits), m3),
            _mm512_and_si512(_mm512_srli_epi16::<6>(bits), m3),
        ];
        let zero = _mm512_setzero_si512();
        let even = _mm512_dpbusd_epi32(zero, codes[0], activations(y, 0));
        let odd = _mm512_dpbusd_epi32(zero, codes[1], activations(y, 1));
        let even = _mm512_dpbusd_epi32(even, codes[2], activations(y, 2));
        let odd = _mm512_dpbusd_epi32(odd, codes[3], activations(y, 3));
        let a_sum: i32 = y.bsums.iter().map(|&s| s as i32).sum();
        let sum = _mm512_reduce_add_epi32(_mm512_add_epi32(even, odd)) - a_sum;
        sumf += sum as f32 * (x.d.to_f32() * y.d);
    }
    sumf
}
