//! Vector kernels of the elementwise set that run often enough to need SIMD: gated activations
//! (every FFN) and attention's inner loops (query·key scores four keys at a time, `y += a·x`
//! for the weighted values), chosen once for the CPU.

use std::sync::OnceLock;

use super::activation::{Activation, gelu_tanh, silu};
use crate::cpu::{self, Isa};

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests;

/// `gate = act(gate) * up` for one activation.
///
/// `unsafe` because SIMD entries need the instruction set they were selected for.
type GatedFn = unsafe fn(&mut [f32], &[f32]);

/// `y += a * x`.
type AxpyFn = unsafe fn(f32, &[f32], &mut [f32]);

/// `y += a[0] * x[0]`, then `+= a[1] * x[1]`, … (four axpys, one pass over `y`).
type Axpy4Fn = unsafe fn([f32; 4], [&[f32]; 4], &mut [f32]);

/// `q · k[i]` for four rows `k[i]`.
type Dot4Fn = unsafe fn(&[f32], [&[f32]; 4]) -> [f32; 4];

/// The vector kernels of this CPU.
#[derive(Clone, Copy)]
pub struct VectorKernels {
    gated_silu: GatedFn,
    gated_gelu_tanh: GatedFn,
    axpy: AxpyFn,
    axpy4: Axpy4Fn,
    dot4: Dot4Fn,
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
                axpy: x86::axpy,
                axpy4: x86::axpy4,
                dot4: x86::dot4,
            };
        }
        let _ = isa;
        VectorKernels {
            gated_silu: gated_silu_reference,
            gated_gelu_tanh: gated_gelu_tanh_reference,
            axpy: axpy_reference,
            axpy4: axpy4_reference,
            dot4: dot4_reference,
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
        assert_eq!(x.len(), y.len());
        // SAFETY: the table was built for this CPU's detected instruction set.
        unsafe { (self.axpy)(a, x, y) }
    }
}

impl VectorKernels {
    /// `y += a[i] * x[i]` for `i` = 0, 1, 2, 3 in turn: bit-identical to four [`Self::axpy`]
    /// calls, reading and writing `y` once.
    ///
    /// # Panics
    /// When the lengths differ (a caller bug).
    pub fn axpy4(&self, a: [f32; 4], x: [&[f32]; 4], y: &mut [f32]) {
        assert!(x.iter().all(|x| x.len() == y.len()));
        // SAFETY: the table was built for this CPU's detected instruction set.
        unsafe { (self.axpy4)(a, x, y) }
    }

    /// `q · k[i]` for four rows: eight lanes each accumulate every eighth product with fused
    /// multiply-adds, the lanes are summed as `((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))`,
    /// and the `len % 8` last products are added in order. The same on every instruction set.
    ///
    /// # Panics
    /// When the lengths differ (a caller bug).
    pub fn dot4(&self, q: &[f32], k: [&[f32]; 4]) -> [f32; 4] {
        assert!(k.iter().all(|k| k.len() == q.len()));
        // SAFETY: the table was built for this CPU's detected instruction set.
        unsafe { (self.dot4)(q, k) }
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
fn axpy_reference(a: f32, x: &[f32], y: &mut [f32]) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

/// Scalar reference of four axpys in turn.
fn axpy4_reference(a: [f32; 4], x: [&[f32]; 4], y: &mut [f32]) {
    for (a, x) in a.into_iter().zip(x) {
        axpy_reference(a, x, y);
    }
}

/// Scalar reference of [`VectorKernels::dot4`]'s order.
fn dot4_reference(q: &[f32], k: [&[f32]; 4]) -> [f32; 4] {
    k.map(|k| {
        let full = q.len() / 8 * 8;
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
        sum
    })
}
