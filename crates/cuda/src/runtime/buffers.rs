//! The activation buffers and the KV cache, allocated once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cudarc::driver::{CudaSlice, CudaStream};

use crate::error::CudaError;
use crate::kernels::KvElement;
use crate::plan::{BufferSizes, UploadPlan};
use crate::program::{CacheAddresses, WorkAddresses};
use crate::runtime::driver::driver;
use crate::runtime::weights::address;

/// A zeroed device buffer and its address.
pub(crate) struct Buffer<T> {
    pub slice: CudaSlice<T>,
    pub ptr: u64,
}

impl<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits> Buffer<T> {
    fn new(stream: &Arc<CudaStream>, len: usize) -> Result<Self, CudaError> {
        let slice = stream
            .alloc_zeros::<T>(len.max(1))
            .map_err(driver("buffer allocation"))?;
        let ptr = address(&slice, stream);
        Ok(Self { slice, ptr })
    }
}

/// Every intermediate of one forward call (rows are tokens), see [`BufferSizes`].
pub(crate) struct Workspace {
    pub x: Buffer<f32>,
    pub h: Buffer<f32>,
    pub qkv: Buffer<f32>,
    pub attn: Buffer<f32>,
    pub out: Buffer<f32>,
    pub gate_up: Buffer<f32>,
    pub logits: Buffer<f32>,
    pub partials: Buffer<f32>,
    /// The batched decode's KV-cache tables (see [`CacheTables`](crate::program::CacheTables)).
    pub cache_tables: Buffer<u64>,
    pub router: Buffer<f32>,
    pub expert_ids: Buffer<i32>,
    pub expert_weights: Buffer<f32>,
    pub expert_counts: Buffer<i32>,
    pub expert_lists: Buffer<i32>,
    pub expert_gate_up: Buffer<f32>,
    pub expert_out: Buffer<f32>,
    pub xq: Buffer<i32>,
    pub xq_meta: Buffer<f32>,
    pub tokens: Buffer<i32>,
    pub positions: Buffer<i32>,
    pub argmax: Buffer<i32>,
}

impl Workspace {
    /// Where each buffer is.
    pub fn addresses(&self) -> WorkAddresses {
        WorkAddresses {
            x: self.x.ptr,
            h: self.h.ptr,
            qkv: self.qkv.ptr,
            attn: self.attn.ptr,
            out: self.out.ptr,
            gate_up: self.gate_up.ptr,
            logits: self.logits.ptr,
            partials: self.partials.ptr,
            router: self.router.ptr,
            expert_ids: self.expert_ids.ptr,
            expert_weights: self.expert_weights.ptr,
            expert_counts: self.expert_counts.ptr,
            expert_lists: self.expert_lists.ptr,
            expert_gate_up: self.expert_gate_up.ptr,
            expert_out: self.expert_out.ptr,
            xq: self.xq.ptr,
            xq_meta: self.xq_meta.ptr,
            tokens: self.tokens.ptr,
            positions: self.positions.ptr,
            argmax: self.argmax.ptr,
        }
    }

    pub fn new(stream: &Arc<CudaStream>, s: &BufferSizes) -> Result<Self, CudaError> {
        Ok(Self {
            x: Buffer::new(stream, s.x)?,
            h: Buffer::new(stream, s.h)?,
            qkv: Buffer::new(stream, s.qkv)?,
            attn: Buffer::new(stream, s.attn)?,
            out: Buffer::new(stream, s.out)?,
            gate_up: Buffer::new(stream, s.gate_up)?,
            logits: Buffer::new(stream, s.logits)?,
            partials: Buffer::new(stream, s.partials)?,
            cache_tables: Buffer::new(stream, s.cache_tables)?,
            router: Buffer::new(stream, s.router)?,
            expert_ids: Buffer::new(stream, s.routes)?,
            expert_weights: Buffer::new(stream, s.routes)?,
            expert_counts: Buffer::new(stream, s.expert_counts)?,
            expert_lists: Buffer::new(stream, s.expert_lists)?,
            expert_gate_up: Buffer::new(stream, s.expert_gate_up)?,
            expert_out: Buffer::new(stream, s.expert_out)?,
            xq: Buffer::new(stream, s.xq)?,
            xq_meta: Buffer::new(stream, s.xq_meta)?,
            tokens: Buffer::new(stream, s.ids)?,
            positions: Buffer::new(stream, s.ids)?,
            argmax: Buffer::new(stream, 1)?,
        })
    }
}

/// Keys and values of one layer, `[slots, kv_dim]` each, of the cache's element type (bytes).
pub(crate) struct LayerCache {
    pub keys: Buffer<u8>,
    pub values: Buffer<u8>,
    pub slots: usize,
}

static NEXT_CACHE_ID: AtomicU64 = AtomicU64::new(1);

/// The device-resident KV cache of one sequence; make one with
/// [`GpuModel::new_cache`](crate::GpuModel::new_cache).
pub struct GpuKvCache {
    pub(crate) layers: Vec<LayerCache>,
    pub(crate) element: KvElement,
    pub(crate) id: u64,
    pub(crate) len: usize,
    pub(crate) context: usize,
}

impl GpuKvCache {
    pub(crate) fn new(
        stream: &Arc<CudaStream>,
        plan: &UploadPlan,
        kv_dim: usize,
    ) -> Result<Self, CudaError> {
        let element = plan.options.kv;
        let layers = plan
            .kv_slots
            .iter()
            .map(|&slots| {
                let bytes = slots * kv_dim * element.bytes();
                Ok(LayerCache {
                    keys: Buffer::new(stream, bytes)?,
                    values: Buffer::new(stream, bytes)?,
                    slots,
                })
            })
            .collect::<Result<Vec<_>, CudaError>>()?;
        Ok(Self {
            layers,
            element,
            id: NEXT_CACHE_ID.fetch_add(1, Ordering::Relaxed),
            len: 0,
            context: plan.options.context,
        })
    }

    /// Where each layer's keys and values are.
    pub(crate) fn addresses(&self) -> CacheAddresses {
        CacheAddresses {
            layers: self
                .layers
                .iter()
                .map(|l| (l.keys.ptr, l.values.ptr, l.slots))
                .collect(),
        }
    }

    /// Positions stored so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most positions this cache holds.
    pub fn context(&self) -> usize {
        self.context
    }

    /// Bytes of its keys and values on the device.
    pub fn bytes(&self) -> usize {
        let layer = |l: &LayerCache| l.keys.slice.len() + l.values.slice.len();
        self.layers.iter().map(layer).sum()
    }

    /// The element type of its keys and values.
    pub fn element(&self) -> KvElement {
        self.element
    }

    /// Forgets everything (the buffers are kept).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Forgets positions from `len` on.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
}
