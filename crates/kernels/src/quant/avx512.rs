//! AVX-512 building blocks shared by the per-type `avx512` kernels.
//!
//! Every function requires AVX-512 F, BW, VL and VNNI plus AVX2, FMA and F16C; they are only
//! reached from kernels that the dispatch table selects after detecting those features.

use std::arch::x86_64::*;

use half::f16;

/// Loads 64 bytes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn load_u8x64(b: &[u8; 64]) -> __m512i {
    // SAFETY: reads exactly the 64 bytes `b` borrows; unaligned loads are allowed.
    unsafe { _mm512_loadu_si512(b.as_ptr().cast()) }
}

/// Loads 64 signed bytes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn load_i8x64(b: &[i8; 64]) -> __m512i {
    // SAFETY: reads exactly the 64 bytes `b` borrows; unaligned loads are allowed.
    unsafe { _mm512_loadu_si512(b.as_ptr().cast()) }
}

/// Loads two 32-byte rows into the low and high halves of one register.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn load_i8x32_pair(lo: &[i8; 32], hi: &[i8; 32]) -> __m512i {
    // SAFETY: reads exactly the 32 bytes each of `lo` and `hi` borrow; unaligned loads are
    // allowed.
    unsafe {
        let lo = _mm256_loadu_si256(lo.as_ptr().cast());
        let hi = _mm256_loadu_si256(hi.as_ptr().cast());
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
    }
}

/// The products `a0 * b0` and `a1 * b1` of four f16 scales, each broadcast to 8 lanes: lanes
/// 0..8 hold the first, 8..16 the second (the scales of two 32-value blocks side by side).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn f16_products_2x8(a0: f16, b0: f16, a1: f16, b1: f16) -> __m512 {
    let bits = a0.to_bits() as u64
        | (a1.to_bits() as u64) << 16
        | (b0.to_bits() as u64) << 32
        | (b1.to_bits() as u64) << 48;
    // [a0, a1, b0, b1] -> [a0 * b0, a1 * b1, ..]
    let v = _mm_cvtph_ps(_mm_cvtsi64_si128(bits as i64));
    let d = _mm_mul_ps(v, _mm_movehl_ps(v, v));
    let index = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm512_permutexvar_ps(index, _mm512_castps128_ps512(d))
}
