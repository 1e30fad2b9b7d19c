//! Vector kernels of the elementwise set that run often enough to need SIMD: activations, gated
//! (every FFN) or plain (an encoder's GELU FFN), and attention's inner loops over a block of f32
//! key and value rows (query·key scores, the shifted exponentials of the online softmax, and
//! `y += Σ w_j·v_j` for the weighted values): one table per [`Isa`] level, part of
//! [`crate::Kernels`].

use half::f16;

use super::activation::{Activation, gelu_tanh, silu};
use super::delta_rule::{self, DeltaRun};
use crate::cpu::{self, Isa};

/// The largest magnitude the SIMD kernels' polynomial exponential takes (Cephes' `expf`, the
/// same steps on every instruction set); inputs are clamped to `±EXP_INPUT_MAX`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const EXP_INPUT_MAX: f32 = 88.376_26;

/// `ln 2` in two parts, high then low: the exponential's argument is reduced to
/// `r = x − n·ln 2` for `n = round(x·log₂ e)` with one fused step each.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const EXP_LN2: [f32; 2] = [0.693_359_4, -2.121_944_4e-4];

/// The coefficients of the exponential's polynomial in `r`, highest degree first (Horner's
/// scheme with fused multiply-adds, then `1 + r + r²·p`).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const EXP_POLY: [f32; 6] = [
    1.987_569_1e-4,
    1.398_2e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    0.166_666_65,
    0.5,
];

/// Writes an instruction set's SIMD elementwise kernels (`gated_silu`, `gated_gelu_tanh`,
/// `gelu_tanh`, `silu` and `exp_shifted`, each compiled for `$features`) from its f32 register
/// `$reg` of `$n` lanes: the register's unaligned `load` and `store`, `splat`, lane-wise `add`,
/// `sub`, `mul` and `div`, `neg` (`−z`) and fused `mul_add` (`a · b + c`), and the module's
/// `$exp` (the polynomial exponential) of one register. The activations take whole registers
/// through those and the `len % $n` last values through the scalar references.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
macro_rules! elementwise_kernels {
    (
        $features:literal, $reg:ty, $n:literal lanes,
        load: $load:ident, store: $store:ident, splat: $splat:ident,
        add: $add:ident, sub: $sub:ident, mul: $mul:ident, div: $div:ident, exp: $exp:ident,
        neg: $neg:expr, mul_add: $mul_add:expr $(,)?
    ) => {
        /// `x / (1 + e^(-z))`.
        #[inline]
        #[target_feature(enable = $features)]
        fn times_sigmoid(x: $reg, z: $reg) -> $reg {
            let neg = $neg;
            $div(x, $add($splat(1.0), $exp(neg(z))))
        }

        /// The tanh GELU of one register, as `x · sigmoid(2u)` with
        /// `u = √(2/π)·x·(1 + 0.044715·x²)` (equal to `0.5·x·(1 + tanh u)`).
        #[inline]
        #[target_feature(enable = $features)]
        fn gelu_tanh_lanes(x: $reg) -> $reg {
            let mul_add = $mul_add;
            let inner = mul_add($splat(0.044715), $mul(x, x), $splat(1.0));
            let two_u = $mul($mul($splat(2.0 * 0.797_884_6), x), inner);
            times_sigmoid(x, two_u)
        }

        /// Applies `f` to the gate's whole registers, times `up`'s, and `tail` to the rest.
        #[inline]
        #[target_feature(enable = $features)]
        fn gated_with(
            gate: &mut [f32],
            up: &[f32],
            f: impl Fn($reg) -> $reg,
            tail: fn(&mut [f32], &[f32]),
        ) {
            let (gate_chunks, gate_tail) = gate.as_chunks_mut::<$n>();
            let (up_chunks, up_tail) = up.as_chunks::<$n>();
            for (g, u) in gate_chunks.iter_mut().zip(up_chunks) {
                // SAFETY: each load and store touches exactly the floats of one chunk.
                unsafe {
                    let y = $mul(f($load(g.as_ptr())), $load(u.as_ptr()));
                    $store(g.as_mut_ptr(), y);
                }
            }
            tail(gate_tail, up_tail);
        }

        /// Gated SiLU: `gate = gate / (1 + e^-gate) * up`.
        #[target_feature(enable = $features)]
        pub(super) fn gated_silu(gate: &mut [f32], up: &[f32]) {
            gated_with(
                gate,
                up,
                |x| times_sigmoid(x, x),
                super::gated_silu_reference,
            );
        }

        /// Gated tanh GELU.
        #[target_feature(enable = $features)]
        pub(super) fn gated_gelu_tanh(gate: &mut [f32], up: &[f32]) {
            gated_with(
                gate,
                up,
                |x| gelu_tanh_lanes(x),
                super::gated_gelu_tanh_reference,
            );
        }

        /// Applies `f` in place to whole registers and `tail` to the rest.
        #[inline]
        #[target_feature(enable = $features)]
        fn activate_with(x: &mut [f32], f: impl Fn($reg) -> $reg, tail: fn(&mut [f32])) {
            let (chunks, rest) = x.as_chunks_mut::<$n>();
            for chunk in chunks {
                // SAFETY: the load and the store touch exactly the floats of one chunk.
                unsafe {
                    let v = f($load(chunk.as_ptr()));
                    $store(chunk.as_mut_ptr(), v);
                }
            }
            tail(rest);
        }

        /// Tanh GELU in place.
        #[target_feature(enable = $features)]
        pub(super) fn gelu_tanh(x: &mut [f32]) {
            activate_with(x, |v| gelu_tanh_lanes(v), super::gelu_tanh_reference);
        }

        /// SiLU in place: `x / (1 + e^-x)`.
        #[target_feature(enable = $features)]
        pub(super) fn silu(x: &mut [f32]) {
            activate_with(x, |v| times_sigmoid(v, v), super::silu_reference);
        }

        /// [`super::VectorKernels::exp_shifted`] through `$exp`; a short last chunk is padded,
        /// so every value goes through the same instructions.
        #[target_feature(enable = $features)]
        pub(super) fn exp_shifted(x: &mut [f32], max: f32) {
            let max = $splat(max);
            super::each_padded_chunk::<$n>(x, |chunk| {
                // SAFETY: the load and the store touch exactly the floats of the chunk.
                unsafe {
                    let v = $exp($sub($load(chunk.as_ptr()), max));
                    $store(chunk.as_mut_ptr(), v);
                }
            });
        }
    };
}

#[cfg(target_arch = "aarch64")]
mod aarch64;
#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests;

/// `gate = act(gate) * up` for one activation.
///
/// `unsafe` because SIMD entries need the instruction set they were selected for.
type GatedFn = unsafe fn(&mut [f32], &[f32]);

/// `x = act(x)` for one activation.
///
/// `unsafe` because SIMD entries need the instruction set they were selected for.
type ActivateFn = unsafe fn(&mut [f32]);

/// `out[j] = (q · k_j) · scale` for the rows `k_j` of `keys`, returning the largest.
type ScaledDotsFn = unsafe fn(&[f32], &[f32], f32, &mut [f32]) -> f32;

/// [`ScaledDotsFn`] for two queries against the same rows.
type ScaledDotsPairFn = unsafe fn([&[f32]; 2], &[f32], f32, [&mut [f32]; 2]) -> [f32; 2];

/// [`ScaledDotsFn`] for four queries against the same rows.
type ScaledDotsQuadFn = unsafe fn([&[f32]; 4], &[f32], f32, [&mut [f32]; 4]) -> [f32; 4];

/// `y += w[j] · x_j` for the rows `x_j` of `rows`, `j` in order.
type AxpyRowsFn = unsafe fn(&[f32], &[f32], &mut [f32]);

/// [`AxpyRowsFn`] for two weight vectors over the same rows into two outputs.
type AxpyRowsPairFn = unsafe fn([&[f32]; 2], &[f32], [&mut [f32]; 2]);

/// `out[i] = src[i]` converted from f16 (exactly).
type F16ToF32Fn = unsafe fn(&[f16], &mut [f32]);

/// `x = e^(x − max)`, elementwise.
type ExpShiftedFn = unsafe fn(&mut [f32], f32);

/// One head's gated delta rule over a run of tokens ([`super::delta_rule`]).
type DeltaRuleFn = unsafe fn(&mut [f32], &DeltaRun<'_>, &mut [f32]);

/// The vector kernels of this CPU.
#[derive(Clone, Copy)]
pub struct VectorKernels {
    gated_silu: GatedFn,
    gated_gelu_tanh: GatedFn,
    gelu_tanh: ActivateFn,
    silu: ActivateFn,
    scaled_dots: ScaledDotsFn,
    scaled_dots_pair: Option<ScaledDotsPairFn>,
    scaled_dots_quad: Option<ScaledDotsQuadFn>,
    axpy_rows: AxpyRowsFn,
    axpy_rows_pair: Option<AxpyRowsPairFn>,
    exp_shifted: ExpShiftedFn,
    f16_to_f32: F16ToF32Fn,
    delta_rule: DeltaRuleFn,
}

impl VectorKernels {
    /// The kernels for the detected CPU ([`crate::cpu::detected`]): those of
    /// [`crate::Kernels::detected`], for the operations that are not handed a table.
    pub(crate) fn detected() -> &'static VectorKernels {
        static TABLES: [VectorKernels; Isa::ALL.len()] = {
            let mut tables = [VectorKernels::for_isa(Isa::Scalar); Isa::ALL.len()];
            let mut i = 0;
            while i < tables.len() {
                tables[i] = VectorKernels::for_isa(Isa::ALL[i]);
                i += 1;
            }
            tables
        };
        &TABLES[cpu::detected() as usize]
    }

    /// The kernels for `isa` (which the CPU must support).
    pub(crate) const fn for_isa(isa: Isa) -> Self {
        #[cfg(target_arch = "x86_64")]
        if isa.includes(Isa::Avx2) {
            let avx512 = isa.includes(Isa::Avx512);
            return VectorKernels {
                gated_silu: x86::gated_silu,
                gated_gelu_tanh: x86::gated_gelu_tanh,
                gelu_tanh: x86::gelu_tanh,
                silu: x86::silu,
                scaled_dots: x86::scaled_dots,
                scaled_dots_pair: match avx512 {
                    true => Some(x86::scaled_dots_heads_avx512::<2>),
                    false => None,
                },
                scaled_dots_quad: match avx512 {
                    true => Some(x86::scaled_dots_heads_avx512::<4>),
                    false => None,
                },
                axpy_rows: match avx512 {
                    true => x86::axpy_rows_avx512,
                    false => x86::axpy_rows,
                },
                axpy_rows_pair: match avx512 {
                    true => Some(x86::axpy_rows_pair_avx512),
                    false => None,
                },
                exp_shifted: x86::exp_shifted,
                f16_to_f32: match avx512 {
                    true => x86::f16_to_f32_avx512,
                    false => x86::f16_to_f32,
                },
                delta_rule: match avx512 {
                    true => delta_rule::x86::delta_rule_avx512,
                    false => delta_rule::reference,
                },
            };
        }
        #[cfg(target_arch = "aarch64")]
        if isa.includes(Isa::Neon) {
            return VectorKernels {
                gated_silu: aarch64::gated_silu,
                gated_gelu_tanh: aarch64::gated_gelu_tanh,
                gelu_tanh: aarch64::gelu_tanh,
                silu: aarch64::silu,
                scaled_dots: aarch64::scaled_dots,
                axpy_rows: aarch64::axpy_rows,
                exp_shifted: aarch64::exp_shifted,
                f16_to_f32: aarch64::f16_to_f32,
                ..Self::reference()
            };
        }
        let _ = isa;
        Self::reference()
    }

    /// The scalar reference kernels.
    pub(crate) const fn reference() -> Self {
        VectorKernels {
            gated_silu: gated_silu_reference,
            gated_gelu_tanh: gated_gelu_tanh_reference,
            gelu_tanh: gelu_tanh_reference,
            silu: silu_reference,
            scaled_dots: scaled_dots_reference,
            scaled_dots_pair: None,
            scaled_dots_quad: None,
            axpy_rows: axpy_rows_reference,
            axpy_rows_pair: None,
            exp_shifted: exp_shifted_reference,
            f16_to_f32: f16_to_f32_reference,
            delta_rule: delta_rule::reference,
        }
    }

    /// `gate = act(gate) * up`, elementwise.
    ///
    /// # Panics
    /// When the lengths differ (a caller bug).
    pub fn gated_inplace(&self, act: Activation, gate: &mut [f32], up: &[f32]) {
        assert_eq!(gate.len(), up.len());
        let kernel = match act {
            Activation::Silu => self.gated_silu,
            Activation::GeluTanh => self.gated_gelu_tanh,
            _ => return super::activation::gated_inplace(act, gate, up),
        };
        // SAFETY: the table was built for this CPU's detected instruction set.
        unsafe { kernel(gate, up) }
    }

    /// `x = act(x)`, elementwise. A value's result depends on it and on its index in `x` only
    /// (the last few, fewer than a SIMD register holds, may take the scalar reference), so rows
    /// activated one by one give the same bits however many there are.
    pub fn activate_inplace(&self, act: Activation, x: &mut [f32]) {
        match act {
            // SAFETY: the table was built for this CPU's detected instruction set.
            Activation::GeluTanh => unsafe { (self.gelu_tanh)(x) },
            // SAFETY: as above.
            Activation::Silu => unsafe { (self.silu)(x) },
            _ => super::activation::apply(act, x),
        }
    }

    /// `out[j] = (q · k_j) · scale` for the `out.len()` rows `k_j` of `keys`, each as long as
    /// `q`, returning the largest (−∞ for no row). The dot products: eight lanes each
    /// accumulate every eighth product with fused multiply-adds, the lanes are summed as
    /// `((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))`, and the `len % 8` last products are
    /// added in order. The same on every instruction set, so a score never depends on the
    /// keys beside it.
    ///
    /// # Panics
    /// When `keys` is not `out.len()` rows of `q.len()` values (a caller bug).
    pub fn scaled_dots(&self, q: &[f32], keys: &[f32], scale: f32, out: &mut [f32]) -> f32 {
        assert_eq!(keys.len(), out.len() * q.len());
        // SAFETY: the table was built for this CPU's detected instruction set.
        unsafe { (self.scaled_dots)(q, keys, scale, out) }
    }

    /// [`Self::scaled_dots`] of two queries (as long as each other) against the same keys:
    /// each score and maximum the bits `scaled_dots` gives it.
    ///
    /// # Panics
    /// As [`Self::scaled_dots`], or when the two outputs differ in length (a caller bug).
    pub fn scaled_dots_pair(
        &self,
        q: [&[f32]; 2],
        keys: &[f32],
        scale: f32,
        out: [&mut [f32]; 2],
    ) -> [f32; 2] {
        assert_heads(&q, keys, &out);
        match self.scaled_dots_pair {
            // SAFETY: the table was built for this CPU's detected instruction set.
            Some(pair) => unsafe { pair(q, keys, scale, out) },
            None => {
                let [out0, out1] = out;
                [
                    self.scaled_dots(q[0], keys, scale, out0),
                    self.scaled_dots(q[1], keys, scale, out1),
                ]
            }
        }
    }

    /// [`Self::scaled_dots`] of four queries (as long as each other) against the same keys:
    /// each score and maximum the bits `scaled_dots` gives it.
    ///
    /// # Panics
    /// As [`Self::scaled_dots_pair`].
    pub fn scaled_dots_quad(
        &self,
        q: [&[f32]; 4],
        keys: &[f32],
        scale: f32,
        out: [&mut [f32]; 4],
    ) -> [f32; 4] {
        assert_heads(&q, keys, &out);
        match self.scaled_dots_quad {
            // SAFETY: the table was built for this CPU's detected instruction set.
            Some(quad) => unsafe { quad(q, keys, scale, out) },
            None => {
                let [o0, o1, o2, o3] = out;
                let [m0, m1] = self.scaled_dots_pair([q[0], q[1]], keys, scale, [o0, o1]);
                let [m2, m3] = self.scaled_dots_pair([q[2], q[3]], keys, scale, [o2, o3]);
                [m0, m1, m2, m3]
            }
        }
    }

    /// `y += w[j] · x_j` for the `w.len()` rows `x_j` of `rows`, each as long as `y`: per
    /// element one fused multiply-add per row, rows in order, on every instruction set.
    ///
    /// # Panics
    /// When `rows` is not `w.len()` rows of `y.len()` values (a caller bug).
    pub fn axpy_rows(&self, w: &[f32], rows: &[f32], y: &mut [f32]) {
        assert_eq!(rows.len(), w.len() * y.len());
        // SAFETY: the table was built for this CPU's detected instruction set.
        unsafe { (self.axpy_rows)(w, rows, y) }
    }

    /// [`Self::axpy_rows`] of two weight vectors over the same rows into two outputs, each
    /// output getting the bits `axpy_rows` gives it.
    ///
    /// # Panics
    /// As [`Self::axpy_rows`], or when the two weight vectors or outputs differ in length (a
    /// caller bug).
    pub fn axpy_rows_pair(&self, w: [&[f32]; 2], rows: &[f32], y: [&mut [f32]; 2]) {
        let [y0, y1] = y;
        assert_eq!(w[0].len(), w[1].len());
        assert_eq!(y0.len(), y1.len());
        assert_eq!(rows.len(), w[0].len() * y0.len());
        match self.axpy_rows_pair {
            // SAFETY: the table was built for this CPU's detected instruction set.
            Some(pair) => unsafe { pair(w, rows, [y0, y1]) },
            None => {
                self.axpy_rows(w[0], rows, y0);
                self.axpy_rows(w[1], rows, y1);
            }
        }
    }

    /// `out[i] = src[i]` as f32: exact, the same bits on every instruction set (a NaN keeps
    /// its payload and comes out quiet).
    ///
    /// # Panics
    /// When the lengths differ (a caller bug).
    pub fn f16_to_f32(&self, src: &[f16], out: &mut [f32]) {
        assert_eq!(src.len(), out.len());
        // SAFETY: the table was built for this CPU's detected instruction set.
        unsafe { (self.f16_to_f32)(src, out) }
    }

    /// `x = e^(x − max)`, elementwise; each value's result depends only on it and `max`.
    pub fn exp_shifted(&self, x: &mut [f32], max: f32) {
        // SAFETY: the table was built for this CPU's detected instruction set.
        unsafe { (self.exp_shifted)(x, max) }
    }

    /// [`super::delta_rule`]: the tokens of `run` in order through one head's `state`, each token's
    /// output to its row of `out`; the same bits on every instruction set.
    ///
    /// # Panics
    /// If the lengths disagree (a caller bug).
    pub fn delta_rule(&self, state: &mut [f32], run: &DeltaRun<'_>, out: &mut [f32]) {
        delta_rule::shape(state, run, out);
        // SAFETY: the table was built for this CPU's detected instruction set.
        unsafe { (self.delta_rule)(state, run, out) }
    }
}

/// The shape [`VectorKernels::scaled_dots_pair`] and [`VectorKernels::scaled_dots_quad`] ask:
/// `H` queries of one length, `H` outputs of one length, and `keys` as many rows of the
/// queries' length as an output has scores.
///
/// # Panics
/// When the shape is off (a caller bug).
fn assert_heads<const H: usize>(q: &[&[f32]; H], keys: &[f32], out: &[&mut [f32]; H]) {
    assert!(q.iter().all(|each| each.len() == q[0].len()));
    assert!(out.iter().all(|o| o.len() == out[0].len()));
    assert_eq!(keys.len(), out[0].len() * q[0].len());
}

/// Scalar reference of the gated SiLU.
fn gated_silu_reference(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = silu(*g) * u;
    }
}

/// Scalar reference of the gated tanh GELU.
fn gated_gelu_tanh_reference(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = gelu_tanh(*g) * u;
    }
}

/// Scalar reference of the SiLU.
fn silu_reference(x: &mut [f32]) {
    for v in x {
        *v = silu(*v);
    }
}

/// Scalar reference of the tanh GELU.
fn gelu_tanh_reference(x: &mut [f32]) {
    for v in x {
        *v = gelu_tanh(*v);
    }
}

/// Scalar reference of [`VectorKernels::scaled_dots`]' order.
fn scaled_dots_reference(q: &[f32], keys: &[f32], scale: f32, out: &mut [f32]) -> f32 {
    let full = q.len() / 8 * 8;
    let mut max = f32::NEG_INFINITY;
    for (j, o) in out.iter_mut().enumerate() {
        let k = &keys[j * q.len()..(j + 1) * q.len()];
        let mut lanes = [0.0f32; 8];
        for c in (0..full).step_by(8) {
            for (l, lane) in lanes.iter_mut().enumerate() {
                *lane = q[c + l].mul_add(k[c + l], *lane);
            }
        }
        let [l0, l1, l2, l3, l4, l5, l6, l7] = lanes;
        let mut sum = ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7));
        for e in full..q.len() {
            sum = q[e].mul_add(k[e], sum);
        }
        *o = sum * scale;
        max = max.max(*o);
    }
    max
}

/// Scalar reference of [`VectorKernels::f16_to_f32`].
fn f16_to_f32_reference(src: &[f16], out: &mut [f32]) {
    for (o, &h) in out.iter_mut().zip(src) {
        *o = h.to_f32();
    }
}

/// Scalar reference of [`VectorKernels::axpy_rows`].
fn axpy_rows_reference(w: &[f32], rows: &[f32], y: &mut [f32]) {
    if y.is_empty() {
        return;
    }
    for (&a, x) in w.iter().zip(rows.chunks_exact(y.len())) {
        for (y, &x) in y.iter_mut().zip(x) {
            *y = a.mul_add(x, *y);
        }
    }
}

/// Scalar reference of [`VectorKernels::exp_shifted`].
fn exp_shifted_reference(x: &mut [f32], max: f32) {
    x.iter_mut().for_each(|v| *v = (*v - max).exp());
}

/// Runs `f` on each whole chunk of `N` values of `x`, then on the rest padded with zeros to
/// `N` (of which only the rest is kept), so that every value goes through the same
/// instructions.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn each_padded_chunk<const N: usize>(x: &mut [f32], mut f: impl FnMut(&mut [f32; N])) {
    let (chunks, tail) = x.as_chunks_mut::<N>();
    for chunk in chunks {
        f(chunk);
    }
    if !tail.is_empty() {
        let mut padded = [0.0f32; N];
        padded[..tail.len()].copy_from_slice(tail);
        f(&mut padded);
        tail.copy_from_slice(&padded[..tail.len()]);
    }
}
