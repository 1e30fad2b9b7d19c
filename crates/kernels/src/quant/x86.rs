//! AVX2 building blocks shared by the per-type x86 kernels (the same helpers ggml uses).
//!
//! Every function requires AVX2, FMA and F16C; they are only reached from kernels that the
//! dispatch table selects after detecting those features.

use std::arch::x86_64::*;

use half::f16;

use super::q8_k::BlockQ8K;
use super::util::scales_mins_k4;

/// How far ahead of the weights being read the kernels prefetch: enough bytes in flight to
/// cover memory latency at full bandwidth. At the end of a row this reaches into the next one,
/// which is what the drivers read next. (The hardware prefetchers alone leave the dot products
/// well below the streaming bandwidth: each load comes with ten or more arithmetic
/// instructions, so few are in flight at a time.)
pub(crate) const PREFETCH_BYTES: usize = 2048;

/// Prefetches into L2 the cache lines [`PREFETCH_BYTES`] ahead of each 64 bytes of `block`
/// (into L2 rather than L1: L2 can track more misses in flight, and measured faster).
#[inline(always)]
pub(crate) fn prefetch_ahead<T>(block: &T) {
    prefetch_part_ahead(block, 0, 1);
}

/// [`prefetch_ahead`] of part `part` of `parts` equal parts of `block`, so that a large block's
/// prefetches spread over its loop instead of coming all at once.
#[inline(always)]
pub(crate) fn prefetch_part_ahead<T>(block: &T, part: usize, parts: usize) {
    let p = (block as *const T)
        .cast::<i8>()
        .wrapping_add(PREFETCH_BYTES);
    let lines = size_of::<T>().div_ceil(64);
    for line in lines * part / parts..lines * (part + 1) / parts {
        // SAFETY: a prefetch is a hint: it never faults and reads nothing the program observes,
        // so any address, even past the end of the weights, is allowed.
        unsafe { _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(64 * line)) };
    }
}

/// Converts two f16 values to f32, in lanes 0 and 1, with F16C.
///
/// Both are moved in from one general register. (`half`'s conversion checks the CPU on every
/// call, and converting a single value compiles to an insert into whatever vector register is
/// at hand, often the loop's accumulator, which chains every block to the previous one.)
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn f16x2_to_f32(a: f16, b: f16) -> __m128 {
    let bits = a.to_bits() as u32 | (b.to_bits() as u32) << 16;
    _mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32))
}

/// An f16 converted to f32 in all 8 lanes (all of them used, so the conversion cannot be
/// narrowed into a merge with an unrelated register; see [`f16x2_to_f32`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn f16_broadcast_8(h: f16) -> __m256 {
    _mm256_cvtph_ps(_mm_set1_epi16(h.to_bits() as i16))
}

/// The product of two f16 values in f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn f16_product(a: f16, b: f16) -> f32 {
    let v = f16x2_to_f32(a, b);
    _mm_cvtss_f32(_mm_mul_ss(v, _mm_movehdup_ps(v)))
}

/// The product of two f16 scales, broadcast to 8 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn f16_product_8(a: f16, b: f16) -> __m256 {
    _mm256_set1_ps(f16_product(a, b))
}

/// Loads 32 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn load_u8x32(b: &[u8; 32]) -> __m256i {
    // SAFETY: reads exactly the 32 bytes `b` borrows; unaligned loads are allowed.
    unsafe { _mm256_loadu_si256(b.as_ptr().cast()) }
}

/// Loads 32 signed bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn load_i8x32(b: &[i8; 32]) -> __m256i {
    // SAFETY: reads exactly the 32 bytes `b` borrows; unaligned loads are allowed.
    unsafe { _mm256_loadu_si256(b.as_ptr().cast()) }
}

/// Loads 16 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn load_u8x16(b: &[u8; 16]) -> __m128i {
    // SAFETY: reads exactly the 16 bytes `b` borrows; unaligned loads are allowed.
    unsafe { _mm_loadu_si128(b.as_ptr().cast()) }
}

/// The sum of each 32 codes of a Q8_K block (8 i16 lanes), from its sums of 16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn q8k_sums_32(y: &BlockQ8K) -> __m128i {
    // SAFETY: reads exactly the 32 bytes of the 16 sums; unaligned loads are allowed.
    let b = unsafe { _mm256_loadu_si256(y.bsums.as_ptr().cast()) };
    _mm_hadd_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256::<1>(b))
}

/// Horizontal sum of 4 i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn hsum_i32_4(x: __m128i) -> i32 {
    let x = _mm_add_epi32(x, _mm_unpackhi_epi64(x, x));
    let x = _mm_add_epi32(x, _mm_shuffle_epi32::<0b01>(x));
    _mm_cvtsi128_si32(x)
}

/// A `pshufb` control that copies i16 lane `i` of each 128-bit half to all its lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn i16_broadcast_control(i: usize) -> __m256i {
    i16_pair_broadcast_control(i, i)
}

/// A `pshufb` control that copies i16 lane `lo` of the low 128-bit half to all its lanes and
/// lane `hi` of the high half to all of its.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn i16_pair_broadcast_control(lo: usize, hi: usize) -> __m256i {
    let word = |i: usize| (((2 * i + 1) << 8) | (2 * i)) as i16;
    _mm256_set_m128i(_mm_set1_epi16(word(hi)), _mm_set1_epi16(word(lo)))
}

/// Horizontal sum of 8 floats.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn hsum_float_8(x: __m256) -> f32 {
    let mut res = _mm256_extractf128_ps::<1>(x);
    res = _mm_add_ps(res, _mm256_castps256_ps128(x));
    res = _mm_add_ps(res, _mm_movehl_ps(res, res));
    res = _mm_add_ss(res, _mm_movehdup_ps(res));
    _mm_cvtss_f32(res)
}

/// Adds adjacent pairs of i16 lanes into 8 i32 lanes, converted to float.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn sum_i16_pairs_float(x: __m256i) -> __m256 {
    _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), x))
}

/// Dot products of groups of 4 unsigned bytes `ax` with signed bytes `sy`, as 8 float lanes.
/// Exact while each pair's sum of products fits an i16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn mul_sum_us8_pairs_float(ax: __m256i, sy: __m256i) -> __m256 {
    sum_i16_pairs_float(_mm256_maddubs_epi16(ax, sy))
}

/// Pairwise products of signed bytes summed into i16 lanes: `x[2i]*y[2i] + x[2i+1]*y[2i+1]`.
/// Exact while `y` avoids -128.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn mul_add_i8_pairs(x: __m256i, y: __m256i) -> __m256i {
    _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x))
}

/// The per-super-block setup of the Q4_K and Q5_K dot products, from a block's packed 6-bit
/// scales and mins, its scales `d` and `dmin` and the activation block `y`: the eight
/// sub-block scales as 16-bit lanes in both 128-bit halves, `[y.d · d, y.d · dmin]`, and the
/// min term `y.d · dmin · Σ mⱼ·Σaⱼ` the dot product subtracts.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn scales_and_min_term_k4(
    packed: &[u8; 12],
    d: f16,
    dmin: f16,
    y: &BlockQ8K,
) -> (__m256i, __m128, f32) {
    // Lanes 0..8: sub-block scales; 8..16: sub-block mins.
    let scales_mins = _mm256_cvtepu8_epi16(load_u8x16(&scales_mins_k4(packed)));
    let mins = _mm256_extracti128_si256::<1>(scales_mins);
    let sum_mins = hsum_i32_4(_mm_madd_epi16(mins, q8k_sums_32(y)));
    // [y.d * d, y.d * dmin]
    let d = _mm_mul_ps(_mm_set1_ps(y.d), f16x2_to_f32(d, dmin));
    let min_term = _mm_cvtss_f32(_mm_movehdup_ps(d)) * sum_mins as f32;
    let scales = _mm256_permute2x128_si256::<0>(scales_mins, scales_mins);
    (scales, d, min_term)
}

/// Dot products of groups of 4 signed bytes, as 8 float lanes. Exact while `y` avoids -128.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn mul_sum_i8_pairs_float(x: __m256i, y: __m256i) -> __m256 {
    sum_i16_pairs_float(mul_add_i8_pairs(x, y))
}

/// Looks up 32 table values: byte `j` of the result is `table[j' & 0xF]` where `j'` is the low
/// nibble of `q[j]` for `j < 16` and the high nibble of `q[j - 16]` after (the Q4_0 packing).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn lookup_nibbles_32(table: __m128i, q: &[u8; 16]) -> __m256i {
    let bits = load_u8x16(q);
    let m4 = _mm_set1_epi8(0xF);
    let lo = _mm_shuffle_epi8(table, _mm_and_si128(bits, m4));
    let hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16::<4>(bits), m4));
    _mm256_set_m128i(hi, lo)
}

/// Two i16 scales as 16 lanes: `lo` in the low eight, `hi` in the high eight (for the groups of
/// 16 values that the two halves of a 32-byte register hold).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn scale_pair(lo: i16, hi: i16) -> __m256i {
    _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo))
}

/// The 2-bit codes of 32 bytes, in four registers: register `k` holds bits `2k..2k + 2` of each
/// byte.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn two_bit_codes_32(b: &[u8; 32]) -> [__m256i; 4] {
    let (bits, m3) = (load_u8x32(b), _mm256_set1_epi8(3));
    [
        _mm256_and_si256(bits, m3),
        _mm256_and_si256(_mm256_srli_epi16::<2>(bits), m3),
        _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m3),
        _mm256_and_si256(_mm256_srli_epi16::<6>(bits), m3),
    ]
}

/// Unpacks 32 nibbles: element `j` from the low nibble of `q[j]`, element `j + 16` from the high.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn bytes_from_nibbles_32(q: &[u8; 16]) -> __m256i {
    let tmp = load_u8x16(q);
    let bytes = _mm256_set_m128i(_mm_srli_epi16::<4>(tmp), tmp);
    _mm256_and_si256(_mm256_set1_epi8(0xF), bytes)
}

/// Spreads the 32 bits of `x` to 32 bytes: byte `i` is `0xFF` when bit `i` is set, else 0.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn bytes_from_bits_32(x: u32) -> __m256i {
    let shuffle = _mm256_set_epi64x(
        0x0303_0303_0303_0303,
        0x0202_0202_0202_0202,
        0x0101_0101_0101_0101,
        0,
    );
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(x as i32), shuffle);
    let bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe));
    _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1))
}

/// Horizontal sum of 8 i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn hsum_i32_8(x: __m256i) -> i32 {
    hsum_i32_4(_mm_add_epi32(
        _mm256_castsi256_si128(x),
        _mm256_extracti128_si256::<1>(x),
    ))
}

/// Four 8-byte groups as one register, `words[0]` in the lowest bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn u64x4(words: [u64; 4]) -> __m256i {
    let [a, b, c, d] = words.map(|w| w as i64);
    _mm256_set_epi64x(d, c, b, a)
}

/// Eight 4-byte groups as one register, `words[0]` in the lowest bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn u32x8(words: [u32; 8]) -> __m256i {
    let [a, b, c, d, e, f, g, h] = words.map(|w| w as i32);
    _mm256_set_epi32(h, g, f, e, d, c, b, a)
}

/// The frame of the grid formats' dot products (IQ1_S, IQ2_*, IQ3_*): per super-block, the i32
/// lanes `sub_block(x, ib, q8)` of its eight 32-value sub-blocks (`q8` the activations of
/// sub-block `ib`) are summed exactly, and `sumf += super_block(x, y, sum)`, super-blocks in
/// order; the caller applies the format's constant factor to the result.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn grid_dot<W>(
    w: &[W],
    a: &[BlockQ8K],
    sub_block: impl Fn(&W, usize, __m256i) -> __m256i,
    super_block: impl Fn(&W, &BlockQ8K, i32) -> f32,
) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        let (q8, _) = y.qs.as_chunks::<32>();
        let mut acc = _mm256_setzero_si256();
        for (ib, q8) in q8.iter().enumerate() {
            acc = _mm256_add_epi32(acc, sub_block(x, ib, load_i8x32(q8)));
        }
        sumf += super_block(x, y, hsum_i32_8(acc));
    }
    sumf
}

/// `Σ ±grid·q8` in i16 pairs: the grid bytes `g` times the activations `q8` with the signs of
/// `s` applied, then scaled by the i16 lanes `ls` into i32 lanes (the step every grid format
/// takes per sub-block).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn signed_grid_product(g: __m256i, q8: __m256i, s: __m256i, ls: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(g, _mm256_sign_epi8(q8, s)), ls)
}
