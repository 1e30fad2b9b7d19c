//! AVX-512 (and AMX) kernels of [`BlockMxfp4x16`]: each block's nibbles are looked up in
//! the code table (offset by 128, so that they are `vpdpbusd`'s unsigned operand) as the other
//! four-bit formats' are (`nibbles_avx512`) and go through the kernels shared with Q5_0 and Q8_0
//! (`byte_codes_avx512`, `byte_codes_amx`).

use super::byte_codes_avx512::{ByteCodes, RowScales, max_code};
use super::mxfp4x16::BlockMxfp4x16;
use super::nibbles_avx512::codes;
use crate::quant::mxfp4::KVALUES;

impl ByteCodes for BlockMxfp4x16 {
    const OFFSET: i32 = 128;
    const MAX_CODE: u8 = max_code(&CODES);
    fn scales(&self) -> RowScales<'_> {
        RowScales::F32(&self.d)
    }
}

/// The byte code of each MXFP4 index: its value plus 128.
const CODES: [u8; 16] = {
    let mut codes = [0u8; 16];
    let mut n = 0;
    while n < 16 {
        codes[n] = (KVALUES[n] as i16 + 128) as u8;
        n += 1;
    }
    codes
};

byte_code_kernels!(BlockMxfp4x16, |x: &BlockMxfp4x16| codes(&x.qs, &CODES));
