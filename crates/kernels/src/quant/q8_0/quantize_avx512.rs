//! AVX-512 Q8_0 quantizer: the activation rows of every Q4_0, Q5_0, Q8_0 and IQ4_NL product,
//! sixteen values per instruction, with the bits of the scalar [`BlockQ8_0::quantize`].

use std::arch::x86_64::*;

use half::f16;

use super::BlockQ8_0;

/// AVX-512 version of [`BlockQ8_0::quantize`] over whole blocks; bit-identical to it for
/// every input, NaN and infinities included.
///
/// The steps match the scalar quantizer one for one: the largest magnitude ignores NaN, each
/// code is `x / d` rounded half away from zero, a NaN product gives code 0 and products
/// beyond the code range saturate, as Rust's float-to-integer casts do.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(crate) fn quantize_row(x: &[f32], out: &mut [BlockQ8_0]) {
    for (b, x) in out.iter_mut().zip(x.chunks_exact(32)) {
        *b = quantize_block(x);
    }
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn quantize_block(x: &[f32]) -> BlockQ8_0 {
    let x: &[f32; 32] = x.try_into().expect("one block of values");
    // SAFETY: each load reads 16 of the block's 32 floats.
    let halves = unsafe {
        [
            _mm512_loadu_ps(x.as_ptr()),
            _mm512_loadu_ps(x.as_ptr().add(16)),
        ]
    };
    // `max(|v|, m)` keeps `m` where `|v|` is NaN, as `f32::max` does.
    let amax = _mm512_reduce_max_ps(_mm512_max_ps(
        _mm512_abs_ps(halves[1]),
        _mm512_max_ps(_mm512_abs_ps(halves[0]), _mm512_setzero_ps()),
    ));
    let d = amax / 127.0;
    let id = _mm512_set1_ps(if d != 0.0 { 1.0 / d } else { 0.0 });
    let (lo, hi) = (_mm512_set1_ps(-128.0), _mm512_set1_ps(127.0));
    let (half, one) = (_mm512_set1_ps(0.5), _mm512_set1_ps(1.0));
    let mut qs = [0i8; 32];
    for (h, v) in halves.into_iter().enumerate() {
        let p = _mm512_mul_ps(v, id);
        // Saturate first (the cast would), with NaN lanes zeroed (the cast gives 0).
        let ordered = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(p, p);
        let p = _mm512_maskz_mov_ps(ordered, _mm512_min_ps(_mm512_max_ps(p, lo), hi));
        // Round half away from zero: the truncation, one step out where the (exact) fraction
        // is at least a half.
        let t = _mm512_roundscale_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(p);
        let away = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(_mm512_abs_ps(_mm512_sub_ps(p, t)), half);
        let negative = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(p, _mm512_setzero_ps());
        let step = _mm512_mask_blend_ps(negative, one, _mm512_set1_ps(-1.0));
        let r = _mm512_mask_add_ps(t, away, t, step);
        let codes = _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(r));
        // SAFETY: writes the 16 codes of half `h` of the block.
        unsafe { _mm_storeu_si128(qs.as_mut_ptr().add(16 * h).cast(), codes) };
    }
    BlockQ8_0 {
        d: f16::from_f32(d),
        qs,
    }
}
