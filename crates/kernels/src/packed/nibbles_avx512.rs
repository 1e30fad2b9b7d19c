//! AVX-512 (and AMX) kernels of the packed four-bit formats [`BlockQ4_0x16`] and
//! [`BlockIq4Nlx16`]: each block's indices are split into nibbles, looked up as byte codes
//! (`vpshufb` over the format's sixteen codes) and go through the kernels shared with Q5_0 and
//! Q8_0 (`byte_codes_avx512`, `byte_codes_amx`).

use std::arch::x86_64::*;

use super::byte_codes_avx512::{ByteCodes, RowScales, max_code};
use super::nibbles::{BlockIq4Nlx16, BlockQ4_0x16};

/// Stamps out the kernels of one packed four-bit format.
macro_rules! nibble_kernels {
    ($packed:ty) => {
        impl ByteCodes for $packed {
            const OFFSET: i32 = <$packed>::OFFSET;
            const MAX_CODE: u8 = max_code(&<$packed>::CODES);
            fn scales(&self) -> RowScales<'_> {
                RowScales::F16(&self.d)
            }
        }

        byte_code_kernels!($packed, |x: &$packed| codes(&x.qs, &<$packed>::CODES));
    };
}

nibble_kernels!(BlockQ4_0x16);
nibble_kernels!(BlockIq4Nlx16);

/// The eight vectors of byte codes of one packed block: vector `g` gives each row its codes
/// `4g..4g + 4`, each index looked up in `table`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn codes(qs: &[[u8; 64]; 4], table: &[u8; 16]) -> [__m512i; 8] {
    let m4 = _mm512_set1_epi8(0xF);
    // SAFETY: reads exactly the 16 bytes of `table`; unaligned is allowed.
    let table = _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(table.as_ptr().cast()) });
    // SAFETY: each load reads exactly the 64 bytes of one array of `qs`; unaligned is allowed.
    let v = qs.map(|q| unsafe { _mm512_loadu_si512(q.as_ptr().cast()) });
    let low = |x: __m512i| _mm512_shuffle_epi8(table, _mm512_and_si512(x, m4));
    let high =
        |x: __m512i| _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16::<4>(x), m4));
    [
        low(v[0]),
        high(v[0]),
        low(v[1]),
        high(v[1]),
        low(v[2]),
        high(v[2]),
        low(v[3]),
        high(v[3]),
    ]
}
