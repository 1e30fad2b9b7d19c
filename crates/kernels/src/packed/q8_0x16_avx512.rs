//! AVX-512 kernel of [`BlockQ8_0x16`]: its codes are loaded as they are and go through the
//! kernel shared with Q5_0 (`byte_codes_avx512`).

use std::arch::x86_64::*;

use super::byte_codes_avx512::{ByteCodes, RowScales};
use super::q8_0x16::BlockQ8_0x16;

impl ByteCodes for BlockQ8_0x16 {
    const OFFSET: i32 = 128;
    const MAX_CODE: u8 = 255;
    fn scales(&self) -> RowScales<'_> {
        RowScales::F16(&self.d)
    }
}

byte_code_kernels!(BlockQ8_0x16, |x: &BlockQ8_0x16| codes(x));

/// The eight vectors of codes (plus 128) of one packed block: vector `g` gives each row its
/// codes `4g..4g + 4`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn codes(x: &BlockQ8_0x16) -> [__m512i; 8] {
    // SAFETY: each load reads exactly the 64 bytes of one array of `x`; unaligned is allowed.
    x.qs.map(|q| unsafe { _mm512_loadu_si512(q.as_ptr().cast()) })
}
