//! AArch64 building blocks shared by the per-type NEON kernels.
//!
//! A kernel is written once, generic over [`Dot4`] (dot products of groups of four signed
//! bytes), and stamped out twice by [`dot4_kernels`]: with plain NEON widening multiplies
//! ([`Widening`]) and with the dot-product extension's `sdot` ([`Sdot`]). Both give the same
//! exact integers, so the two entries return the same bits.
//!
//! The float steps are those of the x86 packed (AVX-512) kernels, which their scalar
//! references in `crate::packed` spell out: per row and block (super-block for the K-quants)
//! the exact integer sums, converted to f32 and added to the running sum with one fused
//! multiply-add each (scale products `d_w · d_a`), blocks in order. So wherever both use
//! integer dots, a NEON kernel returns the bits the x86 packed kernel gives that row, and a
//! tile kernel built on `smmla` (sums of eight products, of two rows at once) returns the bits
//! of its one-row twin.
//!
//! The dot-product and matrix-multiply instructions are not yet stable Rust intrinsics; they are
//! written as inline assembly in functions that enable their target feature.

use std::arch::aarch64::*;
use std::arch::asm;

use super::q8_k::BlockQ8K;
use super::signed_grid::SignedGrid;

/// Dot products of groups of four signed bytes: lane `j` of the result is `acc[j]` plus
/// `Σ a[4j + k] · b[4j + k]` over `k < 4`, exact for all inputs.
pub(crate) trait Dot4 {
    /// The dot products.
    ///
    /// # Safety
    /// The CPU must support what the implementation needs (see each).
    unsafe fn dot4(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t;
}

/// [`Dot4`] with plain NEON widening multiplies and pairwise adds (every AArch64 CPU).
pub(crate) struct Widening;

impl Dot4 for Widening {
    #[inline(always)]
    unsafe fn dot4(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        // SAFETY: NEON is part of every AArch64 CPU.
        unsafe {
            let lo = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
            let hi = vpaddlq_s16(vmull_high_s8(a, b));
            vaddq_s32(acc, vpaddq_s32(lo, hi))
        }
    }
}

/// [`Dot4`] with the dot-product extension's `sdot`.
pub(crate) struct Sdot;

impl Dot4 for Sdot {
    /// # Safety
    /// The CPU must support the dot-product extension.
    #[inline(always)]
    unsafe fn dot4(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        // SAFETY: the caller guarantees the dot-product extension.
        unsafe { sdot(acc, a, b) }
    }
}

/// Declares a function that runs one int8 instruction `$insn acc.4s, a.16b, b.16b` of the target
/// feature `$feature` (an extension its callers detected) and gives the accumulator.
macro_rules! int8_instruction {
    ($(#[$doc:meta])* $name:ident, $insn:literal, $feature:literal) => {
        $(#[$doc])*
        #[inline]
        #[target_feature(enable = $feature)]
        pub(crate) fn $name(mut acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
            // SAFETY: the instruction only reads and writes the named vector registers; the
            // function enables its extension, which its callers detected.
            unsafe {
                asm!(
                    concat!($insn, " {acc:v}.4s, {a:v}.16b, {b:v}.16b"),
                    acc = inout(vreg) acc,
                    a = in(vreg) a,
                    b = in(vreg) b,
                    options(pure, nomem, nostack, preserves_flags),
                );
            }
            acc
        }
    };
}

int8_instruction!(
    /// `sdot`: lane `j` of `acc` plus the dot product of bytes `4j..4j + 4` of `a` and `b`.
    sdot, "sdot", "dotprod"
);
int8_instruction!(
    /// `smmla`: with `a` as a 2×8 matrix (rows: its two 8-byte halves) and `b` likewise,
    /// `acc + a·bᵀ` as a 2×2 matrix `[c00, c01, c10, c11]`, each an exact sum of eight products.
    smmla, "smmla", "i8mm"
);

/// Loads 16 signed bytes.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn load_i8x16(b: &[i8; 16]) -> int8x16_t {
    // SAFETY: reads exactly the 16 bytes `b` borrows; NEON loads need no alignment.
    unsafe { vld1q_s8(b.as_ptr()) }
}

/// Loads 16 bytes.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn load_u8x16(b: &[u8; 16]) -> uint8x16_t {
    // SAFETY: reads exactly the 16 bytes `b` borrows; NEON loads need no alignment.
    unsafe { vld1q_u8(b.as_ptr()) }
}

/// The two 16-byte halves of a 32-byte array, as signed bytes.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn load_i8x32(b: &[i8; 32]) -> [int8x16_t; 2] {
    let (halves, _) = b.as_chunks::<16>();
    [load_i8x16(&halves[0]), load_i8x16(&halves[1])]
}

/// The two 16-byte halves of a 32-byte array.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn load_u8x32(b: &[u8; 32]) -> [uint8x16_t; 2] {
    let (halves, _) = b.as_chunks::<16>();
    [load_u8x16(&halves[0]), load_u8x16(&halves[1])]
}

/// The sum of the four i32 lanes of `x` (exact: the kernels' sums fit an i32).
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn hsum_i32(x: int32x4_t) -> i32 {
    vaddvq_s32(x)
}

/// The dot product of 32 signed bytes, `x` and `y` each as two 16-byte halves, as four lanes.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot32<D: Dot4>(x: [int8x16_t; 2], y: [int8x16_t; 2]) -> int32x4_t {
    // SAFETY: the caller guarantees what `D` needs.
    unsafe { D::dot4(D::dot4(vdupq_n_s32(0), x[0], y[0]), x[1], y[1]) }
}

/// Stamps out the two entries of a kernel body generic over [`Dot4`]:
/// `$neon` with [`Widening`] (any AArch64 CPU) and `$dotprod` with [`Sdot`].
macro_rules! dot4_kernels {
    ($body:ident($($arg:ident: $ty:ty),*) -> $ret:ty; $neon:ident, $dotprod:ident) => {
        /// The NEON kernel (any AArch64 CPU).
        #[target_feature(enable = "neon")]
        pub(crate) fn $neon($($arg: $ty),*) -> $ret {
            // SAFETY: `Widening` needs NEON only, which this function enables.
            unsafe { $body::<$crate::quant::aarch64::Widening>($($arg),*) }
        }

        /// The NEON kernel with the dot-product extension.
        #[target_feature(enable = "neon,dotprod")]
        pub(crate) fn $dotprod($($arg: $ty),*) -> $ret {
            // SAFETY: `Sdot` needs the dot-product extension, which this function enables.
            unsafe { $body::<$crate::quant::aarch64::Sdot>($($arg),*) }
        }
    };
}
pub(crate) use dot4_kernels;

/// The exact `Σ_j m_j · (bsums[2j] + bsums[2j + 1])` of eight sub-block mins against a Q8_K
/// block's sums of 16 (the min term of Q4_K and Q5_K).
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn mins_dot_q8k(mins: &[u8; 8], y: &BlockQ8K) -> i32 {
    let (sums, _) = y.bsums.as_chunks::<8>();
    // SAFETY: each load reads exactly the 8 sums or 8 mins its array holds.
    let (s0, s1, m) = unsafe {
        (
            vld1q_s16(sums[0].as_ptr()),
            vld1q_s16(sums[1].as_ptr()),
            vld1_u8(mins.as_ptr()),
        )
    };
    // Sums of 32 (at most 32 · 128 in magnitude: no i16 overflow) times the mins (below 64).
    let sums_32 = vpaddq_s16(s0, s1);
    let m = vreinterpretq_s16_u16(vmovl_u8(m));
    let lo = vmull_s16(vget_low_s16(sums_32), vget_low_s16(m));
    let hi = vmull_high_s16(sums_32, m);
    vaddvq_s32(vaddq_s32(lo, hi))
}

/// The 32 fifth bits of a Q5_0 or Q5_1 block (`qh`, bit `j` for value `j`) as bytes `0x10` or
/// 0, values `0..16` in the first register and `16..32` in the second.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn fifth_bits_32(qh: [u8; 4]) -> [uint8x16_t; 2] {
    const INDEX: [u8; 32] = {
        let mut index = [0u8; 32];
        let mut j = 0;
        while j < 32 {
            index[j] = (j / 8) as u8;
            j += 1;
        }
        index
    };
    const BIT: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
    let bytes = vreinterpretq_u8_u32(vdupq_n_u32(u32::from_le_bytes(qh)));
    let (index, _) = INDEX.as_chunks::<16>();
    let (bit, m16) = (load_u8x16(&BIT), vdupq_n_u8(0x10));
    let spread = |index: &[u8; 16]| vqtbl1q_u8(bytes, load_u8x16(index));
    [0, 1].map(|h| vandq_u8(vtstq_u8(spread(&index[h]), bit), m16))
}

/// The 32 nibbles of a Q4_0-packed block (element `j` in the low nibble of `q[j]`, element
/// `j + 16` in the high one) as bytes, in two registers of 16.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn nibbles_32(q: &[u8; 16]) -> [uint8x16_t; 2] {
    let bits = load_u8x16(q);
    [vandq_u8(bits, vdupq_n_u8(0xF)), vshrq_n_u8::<4>(bits)]
}

/// The entries of the 16-byte `table` that the 32 nibbles of `q` index, in the order of
/// [`nibbles_32`].
#[inline(always)]
pub(crate) fn table_nibbles_32(table: &[i8; 16], q: &[u8; 16]) -> [int8x16_t; 2] {
    // SAFETY: NEON is part of every AArch64 CPU.
    unsafe {
        let table = load_i8x16(table);
        nibbles_32(q).map(|n| vqtbl1q_s8(table, n))
    }
}

/// Two 8-byte groups as one register of signed bytes, `words[0]` in the low half.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn i8x16_from_u64x2(words: [u64; 2]) -> int8x16_t {
    vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(words[0]), vcreate_u64(words[1])))
}

/// The dot products of the 32 activations `q8` with four eight-value groups: group `l` has
/// the magnitudes `grid[l]` (byte `j` is value `j`, below 128) and the signs `signs[l]` (a
/// `SIGN_BYTES` word: byte `j` is 1 or −1). The signs multiply the activations (exact: codes
/// of Q8_K lie in `−127..=127`), then the magnitudes are dotted with them; the result is the
/// sum of the first 16 values' products in the first register and of the last 16 in the
/// second, each as four lanes.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) unsafe fn signed_grid_halves<D: Dot4>(
    grid: [u64; 4],
    signs: [u64; 4],
    q8: &[i8; 32],
) -> [int32x4_t; 2] {
    let q8 = load_i8x32(q8);
    let zero = vdupq_n_s32(0);
    [0, 1].map(|h| {
        let g = i8x16_from_u64x2([grid[2 * h], grid[2 * h + 1]]);
        let s = i8x16_from_u64x2([signs[2 * h], signs[2 * h + 1]]);
        // SAFETY: the caller guarantees what `D` needs.
        unsafe { D::dot4(zero, g, vmulq_s8(q8[h], s)) }
    })
}

/// The frame of the grid formats' dot products (IQ1_S, IQ2_*, IQ3_*), as the x86 one: per
/// super-block the i32 lanes `sub_block(x, ib, q8)` of its eight 32-value sub-blocks (`q8` the
/// activations of sub-block `ib`) are summed exactly, and `sumf += super_block(x, y, sum)`,
/// super-blocks in order; the caller applies the format's constant factor to the result.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn grid_dot<W>(
    w: &[W],
    a: &[BlockQ8K],
    sub_block: impl Fn(&W, usize, &[i8; 32]) -> int32x4_t,
    super_block: impl Fn(&W, &BlockQ8K, i32) -> f32,
) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let (q8, _) = y.qs.as_chunks::<32>();
        let mut acc = vdupq_n_s32(0);
        for (ib, q8) in q8.iter().enumerate() {
            acc = vaddq_s32(acc, sub_block(x, ib, q8));
        }
        sumf += super_block(x, y, hsum_i32(acc));
    }
    sumf
}
/// The dot product of [`SignedGrid`] blocks (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) with
/// Q8_K activations through [`grid_dot`]: per sub-block `ib`, the grid words and sign bytes of
/// its four groups from `groups(x, ib)` go through [`signed_grid_halves`], each scale run's
/// lanes (the sub-block's, or each half's) times the run's multiplier; the super-block's sum
/// times `d · d_a`, and the total times the format's [`SignedGrid::DOT_FACTOR`]: the
/// reference's exact integer sums and float steps.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) unsafe fn signed_grid_dot<D: Dot4, B: SignedGrid>(
    w: &[B],
    a: &[BlockQ8K],
    groups: impl Fn(&B, usize) -> ([u64; 4], [u64; 4]),
) -> f32 {
    let sub_block = |x: &B, ib: usize, q8: &[i8; 32]| {
        let (g, s) = groups(x, ib);
        // SAFETY: the caller guarantees what `D` needs.
        let [p0, p1] = unsafe { signed_grid_halves::<D>(g, s, q8) };
        match B::GROUPS_PER_SCALE {
            2 => {
                let ls = |h: usize| x.multiplier(h);
                vmlaq_n_s32(vmulq_n_s32(p0, ls(2 * ib)), p1, ls(2 * ib + 1))
            }
            _ => vmulq_n_s32(vaddq_s32(p0, p1), x.multiplier(ib)),
        }
    };
    B::DOT_FACTOR
        * grid_dot(w, a, sub_block, |x, y, sumi| {
            x.d().to_f32() * y.d * sumi as f32
        })
}
