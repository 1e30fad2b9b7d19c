//! Vector kernels of the elementwise set that run often enough to need SIMD: gated activations
//! (every FFN) and `y += a·x` (attention's weighted values), chosen once for the CPU.

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

/// The vector kernels of this CPU.
#[derive(Clone, Copy)]
pub struct VectorKernels {
    gated_silu: GatedFn,
    gated_gelu_tanh: GatedFn,
    axpy: AxpyFn,
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
            };
        }
        let _ = isa;
        VectorKernels {
            gated_silu: gated_silu_reference,
            gated_gelu_tanh: gated_gelu_tanh_reference,
            axpy: axpy_reference,
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
