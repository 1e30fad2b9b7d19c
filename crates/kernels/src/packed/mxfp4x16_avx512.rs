//! AVX-512 VNNI (and AMX) kernels of [`BlockMxfp4x16`]: each block's nibbles are looked up in
//! the code table (offset by 128, so that they are `vpdpbusd`'s unsigned operand) as the other
//! four-bit formats' are (`nibbles_avx512`) and go through the kernels shared with Q5_0 and Q8_0
//! (`byte_codes_avx512`, `byte_codes_amx`).

use super::byte_codes_avx512::{self, ByteCodes, RowScales};
use super::mxfp4x16::BlockMxfp4x16;
use super::nibbles_avx512::codes;
use super::{PackedMatrix, ROWS, Release, byte_codes_amx};
use crate::cpu::Isa;
use crate::operands::{BlockSummary, WeightMatrix};
use crate::quant::mxfp4::KVALUES;
use crate::quant::q8_0::BlockQ8_0;

impl ByteCodes for BlockMxfp4x16 {
    const OFFSET: i32 = 128;
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

/// AVX-512 version of [`super::mxfp4x16::dot_group`]; bit-identical to it.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn dot_group(
    w: &[BlockMxfp4x16],
    a: &[BlockQ8_0],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    byte_codes_avx512::dot_group(w, a, s, out, |x| codes(&x.qs, &CODES));
}

/// [`dot_group`] on the AMX tile unit where a call has tokens enough; bit-identical to it.
///
/// # Safety
/// The CPU must support [`Isa::Amx`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn dot_group_amx(
    w: &[BlockMxfp4x16],
    a: &[BlockQ8_0],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    // SAFETY: the caller checked AMX.
    unsafe { byte_codes_amx::dot_group(w, a, s, out, |x| codes(&x.qs, &CODES)) };
}

/// Packs `w` for [`dot_group_amx`] where `isa` includes AMX, else for [`dot_group`]: the registry's
/// entry for this layout.
///
/// # Safety
/// The CPU must support AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C, and everything
/// `isa` includes.
pub(crate) unsafe fn pack(w: &WeightMatrix<'_>, release: Release<'_>, isa: Isa) -> PackedMatrix {
    if isa >= Isa::Amx {
        PackedMatrix::pack_with::<BlockMxfp4x16>(w, dot_group_amx, release)
    } else {
        PackedMatrix::pack_with::<BlockMxfp4x16>(w, dot_group, release)
    }
}
