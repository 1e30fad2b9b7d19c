//! AVX-512 Q8_K quantizer: the activation rows of every K-quant product, sixteen values per
//! instruction, with the bits of the scalar [`BlockQ8K::quantize`].

use std::arch::x86_64::*;

use rinfer_formats::QK_K;

use super::BlockQ8K;

/// AVX-512 version of [`BlockQ8K::quantize`] over whole blocks; bit-identical to it for every
/// input, NaN and infinities included.
///
/// The steps match the scalar quantizer one for one: the scale comes from the first value of
/// largest magnitude (NaN never is one), each code is `iscale · x` rounded to nearest even and
/// capped at 127, and a code is the low byte of that integer, as Rust's `as i8` keeps it (NaN
/// and out-of-range products give 0 both ways).
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(crate) fn quantize_row(x: &[f32], out: &mut [BlockQ8K]) {
    for (b, x) in out.iter_mut().zip(x.chunks_exact(QK_K)) {
        *b = quantize_block(x);
    }
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn quantize_block(x: &[f32]) -> BlockQ8K {
    let x: &[f32; QK_K] = x.try_into().expect("one block of values");
    let load = |i: usize| {
        // SAFETY: reads the 16 floats `16i..16i + 16` of the 256-value block.
        unsafe { _mm512_loadu_ps(x.as_ptr().add(16 * i)) }
    };
    let mut amax = _mm512_setzero_ps();
    for i in 0..QK_K / 16 {
        // `max(amax, |v|)` keeps `amax` where `|v|` is NaN, as the scalar `>` test does.
        amax = _mm512_max_ps(_mm512_abs_ps(load(i)), amax);
    }
    let amax_all = _mm512_set1_ps(_mm512_reduce_max_ps(amax));
    let mut b = BlockQ8K {
        d: 0.0,
        qs: [0; QK_K],
        bsums: [0; QK_K / 16],
    };
    if _mm512_reduce_max_ps(amax) == 0.0 {
        return b;
    }
    // The first value whose magnitude is the largest: the one the scalar scan keeps.
    let max = (0..QK_K / 16)
        .find_map(|i| {
            let hits = _mm512_cmpeq_ps_mask(_mm512_abs_ps(load(i)), amax_all);
            (hits != 0).then(|| x[16 * i + hits.trailing_zeros() as usize])
        })
        .expect("the largest magnitude is one of the values");
    let iscale = -127.0 / max;
    let (scale, cap) = (_mm512_set1_ps(iscale), _mm512_set1_epi32(127));
    for i in 0..QK_K / 16 {
        let q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(scale, load(i))), cap);
        // SAFETY: writes the 16 codes `16i..16i + 16` of the block.
        unsafe {
            _mm_storeu_si128(
                b.qs.as_mut_ptr().add(16 * i).cast(),
                _mm512_cvtepi32_epi8(q),
            )
        };
        let codes = _mm512_cvtepi8_epi32(_mm512_cvtepi32_epi8(q));
        b.bsums[i] = _mm512_reduce_add_epi32(codes) as i16;
    }
    b.d = 1.0 / iscale;
    b
}
