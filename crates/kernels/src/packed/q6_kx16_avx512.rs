//! AVX-512 kernel of [`BlockQ6Kx16`]: each sub-block's codes are decoded once and dotted
//! with every token of the call, sixteen rows per instruction; and its AMX kernel
//! (`super_blocks_amx`).

use std::arch::x86_64::*;

use super::byte_dot::{ByteDot, broadcast_quad, negated_scale_pairs, word_pair};
use super::code_bits_avx512::or_masked;
use super::fold_avx512::{Sign, add_scaled, row_scales, scaled};
use super::q6_kx16::BlockQ6Kx16;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::prefetch_part_ahead;

super_block_dot_group!(
    BlockQ6Kx16,
    add_block,
    amx parts 2 {
        codes: |x, j| sub_block_codes(x, j),
        add_sub_block: |d, x, j, dots, y, _summaries, sumi| {
            let [sc0, sc1] = group_scales(x, j);
            let first = _mm512_mullo_epi32(dots[0], sc0);
            let second = _mm512_mullo_epi32(dots[1], sc1);
            let sumi = _mm512_add_epi32(sumi, _mm512_add_epi32(first, second));
            subtract_offsets(d, sumi, negated_scale_pairs(sc0, sc1, 32), y, j)
        },
        finish: |_d, x, sumi, y, acc| scaled(acc, row_scales(&x.d), y.d, sumi, Sign::Plus),
    }
);

/// The rows' scales of the two 16-value groups of sub-block `j`, one 32-bit lane each.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn group_scales(x: &BlockQ6Kx16, j: usize) -> [__m512i; 2] {
    // SAFETY: each load reads exactly the 16 scale bytes of one group; unaligned is allowed.
    unsafe {
        [
            _mm512_cvtepi8_epi32(_mm_loadu_si128(x.sc[2 * j].as_ptr().cast())),
            _mm512_cvtepi8_epi32(_mm_loadu_si128(x.sc[2 * j + 1].as_ptr().cast())),
        ]
    }
}

/// `sumi − 32·(sc₀·Σa₀ + sc₁·Σa₁)`: the codes' offset taken out of sub-block `j`'s scaled dots
/// with token `y`, from its sums of sixteen activations and the rows' `offsets`
/// ([`negated_scale_pairs`] of the group scales and 32).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn subtract_offsets(
    d: impl ByteDot,
    sumi: __m512i,
    offsets: __m512i,
    y: &BlockQ8K,
    j: usize,
) -> __m512i {
    d.dpwssd(sumi, offsets, word_pair(y.bsums[2 * j], y.bsums[2 * j + 1]))
}

/// The eight code vectors (`0..64`) of 32-value sub-block `j`: vector `g` gives each row its
/// codes `32j + 4g..32j + 4g + 4`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn sub_block_codes(x: &BlockQ6Kx16, j: usize) -> [__m512i; 8] {
    let (m4, high_bits) = (_mm512_set1_epi8(0xF), _mm512_set1_epi8(0x30));
    let mut codes = [_mm512_setzero_si512(); 8];
    for h in 0..2 {
        // SAFETY: each load reads exactly the 64 bytes of one code vector; unaligned is allowed.
        let (lo, hi, bits) = unsafe {
            (
                _mm512_loadu_si512(x.ql[4 * j + 2 * h].as_ptr().cast()),
                _mm512_loadu_si512(x.ql[4 * j + 2 * h + 1].as_ptr().cast()),
                _mm512_loadu_si512(x.qh[2 * j + h].as_ptr().cast()),
            )
        };
        // Bit pair k of each high-bit byte is moved to bits 4..6 (16-bit shifts: the
        // neighbouring byte's bits only land outside them).
        let g = 4 * h;
        codes[g] = or_masked(
            _mm512_and_si512(lo, m4),
            _mm512_slli_epi16::<4>(bits),
            high_bits,
        );
        codes[g + 1] = or_masked(
            _mm512_and_si512(_mm512_srli_epi16::<4>(lo), m4),
            _mm512_slli_epi16::<2>(bits),
            high_bits,
        );
        codes[g + 2] = or_masked(_mm512_and_si512(hi, m4), bits, high_bits);
        codes[g + 3] = or_masked(
            _mm512_and_si512(_mm512_srli_epi16::<4>(hi), m4),
            _mm512_srli_epi16::<2>(bits),
            high_bits,
        );
    }
    codes
}

/// `sc · Σ q·a` of one 16-value group for sixteen rows: `codes` its four code vectors, `q` its
/// 16 activation codes, `sc` the rows' scales from [`ByteDot::lane_scales`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn group_dot(d: impl ByteDot, codes: &[__m512i], q: &[i8], sc: __m512i) -> __m512i {
    let codes = [codes[0], codes[1], codes[2], codes[3]];
    let quads = std::array::from_fn(|k| broadcast_quad(q, k));
    d.scaled_dot_7bit(63, codes, quads, sc)
}

super_block_adder!(fn add_block(d, x: &BlockQ6Kx16, tokens, acc) {
    let mut sumi = [_mm512_setzero_si512(); N];
    for j in 0..8 {
        prefetch_part_ahead(x, j, 8);
        let codes = sub_block_codes(x, j);
        let [sc0, sc1] = group_scales(x, j);
        let offsets = negated_scale_pairs(sc0, sc1, 32);
        let (sc0, sc1) = (d.lane_scales(sc0), d.lane_scales(sc1));
        for (t, sumi) in sumi.iter_mut().enumerate() {
            let y = tokens.block(t);
            let q = &y.qs[32 * j..32 * j + 32];
            let first = group_dot(d, &codes[..4], &q[..16], sc0);
            let second = group_dot(d, &codes[4..], &q[16..], sc1);
            *sumi = _mm512_add_epi32(*sumi, _mm512_add_epi32(first, second));
            *sumi = subtract_offsets(d, *sumi, offsets, y, j);
        }
    }
    add_scaled(acc, &x.d, &sumi, tokens, Sign::Plus);
});
