//! AVX-512 kernel of [`BlockQ5_0x16`]: each block's codes are decoded to bytes once and go
//! through the kernel shared with Q8_0 (`byte_codes_avx512`).

use std::arch::x86_64::*;

use super::byte_codes_avx512::{ByteCodes, RowScales};
use super::code_bits_avx512::with_fifth_bits;
use super::q5_0x16::BlockQ5_0x16;

impl ByteCodes for BlockQ5_0x16 {
    const OFFSET: i32 = 16;
    const MAX_CODE: u8 = 31;
    fn scales(&self) -> RowScales<'_> {
        RowScales::F16(&self.d)
    }
}

byte_code_kernels!(BlockQ5_0x16, |x: &BlockQ5_0x16| codes(x));

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
    let mut low = [_mm512_setzero_si512(); 8];
    for (k, v) in v.iter().enumerate() {
        low[2 * k] = _mm512_and_si512(*v, m4);
        low[2 * k + 1] = _mm512_and_si512(_mm512_srli_epi16::<4>(*v), m4);
    }
    with_fifth_bits(low, h)
}
