//! The seam between the engine and a GPU: what the executor asks of the device that runs a
//! step ([`GpuDevice`]) and of one sequence's KV cache there ([`GpuCache`]). The CUDA runtime
//! (`rinfer_cuda::GpuModel`) is one implementation; the host emulation of the CUDA kernels in
//! the tests is another, so the engine above this seam (placement, the prefix cache, `n`
//! choices, sampling) is one code path whichever runs the kernels.
//!
//! A GPU cache lists blocks of its device's pool of KV blocks, whose reference counts the
//! device shares ([`GpuDevice::kv_blocks`]): the engine's prefix cache keeps a block by
//! counting it once more, and a new sequence reuses a cached prefix by listing the same blocks
//! ([`GpuCache::attach`]); the device copies a shared block before writing into it.

use std::any::Any;

use rinfer_cuda::kernels::KvElement;
use rinfer_cuda::kv_pool::SharedBlocks;
use rinfer_cuda::{CudaError, GpuInfo, GpuKvCache, GpuModel, Logits};

/// A GPU that runs the engine's steps.
pub trait GpuDevice {
    /// The device, as reported to the user.
    fn info(&self) -> &GpuInfo;

    /// The most rows one [`forward_rows`](Self::forward_rows) pass decodes.
    fn decode_rows(&self) -> usize;

    /// The reference counts of its pool of KV blocks, shared with its caches.
    fn kv_blocks(&self) -> SharedBlocks;

    /// An empty KV cache for one sequence.
    fn new_cache(&self) -> Result<Box<dyn GpuCache>, CudaError>;

    /// Runs `tokens` (any number) as prompt tokens at the positions following those in
    /// `cache`, appends their keys and values, and returns the logits `wanted` (`[vocab]` or
    /// `[tokens, vocab]`). Each token's results are, bit for bit, the same however the prompt
    /// is divided between calls, so a prompt continuing a cached prefix equals its cold run.
    fn prefill(
        &mut self,
        tokens: &[u32],
        cache: &mut dyn GpuCache,
        wanted: Logits,
    ) -> Result<&[f32], CudaError>;

    /// Decodes several sequences in one pass: sequence `i` feeds the tokens `seqs[i].0` (its
    /// last token, then any guesses to verify) at the positions following its cache
    /// `seqs[i].1`, a row each; returns the logits `[rows, vocab]`, the rows in order. Each
    /// row's logits are, bit for bit, those of its token decoded alone at its position, however
    /// many rows share the pass. On an error no cache has grown.
    fn forward_rows(
        &mut self,
        seqs: &mut [(&[u32], &mut dyn GpuCache)],
    ) -> Result<&[f32], CudaError>;
}

/// One sequence's KV cache on a [`GpuDevice`].
pub trait GpuCache: Any {
    /// Positions stored.
    fn len(&self) -> usize;

    /// Whether nothing is stored.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets positions from `len` on, giving back the blocks past them.
    fn truncate(&mut self, len: usize);

    /// Bytes of device memory it holds.
    fn bytes(&self) -> usize;

    /// The element type of its keys and values.
    fn element(&self) -> KvElement;

    /// Its pool blocks, in position order.
    fn blocks(&self) -> &[u32];

    /// Makes it hold positions `0..len` of `blocks` (of its device's pool), listed by
    /// reference; what it held before is given back.
    fn attach(&mut self, blocks: &[u32], len: usize);

    /// The slots of each sliding-window layer's ring, in layer order: position `p` lies in
    /// slot `p % slots`, a row of the element type's bytes (see [`Self::element`]).
    fn ring_slots(&self) -> Vec<usize>;

    /// Copies `keys.len()` bytes of ring `ring`'s keys from byte `offset` on into `keys`, and
    /// as many of its values into `values`.
    fn read_ring(
        &self,
        ring: usize,
        offset: usize,
        keys: &mut [u8],
        values: &mut [u8],
    ) -> Result<(), CudaError>;

    /// Writes `keys` into ring `ring`'s keys from byte `offset` on, and `values` into its
    /// values.
    fn write_ring(
        &mut self,
        ring: usize,
        offset: usize,
        keys: &[u8],
        values: &[u8],
    ) -> Result<(), CudaError>;

    /// Itself, for the device that made it to take its own type back.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl GpuCache for GpuKvCache {
    fn len(&self) -> usize {
        GpuKvCache::len(self)
    }

    fn truncate(&mut self, len: usize) {
        GpuKvCache::truncate(self, len);
    }

    fn bytes(&self) -> usize {
        GpuKvCache::bytes(self)
    }

    fn element(&self) -> KvElement {
        GpuKvCache::element(self)
    }

    fn blocks(&self) -> &[u32] {
        GpuKvCache::blocks(self)
    }

    fn attach(&mut self, blocks: &[u32], len: usize) {
        GpuKvCache::attach(self, blocks, len);
    }

    fn ring_slots(&self) -> Vec<usize> {
        GpuKvCache::ring_slots(self)
    }

    fn read_ring(
        &self,
        ring: usize,
        offset: usize,
        keys: &mut [u8],
        values: &mut [u8],
    ) -> Result<(), CudaError> {
        GpuKvCache::read_ring(self, ring, offset, keys, values)
    }

    fn write_ring(
        &mut self,
        ring: usize,
        offset: usize,
        keys: &[u8],
        values: &[u8],
    ) -> Result<(), CudaError> {
        GpuKvCache::write_ring(self, ring, offset, keys, values)
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// `cache` as the CUDA runtime's own cache type; another device's cache is an error.
/// The rows of a [`GpuDevice::forward_rows`] call with each cache taken back as the device's
/// own type by `own` (which refuses a cache of another device).
pub fn own_rows<'s, 't, C: ?Sized>(
    seqs: &'s mut [(&'t [u32], &mut dyn GpuCache)],
    own: fn(&mut dyn GpuCache) -> Result<&mut C, CudaError>,
) -> Result<Vec<(&'t [u32], &'s mut C)>, CudaError> {
    let mut rows = Vec::with_capacity(seqs.len());
    for (tokens, cache) in seqs.iter_mut() {
        rows.push((*tokens, own(&mut **cache)?));
    }
    Ok(rows)
}

fn cuda_cache(cache: &mut dyn GpuCache) -> Result<&mut GpuKvCache, CudaError> {
    cache
        .as_any_mut()
        .downcast_mut::<GpuKvCache>()
        .ok_or(CudaError::ForeignCache)
}

impl GpuDevice for GpuModel {
    fn info(&self) -> &GpuInfo {
        GpuModel::info(self)
    }

    fn decode_rows(&self) -> usize {
        self.plan().decode_rows
    }

    fn kv_blocks(&self) -> SharedBlocks {
        GpuModel::kv_blocks(self)
    }

    fn new_cache(&self) -> Result<Box<dyn GpuCache>, CudaError> {
        Ok(Box::new(GpuModel::new_cache(self)?))
    }

    fn prefill(
        &mut self,
        tokens: &[u32],
        cache: &mut dyn GpuCache,
        wanted: Logits,
    ) -> Result<&[f32], CudaError> {
        GpuModel::prefill(self, tokens, cuda_cache(cache)?, wanted)
    }

    fn forward_rows(
        &mut self,
        seqs: &mut [(&[u32], &mut dyn GpuCache)],
    ) -> Result<&[f32], CudaError> {
        GpuModel::forward_rows(self, &mut own_rows(seqs, cuda_cache)?)
    }
}
