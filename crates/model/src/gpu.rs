//! The model on an NVIDIA GPU: the view the CUDA backend uploads from. `rinfer-cuda` sits below
//! this crate, so this is where the model's tree is handed to it, mapped once from the CPU's
//! handles to borrowed host views.

use std::borrow::Cow;

use rinfer_cuda::{CudaError, HostMatrix, HostModel, HostStacked, HostView};
use rinfer_transformer::{Mapper, Tensor};

use crate::forward::Model;
use crate::weights::{Cpu, Linear, Matrix};

impl Model {
    /// The model as the CUDA backend takes it: its transformer (the tree the CPU forward pass
    /// walks) with borrowed views of every weight in its stored format.
    ///
    /// Each projection of a layer's experts is handed over as one stacked tensor: borrowed
    /// when the file stores the experts back to back (one 3-D tensor), copied into one buffer
    /// otherwise.
    ///
    /// # Errors
    /// [`CudaError::Unsupported`] when one projection's experts come in different formats or
    /// shapes.
    pub fn gpu_view(&self) -> Result<HostModel<'_>, CudaError> {
        self.transformer().map(&mut HostViews)
    }
}

/// Maps the CPU's handles to borrowed host views.
struct HostViews;

impl<'t> Mapper<'t, Cpu, HostView<'t>> for HostViews {
    type Error = CudaError;

    fn matrix(&mut self, _: &Tensor, m: &'t Matrix) -> Result<HostMatrix<'t>, CudaError> {
        Ok(HostMatrix {
            ty: m.ty,
            rows: m.rows,
            cols: m.cols,
            data: m.data(),
        })
    }

    fn vector(&mut self, _: &Tensor, v: &'t Vec<f32>) -> Result<&'t [f32], CudaError> {
        Ok(v)
    }

    /// Every expert's matrix of one projection as one tensor, expert after expert: borrowed
    /// where the experts lie back to back (a 3-D tensor of the file), else gathered (the gate or
    /// up halves of a fused `ffn_gate_up_exps`, the per-expert tensors of older files).
    fn experts(
        &mut self,
        t: &Tensor,
        experts: &'t Vec<Linear>,
    ) -> Result<HostStacked<'t>, CudaError> {
        let name = t.name;
        let Some(first) = experts.first().map(|l| &l.weight) else {
            return Err(CudaError::Unsupported(format!("{name} has no experts")));
        };
        let same = |m: &Matrix| (m.ty, m.rows, m.cols) == (first.ty, first.rows, first.cols);
        if !experts.iter().all(|l| same(&l.weight)) {
            return Err(CudaError::Unsupported(format!(
                "the experts of {name} differ in format or shape"
            )));
        }
        let data = match Matrix::contiguous(experts.iter().map(|l| &l.weight)) {
            Some(bytes) => Cow::Borrowed(bytes),
            None => Cow::Owned(
                experts
                    .iter()
                    .flat_map(|l| l.weight.data())
                    .copied()
                    .collect(),
            ),
        };
        let biases: Vec<&[f32]> = experts.iter().filter_map(|l| l.bias.as_deref()).collect();
        let bias = match biases.len() {
            0 => None,
            n if n == experts.len() => Some(Cow::Owned(biases.concat())),
            _ => {
                return Err(CudaError::Unsupported(format!(
                    "only some experts of {name} have a bias"
                )));
            }
        };
        Ok(HostStacked {
            ty: first.ty,
            experts: experts.len(),
            rows: first.rows,
            cols: first.cols,
            data,
            bias,
        })
    }
}
