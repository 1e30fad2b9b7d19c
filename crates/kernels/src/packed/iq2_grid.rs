//! The packed layout the IQ2 grid formats (IQ2_XXS, IQ2_XS, IQ2_S) share, sixteen rows at a
//! time for AVX-512, with its scalar reference.
//!
//! Per group of eight values (32 per super-block), each row's grid index and sign byte, the
//! bytes of the sixteen rows side by side: two groups' index bytes are one lookup's 32
//! indices, and eight rows' sign bytes one 64-bit sign mask (bit `8r + j` negates value `j` of
//! row `r`). The sign
//! bytes are complete (IQ2_XXS and IQ2_XS store seven bits and an even parity; the packer
//! writes the eighth). The grid index keeps its low eight bits in that byte; IQ2_XS (nine bits)
//! and IQ2_S (ten) keep the rest in a byte per row and run of groups (`HIGH_BITS` bits per
//! group, group `n·G + k` at bits `HIGH_BITS·k`, `G = 8 / HIGH_BITS`). The 4-bit scale levels
//! are nibbles, runs `j` and `j + RUNS/2` in one byte per row; the f16 scales are the rows'.
//! The packed size is the source's plus the sign bytes' eighth bits (IQ2_XXS: 70 bytes per row
//! and super-block for 66, IQ2_XS: 78 for 74, IQ2_S: 82 for 82).
//!
//! The arithmetic, which the SIMD kernel reproduces bit for bit, is the row-major reference's
//! (`signed_grid::vec_dot`): per row and super-block the exact integer
//! `S = Σ_r (2l_r + 1) · Σ g·a` over the scale runs `r` (signed grid values `g`, activation
//! codes `a`), then `acc = acc + (d_w · d_a) · S` with the products and the sum rounded apart,
//! super-blocks in order, and at the end `acc · 1/8`. So a packed product gives each row the
//! bits the reference dot product gives it.

use super::{PackedFormat, ROWS};
#[cfg(test)]
use crate::operands::BlockSummary;
use crate::quant::q8_k::BlockQ8K;

/// Eight-value groups of a 256-value super-block.
pub(crate) const GROUPS: usize = 32;

packed_struct! {
    /// The grid indices' low bytes and the sign bytes of one super-block of sixteen rows.
    GridGroups {
        /// `low[g][i]`: the low eight bits of row `i`'s grid index of group `g`.
        low: [[u8; ROWS]; GROUPS],
        /// `signs[g][i]`: row `i`'s signs of group `g` (bit `j` set: value `j` negated).
        signs: [[u8; ROWS]; GROUPS],
    }
}

impl GridGroups {
    /// Stores row `i`'s grid index (its low byte) and sign byte of group `g`.
    pub(crate) fn set(&mut self, i: usize, g: usize, index: usize, signs: u8) {
        self.low[g][i] = index as u8;
        self.signs[g][i] = signs;
    }
}

/// A packed IQ2 layout: what the shared kernel and reference read of it.
pub(crate) trait GridRows: PackedFormat<Act = BlockQ8K> {
    /// The grid the indices select from (ggml's words, byte `j` is coordinate `j`; the
    /// reference reads it).
    #[cfg(test)]
    const GRID: &'static [u64];
    /// Scale runs per super-block: 8 (32 values each) or 16 (16 values each).
    const RUNS: usize;
    /// Bits of a grid index above its low byte: 0, 1 or 2.
    const HIGH_BITS: usize;
    /// The factor the dot product's sum is multiplied by at the end.
    const DOT_FACTOR: f32;
    /// The grid two bits a coordinate (coordinate `j` at bits `2j`, indexing 8, 25, 43): 256,
    /// 512 or 1024 entries, which the kernel holds in registers.
    const PACKED_GRID: &'static [u16];

    /// Each row's f16 super-block scale (bits).
    fn d(&self) -> &[u16; ROWS];
    /// `levels[j][i]`: row `i`'s levels of runs `j` (low nibble) and `j + RUNS/2` (high).
    fn levels(&self) -> &[[u8; ROWS]];
    /// `high[n][i]`: row `i`'s high index bits of the groups of run `n` of groups (see the
    /// module doc); empty where indices are bytes.
    fn high(&self) -> &[[u8; ROWS]];
    /// The low index bytes and the sign bytes.
    fn groups(&self) -> &GridGroups;

    /// Row `i`'s grid index of group `g`.
    #[cfg(test)]
    fn index(&self, i: usize, g: usize) -> usize {
        let low = self.groups().low[g][i] as usize;
        let Some(per_byte) = 8usize.checked_div(Self::HIGH_BITS) else {
            return low;
        };
        let byte = self.high()[g / per_byte][i] as usize;
        let high = (byte >> (Self::HIGH_BITS * (g % per_byte))) & ((1 << Self::HIGH_BITS) - 1);
        low | high << 8
    }

    /// Row `i`'s signed values of group `g`.
    #[cfg(test)]
    fn group(&self, i: usize, g: usize) -> [i8; 8] {
        let entry = Self::GRID[self.index(i, g)];
        crate::quant::iq_grids::signed8(entry, self.groups().signs[g][i])
    }

    /// Row `i`'s scale level of run `r`.
    #[cfg(test)]
    fn level(&self, i: usize, r: usize) -> u8 {
        let half = Self::RUNS / 2;
        self.levels()[r % half][i] >> (4 * (r / half)) & 0xF
    }
}

/// Declares a packed IQ2 format in this layout ([`packed_format!`] against Q8_K activations,
/// with the f16 scales `d`) and its [`GridRows`]: the struct's levels, high index bits and
/// groups for `$runs` scale runs and `$high_bits` bits of each grid index above its low byte,
/// the grid `$grid` (words; the reference reads it) and `$packed_grid` (two bits a
/// coordinate), and the `pack_row` given, which fills all but the scales.
macro_rules! grid_rows {
    (
        $(#[$meta:meta])*
        $packed:ident: $source:ty $(, extra row bytes $extra:literal)?,
            runs $runs:expr, high bits $high_bits:expr,
            grid $grid:path, packed grid $packed_grid:path;
        fn pack_row(&mut $self:ident, $i:ident, $block:ident) { $($pack_row:tt)* }
    ) => {
        packed_format! {
            $(#[$meta])*
            $packed: $source => $crate::quant::q8_k::BlockQ8K, scale d
                $(, extra row bytes $extra)? {
                /// `levels[j][i]`: row `i`'s levels of runs `j` (low nibble) and `j + RUNS/2`
                /// (high).
                levels: [[u8; $crate::packed::ROWS]; $runs / 2],
                /// `high[n][i]`: row `i`'s high index bits of the groups of run `n` of groups
                /// (see `iq2_grid`); empty where indices are bytes.
                high: [
                    [u8; $crate::packed::ROWS];
                    $crate::packed::iq2_grid::GROUPS * $high_bits / 8
                ],
                /// The grid indices' low bytes and the sign bytes.
                groups: $crate::packed::iq2_grid::GridGroups,
            }
            fn pack_row(&mut $self, $i, $block) { $($pack_row)* }
        }

        impl $crate::packed::iq2_grid::GridRows for $packed {
            #[cfg(test)]
            const GRID: &'static [u64] = &$grid;
            const RUNS: usize = $runs;
            const HIGH_BITS: usize = $high_bits;
            const DOT_FACTOR: f32 = <$source as $crate::quant::signed_grid::SignedGrid>::DOT_FACTOR;
            const PACKED_GRID: &'static [u16] = &$packed_grid;

            fn d(&self) -> &[u16; $crate::packed::ROWS] {
                &self.d
            }
            fn levels(&self) -> &[[u8; $crate::packed::ROWS]] {
                &self.levels
            }
            fn high(&self) -> &[[u8; $crate::packed::ROWS]] {
                &self.high
            }
            fn groups(&self) -> &$crate::packed::iq2_grid::GridGroups {
                &self.groups
            }
        }
    };
}

pub(super) use grid_rows;

/// Stores row `i`'s level `level` of run `r` of a layout with `runs` scale runs.
pub(crate) fn set_level(levels: &mut [[u8; ROWS]], runs: usize, i: usize, r: usize, level: u8) {
    let half = runs / 2;
    levels[r % half][i] |= (level & 0xF) << (4 * (r / half));
}

/// Stores the bits of row `i`'s grid index `index` of group `g` above its low byte, `bits` of
/// them.
pub(crate) fn set_high(high: &mut [[u8; ROWS]], bits: usize, i: usize, g: usize, index: usize) {
    let per_byte = 8 / bits;
    high[g / per_byte][i] |= ((index >> 8) as u8 & ((1 << bits) - 1)) << (bits * (g % per_byte));
}

/// Scalar reference (tests only): the sixteen rows of `w` (one row group, `nb` super-blocks)
/// against each of the `out.len()` tokens of `a` (`nb` Q8_K blocks each).
#[cfg(test)]
pub(crate) fn dot_group<P: GridRows>(
    w: &[P],
    a: &[BlockQ8K],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    let groups_per_run = GROUPS / P::RUNS;
    super::reference::dot_group(w, a, s, out, |acc, i, x, y, _| {
        let mut bsum = 0i32;
        for r in 0..P::RUNS {
            let mut sumi = 0i32;
            for g in groups_per_run * r..groups_per_run * (r + 1) {
                let q = &y.qs[8 * g..8 * g + 8];
                let values = x.group(i, g).into_iter().zip(q);
                sumi += values.map(|(v, &q)| v as i32 * q as i32).sum::<i32>();
            }
            bsum += sumi * (2 * x.level(i, r) as i32 + 1);
        }
        let d = half::f16::from_bits(x.d()[i]).to_f32() * y.d;
        acc + d * bsum as f32
    });
    for o in out.iter_mut().flatten() {
        *o *= P::DOT_FACTOR;
    }
}
