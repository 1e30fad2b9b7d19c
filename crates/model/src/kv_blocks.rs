//! Fixed-size blocks of the full-attention layers' keys and values, shared by reference between
//! sequences and the prefix cache, and the pool that hands them out within a capacity.
//!
//! A block holds [`BLOCK_TOKENS`] consecutive positions of every full-attention layer, in the
//! cache's [`KvType`]: key and value rows, or key rows alone where attention reads the values
//! from the keys (latent attention's one row per position). A sequence's cache lists its blocks in a table (`pos / BLOCK_TOKENS`
//! → block, `pos % BLOCK_TOKENS` → row), and the prefix cache holds the same blocks, so a
//! prefix found there is appended to a new sequence's table instead of copied.
//!
//! A block is an `Arc`, not an index into an arena with its own reference counts: a batched
//! forward pass holds every sequence's cache mutably at once while its attention reads blocks
//! that other caches share, and an `Arc` makes that safe without a lock or `unsafe`, while
//! `Arc::get_mut` is exactly the rule "a sequence writes only into a block it holds alone".
//! The pool keeps the blocks no one holds any more in a free list, so after warm-up a sequence
//! gets a block without allocating, and it never lets more than its capacity exist.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rinfer_kernels::ops::{KvRow, KvRows, KvType};

use crate::error::ModelError;

/// Positions (tokens) per block, of the KV cache and of the prefix cache alike.
pub const BLOCK_TOKENS: usize = 16;

/// Keys and values of [`BLOCK_TOKENS`] positions of every full-attention layer.
pub(crate) struct KvBlock {
    /// Row `layer * BLOCK_TOKENS + offset` holds position `offset` of the block in the
    /// `layer`-th full-attention layer.
    keys: KvRows,
    /// `None` where the values are the keys.
    values: Option<KvRows>,
    /// The pool's count of blocks in existence, which this block leaves when dropped.
    existing: Arc<AtomicUsize>,
}

impl KvBlock {
    /// The key row of position `offset` in full-attention layer `layer`.
    #[inline]
    pub(crate) fn key(&self, layer: usize, offset: usize) -> KvRow<'_> {
        self.keys.row(layer * BLOCK_TOKENS + offset)
    }

    /// The value row of position `offset` in full-attention layer `layer` (its key row where
    /// the values are the keys).
    #[inline]
    pub(crate) fn value(&self, layer: usize, offset: usize) -> KvRow<'_> {
        let i = layer * BLOCK_TOKENS + offset;
        self.values.as_ref().unwrap_or(&self.keys).row(i)
    }

    /// The stored bytes of the key and value rows of position `offset` in layer `layer` (no
    /// value bytes where the values are the keys).
    pub(crate) fn row_bytes(&self, layer: usize, offset: usize) -> (&[u8], &[u8]) {
        let i = layer * BLOCK_TOKENS + offset;
        let value = self.values.as_ref().map_or(&[][..], |v| v.row_bytes(i));
        (self.keys.row_bytes(i), value)
    }

    /// Stores the key and value rows of position `offset` in layer `layer` (the key alone
    /// where the values are the keys).
    #[inline]
    pub(crate) fn store(&mut self, layer: usize, offset: usize, key: &[f32], value: &[f32]) {
        let i = layer * BLOCK_TOKENS + offset;
        self.keys.store(i, key);
        if let Some(values) = &mut self.values {
            values.store(i, value);
        }
    }

    /// Copies the first `positions` positions of every layer from `other` (the tail of a shared
    /// block, before this copy is written).
    fn copy_positions(&mut self, other: &KvBlock, positions: usize) {
        let layers = self.keys.rows() / BLOCK_TOKENS;
        for layer in 0..layers {
            for offset in 0..positions.min(BLOCK_TOKENS) {
                let i = layer * BLOCK_TOKENS + offset;
                self.keys.set_row_bytes(i, other.keys.row_bytes(i));
                if let (Some(mine), Some(theirs)) = (&mut self.values, &other.values) {
                    mine.set_row_bytes(i, theirs.row_bytes(i));
                }
            }
        }
    }
}

impl Drop for KvBlock {
    fn drop(&mut self) {
        self.existing.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How many blocks a pool holds and hands out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KvPoolStats {
    /// Blocks held by sequences or by the prefix cache.
    pub blocks_in_use: usize,
    /// Blocks in memory: in use, or free for the next sequence that needs one.
    pub blocks_allocated: usize,
    /// The most blocks that may exist.
    pub capacity: usize,
    /// Bytes of one block.
    pub block_bytes: usize,
}

impl KvPoolStats {
    /// Bytes of the blocks in memory.
    pub fn bytes_allocated(&self) -> usize {
        self.blocks_allocated * self.block_bytes
    }
}

struct PoolState {
    /// Blocks no one else holds.
    free: Vec<Arc<KvBlock>>,
    capacity: usize,
}

struct PoolShared {
    kv_type: KvType,
    kv_dim: usize,
    values: bool,
    layers: usize,
    block_bytes: usize,
    existing: Arc<AtomicUsize>,
    state: Mutex<PoolState>,
}

/// The blocks of a set of KV caches (one engine's, or one standalone cache's); cloning it
/// clones the handle, not the blocks.
#[derive(Clone)]
pub(crate) struct BlockPool {
    shared: Arc<PoolShared>,
}

impl BlockPool {
    /// A pool of at most `capacity` blocks of `layers` full-attention layers' rows of `kv_dim`
    /// values in `kv_type` (key rows alone unless `values`), none allocated yet; an error when
    /// a block's size overflows.
    pub(crate) fn new(
        kv_type: KvType,
        (kv_dim, values): (usize, bool),
        layers: usize,
        capacity: usize,
    ) -> Result<Self, ModelError> {
        let block_bytes =
            Self::block_bytes_for(kv_type, (kv_dim, values), layers).ok_or_else(|| {
                ModelError::SizeOverflow {
                    what: format!("a KV block of {layers} layers"),
                }
            })?;
        Ok(Self {
            shared: Arc::new(PoolShared {
                kv_type,
                kv_dim,
                values,
                layers,
                block_bytes,
                existing: Arc::new(AtomicUsize::new(0)),
                state: Mutex::new(PoolState {
                    free: Vec::new(),
                    capacity,
                }),
            }),
        })
    }

    /// Bytes of a block of `layers` layers' key (and, with `values`, value) rows of `kv_dim`
    /// values in `kv_type`.
    pub(crate) fn block_bytes_for(
        kv_type: KvType,
        (kv_dim, values): (usize, bool),
        layers: usize,
    ) -> Option<usize> {
        let rows = if values { 2 } else { 1 };
        kv_type
            .row_bytes(kv_dim)?
            .checked_mul(rows * BLOCK_TOKENS)?
            .checked_mul(layers)
    }

    fn state(&self) -> MutexGuard<'_, PoolState> {
        // A panic while the lock was held left the free list valid (every change is one push
        // or pop), so a poisoned lock is taken as it is.
        self.shared
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The type of the rows.
    pub(crate) fn kv_type(&self) -> KvType {
        self.shared.kv_type
    }

    /// Bytes of one block.
    pub(crate) fn block_bytes(&self) -> usize {
        self.shared.block_bytes
    }

    /// Bytes of one key (or value) row of a block.
    pub(crate) fn row_bytes(&self) -> usize {
        let s = &self.shared;
        s.kv_type.row_bytes(s.kv_dim).unwrap_or(0)
    }

    /// Lets `blocks` more blocks exist.
    pub(crate) fn add_capacity(&self, blocks: usize) {
        let mut state = self.state();
        state.capacity = state.capacity.saturating_add(blocks);
    }

    /// Allocates blocks into the free list until `blocks` exist (within the capacity), so that
    /// taking them later allocates nothing.
    pub(crate) fn preallocate(&self, blocks: usize) -> Result<(), ModelError> {
        let mut state = self.state();
        let wanted = blocks.min(state.capacity);
        let missing = wanted.saturating_sub(state.free.len());
        state.free.reserve(missing);
        while self.shared.existing.load(Ordering::Relaxed) < wanted {
            let block = self.allocate()?;
            state.free.push(block);
        }
        Ok(())
    }

    fn allocate(&self) -> Result<Arc<KvBlock>, ModelError> {
        let s = &self.shared;
        let rows = || {
            KvRows::new(s.kv_type, s.layers * BLOCK_TOKENS, s.kv_dim).ok_or_else(|| {
                ModelError::SizeOverflow {
                    what: format!("a KV block of {} layers", s.layers),
                }
            })
        };
        let block = KvBlock {
            keys: rows()?,
            values: if s.values { Some(rows()?) } else { None },
            existing: Arc::clone(&s.existing),
        };
        s.existing.fetch_add(1, Ordering::Relaxed);
        Ok(Arc::new(block))
    }

    /// A block that no one else holds (its rows hold whatever its last holder left), or an
    /// error when every block the capacity allows is in use.
    pub(crate) fn take(&self) -> Result<Arc<KvBlock>, ModelError> {
        let mut state = self.state();
        if let Some(block) = state.free.pop() {
            return Ok(block);
        }
        if self.shared.existing.load(Ordering::Relaxed) >= state.capacity {
            return Err(ModelError::KvBlocksExhausted {
                capacity: state.capacity,
            });
        }
        drop(state);
        self.allocate()
    }

    /// A block that holds the first `positions` positions of `shared` and that no one else
    /// holds: the copy a sequence writes into instead of a block it shares.
    pub(crate) fn copy_of(
        &self,
        shared: &KvBlock,
        positions: usize,
    ) -> Result<Arc<KvBlock>, ModelError> {
        let mut block = self.take()?;
        Arc::get_mut(&mut block)
            .expect("a block from the pool is held by no one else")
            .copy_positions(shared, positions);
        Ok(block)
    }

    /// Drops a holder's reference to `block`; the block goes back to the free list when that
    /// was the last one.
    pub(crate) fn give_back(&self, block: Arc<KvBlock>) {
        let mut state = self.state();
        // Under the lock, so two holders giving the same block back cannot both miss it.
        if Arc::strong_count(&block) == 1 {
            state.free.push(block);
        }
    }

    /// What the pool holds now.
    pub(crate) fn stats(&self) -> KvPoolStats {
        let state = self.state();
        let allocated = self.shared.existing.load(Ordering::Relaxed);
        KvPoolStats {
            blocks_in_use: allocated.saturating_sub(state.free.len()),
            blocks_allocated: allocated,
            capacity: state.capacity,
            block_bytes: self.shared.block_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(capacity: usize) -> BlockPool {
        BlockPool::new(KvType::F32, (8, true), 2, capacity).unwrap()
    }

    #[test]
    fn a_block_goes_back_to_the_free_list_only_when_its_last_holder_gives_it_back() {
        let pool = pool(4);
        let block = pool.take().unwrap();
        let other = Arc::clone(&block);
        pool.give_back(block);
        assert_eq!(pool.stats().blocks_in_use, 1, "still held by the other");
        pool.give_back(other);
        let stats = pool.stats();
        assert_eq!((stats.blocks_in_use, stats.blocks_allocated), (0, 1));
        // Taken again, it is the same allocation.
        let again = pool.take().unwrap();
        assert_eq!(pool.stats().blocks_allocated, 1);
        // Dropped without being given back, it is freed.
        drop(again);
        assert_eq!(pool.stats().blocks_allocated, 0);
    }

    #[test]
    fn a_pool_refuses_a_block_beyond_its_capacity_with_an_error() {
        let pool = pool(2);
        let held = [pool.take().unwrap(), pool.take().unwrap()];
        let err = pool.take().err().unwrap();
        assert!(matches!(err, ModelError::KvBlocksExhausted { capacity: 2 }));
        pool.add_capacity(1);
        let third = pool.take().unwrap();
        assert_eq!(pool.stats().blocks_in_use, 3);
        drop(held);
        pool.give_back(third);
        let stats = pool.stats();
        assert_eq!((stats.blocks_in_use, stats.blocks_allocated), (0, 1));
    }

    #[test]
    fn a_copy_holds_the_shared_blocks_first_positions() {
        let pool = pool(4);
        let mut block = pool.take().unwrap();
        let owned = Arc::get_mut(&mut block).unwrap();
        for offset in 0..BLOCK_TOKENS {
            owned.store(1, offset, &[offset as f32; 8], &[-(offset as f32); 8]);
        }
        let copy = pool.copy_of(&block, 5).unwrap();
        for offset in 0..5 {
            assert_eq!(copy.row_bytes(1, offset), block.row_bytes(1, offset));
        }
        assert!(!Arc::ptr_eq(&copy, &block));
    }
}
