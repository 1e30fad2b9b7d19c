//! Vector kernels of the elementwise set that run often enough to need SIMD: gated activations
//! (every FFN) and attention's inner loops (query·key scores four keys at a time, `y += a·x`
//! for the weighted values, both reading f32, f16 and q8_0 rows in place), chosen once for the
//! CPU.

use std::sync::OnceLock;

use half::f16;

use super::activation::{Activation, gelu_tanh, silu};
use super::kv_row::KvRow;
use crate::cpu::{self, Isa};
use crate::quant::q8_0::BlockQ8_0;
use row_values::RowValues;

mod row_values;
#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests;

/// `gate = act(gate) * up` for one activation.
///
/// `unsafe` because SIMD entries need the instruction set they were selected for.
type GatedFn = unsafe fn(&mut [f32], &[f32]);

/// `y += a * x` for a row `x` of element type `X`.
type AxpyFn<X> = unsafe fn(f32, &X, &mut [f32]);

/// `y += a[0] * x[0]`, then `+= a[1] * x[1]`, … (four axpys, one pass over `y`).
type Axpy4Fn<X> = unsafe fn([f32; 4], [&X; 4], &mut [f32]);

/// `q · k[i]` for four rows `k[i]`.
type Dot4Fn<K> = unsafe fn(&[f32], [&K; 4]) -> [f32; 4];

/// The attention kernels for rows of one element type.
struct RowKernels<X: ?Sized> {
    axpy: AxpyFn<X>,
    axpy4: Axpy4Fn<X>,
    dot4: Dot4Fn<X>,
}

// By hand: a derive would ask `X: Copy` of the unsized element type.
impl<X: ?Sized> Clone for RowKernels<X> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<X: ?Sized> Copy for RowKernels<X> {}

impl<X: ?Sized> RowKernels<X> {
    /// `y += a * x`.
    fn axpy(&self, a: f32, x: &X, y: &mut [f32]) {
        // SAFETY: tables are built only for the detected instruction set (or the scalar one).
        unsafe { (self.axpy)(a, x, y) }
    }

    /// Four axpys in turn.
    fn axpy4(&self, a: [f32; 4], x: [&X; 4], y: &mut [f32]) {
        // SAFETY: tables are built only for the detected instruction set (or the scalar one).
        unsafe { (self.axpy4)(a, x, y) }
    }

    /// `q · k[i]` for four rows.
    fn dot4(&self, q: &[f32], k: [&X; 4]) -> [f32; 4] {
        // SAFETY: tables are built only for the detected instruction set (or the scalar one).
        unsafe { (self.dot4)(q, k) }
    }
}

impl<X: RowValues + ?Sized> RowKernels<X> {
    /// The scalar references.
    fn reference() -> Self {
        RowKernels {
            axpy: axpy_reference::<X>,
            axpy4: axpy4_reference::<X>,
            dot4: dot4_reference::<X>,
        }
    }
}

/// The vector kernels of this CPU.
#[derive(Clone, Copy)]
pub struct VectorKernels {
    gated_silu: GatedFn,
    gated_gelu_tanh: GatedFn,
    f32_rows: RowKernels<[f32]>,
    f16_rows: RowKernels<[f16]>,
    q8_0_rows: RowKernels<[BlockQ8_0]>,
}

impl VectorKernels {
    /// The kernels for the detected CPU, chosen on first use.
    pub fn detected() -> &'static VectorKernels {
        static KERNELS: OnceLock<VectorKernels> = OnceLock::new();
        KERNELS.get_or_init(|| Self::for_isa(cpu::detected()))
    }

    /// The kernels for `isa` (which the CPU must support).
    fn for_isa(isa: Isa) -> Self {
        #[cfg(target_arch = "x86_64")]
        if isa >= Isa::Avx2 {
            return VectorKernels {
                gated_silu: x86::gated_silu,
                gated_gelu_tanh: x86::gated_gelu_tanh,
                f32_rows: x86::row_kernels(),
                f16_rows: x86::row_kernels(),
                q8_0_rows: x86::row_kernels(),
            };
        }
        let _ = isa;
        VectorKernels {
            gated_silu: gated_silu_reference,
            gated_gelu_tanh: gated_gelu_tanh_reference,
            f32_rows: RowKernels::reference(),
            f16_rows: RowKernels::reference(),
            q8_0_rows: RowKernels::reference(),
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

    /// `y += a * x`, elementwise.
    ///
    /// # Panics
    /// When the lengths differ (a caller bug).
    pub fn axpy(&self, a: f32, x: &[f32], y: &mut [f32]) {
        self.axpy_row(a, KvRow::F32(x), y);
    }

    /// `y += a * x` for a row `x` of any KV type, read in place: bit-identical to [`Self::axpy`]
    /// of the decoded row.
    ///
    /// # Panics
    /// When the lengths differ (a caller bug).
    pub fn axpy_row(&self, a: f32, x: KvRow<'_>, y: &mut [f32]) {
        assert_eq!(x.len(), y.len());
        match x {
            KvRow::F32(x) => self.f32_rows.axpy(a, x, y),
            KvRow::F16(x) => self.f16_rows.axpy(a, x, y),
            KvRow::Q8_0(x) => self.q8_0_rows.axpy(a, x, y),
        }
    }
}

impl VectorKernels {
    /// `y += a[i] * x[i]` for `i` = 0, 1, 2, 3 in turn: bit-identical to four [`Self::axpy`]
    /// calls, reading and writing `y` once.
    ///
    /// # Panics
    /// When the lengths differ (a caller bug).
    pub fn axpy4(&self, a: [f32; 4], x: [&[f32]; 4], y: &mut [f32]) {
        self.axpy4_rows(a, x.map(KvRow::F32), y);
    }

    /// [`Self::axpy4`] for rows of any KV type, read in place: bit-identical to
    /// [`Self::axpy4`] of the decoded rows (and so to four [`Self::axpy_row`] calls).
    ///
    /// # Panics
    /// When the lengths differ (a caller bug).
    pub fn axpy4_rows(&self, a: [f32; 4], x: [KvRow<'_>; 4], y: &mut [f32]) {
        assert!(x.iter().all(|x| x.len() == y.len()));
        match x {
            [
                KvRow::F32(x0),
                KvRow::F32(x1),
                KvRow::F32(x2),
                KvRow::F32(x3),
            ] => self.f32_rows.axpy4(a, [x0, x1, x2, x3], y),
            [
                KvRow::F16(x0),
                KvRow::F16(x1),
                KvRow::F16(x2),
                KvRow::F16(x3),
            ] => self.f16_rows.axpy4(a, [x0, x1, x2, x3], y),
            [
                KvRow::Q8_0(x0),
                KvRow::Q8_0(x1),
                KvRow::Q8_0(x2),
                KvRow::Q8_0(x3),
            ] => self.q8_0_rows.axpy4(a, [x0, x1, x2, x3], y),
            mixed => {
                for (a, x) in a.into_iter().zip(mixed) {
                    self.axpy_row(a, x, y);
                }
            }
        }
    }

    /// `q · k[i]` for four rows: eight lanes each accumulate every eighth product with fused
    /// multiply-adds, the lanes are summed as `((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))`,
    /// and the `len % 8` last products are added in order. The same on every instruction set.
    ///
    /// # Panics
    /// When the lengths differ (a caller bug).
    pub fn dot4(&self, q: &[f32], k: [&[f32]; 4]) -> [f32; 4] {
        self.dot4_rows(q, k.map(KvRow::F32))
    }

    /// [`Self::dot4`] for rows of any KV type, read in place: bit-identical to [`Self::dot4`]
    /// of the decoded rows.
    ///
    /// # Panics
    /// When the lengths differ (a caller bug).
    pub fn dot4_rows(&self, q: &[f32], k: [KvRow<'_>; 4]) -> [f32; 4] {
        assert!(k.iter().all(|k| k.len() == q.len()));
        match k {
            [
                KvRow::F32(k0),
                KvRow::F32(k1),
                KvRow::F32(k2),
                KvRow::F32(k3),
            ] => self.f32_rows.dot4(q, [k0, k1, k2, k3]),
            [
                KvRow::F16(k0),
                KvRow::F16(k1),
                KvRow::F16(k2),
                KvRow::F16(k3),
            ] => self.f16_rows.dot4(q, [k0, k1, k2, k3]),
            [
                KvRow::Q8_0(k0),
                KvRow::Q8_0(k1),
                KvRow::Q8_0(k2),
                KvRow::Q8_0(k3),
            ] => self.q8_0_rows.dot4(q, [k0, k1, k2, k3]),
            // Each key's sum is its own: four calls on one key give it alone.
            mixed => mixed.map(|k| self.dot4_rows(q, [k; 4])[0]),
        }
    }
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

/// Scalar reference of `y += a * x`.
fn axpy_reference<X: RowValues + ?Sized>(a: f32, x: &X, y: &mut [f32]) {
    for (e, y) in y.iter_mut().enumerate() {
        *y += a * x.value(e);
    }
}

/// Scalar reference of four axpys in turn.
fn axpy4_reference<X: RowValues + ?Sized>(a: [f32; 4], x: [&X; 4], y: &mut [f32]) {
    for (a, x) in a.into_iter().zip(x) {
        axpy_reference(a, x, y);
    }
}

/// Scalar reference of [`VectorKernels::dot4`]'s order.
fn dot4_reference<K: RowValues + ?Sized>(q: &[f32], k: [&K; 4]) -> [f32; 4] {
    k.map(|k| {
        let full = q.len() / 8 * 8;
        let mut lanes = [0.0f32; 8];
        for c in (0..full).step_by(8) {
            for (l, lane) in lanes.iter_mut().enumerate() {
                *lane = q[c + l].mul_add(k.value(c + l), *lane);
            }
        }
        let [l0, l1, l2, l3, l4, l5, l6, l7] = lanes;
        let mut sum = ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7));
        for (e, &q) in q.iter().enumerate().skip(full) {
            sum = q.mul_add(k.value(e), sum);
        }
        sum
    })
}
