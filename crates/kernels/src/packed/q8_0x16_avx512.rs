//! AVX-512 VNNI kernel of [`BlockQ8_0x16`]: its codes are loaded as they are and go through the
//! kernel shared with Q5_0 (`byte_codes_avx512`).

use std::arch::x86_64::*;

use super::byte_codes_amx;
use super::byte_codes_avx512::{self, ByteCodes, RowScales};
use super::q8_0x16::BlockQ8_0x16;
use super::{PackedMatrix, ROWS, Release};
use crate::cpu::Isa;
use crate::operands::{BlockSummary, WeightMatrix};
use crate::quant::q8_0::BlockQ8_0;

impl ByteCodes for BlockQ8_0x16 {
    const OFFSET: i32 = 128;
    fn scales(&self) -> RowScales<'_> {
        RowScales::F16(&self.d)
    }
}

/// AVX-512 version of [`super::q8_0x16::dot_group`]; bit-identical to it.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn dot_group(
    w: &[BlockQ8_0x16],
    a: &[BlockQ8_0],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    byte_codes_avx512::dot_group(w, a, s, out, |x| codes(x));
}

/// [`dot_group`] on the AMX tile unit where a call has tokens enough; bit-identical to it.
///
/// # Safety
/// The CPU must support [`Isa::Amx`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn dot_group_amx(
    w: &[BlockQ8_0x16],
    a: &[BlockQ8_0],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    // SAFETY: the caller checked AMX.
    unsafe { byte_codes_amx::dot_group(w, a, s, out, |x| codes(x)) };
}

/// Packs `w` for [`dot_group_amx`] where `isa` includes AMX, else for [`dot_group`]: the registry's
/// entry for this layout.
///
/// # Safety
/// The CPU must support AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C: products of the
/// returned matrix run [`dot_group`] (or [`dot_group_amx`], where `isa` includes [`Isa::Amx`]).
pub(crate) unsafe fn pack(w: &WeightMatrix<'_>, release: Release<'_>, isa: Isa) -> PackedMatrix {
    if isa >= Isa::Amx {
        PackedMatrix::pack_with::<BlockQ8_0x16>(w, dot_group_amx, release)
    } else {
        PackedMatrix::pack_with::<BlockQ8_0x16>(w, dot_group, release)
    }
}

/// The eight vectors of codes (plus 128) of one packed block: vector `g` gives each row its
/// codes `4g..4g + 4`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn codes(x: &BlockQ8_0x16) -> [__m512i; 8] {
    // SAFETY: each load reads exactly the 64 bytes of one array of `x`; unaligned is allowed.
    x.qs.map(|q| unsafe { _mm512_loadu_si512(q.as_ptr().cast()) })
}
