//! AVX-512 kernel of [`BlockQ5_0x16`]: each block's codes are decoded to bytes once and go
//! through the kernel shared with Q8_0 (`byte_codes_avx512`).

use std::arch::x86_64::*;

use super::byte_codes_avx512::{ByteCodes, RowScales};
use super::q5_0x16::BlockQ5_0x16;

impl ByteCodes for BlockQ5_0x16 {
    const OFFSET: i32 = 16;
    const MAX_CODE: u8 = 31;
    fn scales(&self) -> RowScales<'_> {
        RowScales::F16(&self.d)
    }
}

byte_code_kernels!(BlockQ5_0x16, |x: &BlockQ5_0x16| codes(x));

/// `low | (fifth & 0x10)`, bytewise.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn with_fifth_bit(low: __m512i, fifth: __m512i) -> __m512i {
    // Truth table of A | (B & C) with A = 0xF0, B = 0xCC, C = 0xAA.
    _mm512_ternarylogic_epi32::<0xF8>(low, fifth, _mm512_set1_epi8(0x10))
}

/// The eight vectors of codes (`0..32`) of one packed block: vector `g` gives each row its
/// codes `4g..4g + 4`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn codes(x: &BlockQ5_0x16) -> [__m512i; 8] {
    let m4 = _mm512_set1_epi8(0xF);
    // SAFETY: each load reads exactly the 64 bytes of one array of `x`; unaligned is allowed.
    let (v, h) = unsafe {
        (
            x.qs.map(|q| _mm512_loadu_si512(q.as_ptr().cast())),
            _mm512_loadu_si512(x.qh.as_ptr().cast()),
        )
    };
    // Bit g of each fifth-bit byte is moved to bit 4 (16-bit shifts: the neighbouring byte's
    // bits only land outside bit 4).
    [
        with_fifth_bit(_mm512_and_si512(v[0], m4), _mm512_slli_epi16::<4>(h)),
        with_fifth_bit(
            _mm512_and_si512(_mm512_srli_epi16::<4>(v[0]), m4),
            _mm512_slli_epi16::<3>(h),
        ),
        with_fifth_bit(_mm512_and_si512(v[1], m4), _mm512_slli_epi16::<2>(h)),
        with_fifth_bit(
            _mm512_and_si512(_mm512_srli_epi16::<4>(v[1]), m4),
            _mm512_slli_epi16::<1>(h),
        ),
        with_fifth_bit(_mm512_and_si512(v[2], m4), h),
        with_fifth_bit(
            _mm512_and_si512(_mm512_srli_epi16::<4>(v[2]), m4),
            _mm512_srli_epi16::<1>(h),
        ),
        with_fifth_bit(_mm512_and_si512(v[3], m4), _mm512_srli_epi16::<2>(h)),
        with_fifth_bit(
            _mm512_and_si512(_mm512_srli_epi16::<4>(v[3]), m4),
            _mm512_srli_epi16::<3>(h),
        ),
    ]
}
