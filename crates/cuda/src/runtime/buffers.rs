//! The activation buffers, the pool of KV blocks and the sequences' caches, allocated once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaSlice, CudaStream};

use crate::error::CudaError;
use crate::kernels::KvElement;
pub(crate) use crate::kv_pool::lock;
use crate::kv_pool::{BlockAllocator, KV_BLOCK, SharedBlocks};
use crate::plan::{BufferSizes, UploadPlan};
use crate::program::{CacheAddresses, LayerKv, WorkAddresses};
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

/// The pool of KV blocks the full-attention layers of every sequence live in (see
/// [`crate::kv_pool`]): keys `[blocks, pool layers, KV_BLOCK, kv_dim]`, values alike, of the
/// plan's element type (bytes), and the allocator its caches share.
pub(crate) struct KvPool {
    pub keys: Buffer<u8>,
    pub values: Buffer<u8>,
    pub blocks: SharedBlocks,
    /// Bytes of one block (every pooled layer).
    pub block_bytes: usize,
}

impl KvPool {
    pub fn new(stream: &Arc<CudaStream>, plan: &UploadPlan) -> Result<Self, CudaError> {
        let block_bytes = plan.kv_pool_layers() * KV_BLOCK * plan.options.kv.row_bytes(plan.kv_dim);
        let bytes = plan.kv_pool_blocks * block_bytes;
        Ok(Self {
            keys: Buffer::new(stream, bytes)?,
            values: Buffer::new(stream, bytes)?,
            blocks: Arc::new(Mutex::new(BlockAllocator::new(plan.kv_pool_blocks))),
            block_bytes,
        })
    }
}

static NEXT_CACHE_ID: AtomicU64 = AtomicU64::new(1);

/// A sliding-window layer's ring: its keys and its values.
type RingBuffers = (Buffer<u8>, Buffer<u8>);

/// The device-resident KV cache of one sequence; make one with
/// [`GpuModel::new_cache`](crate::GpuModel::new_cache). Its full-attention layers' rows are
/// blocks of the model's pool, listed in its block table; its sliding-window layers keep rings
/// of their own (read through the table 0, 1, 2, ...).
pub struct GpuKvCache {
    /// Its pool blocks in position order (the host copy of `table`).
    pub(crate) blocks: Vec<u32>,
    /// The block table on the device `[⌈context / KV_BLOCK⌉]`.
    pub(crate) table: Buffer<u32>,
    /// How many entries of `table` are current (`blocks` is rewritten there when it changes).
    pub(crate) uploaded: usize,
    /// Keys and values of each sliding-window layer's ring.
    rings: Vec<RingBuffers>,
    /// The table 0, 1, 2, ... the rings are read through.
    ring_table: Buffer<u32>,
    /// Where each layer's keys, values and table are (fixed for the cache's life, so that a
    /// captured graph stays valid).
    pub(crate) layers: Vec<LayerKv>,
    pub(crate) pool: SharedBlocks,
    pub(crate) element: KvElement,
    pub(crate) id: u64,
    pub(crate) len: usize,
    pub(crate) context: usize,
}

impl GpuKvCache {
    pub(crate) fn new(
        stream: &Arc<CudaStream>,
        plan: &UploadPlan,
        pool: &KvPool,
    ) -> Result<Self, CudaError> {
        let element = plan.options.kv;
        let context = plan.options.context;
        let table = Buffer::new(stream, context.div_ceil(KV_BLOCK))?;
        let longest_ring = (plan.kv_slots.iter().zip(&plan.kv_pool_index))
            .filter(|(_, pooled)| pooled.is_none())
            .map(|(&slots, _)| slots)
            .max()
            .unwrap_or(0);
        let identity: Vec<u32> = (0..longest_ring.div_ceil(KV_BLOCK) as u32).collect();
        let mut ring_table = Buffer::new(stream, identity.len())?;
        stream
            .memcpy_htod(&identity, &mut ring_table.slice)
            .map_err(driver("cache allocation"))?;
        let strides = plan.kv_block_strides();
        let row_bytes = element.row_bytes(plan.kv_dim);
        let mut rings = Vec::new();
        let mut layers = Vec::with_capacity(plan.kv_slots.len());
        for (layer, (&slots, pooled)) in plan.kv_slots.iter().zip(&plan.kv_pool_index).enumerate() {
            let (keys, values, table) = match pooled {
                Some(index) => {
                    let offset = (index * KV_BLOCK * row_bytes) as u64;
                    (pool.keys.ptr + offset, pool.values.ptr + offset, table.ptr)
                }
                None => {
                    let bytes = slots * row_bytes;
                    let ring = (Buffer::new(stream, bytes)?, Buffer::new(stream, bytes)?);
                    let addresses = (ring.0.ptr, ring.1.ptr, ring_table.ptr);
                    rings.push(ring);
                    addresses
                }
            };
            layers.push(LayerKv {
                keys,
                values,
                table,
                block_stride: strides[layer],
                slots,
            });
        }
        Ok(Self {
            blocks: Vec::with_capacity(context.div_ceil(KV_BLOCK)),
            table,
            uploaded: 0,
            rings,
            ring_table,
            layers,
            pool: Arc::clone(&pool.blocks),
            element,
            id: NEXT_CACHE_ID.fetch_add(1, Ordering::Relaxed),
            len: 0,
            context,
        })
    }

    /// Where each layer's keys, values and block table are.
    pub(crate) fn addresses(&self) -> CacheAddresses {
        CacheAddresses {
            layers: self.layers.clone(),
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

    /// Bytes of device memory it holds: its rings, and the pool blocks it lists (a block it
    /// shares counted whole).
    pub fn bytes(&self) -> usize {
        let rings: usize = self
            .rings
            .iter()
            .map(|(k, v)| k.slice.len() + v.slice.len())
            .sum();
        let pooled = self.layers.iter().find(|l| l.table == self.table.ptr);
        let block = pooled.map_or(0, |l| 2 * self.element.row_bytes(l.block_stride as usize));
        rings + self.blocks.len() * block
    }

    /// The element type of its keys and values.
    pub fn element(&self) -> KvElement {
        self.element
    }

    /// Its pool blocks, in position order.
    pub fn blocks(&self) -> &[u32] {
        &self.blocks
    }

    /// Makes the cache hold positions `0..len` of `blocks` (of its model's pool, from another
    /// cache's [`blocks`](Self::blocks)), listed by reference: a prefix reused without
    /// computing it. What it held before is given back; its rings are not touched.
    pub fn attach(&mut self, blocks: &[u32], len: usize) {
        let mut pool = lock(&self.pool);
        pool.truncate(&mut self.blocks, 0);
        self.blocks = pool.fork(blocks, len);
        self.len = len.min(self.blocks.len() * KV_BLOCK);
        self.uploaded = 0;
    }

    /// The slots of each sliding-window layer's ring, in layer order: position `p` lies in
    /// slot `p % slots`.
    pub fn ring_slots(&self) -> Vec<usize> {
        let rings = self
            .layers
            .iter()
            .filter(|l| l.table == self.ring_table.ptr);
        rings.map(|l| l.slots).collect()
    }

    /// Copies `keys.len()` bytes of ring `ring`'s keys from byte `offset` on into `keys`, and
    /// as many of its values into `values`.
    pub fn read_ring(
        &self,
        ring: usize,
        offset: usize,
        keys: &mut [u8],
        values: &mut [u8],
    ) -> Result<(), CudaError> {
        let (k, v) = self.ring(ring, offset, keys.len(), values.len())?;
        let stream = k.slice.stream();
        let span = offset..offset + keys.len();
        stream
            .memcpy_dtoh(&k.slice.slice(span.clone()), keys)
            .and_then(|()| stream.memcpy_dtoh(&v.slice.slice(span), values))
            .and_then(|()| stream.synchronize())
            .map_err(driver("ring read"))
    }

    /// Writes `keys` into ring `ring`'s keys from byte `offset` on, and `values` into its
    /// values.
    pub fn write_ring(
        &mut self,
        ring: usize,
        offset: usize,
        keys: &[u8],
        values: &[u8],
    ) -> Result<(), CudaError> {
        self.ring(ring, offset, keys.len(), values.len())?;
        let (k, v) = &mut self.rings[ring];
        let stream = Arc::clone(k.slice.stream());
        let span = offset..offset + keys.len();
        stream
            .memcpy_htod(keys, &mut k.slice.slice_mut(span.clone()))
            .and_then(|()| stream.memcpy_htod(values, &mut v.slice.slice_mut(span)))
            .and_then(|()| stream.synchronize())
            .map_err(driver("ring write"))
    }

    /// Ring `ring`, checked to hold `len` bytes from `offset` on, as many of keys as of values
    /// (`values_len`).
    fn ring(
        &self,
        ring: usize,
        offset: usize,
        len: usize,
        values_len: usize,
    ) -> Result<&RingBuffers, CudaError> {
        let fits = |(k, _): &&RingBuffers| {
            let end = offset.checked_add(len);
            len == values_len && end.is_some_and(|end| end <= k.slice.len())
        };
        self.rings
            .get(ring)
            .filter(fits)
            .ok_or_else(|| CudaError::Driver {
                op: "ring access",
                message: format!(
                    "{len} key and {values_len} value bytes at {offset} do not fit ring {ring}"
                ),
            })
    }

    /// Forgets everything, giving its blocks back to the pool (the rings are kept).
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Forgets positions from `len` on, giving back the blocks past them.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
        lock(&self.pool).truncate(&mut self.blocks, self.len);
        self.uploaded = self.uploaded.min(self.blocks.len());
    }
}

impl Drop for GpuKvCache {
    fn drop(&mut self) {
        lock(&self.pool).truncate(&mut self.blocks, 0);
    }
}
