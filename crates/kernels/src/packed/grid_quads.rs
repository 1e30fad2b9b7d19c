//! The layout IQ3_XXS and IQ3_S share when packed sixteen rows at a time for AVX-512:
//! formats whose 256-value super-blocks are 64 groups of four values, each group an index
//! into a grid of `u32` words (byte `c` is coordinate `c`, a magnitude below 64), each value
//! with a sign bit, and each 32-value sub-block a 4-bit level `l` (multiplier `2l + 1`).
//!
//! Per group `q` the sixteen rows' indices lie side by side (one lookup finds the grid entries
//! of all sixteen, row `i` in 32-bit lane `i`) and their 64 sign bits make one `u64` (bit `4i + c`
//! for coordinate `c` of row `i`: one `__mmask64` for the looked-up vector). The sign bits are
//! stored whole (IQ3_XXS keeps seven of eight and rebuilds the eighth from parity), so IQ3_XXS
//! packs 4 % over its source size; IQ3_S packs in its source's 110 bytes per row.
//!
//! The arithmetic, which the SIMD kernel reproduces bit for bit, is the row-major reference's
//! (`quant::signed_grid`): per row and super-block the exact integer
//! `S = Σ_j (2l_j + 1) · Σ ±grid·a` over the sub-blocks `j`, then `acc = acc + (d_w·d_a)·S` with
//! the multiply and the add rounded apart, super-blocks in order, and at the end the format's
//! factor times `acc`. So a packed product gives each row the bits the reference dot gives it.

use super::{PackedFormat, ROWS};
#[cfg(test)]
use crate::operands::BlockSummary;
use crate::quant::q8_k::BlockQ8K;

/// Four-value groups of a 256-value super-block.
pub(super) const GROUPS: usize = 64;

/// Sub-blocks (runs of eight groups sharing one level) of a super-block.
pub(super) const SUB_BLOCKS: usize = 8;

packed_struct! {
    /// The grid indices, signs and levels of one super-block of sixteen rows.
    GridQuads {
        /// Each row's f16 super-block scale (bits).
        d: [u16; ROWS],
        /// `levels[p][i]`: row `i`'s levels of sub-blocks `2p` (low nibble) and `2p + 1` (high).
        levels: [[u8; ROWS]; SUB_BLOCKS / 2],
        /// `signs[q]`, bit `4i + c`: coordinate `c` of row `i`'s group `q` is negative.
        signs: [u64; GROUPS],
        /// `qs[q][i]`: row `i`'s grid index of group `q` (its low eight bits where the grid is
        /// larger).
        qs: [[u8; ROWS]; GROUPS],
    }
}

/// Declares a packed format in the [`GridQuads`] layout ([`packed_format!`] against Q8_K
/// activations, its first field the `quads`, then the fields given) and its [`GridQuadRows`]:
/// the grid `$grid` (words; the reference reads it) and `$packed_grid` (three bits a
/// coordinate, indexing `$values`), the source format's factor, and the `pack_row` given; with
/// `ninth bits $high`, the field `$high` holds the grid indices' ninth bits.
macro_rules! grid_quad_rows {
    (
        $(#[$meta:meta])*
        $packed:ident: $source:ty $(, extra row bytes $extra:literal)?,
            values $values:path, grid $grid:path, packed grid $packed_grid:path
            $(, ninth bits $high:ident)? {
            $($(#[$field_meta:meta])* $field:ident: $field_ty:ty,)*
        }
        fn pack_row(&mut $self:ident, $i:ident, $block:ident) { $($pack_row:tt)* }
    ) => {
        packed_format! {
            $(#[$meta])*
            $packed: $source => $crate::quant::q8_k::BlockQ8K $(, extra row bytes $extra)? {
                /// The grid indices (their low eight bits), the signs and the levels.
                quads: $crate::packed::grid_quads::GridQuads,
                $($(#[$field_meta])* $field: $field_ty,)*
            }
            fn pack_row(&mut $self, $i, $block) { $($pack_row)* }
        }

        impl $crate::packed::grid_quads::GridQuadRows for $packed {
            const DOT_FACTOR: f32 =
                <$source as $crate::quant::signed_grid::SignedGrid>::DOT_FACTOR;
            const VALUES: [u8; 8] = $values;
            const PACKED_GRID: &'static [u16] = &$packed_grid;
            #[cfg(test)]
            fn grid() -> &'static [u32] {
                &$grid
            }
            fn quads(&self) -> &$crate::packed::grid_quads::GridQuads {
                &self.quads
            }
            $(
                fn high(&self) -> Option<&[u16; $crate::packed::grid_quads::GROUPS]> {
                    Some(&self.$high)
                }
            )?
        }
    };
}

pub(super) use grid_quad_rows;

/// A packed format in the [`GridQuads`] layout.
pub(crate) trait GridQuadRows: PackedFormat<Act = BlockQ8K> {
    /// The factor the dot product's sum is multiplied by at the end (the source format's
    /// `DOT_FACTOR`).
    const DOT_FACTOR: f32;
    /// The values a grid coordinate indexes (three bits).
    const VALUES: [u8; 8];
    /// The grid three bits a coordinate (coordinate `c` at bits `3c`, indexing
    /// [`GridQuadRows::VALUES`]).
    const PACKED_GRID: &'static [u16];
    /// The grid the indices select from, whole words (the reference reads it).
    #[cfg(test)]
    fn grid() -> &'static [u32];
    /// The indices, signs and levels.
    fn quads(&self) -> &GridQuads;
    /// Bit `i` of `high[q]`: row `i`'s grid index of group `q` is 256 above `qs[q][i]`
    /// (`None` where indices have eight bits).
    fn high(&self) -> Option<&[u16; GROUPS]> {
        None
    }

    /// Row `i`'s grid index of group `q`.
    #[cfg(test)]
    fn index(&self, i: usize, q: usize) -> usize {
        let high = self.high().map_or(0, |h| (h[q] >> i) as usize & 1);
        self.quads().qs[q][i] as usize | high << 8
    }

    /// Row `i`'s signed value `c` of group `q`.
    #[cfg(test)]
    fn value(&self, i: usize, q: usize, c: usize) -> i32 {
        let magnitude = (Self::grid()[self.index(i, q)] >> (8 * c)) as u8 as i32;
        match (self.quads().signs[q] >> (4 * i + c)) & 1 {
            0 => magnitude,
            _ => -magnitude,
        }
    }

    /// Row `i`'s multiplier `2l + 1` of sub-block `j`.
    #[cfg(test)]
    fn multiplier(&self, i: usize, j: usize) -> i32 {
        let byte = self.quads().levels[j / 2][i];
        2 * ((byte >> (4 * (j % 2))) & 0xF) as i32 + 1
    }
}

/// Places one row `i` of a source super-block into `out` (zeroed in that row's places): its
/// scale bits `d`, the low eight bits of its grid indices (`index(q)` for group `q`), its sign
/// bytes (`sign_byte(n)`: bit `b` negates value `8n + b`) and its levels (`level(j)`).
pub(super) fn pack_row(
    out: &mut GridQuads,
    i: usize,
    d: u16,
    index: impl Fn(usize) -> u8,
    sign_byte: impl Fn(usize) -> u8,
    level: impl Fn(usize) -> u8,
) {
    out.d[i] = d;
    for (q, (qs, signs)) in out.qs.iter_mut().zip(&mut out.signs).enumerate() {
        qs[i] = index(q);
        let nibble = (sign_byte(q / 2) >> (4 * (q % 2))) & 0xF;
        *signs |= (nibble as u64) << (4 * i);
    }
    for (p, levels) in out.levels.iter_mut().enumerate() {
        levels[i] = level(2 * p) & 0xF | (level(2 * p + 1) & 0xF) << 4;
    }
}

/// Scalar reference (tests only): the sixteen rows of `w` (one row group, `nb` super-blocks)
/// against each of the `out.len()` tokens of `a` (`nb` Q8_K blocks each).
#[cfg(test)]
pub(super) fn dot_group<P: GridQuadRows>(
    w: &[P],
    a: &[BlockQ8K],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    super::reference::dot_group(w, a, s, out, |acc, i, x, y, _| {
        let mut sum = 0i32;
        for j in 0..SUB_BLOCKS {
            let dot: i32 = (0..32)
                .map(|v| x.value(i, 8 * j + v / 4, v % 4) * y.qs[32 * j + v] as i32)
                .sum();
            sum += x.multiplier(i, j) * dot;
        }
        let d = half::f16::from_bits(x.quads().d[i]).to_f32() * y.d;
        acc + d * sum as f32
    });
    for out in out.iter_mut().flatten() {
        *out *= P::DOT_FACTOR;
    }
}
