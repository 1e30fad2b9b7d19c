//! Q4_1 and Q5_1, whose values are `d·q + m`, repacked sixteen rows at a time for AVX-512:
//! the scales and codes laid out as Q4_0's (`nibbles`) and Q5_0's (`q5_0x16`), plus each row's
//! f16 min.
//!
//! The arithmetic, which the SIMD kernel reproduces bit for bit (`byte_codes_reference`): per row
//! and block the exact integer `Σ q·a`, converted to f32, times `d_w · d_a`, added with one fused
//! multiply-add, then the activation sum `Σa` times `m_w · d_a` added with another, blocks in
//! order. The activations are quantized as Q8_0 (the codes and scale Q8_1 would have; its sum is
//! taken exactly as an integer instead of Q8_1's f16 `d·Σa`).

use bytemuck::{Pod, Zeroable};

use super::nibbles::BlockQ4_0x16;
use super::q5_0x16::BlockQ5_0x16;
use super::{PackedFormat, ROWS};
#[cfg(test)]
use crate::operands::BlockSummary;
use crate::quant::q4_0::BlockQ4_0;
use crate::quant::q4_1::BlockQ4_1;
use crate::quant::q5_0::BlockQ5_0;
use crate::quant::q5_1::BlockQ5_1;
use crate::quant::q8_0::BlockQ8_0;

/// One Q4_1 block of sixteen rows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub(crate) struct BlockQ4_1x16 {
    /// Scales and codes, as Q4_0 packs them (code `n` here stands for `n`).
    pub(crate) q: BlockQ4_0x16,
    /// Each row's f16 min (bits).
    pub(crate) m: [u16; ROWS],
}

impl PackedFormat for BlockQ4_1x16 {
    type Source = BlockQ4_1;
    type Act = BlockQ8_0;
    fn pack_row(&mut self, i: usize, block: &BlockQ4_1) {
        let codes = BlockQ4_0 {
            d: block.d,
            qs: block.qs,
        };
        self.q.pack_row(i, &codes);
        self.m[i] = block.m.to_bits();
    }
}

/// One Q5_1 block of sixteen rows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub(crate) struct BlockQ5_1x16 {
    /// Scales and codes, as Q5_0 packs them (code `n` here stands for `n`).
    pub(crate) q: BlockQ5_0x16,
    /// Each row's f16 min (bits).
    pub(crate) m: [u16; ROWS],
}

impl PackedFormat for BlockQ5_1x16 {
    type Source = BlockQ5_1;
    type Act = BlockQ8_0;
    fn pack_row(&mut self, i: usize, block: &BlockQ5_1) {
        let codes = BlockQ5_0 {
            d: block.d,
            qh: block.qh,
            qs: block.qs,
        };
        self.q.pack_row(i, &codes);
        self.m[i] = block.m.to_bits();
    }
}

/// Stamps out the test-only packer and scalar reference of a format above.
#[cfg(test)]
macro_rules! min_format_reference {
    ($packed:ty, $source:ty) => {
        impl $packed {
            /// Scalar reference, see `byte_codes_reference`.
            pub(crate) fn dot_group(
                w: &[Self],
                a: &[BlockQ8_0],
                s: &[BlockSummary],
                out: &mut [[f32; ROWS]],
            ) {
                let f16 = |bits: u16| half::f16::from_bits(bits).to_f32();
                super::byte_codes_reference::dot_group_with_mins(
                    w,
                    a,
                    s,
                    out,
                    0,
                    |x: &Self, i, j| x.q.code(i, j),
                    |x: &Self, i| f16(x.q.d[i]),
                    Some(|x: &Self, i: usize| f16(x.m[i])),
                );
            }
        }
    };
}

#[cfg(test)]
min_format_reference!(BlockQ4_1x16, BlockQ4_1);
#[cfg(test)]
min_format_reference!(BlockQ5_1x16, BlockQ5_1);
