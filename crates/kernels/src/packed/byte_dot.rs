//! The byte and word dot products of the packed AVX-512 kernels, on two instruction sets with
//! the same integer results: AVX-512 VNNI's `vpdpbusd` and `vpdpwssd`, or, on CPUs with
//! AVX-512 BW but no VNNI (Skylake-SP class Xeons), `vpmaddubsw` and `vpmaddwd` with an add.
//!
//! Each kernel is written once, generic over [`ByteDot`], and stamped out for each set by the
//! `byte_code_kernels!` and `super_block_dot_group!` macros, whose entry points carry the
//! target features and hold the proof that the CPU has them (a [`Vnni`] or [`MultiplyAdd`]
//! value). The kernels' own functions carry AVX-512 F/BW/VL only, so VNNI's two instructions
//! are written as inline assembly, which any function with AVX-512 F may hold: the intrinsics
//! would need the feature on every function they are inlined into, and become calls where one
//! is not inlined into its entry point.
//!
//! `vpmaddubsw` adds two products `u·s` (u unsigned, s signed bytes) into a saturating 16-bit
//! lane: exact while `u < 128` (`2 · 127 · 128 < 2^15`), so codes below 128 take one
//! multiply-add pair ([`ByteDot::dpbusd_7bit`]), and small codes' pair sums are added in 16
//! bits before one widening ([`ByteDot::dot_7bit`]); wider codes are split into their low
//! seven bits and their top bit, each exact ([`ByteDot::dpbusd`]).

use std::arch::asm;
use std::arch::x86_64::*;

/// The integer dot products of a packed AVX-512 kernel, in 32-bit lanes.
pub(crate) trait ByteDot: Copy {
    /// `acc + Σ u·s` over each lane's four byte pairs (`u` unsigned bytes, `s` signed): VNNI's
    /// `vpdpbusd`.
    fn dpbusd(self, acc: __m512i, u: __m512i, s: __m512i) -> __m512i;
    /// [`ByteDot::dpbusd`] where every byte of `u` is below 128.
    fn dpbusd_7bit(self, acc: __m512i, u: __m512i, s: __m512i) -> __m512i;
    /// `Σ_k Σ u_k·s_k` per lane (no accumulator) over `K` pairs of vectors: two chains of
    /// [`ByteDot::dpbusd`], so that neither waits on the other.
    #[inline(always)]
    fn dot<const K: usize>(self, u: [__m512i; K], s: [__m512i; K]) -> __m512i {
        // SAFETY: every implementor proves AVX-512 F.
        let zero = unsafe { _mm512_setzero_si512() };
        let (mut even, mut odd) = (zero, zero);
        for k in 0..K {
            match k % 2 {
                0 => even = self.dpbusd(even, u[k], s[k]),
                _ => odd = self.dpbusd(odd, u[k], s[k]),
            }
        }
        // SAFETY: as above.
        unsafe { _mm512_add_epi32(even, odd) }
    }
    /// [`ByteDot::dot`] where every unsigned byte is at most `max_code` (below 128): with
    /// multiply-adds, as many 16-bit pair sums added in 16 bits as stay exact
    /// (`n · 2 · max_code · 128 < 2^15`) before each widening.
    #[inline(always)]
    fn dot_7bit<const K: usize>(self, max_code: u8, u: [__m512i; K], s: [__m512i; K]) -> __m512i {
        let _ = max_code;
        self.dot(u, s)
    }
    /// `scale · Σ_k Σ u_k·s_k` per lane: [`ByteDot::dot_7bit`] times the lane's scale, given
    /// by [`ByteDot::lane_scales`]. With multiply-adds, each widening multiplies by the scale
    /// instead of by one, so the scale costs no instruction of its own.
    #[inline(always)]
    fn scaled_dot_7bit<const K: usize>(
        self,
        max_code: u8,
        u: [__m512i; K],
        s: [__m512i; K],
        scales: __m512i,
    ) -> __m512i {
        // SAFETY: every implementor proves AVX-512 F.
        unsafe { _mm512_mullo_epi32(self.dot_7bit(max_code, u, s), scales) }
    }
    /// Sixteen lane scales (32-bit, each within ±2^15) in the form that
    /// [`ByteDot::scaled_dot_7bit`] takes.
    #[inline(always)]
    fn lane_scales(self, scales: __m512i) -> __m512i {
        scales
    }
    /// `acc + Σ a·b` over each lane's two 16-bit pairs (wrapping): VNNI's `vpdpwssd`.
    fn dpwssd(self, acc: __m512i, a: __m512i, b: __m512i) -> __m512i;
}

/// Each row's `(−offset·sc₀, −offset·sc₁)` as the two 16-bit halves of its lane, from two
/// vectors of 32-bit lane scales (each `|offset·sc|` below 2^15): with [`ByteDot::dpwssd`]
/// against [`word_pair`] of two groups' activation sums, it subtracts both groups' code offset
/// from a scaled dot in one instruction.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn negated_scale_pairs(sc0: __m512i, sc1: __m512i, offset: i32) -> __m512i {
    let factor = _mm512_set1_epi32(-offset);
    let (low, high) = (
        _mm512_mullo_epi32(sc0, factor),
        _mm512_mullo_epi32(sc1, factor),
    );
    let low = _mm512_and_si512(low, _mm512_set1_epi32(0xFFFF));
    _mm512_or_si512(low, _mm512_slli_epi32::<16>(high))
}

/// `low` and `high` as the two 16-bit halves of every 32-bit lane.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn word_pair(low: i16, high: i16) -> __m512i {
    _mm512_set1_epi32((low as u16 as u32 | (high as u16 as u32) << 16) as i32)
}

/// The four activations `q[4k..4k + 4]` in every 32-bit lane.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn broadcast_quad(q: &[i8], k: usize) -> __m512i {
    let q: [i8; 4] = q[4 * k..4 * k + 4].try_into().expect("four activations");
    _mm512_set1_epi32(i32::from_le_bytes(q.map(|v| v as u8)))
}

/// Proof that the CPU has AVX-512 F, BW, VL and VNNI: the dot products are VNNI's.
#[derive(Clone, Copy)]
pub(crate) struct Vnni(());

impl Vnni {
    /// # Safety
    /// The CPU must support AVX-512 F, BW, VL and VNNI.
    #[inline(always)]
    pub(crate) unsafe fn new() -> Self {
        Vnni(())
    }
}

impl ByteDot for Vnni {
    #[inline(always)]
    fn dpbusd(self, acc: __m512i, u: __m512i, s: __m512i) -> __m512i {
        // SAFETY: a `Vnni` exists only where the CPU has AVX-512 F and VNNI.
        unsafe { vpdpbusd(acc, u, s) }
    }

    #[inline(always)]
    fn dpbusd_7bit(self, acc: __m512i, u: __m512i, s: __m512i) -> __m512i {
        self.dpbusd(acc, u, s)
    }

    #[inline(always)]
    fn dpwssd(self, acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: a `Vnni` exists only where the CPU has AVX-512 F and VNNI.
        unsafe { vpdpwssd(acc, a, b) }
    }
}

/// VNNI's `vpdpbusd`.
///
/// # Safety
/// The CPU must support AVX-512 VNNI.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn vpdpbusd(mut acc: __m512i, u: __m512i, s: __m512i) -> __m512i {
    // SAFETY: the caller checked VNNI; the instruction reads and writes registers only.
    unsafe {
        asm!(
            "vpdpbusd {acc}, {u}, {s}",
            acc = inout(zmm_reg) acc,
            u = in(zmm_reg) u,
            s = in(zmm_reg) s,
            options(pure, nomem, nostack, preserves_flags),
        )
    };
    acc
}

/// VNNI's `vpdpwssd`.
///
/// # Safety
/// The CPU must support AVX-512 VNNI.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn vpdpwssd(mut acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
    // SAFETY: the caller checked VNNI; the instruction reads and writes registers only.
    unsafe {
        asm!(
            "vpdpwssd {acc}, {a}, {b}",
            acc = inout(zmm_reg) acc,
            a = in(zmm_reg) a,
            b = in(zmm_reg) b,
            options(pure, nomem, nostack, preserves_flags),
        )
    };
    acc
}

/// Proof that the CPU has AVX-512 F, BW and VL: the dot products are multiply-adds.
#[derive(Clone, Copy)]
pub(crate) struct MultiplyAdd(());

impl MultiplyAdd {
    /// # Safety
    /// The CPU must support AVX-512 F, BW and VL.
    #[inline(always)]
    pub(crate) unsafe fn new() -> Self {
        MultiplyAdd(())
    }
}

impl ByteDot for MultiplyAdd {
    #[inline(always)]
    fn dpbusd(self, acc: __m512i, u: __m512i, s: __m512i) -> __m512i {
        // SAFETY: a `MultiplyAdd` exists only where the CPU has AVX-512 F and BW.
        unsafe {
            // u = low + 128·top with low = u & 0x7F and top = u >> 7 (bytewise; the 16-bit
            // shift's carry from the neighbouring byte is masked off).
            let low = _mm512_and_si512(u, _mm512_set1_epi8(0x7F));
            let top = _mm512_and_si512(_mm512_srli_epi16::<7>(u), _mm512_set1_epi8(1));
            let low = _mm512_madd_epi16(_mm512_maddubs_epi16(low, s), _mm512_set1_epi16(1));
            let top = _mm512_madd_epi16(_mm512_maddubs_epi16(top, s), _mm512_set1_epi16(128));
            _mm512_add_epi32(acc, _mm512_add_epi32(low, top))
        }
    }

    #[inline(always)]
    fn dpbusd_7bit(self, acc: __m512i, u: __m512i, s: __m512i) -> __m512i {
        // SAFETY: a `MultiplyAdd` exists only where the CPU has AVX-512 F and BW.
        unsafe {
            let pairs = _mm512_maddubs_epi16(u, s);
            _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)))
        }
    }

    #[inline(always)]
    fn dpwssd(self, acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: a `MultiplyAdd` exists only where the CPU has AVX-512 F and BW.
        unsafe { _mm512_add_epi32(acc, _mm512_madd_epi16(a, b)) }
    }

    #[inline(always)]
    fn dot_7bit<const K: usize>(self, max_code: u8, u: [__m512i; K], s: [__m512i; K]) -> __m512i {
        // SAFETY: a `MultiplyAdd` exists only where the CPU has AVX-512 F and BW.
        let ones = unsafe { _mm512_set1_epi16(1) };
        self.scaled_dot_7bit(max_code, u, s, ones)
    }

    #[inline(always)]
    fn scaled_dot_7bit<const K: usize>(
        self,
        max_code: u8,
        u: [__m512i; K],
        s: [__m512i; K],
        scales: __m512i,
    ) -> __m512i {
        debug_assert!(max_code < 128);
        // Pair sums of 16 bits added before one widening: |each| ≤ 2·max_code·128, so every
        // 16-bit sum stays within ±2^15, and `vpmaddwd`'s products of two such sums with
        // scales within ±2^15 fit in 32 bits.
        let per_widening = (i16::MAX as usize / (256 * max_code.max(1) as usize)).max(1);
        // SAFETY: a `MultiplyAdd` exists only where the CPU has AVX-512 F and BW.
        unsafe {
            let mut sum = _mm512_setzero_si512();
            for (u, s) in u.chunks(per_widening).zip(s.chunks(per_widening)) {
                let mut pairs = _mm512_maddubs_epi16(u[0], s[0]);
                for (u, s) in u.iter().zip(s).skip(1) {
                    pairs = _mm512_add_epi16(pairs, _mm512_maddubs_epi16(*u, *s));
                }
                sum = _mm512_add_epi32(sum, _mm512_madd_epi16(pairs, scales));
            }
            sum
        }
    }

    /// Each lane's scale in both of its 16-bit halves, for `vpmaddwd`.
    #[inline(always)]
    fn lane_scales(self, scales: __m512i) -> __m512i {
        // SAFETY: a `MultiplyAdd` exists only where the CPU has AVX-512 F and BW.
        unsafe {
            let low = _mm512_and_si512(scales, _mm512_set1_epi32(0xFFFF));
            _mm512_or_si512(low, _mm512_slli_epi32::<16>(scales))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `vpdpbusd` and `vpdpwssd` written out lane by lane.
    fn reference(acc: [i32; 16], u: [u8; 64], s: [i8; 64], words: bool) -> [i32; 16] {
        std::array::from_fn(|l| {
            let sum: i32 = if words {
                (0..2)
                    .map(|k| {
                        let a = i16::from_le_bytes([u[4 * l + 2 * k], u[4 * l + 2 * k + 1]]);
                        let b = i16::from_le_bytes([
                            s[4 * l + 2 * k] as u8,
                            s[4 * l + 2 * k + 1] as u8,
                        ]);
                        i32::from(a) * i32::from(b)
                    })
                    .fold(0i32, i32::wrapping_add)
            } else {
                (0..4)
                    .map(|k| i32::from(u[4 * l + k]) * i32::from(s[4 * l + k]))
                    .sum()
            };
            acc[l].wrapping_add(sum)
        })
    }

    fn run(
        f: impl Fn(__m512i, __m512i, __m512i) -> __m512i,
        acc: [i32; 16],
        u: [u8; 64],
        s: [i8; 64],
    ) -> [i32; 16] {
        // SAFETY: only called where AVX-512 F was detected; each transmute is between
        // 64-byte plain-data types.
        unsafe {
            let v = f(
                std::mem::transmute::<[i32; 16], __m512i>(acc),
                std::mem::transmute::<[u8; 64], __m512i>(u),
                std::mem::transmute::<[i8; 64], __m512i>(s),
            );
            std::mem::transmute::<__m512i, [i32; 16]>(v)
        }
    }

    /// Random lanes and the extremes: every byte 255 or 127 against -128 and 127, words at
    /// ±32768, accumulators near the wrap.
    fn cases() -> Vec<([i32; 16], [u8; 64], [i8; 64])> {
        let mut next = crate::packed::tests::xorshift(0x9E37_79B9_7F4A_7C15);
        let mut cases = vec![];
        for u in [0u8, 127, 128, 255] {
            for s in [-128i8, -1, 0, 127] {
                cases.push(([i32::MAX - 5; 16], [u; 64], [s; 64]));
                cases.push(([i32::MIN + 5; 16], [u; 64], [s; 64]));
            }
        }
        for _ in 0..200 {
            let acc = std::array::from_fn(|_| next() as i32);
            let u = std::array::from_fn(|_| next() as u8);
            let s = std::array::from_fn(|_| next() as i8);
            cases.push((acc, u, s));
        }
        cases
    }

    #[test]
    fn multiply_adds_give_vnni_results() {
        if !(is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw")) {
            eprintln!("skipped: this CPU has no AVX-512 BW");
            return;
        }
        // SAFETY: AVX-512 F and BW were detected just above.
        let d = unsafe { MultiplyAdd::new() };
        for (acc, u, s) in cases() {
            assert_eq!(
                run(|a, u, s| d.dpbusd(a, u, s), acc, u, s),
                reference(acc, u, s, false)
            );
            assert_eq!(
                run(|a, u, s| d.dpwssd(a, u, s), acc, u, s),
                reference(acc, u, s, true)
            );
            let low = u.map(|b| b & 0x7F);
            let got = run(|a, u, s| d.dpbusd_7bit(a, u, s), acc, low, s);
            assert_eq!(got, reference(acc, low, s, false));
        }
        if is_x86_feature_detected!("avx512vnni") {
            // SAFETY: AVX-512 VNNI was detected just above.
            let v = unsafe { Vnni::new() };
            for (acc, u, s) in cases() {
                assert_eq!(
                    run(|a, u, s| v.dpbusd(a, u, s), acc, u, s),
                    reference(acc, u, s, false)
                );
                assert_eq!(
                    run(|a, u, s| v.dpwssd(a, u, s), acc, u, s),
                    reference(acc, u, s, true)
                );
            }
        }
    }

    #[test]
    fn scaled_dots_are_scale_times_dot() {
        if !(is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw")) {
            eprintln!("skipped: this CPU has no AVX-512 BW");
            return;
        }
        // SAFETY: AVX-512 F and BW were detected just above.
        let d = unsafe { MultiplyAdd::new() };
        let vnni = is_x86_feature_detected!("avx512vnni");
        let all = cases();
        for max_code in [1u8, 15, 31, 63, 127] {
            for (i, (scales, _, _)) in all.iter().enumerate() {
                let scales = scales.map(|x| x >> 16);
                let pairs: [([u8; 64], [i8; 64]); 8] = std::array::from_fn(|k| {
                    let (_, u, s) = all[(i + k + 1) % all.len()];
                    (u.map(|b| b % (max_code + 1)), s)
                });
                let expected: [i32; 16] = std::array::from_fn(|l| {
                    let dot = pairs
                        .iter()
                        .map(|(u, s)| reference([0; 16], *u, *s, false)[l])
                        .fold(0i32, i32::wrapping_add);
                    dot.wrapping_mul(scales[l])
                });
                // SAFETY: AVX-512 F was detected above (and VNNI where `v` is made); each
                // transmute is between 64-byte plain-data types.
                let scaled = |f: &dyn Fn([__m512i; 8], [__m512i; 8], __m512i) -> __m512i| unsafe {
                    let u = pairs.map(|(u, _)| std::mem::transmute::<[u8; 64], __m512i>(u));
                    let s = pairs.map(|(_, s)| std::mem::transmute::<[i8; 64], __m512i>(s));
                    let sc = std::mem::transmute::<[i32; 16], __m512i>(scales);
                    std::mem::transmute::<__m512i, [i32; 16]>(f(u, s, sc))
                };
                let got = scaled(&|u, s, sc| d.scaled_dot_7bit(max_code, u, s, d.lane_scales(sc)));
                assert_eq!(got, expected, "max code {max_code}");
                if vnni {
                    // SAFETY: AVX-512 VNNI was detected above.
                    let v = unsafe { Vnni::new() };
                    let got =
                        scaled(&|u, s, sc| v.scaled_dot_7bit(max_code, u, s, v.lane_scales(sc)));
                    assert_eq!(got, expected, "max code {max_code}");
                }
            }
        }
    }
}
