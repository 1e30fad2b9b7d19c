//! The AVX-512 kernel IQ1_S and IQ1_M share (`iq1_grid`): the two formats differ only in
//! where the scales and shift signs come from, which each gives per sub-block
//! ([`Iq1Layout::sub_block`]).
//!
//! Both reference dot products end in `d_w·d_a·(sumi + δ·shift)` with `δ = 1/8` and integers
//! `sumi = Σ sc·Σ g·a` (grid values `g` in −1..=1, scales `sc = 2s + 1`) and
//! `shift = Σ sc·σ·Σ a` (shift signs `σ`). `X = 8·sumi + shift` is an integer below 2^23 in
//! magnitude, so `X/8` is exactly the f32 the reference rounds `sumi + δ·shift` to; the kernel
//! computes `X` and multiplies `f32(X)` by 1/8, then takes the reference's float steps.
//!
//! Per weight `8g + σ = 2w − 9` with the code `w = 4(g + 1) + [σ > 0]` in `0..=9`, so
//! `X = 2·Σ sc·w·a − 9·Σ_h sc_h·Σ_h a` over the scale groups `h` (sums of 16 from `bsums`).
//! Sixteen rows' grid indices are built at once, and each eight rows' codes `4(g + 1)` gathered
//! as one 64-bit entry per row from `IQ1S_CODES`; one masked OR adds `[σ > 0]`, one 16-bit
//! multiply the row's scale (`sc·w ≤ 135`, a byte). Then one `vpdpbusd` per token takes the
//! dot with the group's eight activations broadcast: each row's sum lies in its two 32-bit
//! lanes, summed once per super-block; the correction takes eight `vpdpwssd` per token.

use std::arch::x86_64::*;

use super::PackedFormat;
use super::ROWS;
use super::byte_dot::ByteDot;
use super::code_bits_avx512::or_masked;
use super::iq1_grid::{GROUPS, GridIndices, IQ1S_CODES};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::prefetch_ahead;

/// What the shared kernel needs of one sub-block of sixteen rows.
pub(super) struct SubBlock {
    /// Each row's scale `2s + 1` (one 32-bit lane per row) of the sub-block's two 16-value
    /// halves.
    pub(super) scales: [__m512i; 2],
    /// The rows whose shift is positive, for each of the sub-block's four groups.
    pub(super) positive: [__mmask16; 4],
}

/// A packed IQ1 layout the shared kernel multiplies.
pub(super) trait Iq1Layout: PackedFormat<Act = BlockQ8K> {
    /// The grid indices.
    fn grid(&self) -> &GridIndices;

    /// The rows' f32 super-block scales.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F and BW and F16C.
    unsafe fn scales(&self) -> __m512;

    /// Sub-block `j`'s scales and shift signs; `words` holds its index words, one 32-bit lane
    /// per row.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F and BW.
    unsafe fn sub_block(&self, j: usize, words: __m512i) -> SubBlock;
}

/// Row `i`'s word of `v` (sixteen rows, one 32-bit lane each) in every 16-bit lane of row
/// `i`'s 64-bit lane, for the rows `8·half..8·half + 8`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn row_words(v: __m512i, half: usize) -> __m512i {
    let lanes: [i16; 32] = std::array::from_fn(|k| (2 * (8 * half + k / 4)) as i16);
    // SAFETY: reads exactly the 64 bytes of `lanes`; unaligned is allowed.
    let lanes = unsafe { _mm512_loadu_si512(lanes.as_ptr().cast()) };
    _mm512_permutexvar_epi16(lanes, v)
}

/// The sixteen rows' grid indices of group `l` of a sub-block: the low bytes `qs` and the high
/// bits at `3l` of the rows' `words`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn indices(qs: &[u8; ROWS], words: __m512i, l: usize) -> __m512i {
    let high = match l {
        0 => _mm512_slli_epi32::<8>(words),
        1 => _mm512_slli_epi32::<5>(words),
        2 => _mm512_slli_epi32::<2>(words),
        _ => _mm512_srli_epi32::<1>(words),
    };
    // SAFETY: reads exactly the sixteen bytes of `qs`; unaligned is allowed.
    let low = _mm512_cvtepu8_epi32(unsafe { _mm_loadu_si128(qs.as_ptr().cast()) });
    or_masked(low, high, _mm512_set1_epi32(0x700))
}

/// The codes `4(g + 1)` of eight rows' groups at `indices`, one 64-bit lane per row.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn gather(indices: __m256i) -> __m512i {
    super::table_lookup_avx512::lookup_u64x8(&IQ1S_CODES, indices)
}

/// The eight activations `q[8g..8g + 8]` in every 64-bit lane.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn octet(q: &[i8; 256], g: usize) -> __m512i {
    let q: [i8; 8] = q[8 * g..8 * g + 8].try_into().expect("eight activations");
    _mm512_set1_epi64(i64::from_le_bytes(q.map(|v| v as u8)))
}

super_block_adder!(pub(super) fn add_block<P: Iq1Layout>(d, x: &P, tokens, acc) {
    prefetch_ahead(x);
    let grid = x.grid();
    // Σ sc·w·a per token, rows 0..8 and 8..16, each row in two 32-bit lanes.
    let mut sums = [[_mm512_setzero_si512(); 2]; N];
    // Per sub-block, each row's scales of its two halves as a pair of 16-bit lanes.
    let mut pairs = [_mm512_setzero_si512(); GROUPS / 4];
    for (j, pair) in pairs.iter_mut().enumerate() {
        // SAFETY: reads exactly the 32 bytes of the sub-block's words; unaligned is allowed.
        let words =
            _mm512_cvtepu16_epi32(unsafe { _mm256_loadu_si256(grid.qh[j].as_ptr().cast()) });
        // SAFETY: this function runs with every feature `sub_block` needs.
        let sb = unsafe { x.sub_block(j, words) };
        *pair = _mm512_or_si512(sb.scales[0], _mm512_slli_epi32::<16>(sb.scales[1]));
        let scale_words = sb.scales.map(|s| [row_words(s, 0), row_words(s, 1)]);
        for l in 0..4 {
            let g = 4 * j + l;
            let idx = indices(&grid.qs[g], words, l);
            let halves = [
                _mm512_castsi512_si256(idx),
                _mm512_extracti64x4_epi64::<1>(idx),
            ];
            for (half, &idx) in halves.iter().enumerate() {
                let codes = gather(idx);
                let positive = (sb.positive[l] >> (8 * half)) as __mmask8;
                let codes = _mm512_mask_or_epi64(codes, positive, codes, _mm512_set1_epi8(1));
                let codes = _mm512_mullo_epi16(codes, scale_words[l / 2][half]);
                for (t, sums) in sums.iter_mut().enumerate() {
                    let q = octet(&tokens.block(t).qs, g);
                    sums[half] = d.dpbusd(sums[half], codes, q);
                }
            }
        }
    }
    // SAFETY: this function runs with every feature `scales` needs.
    let dw = unsafe { x.scales() };
    for (t, (acc, sums)) in acc.iter_mut().zip(&sums).enumerate() {
        add_super_block(d, acc, sums, &pairs, dw, tokens.block(t));
    }
});

/// Adds one super-block of sixteen rows to a token's accumulator: `X = 2·Σ sc·w·a − 9·Σ sc·Σa`
/// from the code sums `sums` (each row in two 32-bit lanes) and the scale pairs `pairs`, then
/// `acc + (d_w·d_a)·(X/8)` with the reference's float steps (a product, then a sum).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn add_super_block(
    d: impl ByteDot,
    acc: &mut __m512,
    sums: &[__m512i; 2],
    pairs: &[__m512i; GROUPS / 4],
    dw: __m512,
    y: &BlockQ8K,
) {
    let mut correction = _mm512_setzero_si512();
    for (j, &pair) in pairs.iter().enumerate() {
        let bsums = (y.bsums[2 * j] as u16 as i32) | (y.bsums[2 * j + 1] as i32) << 16;
        correction = d.dpwssd(correction, pair, _mm512_set1_epi32(bsums));
    }
    let even: [i32; 16] = std::array::from_fn(|r| 2 * r as i32);
    let odd: [i32; 16] = std::array::from_fn(|r| 2 * r as i32 + 1);
    // SAFETY: each reads exactly the 64 bytes of its array; unaligned is allowed.
    let (even, odd) = unsafe {
        (
            _mm512_loadu_si512(even.as_ptr().cast()),
            _mm512_loadu_si512(odd.as_ptr().cast()),
        )
    };
    let dot = _mm512_add_epi32(
        _mm512_permutex2var_epi32(sums[0], even, sums[1]),
        _mm512_permutex2var_epi32(sums[0], odd, sums[1]),
    );
    let nine = _mm512_add_epi32(_mm512_slli_epi32::<3>(correction), correction);
    let x = _mm512_sub_epi32(_mm512_slli_epi32::<1>(dot), nine);
    let sum = _mm512_mul_ps(_mm512_cvtepi32_ps(x), _mm512_set1_ps(0.125));
    let d = _mm512_mul_ps(dw, _mm512_set1_ps(y.d));
    *acc = _mm512_add_ps(*acc, _mm512_mul_ps(d, sum));
}
