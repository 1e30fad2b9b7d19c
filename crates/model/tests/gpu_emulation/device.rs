//! The GPU program on host buffers behind the engine's device seam
//! (`rinfer_model::engine::GpuDevice`): the engine drives the emulated kernels as it drives
//! the CUDA runtime, its KV caches block tables into the emulated pool.

use std::any::Any;

use rinfer_cuda::kernels::KvElement;
use rinfer_cuda::kv_pool::{SharedBlocks, lock};
use rinfer_cuda::{CudaError, GpuInfo, Logits};
use rinfer_model::engine::{GpuCache, GpuDevice, own_rows};

use super::{Emulated, HostCache, HostPool};

/// A sequence's cache on the emulated device: its block table into the pool (given back when
/// it is dropped).
struct EmulatedCache {
    cache: HostCache,
    blocks: SharedBlocks,
    element: KvElement,
    /// Bytes of one key or value row.
    row_bytes: usize,
}

impl Drop for EmulatedCache {
    fn drop(&mut self) {
        lock(&self.blocks).truncate(&mut self.cache.blocks, 0);
    }
}

impl GpuCache for EmulatedCache {
    fn len(&self) -> usize {
        self.cache.len
    }

    fn truncate(&mut self, len: usize) {
        self.cache.len = self.cache.len.min(len);
        lock(&self.blocks).truncate(&mut self.cache.blocks, self.cache.len);
    }

    fn bytes(&self) -> usize {
        self.cache.blocks.len()
    }

    fn element(&self) -> KvElement {
        self.element
    }

    fn blocks(&self) -> &[u32] {
        &self.cache.blocks
    }

    fn attach(&mut self, blocks: &[u32], len: usize) {
        let mut pool = lock(&self.blocks);
        pool.truncate(&mut self.cache.blocks, 0);
        self.cache.blocks = pool.fork(blocks, len);
        self.cache.len = len;
    }

    fn ring_slots(&self) -> Vec<usize> {
        let rings = self.cache.rings.iter();
        rings.map(|(k, _)| k.len() / self.row_bytes).collect()
    }

    fn read_ring(
        &self,
        ring: usize,
        offset: usize,
        keys: &mut [u8],
        values: &mut [u8],
    ) -> Result<(), CudaError> {
        let (k, v) = &self.cache.rings[ring];
        keys.copy_from_slice(&k[offset..offset + keys.len()]);
        values.copy_from_slice(&v[offset..offset + values.len()]);
        Ok(())
    }

    fn write_ring(
        &mut self,
        ring: usize,
        offset: usize,
        keys: &[u8],
        values: &[u8],
    ) -> Result<(), CudaError> {
        let (k, v) = &mut self.cache.rings[ring];
        k[offset..offset + keys.len()].copy_from_slice(keys);
        v[offset..offset + values.len()].copy_from_slice(values);
        Ok(())
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

fn own(cache: &mut dyn GpuCache) -> Result<&mut HostCache, CudaError> {
    let cache = cache.as_any_mut().downcast_mut::<EmulatedCache>();
    cache.map(|c| &mut c.cache).ok_or(CudaError::ForeignCache)
}

/// The GPU program on host buffers behind the device seam.
pub struct EmulatedGpu<'e, 'b> {
    gpu: Emulated<'e, 'b>,
    info: GpuInfo,
}

impl<'e, 'b> EmulatedGpu<'e, 'b> {
    pub fn new(gpu: Emulated<'e, 'b>) -> Self {
        Self {
            gpu,
            info: GpuInfo {
                ordinal: 0,
                name: "the host emulation".into(),
                compute_capability: (8, 0),
                total_memory: 0,
                nvrtc: None,
            },
        }
    }
}

impl GpuDevice for EmulatedGpu<'_, '_> {
    fn info(&self) -> &GpuInfo {
        &self.info
    }

    fn decode_rows(&self) -> usize {
        self.gpu.pool.plan.decode_rows
    }

    fn kv_blocks(&self) -> SharedBlocks {
        self.gpu.pool.blocks.clone()
    }

    fn new_cache(&self) -> Result<Box<dyn GpuCache>, CudaError> {
        Ok(Box::new(EmulatedCache {
            cache: self.gpu.pool.new_cache(),
            blocks: self.kv_blocks(),
            element: self.gpu.pool.plan.options.kv,
            row_bytes: HostPool::row_bytes(&self.gpu.pool.plan),
        }))
    }

    fn prefill(
        &mut self,
        tokens: &[u32],
        cache: &mut dyn GpuCache,
        wanted: Logits,
    ) -> Result<&[f32], CudaError> {
        let cache = own(cache)?;
        let max_batch = self.gpu.pool.plan.options.max_batch;
        if wanted == Logits::All && tokens.len() > max_batch {
            return Err(CudaError::BatchTooLarge {
                requested: tokens.len(),
                max: max_batch,
            });
        }
        let chunks = tokens.len().div_ceil(max_batch);
        for (i, chunk) in tokens.chunks(max_batch).enumerate() {
            let rows = match wanted {
                Logits::All => chunk.len(),
                Logits::Last => usize::from(i + 1 == chunks),
            };
            self.gpu.step_rows(chunk, cache, rows);
        }
        let rows = match wanted {
            Logits::All => tokens.len(),
            Logits::Last => 1,
        };
        Ok(&self.gpu.buffers.logits()[..rows * self.gpu.builder.model.vocab_size])
    }

    fn forward_rows(
        &mut self,
        seqs: &mut [(&[u32], &mut dyn GpuCache)],
    ) -> Result<&[f32], CudaError> {
        let mut rows = own_rows(seqs, own)?;
        let plan = self.gpu.pool.plan.clone();
        Ok(self.gpu.decode_rows(&mut rows, &plan))
    }
}
