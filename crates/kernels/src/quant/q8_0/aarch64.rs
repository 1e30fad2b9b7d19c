//! NEON Q8_0 × Q8_0 dot products, with the float steps of the packed x86 kernel (`q8_0x16`),
//! and the kernels of every 32-value block type with one scale against Q8_0 activations
//! ([`ScaledCodes32`], [`q8_0_kernels`]).

use std::arch::aarch64::*;

use super::BlockQ8_0;
use crate::quant::aarch64::{Dot4, dot32, hsum_i32, load_i8x32, smmla};

/// A 32-value weight block with one scale, dotted against Q8_0 (Q4_0, Q5_0, Q8_0, IQ4_NL):
/// what the two-row `smmla` kernel ([`pair_tile_q8_0`]) needs of it.
pub(crate) trait ScaledCodes32 {
    /// The block's 32 codes as the signed values they stand for, in two registers of 16.
    fn codes(&self) -> [int8x16_t; 2];
    /// The block's scale.
    fn scale(&self) -> f32;
}

/// Two weight rows `w` (`2·nb` blocks, row 0 first) against the `n = out.len() / 2` activation
/// rows of `a` (`nb` blocks each): `out[r·n + t]` is row `r` against row `t`, with the bits of
/// the one-row kernels (per block the exact integer `Σ q·a`, then `acc = fma(d_w·d_a, sum, acc)`,
/// blocks in order).
///
/// `smmla` multiplies a 2×8 by an 8×2 byte matrix: with the two weight rows' bytes as the rows
/// of one operand and two tokens' as the other, each instruction does four 8-value dots, all of
/// them needed (a one-row dot wastes half of them, so rows come in pairs).
///
/// # Safety
/// The CPU must support the int8 matrix-multiply extension.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) unsafe fn pair_tile_q8_0<W: ScaledCodes32>(w: &[W], a: &[BlockQ8_0], out: &mut [f32]) {
    let nb = w.len() / 2;
    let n = out.len() / 2;
    let (w0, w1) = w.split_at(nb);
    for t0 in (0..n).step_by(2) {
        // An odd last token is paired with itself.
        let t1 = (t0 + 1).min(n - 1);
        let (y0, y1) = (&a[t0 * nb..(t0 + 1) * nb], &a[t1 * nb..(t1 + 1) * nb]);
        let mut acc = vdupq_n_f32(0.0);
        for (((x0, x1), y0), y1) in w0.iter().zip(w1).zip(y0).zip(y1) {
            let (c0, c1) = (x0.codes(), x1.codes());
            let (q0, q1) = (load_i8x32(&y0.qs), load_i8x32(&y1.qs));
            let mut sums = vdupq_n_s32(0);
            for h in 0..2 {
                // Each 8-byte chunk of this half: both rows' bytes, against both tokens'.
                let (r0, r1) = (vreinterpretq_s64_s8(c0[h]), vreinterpretq_s64_s8(c1[h]));
                let (s0, s1) = (vreinterpretq_s64_s8(q0[h]), vreinterpretq_s64_s8(q1[h]));
                for (wpair, ypair) in [
                    (vzip1q_s64(r0, r1), vzip1q_s64(s0, s1)),
                    (vzip2q_s64(r0, r1), vzip2q_s64(s0, s1)),
                ] {
                    let (wpair, ypair) = (vreinterpretq_s8_s64(wpair), vreinterpretq_s8_s64(ypair));
                    // SAFETY: the caller guarantees the int8 matrix-multiply extension.
                    sums = unsafe { smmla(sums, wpair, ypair) };
                }
            }
            let (d0, d1) = (x0.scale(), x1.scale());
            let (e0, e1) = (y0.d.to_f32(), y1.d.to_f32());
            let d = [d0 * e0, d0 * e1, d1 * e0, d1 * e1];
            // SAFETY: reads the four floats of `d`.
            acc = vfmaq_f32(acc, vcvtq_f32_s32(sums), unsafe { vld1q_f32(d.as_ptr()) });
        }
        let mut lanes = [0.0f32; 4];
        // SAFETY: writes the four floats of `lanes`.
        unsafe { vst1q_f32(lanes.as_mut_ptr(), acc) };
        out[t0] = lanes[0];
        out[n + t0] = lanes[2];
        out[t1] = lanes[1];
        out[n + t1] = lanes[3];
    }
}

/// The dot product of a row of [`ScaledCodes32`] blocks with a Q8_0 row: per block the exact
/// integer `Σ q·a`, then `acc = fma(d_w·d_a, sum, acc)`, blocks in order (the arithmetic of the
/// packed x86 kernels, `byte_codes_reference`).
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) unsafe fn vec_dot_q8_0<D: Dot4, W: ScaledCodes32>(w: &[W], a: &[BlockQ8_0]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        // SAFETY: the caller guarantees what `D` needs.
        let sum = hsum_i32(unsafe { dot32::<D>(x.codes(), load_i8x32(&y.qs)) });
        acc = (x.scale() * y.d.to_f32()).mul_add(sum as f32, acc);
    }
    acc
}

/// Stamps out the kernels of a [`ScaledCodes32`] block type `$w` against Q8_0:
/// `vec_dot_neon`, `vec_dot_dotprod` ([`vec_dot_q8_0`]) and `vec_dot_pairs_i8mm`
/// ([`pair_tile_q8_0`]). With `table` and `scale`, for a format whose 32 nibbles (field `qs`)
/// index the 16-entry table `$table` (IQ4_NL, MXFP4), it implements [`ScaledCodes32`] too,
/// the block `$b`'s scale being `$scale`.
macro_rules! q8_0_kernels {
    ($w:ty, table: $table:path, scale: |$b:ident| $scale:expr) => {
        impl $crate::quant::q8_0::aarch64::ScaledCodes32 for $w {
            /// The table values the nibbles index.
            #[inline(always)]
            fn codes(&self) -> [::std::arch::aarch64::int8x16_t; 2] {
                $crate::quant::aarch64::table_nibbles_32(&$table, &self.qs)
            }

            #[inline(always)]
            fn scale(&self) -> f32 {
                let $b = self;
                $scale
            }
        }

        $crate::quant::q8_0::aarch64::q8_0_kernels!($w);
    };
    ($w:ty) => {
        /// The dot product ([`vec_dot_q8_0`](crate::quant::q8_0::aarch64::vec_dot_q8_0)).
        ///
        /// # Safety
        /// The CPU must support what `D` needs.
        #[inline]
        #[target_feature(enable = "neon")]
        unsafe fn vec_dot<D: $crate::quant::aarch64::Dot4>(
            w: &[$w],
            a: &[$crate::quant::q8_0::BlockQ8_0],
        ) -> f32 {
            // SAFETY: the caller guarantees what `D` needs.
            unsafe { $crate::quant::q8_0::aarch64::vec_dot_q8_0::<D, $w>(w, a) }
        }

        $crate::quant::aarch64::dot4_kernels!(
            vec_dot(w: &[$w], a: &[$crate::quant::q8_0::BlockQ8_0]) -> f32;
            vec_dot_neon,
            vec_dot_dotprod
        );

        /// Two rows against several tokens with the int8 matrix-multiply extension
        /// ([`pair_tile_q8_0`](crate::quant::q8_0::aarch64::pair_tile_q8_0)).
        #[target_feature(enable = "neon,dotprod,i8mm")]
        pub(crate) fn vec_dot_pairs_i8mm(
            w: &[$w],
            a: &[$crate::quant::q8_0::BlockQ8_0],
            out: &mut [f32],
        ) {
            // SAFETY: this function enables the int8 matrix-multiply extension.
            unsafe { $crate::quant::q8_0::aarch64::pair_tile_q8_0(w, a, out) }
        }
    };
}
pub(crate) use q8_0_kernels;

impl ScaledCodes32 for BlockQ8_0 {
    #[inline(always)]
    fn codes(&self) -> [int8x16_t; 2] {
        // SAFETY: NEON is part of every AArch64 CPU.
        unsafe { load_i8x32(&self.qs) }
    }

    #[inline(always)]
    fn scale(&self) -> f32 {
        self.d.to_f32()
    }
}

q8_0_kernels!(BlockQ8_0);
