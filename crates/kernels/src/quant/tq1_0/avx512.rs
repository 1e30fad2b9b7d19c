//! AVX-512 VNNI TQ1_0 × Q8_K dot product: the 48 `qs` bytes and the four `qh` bytes (repeated
//! four times) in one 64-byte register, whose trits `n` are taken for all of them at once as the
//! AVX2 kernel takes them for 16 (each byte times `3ⁿ` modulo 256 in 16-bit lanes, the trit the
//! high half of `3 · q`) and dotted with their activations by one `vpdpbusd`; the activations'
//! sum is subtracted once, which is `Σ (trit − 1) · a` exactly.
//!
//! The `qh` bytes hold four trits, which the first pass takes (multipliers `1, 3, 9, 27`, one
//! per copy); the other passes multiply them by 0, whose trit is 0. Five passes of 64 bytes
//! replace the AVX2 kernel's sixteen of 16, each about as long: the trits cost about twelve
//! instructions per 16 values there, so this format (1.69 bits a value) is bound by that
//! arithmetic, not by memory. The float step is the reference's, so the result is bit-identical
//! to it.

use std::arch::x86_64::*;

use super::BlockTq1_0;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::prefetch_ahead;

/// The trits `n` of 64 bytes, with `pow` holding `3ⁿ` per byte.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn trits(x: __m512i, pow: __m512i) -> __m512i {
    let low = _mm512_set1_epi16(0xFF);
    let even = _mm512_mullo_epi16(_mm512_and_si512(x, low), _mm512_and_si512(pow, low));
    let odd = _mm512_mullo_epi16(_mm512_srli_epi16::<8>(x), _mm512_srli_epi16::<8>(pow));
    let third = _mm512_set1_epi16(768);
    let even = _mm512_mulhi_epu16(_mm512_and_si512(even, low), third);
    let odd = _mm512_mulhi_epu16(_mm512_and_si512(odd, low), third);
    _mm512_or_si512(even, _mm512_slli_epi16::<8>(odd))
}

/// AVX-512 version of [`BlockTq1_0`]'s `vec_dot`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockTq1_0], a: &[BlockQ8K]) -> f32 {
    // Pass `n`: `3ⁿ` for the 48 `qs` bytes; for the `qh` copies `1, 3, 9, 27` in the first pass
    // (byte `48 + 4k + j` is trit `k` of `qh[j]`), 0 after.
    let pow: [__m512i; 5] = [0u32, 1, 2, 3, 4].map(|n| {
        let p = 3i32.pow(n) * 0x0101_0101;
        let qh = |k: i32| {
            if n == 0 {
                3i32.pow(k as u32) * 0x0101_0101
            } else {
                0
            }
        };
        _mm512_set_epi32(
            qh(3),
            qh(2),
            qh(1),
            qh(0),
            p,
            p,
            p,
            p,
            p,
            p,
            p,
            p,
            p,
            p,
            p,
            p,
        )
    });
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        let mut bytes = [0u8; 64];
        bytes[..48].copy_from_slice(&x.qs);
        for copy in bytes[48..].chunks_exact_mut(4) {
            copy.copy_from_slice(&x.qh);
        }
        // SAFETY: reads exactly the 64 bytes of `bytes`; unaligned loads are allowed.
        let bytes = unsafe { _mm512_loadu_si512(bytes.as_ptr().cast()) };
        // SAFETY: reads the last 16 activations (dotted with the `qh` trits in every pass);
        // unaligned loads are allowed.
        let last = unsafe { _mm_loadu_si128(y.qs[240..].as_ptr().cast()) };
        let mut acc = _mm512_setzero_si512();
        for (n, &pow) in pow.iter().enumerate() {
            // SAFETY: reads the 32 activations `32n..32n + 32` and the 16 `160 + 16n..`;
            // unaligned loads are allowed.
            let (head, middle) = unsafe {
                (
                    _mm256_loadu_si256(y.qs[32 * n..32 * n + 32].as_ptr().cast()),
                    _mm_loadu_si128(y.qs[160 + 16 * n..176 + 16 * n].as_ptr().cast()),
                )
            };
            let act = _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(head),
                _mm256_set_m128i(last, middle),
            );
            acc = _mm512_dpbusd_epi32(acc, trits(bytes, pow), act);
        }
        let a_sum: i32 = y.bsums.iter().map(|&s| s as i32).sum();
        let sum = _mm512_reduce_add_epi32(acc) - a_sum;
        sumf += sum as f32 * (x.d.to_f32() * y.d);
    }
    sumf
}
