//! The grid indices of IQ1_S and IQ1_M repacked sixteen rows at a time (both formats address
//! the same grid the same way), and the grid as the unsigned codes their AVX-512 kernel gathers.
//!
//! A group of eight weights has an 11-bit index into IQ1S_GRID: its low byte is stored per
//! group with the sixteen rows side by side, its three high bits in one 16-bit word per row and
//! 32-value sub-block (group `l` of the sub-block at bits `3l`), whose top four bits each format
//! fills with its own per-sub-block bits. One load of a group's bytes and of its sub-block's
//! words gives the indices of sixteen rows.

use super::ROWS;
#[cfg(test)]
use crate::quant::iq_grids::IQ1S_GRID;
use crate::quant::iq_grids::IQ1S_PACKED;

/// Groups of eight weights per super-block.
pub(crate) const GROUPS: usize = 32;

packed_struct! {
    /// The grid indices of one super-block of sixteen rows.
    GridIndices {
        /// `qs[g][i]`: the low eight index bits of row `i`'s group `g`.
        qs: [[u8; ROWS]; GROUPS],
        /// `qh[j][i]`: row `i`'s word of sub-block `j`: the high three index bits of its group
        /// `4j + l` at bits `3l`, and four bits of the format's own at bits 12–15.
        qh: [[u16; ROWS]; GROUPS / 4],
    }
}

impl GridIndices {
    /// Stores row `i`'s index of group `g` (the word's own top bits are set apart).
    pub(crate) fn set(&mut self, i: usize, g: usize, index: usize) {
        self.qs[g][i] = index as u8;
        self.qh[g / 4][i] |= ((index >> 8) as u16 & 7) << (3 * (g % 4));
    }

    /// Row `i`'s grid index of group `g`.
    #[cfg(test)]
    pub(crate) fn index(&self, i: usize, g: usize) -> usize {
        let high = (self.qh[g / 4][i] >> (3 * (g % 4))) & 7;
        self.qs[g][i] as usize | (high as usize) << 8
    }

    /// Row `i`'s grid entry of group `g`: eight bytes −1, 0 or 1.
    #[cfg(test)]
    pub(crate) fn entry(&self, i: usize, g: usize) -> u64 {
        IQ1S_GRID[self.index(i, g)]
    }

    #[cfg(test)]
    /// The top four bits of row `i`'s word of sub-block `j`.
    pub(crate) fn own_bits(&self, i: usize, j: usize) -> u16 {
        self.qh[j][i] >> 12
    }

    /// The shift sign that bit `bit` of row `i`'s own bits of sub-block `j` holds: −1 where
    /// it is set, 1 where not.
    #[cfg(test)]
    pub(crate) fn shift_sign(&self, i: usize, j: usize, bit: usize) -> i32 {
        if (self.own_bits(i, j) >> bit) & 1 != 0 {
            -1
        } else {
            1
        }
    }
}

/// `IQ1S_GRID` as unsigned codes: byte `j` of entry `i` is `4·(v + 1)` for the grid value
/// `v` (`0`, `4` or `8` for −1, 0 and 1), expanded from the same packed table.
pub(crate) static IQ1S_CODES: [u64; 2048] = {
    let mut out = [0u64; 2048];
    let mut i = 0;
    while i < out.len() {
        let mut j = 0;
        while j < 8 {
            let level = (IQ1S_PACKED[i] >> (2 * j)) & 3;
            out[i] |= (4 * level as u64) << (8 * j);
            j += 1;
        }
        i += 1;
    }
    out
};

#[cfg(test)]
mod tests {
    use bytemuck::Zeroable;

    use super::*;

    #[test]
    fn codes_are_four_times_the_grid_values_plus_one() {
        for (&code, &entry) in IQ1S_CODES.iter().zip(&IQ1S_GRID) {
            let want = entry
                .to_le_bytes()
                .map(|v| (4 * (v as i8 as i32 + 1)) as u8);
            assert_eq!(code.to_le_bytes(), want);
        }
    }

    #[test]
    fn indices_round_trip_beside_the_own_bits() {
        let mut g = GridIndices::zeroed();
        g.qh[1][3] = 0xA000;
        g.set(3, 5, 0x7FF);
        g.set(3, 6, 0x123);
        assert_eq!(
            (g.index(3, 5), g.index(3, 6), g.own_bits(3, 1)),
            (0x7FF, 0x123, 0xA)
        );
    }
}
