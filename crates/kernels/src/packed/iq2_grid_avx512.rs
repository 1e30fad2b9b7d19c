//! AVX-512 kernel of the packed IQ2 layouts ([`GridRows`]), eight rows per vector.
//!
//! The grid (256, 512 or 1024 entries) is held in registers two bits a coordinate
//! (`register_grid_avx512`). Per two groups of eight values the sixteen rows' indices (the
//! high bits merged in) are one lookup's 32; a word permute spreads each row's entry over its
//! 64-bit lane, and a shift, a mask and a byte shuffle make its eight values. The signs are
//! applied to the weights as bytes `64 ± g` (one add and one masked subtract under the
//! group's 64-bit sign mask): every weight byte is positive, so `vpmaddubsw` multiplies it
//! with the broadcast activations without saturating (`2 · 107 · 128 < 2^15`), and `vpdpwssd`
//! adds the pairs times the run's multiplier `2l + 1` (spread over the row's four 16-bit
//! lanes) into 32-bit sums per row and half group.
//! The weights are made once for all tokens of the call; per token a group costs one
//! multiply and one multiply-add per eight rows.
//!
//! Per super-block and token the two halves of each row are added, and the offset taken out:
//! `64 · Σ_r (2l_r + 1) · Σa` from Q8_K's sums of sixteen activations (`vpdpwssd` of each
//! row's multipliers with the sums), then the float steps of the reference.
//!
//! On the AMD kind, against eight scalar loads of grid words per eight rows, the lookup from
//! registers made the product of a matrix with one token 1.5× (IQ2_XXS) and 1.3× (IQ2_XS)
//! faster; looking up two groups at once instead of one then 1.15× and 1.14×. IQ2_S's
//! 1024-entry grid, looked up two groups at once, gave 1.30× over the loads. Tried and not
//! kept: the sign chosen inside the byte shuffle (one masked add instead of an add and a
//! masked subtract), and even and odd groups summed apart for one or two tokens: neither
//! beat the noise on all three types.

use std::arch::x86_64::*;

use super::ROWS;
use super::byte_dot::ByteDot;
use super::fold_avx512::row_scales;
use super::iq2_grid::{GROUPS, GridRows};
use super::register_grid_avx512::{MAX_ENTRIES, RegisterGrid};
use crate::quant::iq_grids::IQ2_VALUES;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::prefetch_ahead;

/// How far the weight bytes lie above the signed grid values: above the largest magnitude
/// (43), and a power of two, so that the correction is a shift.
const OFFSET: i8 = 64;

/// Runs of sixteen activations in a super-block (the Q8_K sums).
const HALF_RUNS: usize = 16;

super_block_adder!(pub(super) fn add_block<P: GridRows>(d, x: &P, tokens, acc) {
    let spread = [spread_pattern(0), spread_pattern(1)];
    let grid = register_grid::<P>();
    prefetch_ahead(x);
    let m = multipliers::<P>(x.levels());
    let mut sums = [[_mm512_setzero_si512(); 2]; N];
    let groups_per_run = GROUPS / P::RUNS;
    for (r, m) in m.iter().take(P::RUNS).enumerate() {
        // SAFETY: reads exactly the sixteen bytes of `m`; unaligned is allowed.
        let m = _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(m.as_ptr().cast()) });
        let m = spread.map(|p| _mm512_shuffle_epi8(m, p));
        for g in (groups_per_run * r..groups_per_run * (r + 1)).step_by(2) {
            for (g, weights) in (g..g + 2).zip(register_weights(&grid, x, g)) {
                let act: [__m512i; N] = std::array::from_fn(|t| {
                    let q: [i8; 8] = tokens.block(t).qs[8 * g..8 * g + 8]
                        .try_into()
                        .expect("eight activations");
                    _mm512_set1_epi64(i64::from_le_bytes(bytemuck::cast(q)))
                });
                for (v, (m, weights)) in m.iter().zip(weights).enumerate() {
                    for (sums, act) in sums.iter_mut().zip(&act) {
                        let pairs = _mm512_maddubs_epi16(weights, *act);
                        sums[v] = d.dpwssd(sums[v], pairs, *m);
                    }
                }
            }
        }
    }
    let pairs = multiplier_pairs::<P>(&m);
    let dw = row_scales(x.d());
    for (t, (acc, sums)) in acc.iter_mut().zip(&sums).enumerate() {
        let y = tokens.block(t);
        let sum = _mm512_sub_epi32(row_sums(sums), offset_sums(d, &pairs, y));
        let d = _mm512_mul_ps(dw, _mm512_set1_ps(y.d));
        *acc = _mm512_add_ps(*acc, _mm512_mul_ps(d, _mm512_cvtepi32_ps(sum)));
    }
});

/// `packed` (coordinate `j` at bits `2j`) rearranged for [`register_weights`]: coordinate `2k`
/// at bits `2k`, `2k + 1` at bits `2k + 8`, so that in each 64-bit lane word `k` shifted right
/// by `2k` holds coordinate `2k` in its low byte's two low bits and `2k + 1` in its high
/// byte's; zero past its entries.
const fn word_shift_codes(packed: &[u16]) -> [u16; MAX_ENTRIES] {
    let mut out = [0u16; MAX_ENTRIES];
    let mut i = 0;
    while i < packed.len() {
        let mut k = 0;
        while k < 4 {
            let even = (packed[i] >> (4 * k)) & 3;
            let odd = (packed[i] >> (4 * k + 2)) & 3;
            out[i] |= even << (2 * k) | odd << (2 * k + 8);
            k += 1;
        }
        i += 1;
    }
    out
}

/// The grid of `P` in registers.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn register_grid<P: GridRows>() -> RegisterGrid {
    let codes: &[u16; MAX_ENTRIES] = const { &word_shift_codes(P::PACKED_GRID) };
    RegisterGrid::new(codes, P::PACKED_GRID.len())
}

/// The weight bytes `64 ± g` of groups `g` and `g + 1` (`g` even), rows `8v..8v + 8` of
/// group `g + h` in vector `[h][v]`, row `8v + r` in 64-bit lane `r`: one lookup finds the two
/// groups' 32 entries.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn register_weights<P: GridRows>(grid: &RegisterGrid, x: &P, g: usize) -> [[__m512i; 2]; 2] {
    let groups = x.groups();
    let pair = &groups.low[g..g + 2];
    // SAFETY: reads exactly the 32 index bytes of the two groups, which lie side by side;
    // unaligned is allowed.
    let low = unsafe { _mm256_loadu_si256(pair.as_ptr().cast()) };
    let mut index = _mm512_cvtepu8_epi16(low);
    if let Some(per_byte) = 8usize.checked_div(P::HIGH_BITS) {
        // Both groups' high bits lie in one byte per row (`g` is even and `per_byte` is too).
        // SAFETY: reads exactly the sixteen high-bit bytes of the groups' run.
        let high = unsafe { _mm_loadu_si128(x.high()[g / per_byte].as_ptr().cast()) };
        let high = _mm512_cvtepu8_epi16(_mm256_broadcastsi128_si256(high));
        // Lanes 16.. (group `g + 1`) shift `HIGH_BITS` further.
        let first = (P::HIGH_BITS * (g % per_byte)) as i16;
        let shifts = _mm512_mask_blend_epi16(
            0xFFFF_0000,
            _mm512_set1_epi16(first),
            _mm512_set1_epi16(first + P::HIGH_BITS as i16),
        );
        let high = _mm512_and_si512(
            _mm512_srlv_epi16(high, shifts),
            _mm512_set1_epi16((1 << P::HIGH_BITS) - 1),
        );
        index = _mm512_or_si512(index, _mm512_slli_epi16::<8>(high));
    }
    let codes = grid.lookup(index);
    let shifts = _mm512_set1_epi64(0x0006_0004_0002_0000);
    let pair_mask = _mm512_set1_epi16(0x0303);
    let [v0, v1, v2] = IQ2_VALUES;
    let values = _mm512_set1_epi32(i32::from_le_bytes([v0, v1, v2, 0]));
    let offset = _mm512_set1_epi8(OFFSET);
    // Word `k` of 64-bit lane `r`: index `r` (row `r` of the first group's first eight).
    let lanes = _mm512_set_epi64(
        0x0007_0007_0007_0007,
        0x0006_0006_0006_0006,
        0x0005_0005_0005_0005,
        0x0004_0004_0004_0004,
        0x0003_0003_0003_0003,
        0x0002_0002_0002_0002,
        0x0001_0001_0001_0001,
        0,
    );
    [0, 1].map(|h| {
        [0, 1].map(|v| {
            // Word `k` of 64-bit lane `r`: group `g + h`'s code of row `8v + r`.
            let rows = _mm512_add_epi16(lanes, _mm512_set1_epi16((16 * h + 8 * v) as i16));
            let spread = _mm512_permutexvar_epi16(rows, codes);
            let coordinates = _mm512_and_si512(_mm512_srlv_epi16(spread, shifts), pair_mask);
            let grid = _mm512_shuffle_epi8(values, coordinates);
            let signs = groups.signs[g + h][8 * v..8 * v + 8].try_into().expect("8");
            let signs = u64::from_le_bytes(signs);
            _mm512_mask_sub_epi8(_mm512_add_epi8(grid, offset), signs, offset, grid)
        })
    })
}

/// The vector that `vpshufb` spreads a run's sixteen multiplier bytes with for rows
/// `8v..8v + 8`: row `r`'s byte into the four 16-bit lanes of 64-bit lane `r`, high bytes
/// zero.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn spread_pattern(v: usize) -> __m512i {
    let bytes: [u8; 64] = std::array::from_fn(|k| {
        let row = 8 * v + k / 8;
        if k % 2 == 0 { row as u8 } else { 0x80 }
    });
    // SAFETY: reads exactly the 64 bytes of `bytes`; unaligned is allowed.
    unsafe { _mm512_loadu_si512(bytes.as_ptr().cast()) }
}

/// The multipliers `2l + 1` of each run (`m[r][i]` for row `i`; the first `P::RUNS` runs),
/// from the level nibbles.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn multipliers<P: GridRows>(levels: &[[u8; ROWS]]) -> [[u8; ROWS]; HALF_RUNS] {
    let mut m = [[0u8; ROWS]; HALF_RUNS];
    let (mask, one) = (_mm_set1_epi8(0x1E), _mm_set1_epi8(1));
    for (j, levels) in levels.iter().enumerate() {
        // SAFETY: reads exactly the sixteen bytes of `levels`; unaligned is allowed.
        let l = unsafe { _mm_loadu_si128(levels.as_ptr().cast()) };
        let low = _mm_or_si128(_mm_and_si128(_mm_slli_epi16::<1>(l), mask), one);
        let high = _mm_or_si128(_mm_and_si128(_mm_srli_epi16::<3>(l), mask), one);
        for (r, value) in [(j, low), (j + P::RUNS / 2, high)] {
            // SAFETY: writes exactly the sixteen bytes of `m[r]`; unaligned is allowed.
            unsafe { _mm_storeu_si128(m[r].as_mut_ptr().cast(), value) };
        }
    }
    m
}

/// For each pair of activation runs `2j, 2j + 1` (sixteen values each), the sixteen rows'
/// multipliers of those runs as 16-bit pairs, row `i` in 32-bit lane `i`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn multiplier_pairs<P: GridRows>(m: &[[u8; ROWS]; HALF_RUNS]) -> [__m512i; HALF_RUNS / 2] {
    // SAFETY: reads exactly the sixteen bytes of one run's multipliers; unaligned is allowed.
    let load = |h: usize| unsafe { _mm_loadu_si128(m[h * P::RUNS / HALF_RUNS].as_ptr().cast()) };
    std::array::from_fn(|j| {
        let (first, second) = (load(2 * j), load(2 * j + 1));
        let rows = _mm256_set_m128i(
            _mm_unpackhi_epi8(first, second),
            _mm_unpacklo_epi8(first, second),
        );
        _mm512_cvtepu8_epi16(rows)
    })
}

/// `64 · Σ_r (2l_r + 1) · Σa` of each row (32-bit lane `i`): what the offset of the weight
/// bytes added, from the multiplier pairs and the activations' sums of sixteen.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn offset_sums(d: impl ByteDot, pairs: &[__m512i; HALF_RUNS / 2], y: &BlockQ8K) -> __m512i {
    let mut sum = _mm512_setzero_si512();
    for (j, pair) in pairs.iter().enumerate() {
        let sums = (y.bsums[2 * j] as u16 as u32 | (y.bsums[2 * j + 1] as u16 as u32) << 16) as i32;
        sum = d.dpwssd(sum, *pair, _mm512_set1_epi32(sums));
    }
    _mm512_slli_epi32::<6>(sum)
}

/// Each row's sum (32-bit lane `i` for row `i`) of the two halves it has in `sums` (rows
/// `8v + r` in lanes `2r` and `2r + 1` of `sums[v]`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn row_sums(sums: &[__m512i; 2]) -> __m512i {
    let even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    let odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    _mm512_add_epi32(
        _mm512_permutex2var_epi32(sums[0], even, sums[1]),
        _mm512_permutex2var_epi32(sums[0], odd, sums[1]),
    )
}
