//! AVX-512 VNNI kernel of [`BlockMxfp4x16`]: each block's nibbles are looked up in the code table
//! (offset by 128, so that they are `vpdpbusd`'s unsigned operand) and go through the kernel
//! shared with Q5_0 and Q8_0 (`byte_codes_avx512`).

use std::arch::x86_64::*;

use super::byte_codes_avx512::{self, ByteCodes, RowScales};
use super::mxfp4x16::BlockMxfp4x16;
use super::{PackedMatrix, ROWS, Release};
use crate::operands::{BlockSummary, WeightMatrix};
use crate::quant::mxfp4::KVALUES;
use crate::quant::q8_0::BlockQ8_0;

impl ByteCodes for BlockMxfp4x16 {
    const OFFSET: i32 = 128;
    fn scales(&self) -> RowScales<'_> {
        RowScales::F32(&self.d)
    }
}

/// AVX-512 version of [`super::mxfp4x16::dot_group`]; bit-identical to it.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn dot_group(
    w: &[BlockMxfp4x16],
    a: &[BlockQ8_0],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    let table = KVALUES.map(|k| (k as i32 + 128) as u8);
    // SAFETY: reads exactly the 16 bytes of the table; unaligned is allowed.
    let table = _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(table.as_ptr().cast()) });
    byte_codes_avx512::dot_group(w, a, s, out, |x| codes(table, x));
}

/// Packs `w` for [`dot_group`]: the registry's entry for this layout.
///
/// # Safety
/// The CPU must support AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C: products of the
/// returned matrix run [`dot_group`].
pub(crate) unsafe fn pack(w: &WeightMatrix<'_>, release: Release<'_>) -> PackedMatrix {
    PackedMatrix::pack_with::<BlockMxfp4x16>(w, dot_group, release)
}

/// The eight vectors of code values (plus 128) of one packed block: vector `g` gives each row
/// its codes `4g..4g + 4`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn codes(table: __m512i, x: &BlockMxfp4x16) -> [__m512i; 8] {
    let low = _mm512_set1_epi8(0xF);
    let mut out = [_mm512_setzero_si512(); 8];
    for (h, q) in x.qs.iter().enumerate() {
        // SAFETY: reads exactly the 64 bytes of one array of `x`; unaligned is allowed.
        let v = unsafe { _mm512_loadu_si512(q.as_ptr().cast()) };
        let lo = _mm512_and_si512(v, low);
        let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(v), low);
        out[2 * h] = _mm512_shuffle_epi8(table, lo);
        out[2 * h + 1] = _mm512_shuffle_epi8(table, hi);
    }
    out
}
