//! AVX-512 VNNI (and AMX) kernels of the packed formats with a min per row, [`BlockQ4_1x16`] and
//! [`BlockQ5_1x16`]: their codes decode as Q4_0's and Q5_0's do, and go through the byte-code
//! kernels (`byte_codes_avx512`, `byte_codes_amx`) with offset zero and the mins added.

use super::byte_codes_avx512::{self, ByteCodes, RowScales};
use super::min_formats::{BlockQ4_1x16, BlockQ5_1x16};
use super::nibbles::BlockQ4_0x16;
use super::{PackedMatrix, ROWS, Release, byte_codes_amx, nibbles_avx512, q5_0x16_avx512};
use crate::cpu::Isa;
use crate::operands::{BlockSummary, WeightMatrix};
use crate::quant::q8_0::BlockQ8_0;

/// Stamps out the kernels and packer of one format with mins, whose codes `$codes` decodes.
macro_rules! min_format_kernels {
    ($packed:ty, $codes:expr, $dot:ident, $dot_amx:ident, $pack:ident) => {
        impl ByteCodes for $packed {
            const OFFSET: i32 = 0;
            fn scales(&self) -> RowScales<'_> {
                RowScales::F16(&self.q.d)
            }
            fn mins(&self) -> Option<RowScales<'_>> {
                Some(RowScales::F16(&self.m))
            }
        }

        /// The AVX-512 kernel of this format; bit-identical to its scalar reference.
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        pub(crate) fn $dot(
            w: &[$packed],
            a: &[BlockQ8_0],
            s: &[BlockSummary],
            out: &mut [[f32; ROWS]],
        ) {
            byte_codes_avx512::dot_group(w, a, s, out, $codes);
        }

        /// The AVX-512 kernel on the AMX tile unit where a call has tokens enough.
        ///
        /// # Safety
        /// The CPU must support [`Isa::Amx`].
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        pub(crate) unsafe fn $dot_amx(
            w: &[$packed],
            a: &[BlockQ8_0],
            s: &[BlockSummary],
            out: &mut [[f32; ROWS]],
        ) {
            // SAFETY: the caller checked AMX.
            unsafe { byte_codes_amx::dot_group(w, a, s, out, $codes) };
        }

        /// Packs `w` for the AMX kernel where `isa` includes AMX, else for the AVX-512 one: the
        /// registry's entry for this layout.
        ///
        /// # Safety
        /// The CPU must support AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C, and everything
        /// `isa` includes.
        pub(crate) unsafe fn $pack(
            w: &WeightMatrix<'_>,
            release: Release<'_>,
            isa: Isa,
        ) -> PackedMatrix {
            if isa >= Isa::Amx {
                PackedMatrix::pack_with::<$packed>(w, $dot_amx, release)
            } else {
                PackedMatrix::pack_with::<$packed>(w, $dot, release)
            }
        }
    };
}

min_format_kernels!(
    BlockQ4_1x16,
    |x: &BlockQ4_1x16| nibbles_avx512::codes(&x.q.qs, &BlockQ4_0x16::CODES),
    dot_group_q4_1,
    dot_group_q4_1_amx,
    pack_q4_1
);
min_format_kernels!(
    BlockQ5_1x16,
    |x: &BlockQ5_1x16| q5_0x16_avx512::codes(&x.q),
    dot_group_q5_1,
    dot_group_q5_1_amx,
    pack_q5_1
);
