//! AVX2 dot products of F32, F16 and BF16 rows with f32 activations: four 8-lane FMA
//! accumulators, then a scalar tail. Their tile twins dot one weight row with several activation
//! rows, loading each eight weights once for a group of [`GROUP`] rows: one row's four FMA chains
//! wait on the FMA latency, a group's twelve keep both FMA ports busy, and every row still goes
//! through exactly its own dot's operations, in its order.

use std::arch::x86_64::*;

use half::{bf16, f16};

use super::dot_from;

use crate::quant::x86::{hsum_float_8, prefetch_ahead};

/// Loads 8 floats.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load_f32x8(x: &[f32; 8]) -> __m256 {
    // SAFETY: reads exactly the 8 floats `x` borrows; unaligned loads are allowed.
    unsafe { _mm256_loadu_ps(x.as_ptr()) }
}

/// Loads 8 halves as floats.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load_f16x8(x: &[f16; 8]) -> __m256 {
    // SAFETY: reads exactly the 16 bytes `x` borrows; unaligned loads are allowed.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(x.as_ptr().cast()) })
}

/// Loads 8 bfloat16 values as floats.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load_bf16x8(x: &[bf16; 8]) -> __m256 {
    // SAFETY: reads exactly the 16 bytes `x` borrows; unaligned loads are allowed.
    let raw = unsafe { _mm_loadu_si128(x.as_ptr().cast()) };
    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(raw)))
}

/// The most activation rows a tile kernel dots with each weight load: twelve accumulators, a
/// weight register and a spare fit AVX2's sixteen.
const GROUP: usize = 3;

/// Declares the AVX2 dot product `$name` of `$t` rows (loaded eight at a time by `$load`) and its
/// tile twin `$tile`.
macro_rules! float_dot {
    ($($name:ident, $tile:ident: $t:ty, $load:ident;)*) => {$(
        #[doc = concat!("AVX2 version of `", stringify!($t), "`'s `vec_dot`.")]
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(crate) fn $name(w: &[$t], a: &[f32]) -> f32 {
            let (wc, wt) = w.as_chunks::<32>();
            let (ac, at) = a[..w.len()].as_chunks::<32>();
            let mut acc = [_mm256_setzero_ps(); 4];
            for (x, y) in wc.iter().zip(ac) {
                prefetch_ahead(x);
                let (x8, _) = x.as_chunks::<8>();
                let (y8, _) = y.as_chunks::<8>();
                for k in 0..4 {
                    acc[k] = _mm256_fmadd_ps($load(&x8[k]), load_f32x8(&y8[k]), acc[k]);
                }
            }
            let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
            dot_from(hsum_float_8(sum), wt, at)
        }

        #[doc = concat!("`", stringify!($name), "` of one weight row with each of the `out.len()`")]
        /// activation rows `a` holds one after the other, bit-identical to one dot per row.
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(crate) fn $tile(w: &[$t], a: &[f32], out: &mut [f32]) {
            /// The dots of `w` with the `G` rows of `a`, each weight loaded once for all.
            #[target_feature(enable = "avx2,fma,f16c")]
            fn group<const G: usize>(w: &[$t], a: &[f32], out: &mut [f32]) {
                let (wc, wt) = w.as_chunks::<32>();
                let rows: [(&[[f32; 32]], &[f32]); G] =
                    std::array::from_fn(|g| a[g * w.len()..(g + 1) * w.len()].as_chunks::<32>());
                let mut acc = [[_mm256_setzero_ps(); 4]; G];
                for (i, x) in wc.iter().enumerate() {
                    prefetch_ahead(x);
                    let (x8, _) = x.as_chunks::<8>();
                    for k in 0..4 {
                        let wk = $load(&x8[k]);
                        for (acc, (yc, _)) in acc.iter_mut().zip(&rows) {
                            let (y8, _) = yc[i].as_chunks::<8>();
                            acc[k] = _mm256_fmadd_ps(wk, load_f32x8(&y8[k]), acc[k]);
                        }
                    }
                }
                for ((o, acc), (_, yt)) in out.iter_mut().zip(&acc).zip(&rows) {
                    let sum =
                        _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
                    *o = dot_from(hsum_float_8(sum), wt, yt);
                }
            }
            let n = w.len();
            let mut t = 0;
            while t < out.len() {
                let a = &a[t * n..];
                match out.len() - t {
                    1 => group::<1>(w, a, &mut out[t..]),
                    2 => group::<2>(w, a, &mut out[t..]),
                    _ => group::<GROUP>(w, a, &mut out[t..]),
                }
                t += GROUP;
            }
        }
    )*};
}

float_dot! {
    vec_dot_f32, vec_dot_tile_f32: f32, load_f32x8;
    vec_dot_f16, vec_dot_tile_f16: f16, load_f16x8;
    vec_dot_bf16, vec_dot_tile_bf16: bf16, load_bf16x8;
}
