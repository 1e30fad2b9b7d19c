//! Q4_0 and IQ4_NL repacked sixteen rows at a time for AVX-512: a 32-value block of
//! four-bit codes and one f16 scale per row, laid out as Q5_0's low four bits (`q5_0x16`).
//!
//! The arithmetic, which the SIMD kernel reproduces bit for bit: each four-bit index becomes an
//! unsigned byte code `c` (Q4_0: the index, which stands for `index − 8`; IQ4_NL: the table
//! value plus 128); per row and block the exact integer `Σ c·a − offset·Σa`, converted to f32,
//! times `d_w · d_a`, added to the running sum with one fused multiply-add, blocks in order.

use crate::quant::iq4_nl::{BlockIq4Nl, KVALUES};
use crate::quant::q4_0::BlockQ4_0;
use crate::quant::q8_0::BlockQ8_0;

/// Stamps out the packed block `$packed` of the four-bit format `$source`, whose index `n`
/// has the byte code `$code(n)` (at most 255) standing for `$code(n) − $offset`, and what the
/// scalar reference reads of it (`byte_codes_reference`, tests only).
macro_rules! nibble_format {
    ($(#[$doc:meta])* $packed:ident, $source:ty, offset $offset:expr, code $code:expr) => {
        packed_format! {
            $(#[$doc])*
            $packed: $source => BlockQ8_0, scale d {
                /// In vector `k`, byte `4i + j` holds row `i`'s index `8k + j` in its low
                /// nibble and index `8k + 4 + j` in its high nibble.
                qs: [[u8; 64]; 4],
            }
            fn pack_row(&mut self, i, block) {
                pack_indices(&block.qs, i, &mut self.qs);
            }
        }

        impl $packed {
            /// How far the byte codes lie above the values they stand for.
            pub(crate) const OFFSET: i32 = $offset;

            /// The byte code of each four-bit index.
            pub(crate) const CODES: [u8; 16] = {
                let mut codes = [0u8; 16];
                let mut n = 0;
                while n < 16 {
                    codes[n] = $code(n);
                    n += 1;
                }
                codes
            };
        }

        #[cfg(test)]
        impl super::byte_codes_reference::ByteCodeRows for $packed {
            const CODE_OFFSET: i32 = $offset;

            fn code(&self, i: usize, j: usize) -> i32 {
                let (g, jj) = (j / 4, j % 4);
                let index = (self.qs[g / 2][4 * i + jj] >> (4 * (g % 2))) & 0xF;
                Self::CODES[index as usize] as i32
            }

            fn scale(&self, i: usize) -> f32 {
                half::f16::from_bits(self.d[i]).to_f32()
            }
        }
    };
}

nibble_format!(
    /// One Q4_0 block of sixteen rows: index `n` stands for `n − 8`.
    BlockQ4_0x16, BlockQ4_0, offset 8, code q4_0_code
);

const fn q4_0_code(index: usize) -> u8 {
    index as u8
}

nibble_format!(
    /// One IQ4_NL block of sixteen rows: index `n` stands for the table value `KVALUES[n]`,
    /// coded as that plus 128.
    BlockIq4Nlx16, BlockIq4Nl, offset 128, code iq4_nl_code
);

const fn iq4_nl_code(index: usize) -> u8 {
    (KVALUES[index] as i16 + 128) as u8
}

/// Places the 32 four-bit indices of one source block (`qs[j]`: index `j` low, `j + 16` high)
/// as row `i` of the packed vectors: vector `k` takes indices `8k..8k + 4` (low nibbles) and
/// `8k + 4..8k + 8` (high), four bytes at a time.
pub(super) fn pack_indices(qs: &[u8; 16], i: usize, out: &mut [[u8; 64]; 4]) {
    const LOW: u32 = 0x0F0F_0F0F;
    let word = |at: usize| u32::from_le_bytes([qs[at], qs[at + 1], qs[at + 2], qs[at + 3]]);
    for (k, v) in out.iter_mut().enumerate() {
        let (a, b) = (word(8 * (k % 2)), word(8 * (k % 2) + 4));
        let packed = if k < 2 {
            (a & LOW) | (b & LOW) << 4
        } else {
            (a >> 4 & LOW) | (b & !LOW)
        };
        v[4 * i..4 * i + 4].copy_from_slice(&packed.to_le_bytes());
    }
}
