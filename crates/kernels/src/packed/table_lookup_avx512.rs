//! Grid lookups of the IQ1 kernels, whose grids (2048 entries) are too large for registers:
//! eight rows at a time, one scalar load per row, the 64-bit words then assembled in a vector.
//! On the Intel kind (Xeon, Cascade Lake class) this beat `vpgatherdq`: 2.3 GB/s on one thread
//! against 0.9 (`cargo xtask bench kernels IQ2_XXS`, when IQ2 still looked up this way).

use std::arch::x86_64::*;

/// `table[indices[k]]` in 64-bit lane `k`.
///
/// # Panics
/// If an index is outside `table`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn lookup_u64x8(table: &[u64], indices: __m256i) -> __m512i {
    let mut at = [0u32; 8];
    // SAFETY: writes exactly the 32 bytes of `at`; unaligned is allowed.
    unsafe { _mm256_storeu_si256(at.as_mut_ptr().cast(), indices) };
    let w = at.map(|i| table[i as usize] as i64);
    _mm512_set_epi64(w[7], w[6], w[5], w[4], w[3], w[2], w[1], w[0])
}
