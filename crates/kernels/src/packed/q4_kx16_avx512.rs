//! AVX-512 kernel of [`BlockQ4Kx16`]: each sub-block's codes are decoded once and dotted
//! with every token of the call, sixteen rows per instruction; and its AMX kernel
//! (`super_blocks_amx`), which Q5_K shares.

use std::arch::x86_64::*;

use super::byte_dot::{ByteDot, broadcast_quad};
use super::fold_avx512::{Sign, Tokens, add_scaled, row_scales, scaled};
use super::q4_kx16::BlockQ4Kx16;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::prefetch_part_ahead;

super_block_dot_group!(
    BlockQ4Kx16,
    |d, x: &BlockQ4Kx16, tokens, acc| {
        add_k_block(d, x, tokens, acc, 15, |x| x, |x, j| sub_block_codes(x, j))
    },
    amx {
        codes: |x, j| sub_block_codes(x, j),
        add_sub_block: |_d, x, j, dots, _y, _summaries, sumi| {
            add_scaled_sub_block(x, j, dots[0], sumi)
        },
        finish: |d, x, sumi, y, acc| finish_k_block(d, x, sumi, y, acc),
    }
);

/// `sumi + sc_j · dot`: sub-block `j`'s exact dots `dot` scaled by the rows' 6-bit scales, as
/// [`add_k_block`] adds them (the tile unit's share of a Q4_K-shaped super-block).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn add_scaled_sub_block(
    x: &BlockQ4Kx16,
    j: usize,
    dot: __m512i,
    sumi: __m512i,
) -> __m512i {
    // SAFETY: reads exactly the 16 scale bytes of sub-block `j`; unaligned is allowed.
    let sc = _mm512_cvtepu8_epi32(unsafe { _mm_loadu_si128(x.sc[j].as_ptr().cast()) });
    _mm512_add_epi32(sumi, _mm512_mullo_epi32(dot, sc))
}

/// One token's float steps at the end of a Q4_K-shaped super-block, as [`add_k_block`] takes
/// them: `acc + (d_w·d_a)·S`, then `− (dmin_w·d_a)·M` with `M` the min sums.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn finish_k_block(
    d: impl ByteDot,
    x: &BlockQ4Kx16,
    sumi: __m512i,
    y: &BlockQ8K,
    acc: __m512,
) -> __m512 {
    let acc = scaled(acc, row_scales(&x.d), y.d, sumi, Sign::Plus);
    scaled(
        acc,
        row_scales(&x.dmin),
        y.d,
        min_sums(d, x, y),
        Sign::Minus,
    )
}

/// `Σ_j m_j · Σ a_j` of one token for the sixteen rows: the rows' 6-bit mins against the
/// activation block's sub-block sums.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn min_sums(d: impl ByteDot, x: &BlockQ4Kx16, y: &BlockQ8K) -> __m512i {
    // SAFETY: each load reads exactly the 64 bytes of one min-pair vector; unaligned is
    // allowed.
    let m = unsafe { x.m.map(|m| _mm512_loadu_si512(m.as_ptr().cast())) };
    let mut summ = _mm512_setzero_si512();
    for (m, pair) in m.iter().zip(sub_block_sum_pairs(y)) {
        summ = d.dpwssd(summ, *m, pair);
    }
    summ
}

/// `Σ q·a` of one sub-block for sixteen rows: `codes` from [`sub_block_codes`] (or any byte
/// codes, each at most `max_code`), `q` the sub-block's 32 activation codes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn sub_block_dot(
    d: impl ByteDot,
    max_code: u8,
    codes: &[__m512i; 8],
    q: &[i8],
) -> __m512i {
    let quads = std::array::from_fn(|g| broadcast_quad(q, g));
    match max_code < 128 {
        true => d.dot_7bit(max_code, *codes, quads),
        false => d.dot(*codes, quads),
    }
}

/// The eight code vectors of sub-block `j`: vector `g` gives each row its codes `4g..4g + 4`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn sub_block_codes(x: &BlockQ4Kx16, j: usize) -> [__m512i; 8] {
    let m4 = _mm512_set1_epi8(0xF);
    let mut codes = [_mm512_setzero_si512(); 8];
    for v in 0..4 {
        // SAFETY: reads exactly the 64 bytes of one code vector; unaligned is allowed.
        let bits = unsafe { _mm512_loadu_si512(x.qs[4 * j + v].as_ptr().cast()) };
        codes[2 * v] = _mm512_and_si512(bits, m4);
        codes[2 * v + 1] = _mm512_and_si512(_mm512_srli_epi16::<4>(bits), m4);
    }
    codes
}

/// The code sums of an activation block's eight 32-value sub-blocks, in pairs: vector `k` holds
/// `(sum 2k, sum 2k + 1)` as two 16-bit halves in every 32-bit lane, for `vpdpwssd` against the
/// packed min pairs. The sums (each within ±4096) are those of its groups of 16 added in pairs.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn sub_block_sum_pairs(a: &BlockQ8K) -> [__m512i; 4] {
    // SAFETY: reads exactly the 32 bytes of the block's sixteen group sums.
    let groups = unsafe { _mm256_loadu_si256(a.bsums.as_ptr().cast()) };
    let sums = _mm256_madd_epi16(groups, _mm256_set1_epi16(1));
    let pairs = _mm512_castsi128_si512(_mm256_cvtepi32_epi16(sums));
    [0, 1, 2, 3].map(|k| _mm512_permutexvar_epi32(_mm512_set1_epi32(k), pairs))
}

/// Adds super-block `p`'s products with the tokens' activations to their accumulators, for
/// the Q4_K-shaped formats: `base` gives a packed block's scales and mins, `codes(p, j)` the
/// eight code vectors (each code at most `max_code`) of its sub-block `j` (see
/// [`sub_block_codes`]; `max_code` below 128).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn add_k_block<P, D: ByteDot, const N: usize>(
    d: D,
    p: &P,
    tokens: Tokens<'_>,
    acc: &mut [__m512; N],
    max_code: u8,
    base: impl Fn(&P) -> &BlockQ4Kx16,
    codes: impl Fn(&P, usize) -> [__m512i; 8],
) {
    let x = base(p);
    let mut sumi = [_mm512_setzero_si512(); N];
    for j in 0..8 {
        prefetch_part_ahead(p, j, 8);
        let codes = codes(p, j);
        // SAFETY: reads exactly the 16 scale bytes of sub-block `j`; unaligned is allowed.
        let sc = _mm512_cvtepu8_epi32(unsafe { _mm_loadu_si128(x.sc[j].as_ptr().cast()) });
        let sc = d.lane_scales(sc);
        for (t, sumi) in sumi.iter_mut().enumerate() {
            let q = &tokens.block(t).qs[32 * j..32 * j + 32];
            let quads = std::array::from_fn(|g| broadcast_quad(q, g));
            *sumi = _mm512_add_epi32(*sumi, d.scaled_dot_7bit(max_code, codes, quads, sc));
        }
    }
    let summ: [__m512i; N] = std::array::from_fn(|t| min_sums(d, x, tokens.block(t)));
    add_scaled(acc, &x.d, &sumi, tokens, Sign::Plus);
    add_scaled(acc, &x.dmin, &summ, tokens, Sign::Minus);
}
