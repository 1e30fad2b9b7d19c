//! Q4_1 and Q5_1, whose values are `d·q + m`, repacked sixteen rows at a time for AVX-512:
//! the scales and codes laid out as Q4_0's (`nibbles`) and Q5_0's (`q5_0x16`), plus each row's
//! f16 min.
//!
//! The arithmetic, which the SIMD kernel reproduces bit for bit (`byte_codes_reference`): per row
//! and block the exact integer `Σ q·a`, converted to f32, times `d_w · d_a`, added with one fused
//! multiply-add, then the activation sum `Σa` times `m_w · d_a` added with another, blocks in
//! order. The activations are quantized as Q8_0 (the codes and scale Q8_1 would have; its sum is
//! taken exactly as an integer instead of Q8_1's f16 `d·Σa`).

use super::ROWS;
use super::nibbles::BlockQ4_0x16;
use super::q5_0x16::BlockQ5_0x16;
use crate::quant::q4_0::BlockQ4_0;
use crate::quant::q4_1::BlockQ4_1;
use crate::quant::q5_0::BlockQ5_0;
use crate::quant::q5_1::BlockQ5_1;
use crate::quant::q8_0::BlockQ8_0;

/// Stamps out the packed block `$packed` of the format with mins `$source`: its scales and
/// codes packed as `$codes_packed` packs those of `$codes` (the block of `$source`'s scale and
/// the fields given, code `n` here standing for `n`), plus each row's f16 min; and what the
/// scalar reference reads of it (`byte_codes_reference`, tests only).
macro_rules! min_format {
    (
        $(#[$doc:meta])*
        $packed:ident: $source:ty, codes $codes_packed:ty, $codes:ident { $($field:ident),* }
    ) => {
        packed_format! {
            $(#[$doc])*
            $packed: $source => BlockQ8_0 {
                /// Scales and codes, as the format without mins packs them.
                q: $codes_packed,
                /// Each row's f16 min (bits).
                m: [u16; ROWS],
            }
            fn pack_row(&mut self, i, block) {
                let codes = $codes {
                    d: block.d,
                    $($field: block.$field,)*
                };
                self.q.pack_row(i, &codes);
                self.m[i] = block.m.to_bits();
            }
        }

        #[cfg(test)]
        impl super::byte_codes_reference::ByteCodeRows for $packed {
            const CODE_OFFSET: i32 = 0;

            fn code(&self, i: usize, j: usize) -> i32 {
                self.q.code(i, j)
            }

            fn scale(&self, i: usize) -> f32 {
                half::f16::from_bits(self.q.d[i]).to_f32()
            }

            fn min(&self, i: usize) -> Option<f32> {
                Some(half::f16::from_bits(self.m[i]).to_f32())
            }
        }
    };
}

min_format!(
    /// One Q4_1 block of sixteen rows.
    BlockQ4_1x16: BlockQ4_1, codes BlockQ4_0x16, BlockQ4_0 { qs }
);

min_format!(
    /// One Q5_1 block of sixteen rows.
    BlockQ5_1x16: BlockQ5_1, codes BlockQ5_0x16, BlockQ5_0 { qh, qs }
);
