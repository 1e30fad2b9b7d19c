//! Watching the CPU forward pass's matrix products: an observer set on a [`Scratch`] sees the
//! f32 input rows of every product (before they are quantized for the kernel) together with
//! the weight matrix they multiply. `rinfer imatrix` collects its importance matrix this way.
//!
//! Without an observer a product costs one branch more; with one, a mixture of experts runs
//! each expert's rows through the per-expert products (never the batched one-token path), so
//! the observer sees every expert's input.
//!
//! [`Scratch`]: crate::Scratch

use std::any::Any;

use rinfer_kernels::ActivationBuffer;

use crate::weights::Matrix;

/// Sees the inputs of the forward pass's matrix products.
///
/// A weight is told apart by its bytes ([`Matrix::data`]): the loaded model keeps them in
/// place, so their address names one matrix (one expert's of a stacked tensor) for the
/// model's life. `Any` lets the owner take its observer back as its own type.
pub trait MatmulObserver: Any + Send {
    /// `weight` is about to multiply the `rows` rows of `input`, `weight.cols` values each.
    fn observe(&mut self, weight: &Matrix, input: &[f32], rows: usize);
}

/// The matrix products' state in a scratch: the kernels' quantized-activation buffer and the
/// observer of their inputs, if one is set.
pub(crate) struct Products {
    /// The quantized-activation buffer of the matmul kernels.
    pub(crate) buffer: ActivationBuffer,
    observer: Option<Box<dyn MatmulObserver>>,
}

impl Products {
    /// Products over `buffer`, unobserved.
    pub(crate) fn new(buffer: ActivationBuffer) -> Self {
        Self {
            buffer,
            observer: None,
        }
    }

    /// Shows the observer, if any, the `rows` input rows of a product by `weight`.
    pub(crate) fn observe(&mut self, weight: &Matrix, input: &[f32], rows: usize) {
        if let Some(observer) = &mut self.observer {
            observer.observe(weight, &input[..rows * weight.cols], rows);
        }
    }

    /// Whether an observer is set.
    pub(crate) fn observed(&self) -> bool {
        self.observer.is_some()
    }

    /// The observer, if one is set.
    pub(crate) fn observer_mut(&mut self) -> Option<&mut dyn MatmulObserver> {
        self.observer.as_deref_mut()
    }

    /// Sets `observer`, returning the one it replaces.
    pub(crate) fn set_observer(
        &mut self,
        observer: Option<Box<dyn MatmulObserver>>,
    ) -> Option<Box<dyn MatmulObserver>> {
        std::mem::replace(&mut self.observer, observer)
    }
}
