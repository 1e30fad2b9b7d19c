//! AVX-512 pieces shared by the packed two-bit formats (`two_bits`): decoding a group's
//! codes and dotting them with a token's sixteen activation codes.

use std::arch::x86_64::*;

use super::byte_dot::ByteDot;

/// The four code vectors of one group (`0..4`): vector `k` gives each row its codes
/// `4k..4k + 4`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn group_codes(group: &[u8; 64]) -> [__m512i; 4] {
    let m2 = _mm512_set1_epi8(3);
    // SAFETY: reads exactly the 64 bytes of one group; unaligned is allowed.
    let bits = unsafe { _mm512_loadu_si512(group.as_ptr().cast()) };
    [
        _mm512_and_si512(bits, m2),
        _mm512_and_si512(_mm512_srli_epi16::<2>(bits), m2),
        _mm512_and_si512(_mm512_srli_epi16::<4>(bits), m2),
        _mm512_and_si512(_mm512_srli_epi16::<6>(bits), m2),
    ]
}

/// `sc · Σ c·a` of one group for sixteen rows: `codes` from [`group_codes`] (or wider codes in
/// the same layout, each at most `max_code`, below 128), `q` the group's sixteen activation
/// codes, `sc` the rows' scales from [`ByteDot::lane_scales`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn scaled_group_dot(
    d: impl ByteDot,
    max_code: u8,
    codes: &[__m512i; 4],
    q: &[i8],
    sc: __m512i,
) -> __m512i {
    let quad = |k: usize| {
        let q = &q[4 * k..4 * k + 4];
        _mm512_set1_epi32(i32::from_le_bytes([
            q[0] as u8, q[1] as u8, q[2] as u8, q[3] as u8,
        ]))
    };
    d.scaled_dot_7bit(max_code, *codes, std::array::from_fn(quad), sc)
}
