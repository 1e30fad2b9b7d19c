//! The GPU API of a build without the `cuda` feature: the same names, where loading reports
//! [`CudaError::NotBuilt`], so callers need no feature switches of their own.

use std::convert::Infallible;

use crate::Logits;
use crate::device::GpuInfo;
use crate::error::CudaError;
use crate::host::HostModel;
use crate::kv_pool::SharedBlocks;
use crate::nvrtc_search::NvrtcSearch;
use crate::plan::{LoadOptions, UploadPlan};
use crate::program::WeightAddresses;

/// A model on a GPU; in this build it cannot be made.
pub struct GpuModel {
    never: Infallible,
}

/// A device-resident KV cache; in this build it cannot be made.
pub struct GpuKvCache {
    never: Infallible,
}

/// Always [`CudaError::NotBuilt`].
pub fn probe(_ordinal: usize) -> Result<GpuInfo, CudaError> {
    Err(CudaError::NotBuilt)
}

/// Always [`CudaError::NotBuilt`].
pub fn compile_kernels(_search: &NvrtcSearch, _arch: (u32, u32)) -> Result<Vec<u8>, CudaError> {
    Err(CudaError::NotBuilt)
}

impl GpuModel {
    /// Validates `model` like the GPU build does, then reports [`CudaError::NotBuilt`].
    pub fn load(model: &HostModel<'_>, options: &LoadOptions) -> Result<Self, CudaError> {
        UploadPlan::new(model, options)?;
        Err(CudaError::NotBuilt)
    }

    /// The device the model is on.
    pub fn info(&self) -> &GpuInfo {
        match self.never {}
    }

    /// The transformer the model runs, with its weights' device addresses.
    pub fn config(&self) -> &WeightAddresses {
        match self.never {}
    }

    /// What was uploaded and allocated.
    pub fn plan(&self) -> &UploadPlan {
        match self.never {}
    }

    /// Why decode steps run without a CUDA graph, if they do.
    pub fn graph_disabled_reason(&self) -> Option<&str> {
        match self.never {}
    }

    /// A KV cache for one sequence.
    pub fn new_cache(&self) -> Result<GpuKvCache, CudaError> {
        match self.never {}
    }

    /// The reference counts of the KV pool's blocks, shared with its caches.
    pub fn kv_blocks(&self) -> SharedBlocks {
        match self.never {}
    }

    /// Prompt tokens, any number of them.
    pub fn prefill(
        &mut self,
        _tokens: &[u32],
        _cache: &mut GpuKvCache,
        _wanted: Logits,
    ) -> Result<&[f32], CudaError> {
        match self.never {}
    }

    /// The batched decode: the last token (and any guesses) of each of several sequences.
    pub fn forward_rows(
        &mut self,
        _seqs: &mut [(&[u32], &mut GpuKvCache)],
    ) -> Result<&[f32], CudaError> {
        match self.never {}
    }

    /// Why the batched decode runs without CUDA graphs, if it does.
    pub fn rows_graph_disabled_reason(&self) -> Option<&str> {
        match self.never {}
    }

    /// The forward pass, returning the greedy token.
    pub fn forward_argmax(
        &mut self,
        _tokens: &[u32],
        _cache: &mut GpuKvCache,
    ) -> Result<u32, CudaError> {
        match self.never {}
    }
}

impl GpuKvCache {
    /// Positions stored so far.
    pub fn len(&self) -> usize {
        match self.never {}
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        match self.never {}
    }

    /// The most positions this cache holds.
    pub fn context(&self) -> usize {
        match self.never {}
    }

    /// Bytes of its keys and values on the device.
    pub fn bytes(&self) -> usize {
        match self.never {}
    }

    /// The element type of its keys and values.
    pub fn element(&self) -> crate::kernels::KvElement {
        match self.never {}
    }

    /// Its pool blocks, in position order.
    pub fn blocks(&self) -> &[u32] {
        match self.never {}
    }

    /// The slots of each sliding-window layer's ring, in layer order.
    pub fn ring_slots(&self) -> Vec<usize> {
        match self.never {}
    }

    /// Copies bytes of ring `ring`'s keys and values from byte `offset` on.
    pub fn read_ring(
        &self,
        _ring: usize,
        _offset: usize,
        _keys: &mut [u8],
        _values: &mut [u8],
    ) -> Result<(), CudaError> {
        match self.never {}
    }

    /// Writes bytes of ring `ring`'s keys and values from byte `offset` on.
    pub fn write_ring(
        &mut self,
        _ring: usize,
        _offset: usize,
        _keys: &[u8],
        _values: &[u8],
    ) -> Result<(), CudaError> {
        match self.never {}
    }

    /// Makes the cache hold positions `0..len` of `blocks`, listed by reference.
    pub fn attach(&mut self, _blocks: &[u32], _len: usize) {
        match self.never {}
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        match self.never {}
    }

    /// Forgets positions from `len` on.
    pub fn truncate(&mut self, _len: usize) {
        match self.never {}
    }
}
