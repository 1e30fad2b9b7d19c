//! Uploading a model's weights once, in their stored block formats.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::error::CudaError;
use crate::host::{HostFfnUp, HostLinear, HostMatrix, HostModel, HostNorm, HostQkv};
use crate::kernels::GpuType;
use crate::runtime::driver::driver;
use crate::runtime::kernels::{Kernels, WeightKernels};

/// The device address of a buffer.
pub(crate) fn address<T>(buffer: &CudaSlice<T>, stream: &Arc<CudaStream>) -> u64 {
    let (ptr, _no_event) = buffer.device_ptr(stream);
    ptr
}

/// A matrix in device memory.
#[derive(Clone)]
pub(crate) struct DeviceMatrix {
    _buffer: Arc<CudaSlice<u8>>,
    pub ptr: u64,
    pub rows: usize,
    pub cols: usize,
    pub row_bytes: i64,
    pub kernels: WeightKernels,
}

/// An f32 vector in device memory.
pub(crate) struct DeviceVector {
    _buffer: CudaSlice<f32>,
    pub ptr: u64,
}

/// A projection and the column its output starts at in the destination buffer.
pub(crate) struct DeviceLinear {
    pub weight: DeviceMatrix,
    pub bias: Option<DeviceVector>,
    pub out_offset: usize,
}

/// A norm's scale and bias.
pub(crate) struct DeviceNorm {
    pub weight: DeviceVector,
    pub bias: Option<DeviceVector>,
}

/// One decoder block.
pub(crate) struct DeviceLayer {
    pub attn_norm: DeviceNorm,
    /// Projections into the `[n, q_dim + 2 kv_dim]` qkv buffer.
    pub qkv: Vec<DeviceLinear>,
    pub qk_norm: Option<(DeviceVector, DeviceVector)>,
    pub attn_output: DeviceLinear,
    pub post_attn_norm: Option<DeviceNorm>,
    pub ffn_norm: Option<DeviceNorm>,
    /// Projections into the `[n, 2 ffn]` gate | up buffer.
    pub ffn_up: Vec<DeviceLinear>,
    pub ffn_down: DeviceLinear,
    pub post_ffn_norm: Option<DeviceNorm>,
}

/// All weights.
pub(crate) struct DeviceWeights {
    pub token_embd: DeviceMatrix,
    pub position_embd: Option<DeviceMatrix>,
    pub rope_freqs: Option<DeviceVector>,
    pub layers: Vec<DeviceLayer>,
    pub output_norm: DeviceNorm,
    pub lm_head: DeviceMatrix,
    pub output_bias: Option<DeviceVector>,
}

struct Uploader<'a> {
    stream: &'a Arc<CudaStream>,
    kernels: &'a Kernels,
}

impl Uploader<'_> {
    fn matrix(&self, m: &HostMatrix<'_>) -> Result<DeviceMatrix, CudaError> {
        // The upload plan has checked the type, so this never fails for a planned model.
        let ty = GpuType::of(m.ty).ok_or_else(|| CudaError::UnsupportedType {
            tensor: m.name.clone(),
            ty: m.ty.name(),
        })?;
        let buffer = self
            .stream
            .clone_htod(m.data)
            .map_err(driver("weight upload"))?;
        let ptr = address(&buffer, self.stream);
        Ok(DeviceMatrix {
            _buffer: Arc::new(buffer),
            ptr,
            rows: m.rows,
            cols: m.cols,
            row_bytes: (m.data.len() / m.rows.max(1)) as i64,
            kernels: self.kernels.weights(ty).clone(),
        })
    }

    fn vector(&self, v: &[f32]) -> Result<DeviceVector, CudaError> {
        let buffer = self.stream.clone_htod(v).map_err(driver("weight upload"))?;
        let ptr = address(&buffer, self.stream);
        Ok(DeviceVector {
            _buffer: buffer,
            ptr,
        })
    }

    fn linear(&self, l: &HostLinear<'_>, out_offset: usize) -> Result<DeviceLinear, CudaError> {
        Ok(DeviceLinear {
            weight: self.matrix(&l.weight)?,
            bias: l.bias.map(|b| self.vector(b)).transpose()?,
            out_offset,
        })
    }

    fn norm(&self, n: &HostNorm<'_>) -> Result<DeviceNorm, CudaError> {
        Ok(DeviceNorm {
            weight: self.vector(n.weight)?,
            bias: n.bias.map(|b| self.vector(b)).transpose()?,
        })
    }
}

/// Uploads every weight of `model` (already validated by an [`UploadPlan`]).
///
/// [`UploadPlan`]: crate::UploadPlan
pub(crate) fn upload(
    model: &HostModel<'_>,
    stream: &Arc<CudaStream>,
    kernels: &Kernels,
) -> Result<DeviceWeights, CudaError> {
    let up = Uploader { stream, kernels };
    let c = &model.config;
    let (q_dim, kv_dim, ffn) = (c.q_dim(), c.kv_dim(), c.ffn_dim);
    let norm = |n: &Option<HostNorm<'_>>| n.as_ref().map(|n| up.norm(n)).transpose();
    let mut layers = Vec::with_capacity(model.layers.len());
    for layer in &model.layers {
        let qkv = match &layer.qkv {
            HostQkv::Separate { q, k, v } => vec![
                up.linear(q, 0)?,
                up.linear(k, q_dim)?,
                up.linear(v, q_dim + kv_dim)?,
            ],
            HostQkv::Fused(qkv) => vec![up.linear(qkv, 0)?],
        };
        let ffn_up = match &layer.ffn_up {
            HostFfnUp::Gated { gate, up: u } => vec![up.linear(gate, 0)?, up.linear(u, ffn)?],
            HostFfnUp::FusedGated(gate_up) => vec![up.linear(gate_up, 0)?],
            HostFfnUp::Plain(u) => vec![up.linear(u, 0)?],
        };
        layers.push(DeviceLayer {
            attn_norm: up.norm(&layer.attn_norm)?,
            qkv,
            qk_norm: match layer.qk_norm {
                Some((q, k)) => Some((up.vector(q)?, up.vector(k)?)),
                None => None,
            },
            attn_output: up.linear(&layer.attn_output, 0)?,
            post_attn_norm: norm(&layer.post_attn_norm)?,
            ffn_norm: norm(&layer.ffn_norm)?,
            ffn_up,
            ffn_down: up.linear(&layer.ffn_down, 0)?,
            post_ffn_norm: norm(&layer.post_ffn_norm)?,
        });
    }
    let token_embd = up.matrix(&model.token_embd)?;
    let lm_head = if std::ptr::eq(model.lm_head.data, model.token_embd.data) {
        token_embd.clone()
    } else {
        up.matrix(&model.lm_head)?
    };
    Ok(DeviceWeights {
        token_embd,
        position_embd: model
            .position_embd
            .as_ref()
            .map(|m| up.matrix(m))
            .transpose()?,
        rope_freqs: model.rope_freqs.map(|f| up.vector(f)).transpose()?,
        layers,
        output_norm: up.norm(&model.output_norm)?,
        lm_head,
        output_bias: model.output_bias.map(|b| up.vector(b)).transpose()?,
    })
}
