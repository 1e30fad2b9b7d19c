//! AVX-512 (and AMX) kernels of the packed formats with a min per row, [`BlockQ4_1x16`] and
//! [`BlockQ5_1x16`]: their codes decode as Q4_0's and Q5_0's do, and go through the byte-code
//! kernels (`byte_codes_avx512`, `byte_codes_amx`) with offset zero and the mins added.

use super::byte_codes_avx512::{ByteCodes, RowScales};
use super::min_formats::{BlockQ4_1x16, BlockQ5_1x16};
use super::nibbles::BlockQ4_0x16;
use super::{nibbles_avx512, q5_0x16_avx512};

/// Stamps out the kernels of one format with mins, whose codes (at most `$max`) `$codes`
/// decodes.
macro_rules! min_format_kernels {
    ($packed:ty, $max:expr, $codes:expr) => {
        impl ByteCodes for $packed {
            const OFFSET: i32 = 0;
            const MAX_CODE: u8 = $max;
            fn scales(&self) -> RowScales<'_> {
                RowScales::F16(&self.q.d)
            }
            fn mins(&self) -> Option<RowScales<'_>> {
                Some(RowScales::F16(&self.m))
            }
        }

        byte_code_kernels!($packed, $codes);
    };
}

min_format_kernels!(BlockQ4_1x16, 15, |x: &BlockQ4_1x16| {
    nibbles_avx512::codes(&x.q.qs, &BlockQ4_0x16::CODES)
});
min_format_kernels!(BlockQ5_1x16, 31, |x: &BlockQ5_1x16| q5_0x16_avx512::codes(
    &x.q
));
