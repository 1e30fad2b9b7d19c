//! The code layout of the packed formats with 16-value groups and two low bits per code (Q2_K,
//! Q3_K): per group one 64-byte vector, row `i` in 32-bit lane `i`, byte `jj` of the lane holding
//! the group's codes `4k + jj` in its bits `2k..2k + 2` (`k` in `0..4`), so that one shift and
//! one mask give the codes `4k..4k + 4` of all sixteen rows.

use super::ROWS;

/// Groups of a 256-value super-block.
pub(super) const GROUPS: usize = 16;

/// The low two bits of a group's codes for sixteen rows.
pub(super) type GroupCodes = [[u8; 64]; GROUPS];

/// Places the low two bits of row `i`'s 256 codes (`code(v)` for value `v`, already below 4)
/// into `out`, which must hold zeros in that row's lanes.
pub(super) fn pack_codes(code: impl Fn(usize) -> u8, i: usize, out: &mut GroupCodes) {
    for (g, group) in out.iter_mut().enumerate() {
        for jj in 0..4 {
            group[4 * i + jj] = (0..4)
                .map(|k| code(16 * g + 4 * k + jj) << (2 * k))
                .fold(0, |a, b| a | b);
        }
    }
}

/// Row `i`'s low two bits of code `l` of group `g` (tests only).
#[cfg(test)]
pub(super) fn code(codes: &GroupCodes, i: usize, g: usize, l: usize) -> i32 {
    let (k, jj) = (l / 4, l % 4);
    ((codes[g][4 * i + jj] >> (2 * k)) & 3) as i32
}

/// The value index within a Q2_K / Q3_K super-block of bits `2j..2j + 2` of `qs[32n + l]`, the
/// inverse of where those formats keep value `v`: `n = v / 128`, `j = v % 128 / 32`, `l = v % 32`.
#[inline]
pub(super) fn source_bits(qs: &[u8; 64], v: usize) -> u8 {
    let (n, j, l) = (v / 128, v % 128 / 32, v % 32);
    (qs[32 * n + l] >> (2 * j)) & 3
}

const _: () = assert!(ROWS * 4 == 64);
