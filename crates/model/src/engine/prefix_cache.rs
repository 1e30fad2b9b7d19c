//! The prefix cache: token blocks that earlier sequences computed, indexed by chained block
//! hashes, so that a new sequence whose prompt starts with the same tokens takes them instead of
//! computing them again.
//!
//! A block is [`BLOCK_TOKENS`] tokens at positions `[b * BLOCK_TOKENS, (b + 1) * BLOCK_TOKENS)`.
//! Its full-attention layers' keys and values are the KV cache's own block, held by reference:
//! a hit appends that same block to the new sequence's block table, and sequences that share a
//! prompt share its blocks. Its sliding-window layers' rows are copied out of the sequence's
//! rings (they are overwritten there) and copied back into the rings of a sequence that reuses
//! the block, for the positions those rings keep.
//!
//! A block's key hashes its tenant, its parent's key and its own tokens, so one key names a
//! whole prefix of one tenant; a lookup also compares the stored tenant, tokens and parent, so
//! a hash collision can never hand out another prefix's rows, and one tenant's blocks are never
//! another's. Only leaf blocks (no cached child) that no running sequence holds are
//! evicted, least recently used first, so every cached block's whole prefix is cached too and
//! the store never holds more than its byte budget.
//!
//! The rows of position `p` depend only on tokens `0..=p`, and the kernels give the same rows
//! whatever the batch split, so reused rows are bit-identical to recomputed ones.
//!
//! A hybrid model's recurrent layers keep no rows, only their state after the last position:
//! a block stored while its sequence's cache ended exactly at the block's end also keeps that
//! state (a [`StateSnapshot`]), and a prefix is reused only up to its last block with one,
//! whose state the new sequence starts from. The state depends only on the tokens before it
//! and is the same bits whatever the batch split, so the reuse is exact too.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::ops::Range;
use std::sync::Arc;

use rinfer_cuda::CudaError;
use rinfer_cuda::kv_pool::{KV_BLOCK, SharedBlocks, lock};

use super::gpu_device::GpuCache;
pub use crate::kv_blocks::BLOCK_TOKENS;
use crate::kv_blocks::{BlockPool, KvBlock};
use crate::kv_cache::{KvCache, StateSnapshot};

// A GPU block holds a prefix-cache block: the same positions.
const _: () = assert!(KV_BLOCK == BLOCK_TOKENS);

/// The name of a cached block (and of the prefix it ends).
pub(super) type BlockKey = u64;

/// What the prefix cache has done since the engine started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefixCacheStats {
    /// Sequences started.
    pub requests: u64,
    /// Sequences that reused at least one cached token.
    pub hits: u64,
    /// Prompt tokens of the sequences started.
    pub prompt_tokens: u64,
    /// Of those, tokens whose keys and values were reused instead of computed.
    pub cached_tokens: u64,
    /// Blocks evicted to stay within the budget.
    pub evictions: u64,
    /// Blocks held now.
    pub blocks: usize,
    /// Bytes the blocks hold now.
    pub bytes: usize,
    /// The most bytes the blocks may hold.
    pub budget: usize,
}

impl PrefixCacheStats {
    /// The share of prompt tokens that were reused, 0 when no prompt ran.
    pub fn hit_rate(&self) -> f64 {
        super::share(self.cached_tokens, self.prompt_tokens)
    }
}

/// Where a cached block's full-attention keys and values are, shared with the sequences
/// that list it.
enum Shared {
    /// A block of the CPU caches' pool.
    Cpu(Arc<KvBlock>),
    /// A block of the GPU's pool, counted once for the store.
    Gpu(u32),
}

/// The pool the store's blocks come from and go back to.
pub(super) enum StorePool {
    /// None: nothing is stored.
    None,
    /// The CPU caches' pool.
    Cpu(BlockPool),
    /// The GPU's pool, which has `room` blocks for the store beyond the sequences' own.
    Gpu { blocks: SharedBlocks, room: usize },
}

struct Block {
    tenant: u64,
    parent: Option<BlockKey>,
    tokens: Vec<u32>,
    /// The full-attention layers' keys and values, shared with the sequences that hold it.
    shared: Shared,
    /// Per sliding-window layer: the stored bytes of the `BLOCK_TOKENS` key rows, then of the
    /// value rows, in the KV cache's type.
    ring_rows: Vec<u8>,
    /// A recurrent model's state at the block's end, when the cache ended there.
    state: Option<StateSnapshot>,
    last_used: u64,
    children: usize,
    /// Running sequences whose prefix it is (it is not evicted while they run).
    users: usize,
}

impl Block {
    /// A block of `tokens` after `parent`, without ring rows or a state, used by no one.
    fn new(tenant: u64, parent: Option<BlockKey>, tokens: &[u32], shared: Shared) -> Self {
        Self {
            tenant,
            parent,
            tokens: tokens.to_vec(),
            shared,
            ring_rows: Vec::new(),
            state: None,
            last_used: 0,
            children: 0,
            users: 0,
        }
    }
}

/// Cached blocks within a byte budget.
pub(super) struct BlockStore {
    blocks: HashMap<BlockKey, Block>,
    budget: usize,
    /// Bytes a block counts against the budget: every layer's key and value rows of its
    /// positions.
    block_bytes: usize,
    /// Bytes of one key or value row.
    row_bytes: usize,
    /// Bytes a block's recurrent state may add (0 without recurrent layers).
    state_bytes: usize,
    /// The pool of the KV caches' blocks, which the store's blocks go back to.
    pool: StorePool,
    clock: u64,
    evictions: u64,
}

impl BlockStore {
    /// An empty store of at most `budget` bytes for blocks of `layers` layers of key and value
    /// rows of `row_bytes` bytes each (a KV cache's rows, whatever their type), taken from and
    /// given back to `pool`: a CPU pool may hold that many more blocks from now on; a GPU
    /// pool's room bounds the budget.
    pub(super) fn new(budget: usize, layers: usize, row_bytes: usize, pool: StorePool) -> Self {
        let block_bytes = layers
            .saturating_mul(2 * BLOCK_TOKENS)
            .saturating_mul(row_bytes);
        let budget = match &pool {
            StorePool::None => budget,
            StorePool::Cpu(pool) => {
                pool.add_capacity(budget / block_bytes.max(1));
                budget
            }
            StorePool::Gpu { room, .. } => budget.min(room.saturating_mul(block_bytes)),
        };
        Self {
            blocks: HashMap::new(),
            budget,
            block_bytes,
            row_bytes,
            state_bytes: 0,
            pool,
            clock: 0,
            evictions: 0,
        }
    }

    /// The same store counting `bytes` more per block, for a recurrent model's state.
    pub(super) fn with_state_bytes(mut self, bytes: usize) -> Self {
        self.state_bytes = bytes;
        self
    }

    /// Whether it may hold GPU blocks: a GPU pool and room for one block in its budget.
    pub(super) fn holds_gpu_blocks(&self) -> bool {
        matches!(self.pool, StorePool::Gpu { .. }) && self.bytes_per_block() <= self.budget
    }

    /// Bytes one block counts against the budget.
    fn bytes_per_block(&self) -> usize {
        self.block_bytes.saturating_add(self.state_bytes)
    }

    /// The leading blocks of `chain` up to its last one that keeps a recurrent state: the
    /// prefix a recurrent cache can start from.
    pub(super) fn stateful_prefix(&self, chain: &[BlockKey]) -> usize {
        chain
            .iter()
            .rposition(|key| self.blocks.get(key).is_some_and(|b| b.state.is_some()))
            .map_or(0, |i| i + 1)
    }

    fn key(tenant: u64, parent: Option<BlockKey>, tokens: &[u32]) -> BlockKey {
        let mut hasher = DefaultHasher::new();
        tenant.hash(&mut hasher);
        parent.hash(&mut hasher);
        tokens.hash(&mut hasher);
        hasher.finish()
    }

    /// The block of `key` if `tenant` cached it with `tokens` after `parent`.
    fn find(
        &self,
        key: BlockKey,
        tenant: u64,
        parent: Option<BlockKey>,
        tokens: &[u32],
    ) -> Option<&Block> {
        self.blocks
            .get(&key)
            .filter(|b| b.tenant == tenant && b.parent == parent && b.tokens == tokens)
    }

    fn touch(&mut self, key: BlockKey) {
        self.clock += 1;
        if let Some(block) = self.blocks.get_mut(&key) {
            block.last_used = self.clock;
        }
    }

    /// The keys of the longest run of cached blocks that `tokens` starts with, at most
    /// `max_blocks` of them (marked as just used), of those `tenant` cached.
    pub(super) fn longest_prefix(
        &mut self,
        tenant: u64,
        tokens: &[u32],
        max_blocks: usize,
    ) -> Vec<BlockKey> {
        let mut chain = Vec::new();
        for block in tokens.chunks_exact(BLOCK_TOKENS).take(max_blocks) {
            let parent = chain.last().copied();
            let key = Self::key(tenant, parent, block);
            if self.find(key, tenant, parent, block).is_none() {
                break;
            }
            self.touch(key);
            chain.push(key);
        }
        chain
    }

    /// Makes `cache` hold the first `len` positions of the blocks `chain` (from
    /// [`Self::longest_prefix`]; `len` within its last block): their full-attention blocks are
    /// appended to its table by reference, and its rings get the rows of the positions they
    /// keep, copied.
    pub(super) fn restore(&self, chain: &[BlockKey], len: usize, cache: &mut KvCache) {
        let blocks = chain
            .iter()
            .filter_map(|key| match &self.blocks[key].shared {
                Shared::Cpu(block) => Some(Arc::clone(block)),
                Shared::Gpu(_) => None,
            });
        cache.attach(blocks, len);
        if cache.is_recurrent() {
            // `len` is the end of the chain's last block, which keeps its state.
            let last = chain.last().and_then(|key| self.blocks[key].state.as_ref());
            match last {
                Some(state) if state.len == len => cache.restore(state),
                _ => cache.clear(),
            }
        }
        // The rings' rows lie ring after ring, keys then values, each ring its own width.
        let mut first = 0;
        let rings: Vec<usize> = (0..cache.layers())
            .filter(|&layer| cache.is_ring(layer))
            .collect();
        for layer in rings {
            let row_bytes = cache.row_len(layer);
            let span = BLOCK_TOKENS * row_bytes;
            for pos in len.saturating_sub(cache.ring_slots(layer))..len {
                let (key, value) = self.ring_row(chain, first, row_bytes, pos);
                cache.store_ring_bytes(layer, pos, key, value);
            }
            first += 2 * span;
        }
    }

    /// Caches the block of `tokens` at positions `start..start + BLOCK_TOKENS` of `cache`,
    /// following the cached block `parent` (`None` for the first block), for `tenant`, and
    /// returns its key; `None` when it cannot: the parent was evicted, the cache no longer
    /// keeps those rows, or the budget has no room.
    pub(super) fn insert(
        &mut self,
        tenant: u64,
        parent: Option<BlockKey>,
        tokens: &[u32],
        cache: &KvCache,
        start: usize,
    ) -> Option<BlockKey> {
        debug_assert_eq!(start % BLOCK_TOKENS, 0);
        let key = Self::key(tenant, parent, tokens);
        let kept = (0..cache.layers())
            .all(|layer| cache.keeps(layer, start) && cache.keeps(layer, start + BLOCK_TOKENS - 1));
        if !matches!(self.pool, StorePool::Cpu(_)) || !kept {
            return self.found(key, tenant, parent, tokens);
        }
        if let Some(found) = self.make_room_for(key, tenant, parent, tokens) {
            return found;
        }
        let mut ring_rows = Vec::new();
        for layer in (0..cache.layers()).filter(|&layer| cache.is_ring(layer)) {
            for values in [false, true] {
                for pos in start..start + BLOCK_TOKENS {
                    let (k, v) = cache.row_bytes(layer, pos);
                    ring_rows.extend_from_slice(if values { v } else { k });
                }
            }
        }
        let at_end = cache.len() == start + BLOCK_TOKENS;
        let state = (cache.is_recurrent() && at_end).then(|| cache.snapshot());
        let shared = Shared::Cpu(Arc::clone(cache.block(start / BLOCK_TOKENS)));
        let block = Block {
            ring_rows,
            state,
            ..Block::new(tenant, parent, tokens, shared)
        };
        self.add(key, block);
        Some(key)
    }

    /// Caches the block of `tokens` at positions `start..start + BLOCK_TOKENS` of the GPU
    /// cache `cache` as [`Self::insert`] does: its full-attention layers' pool block by
    /// reference, and `ring_rows`, its rings' rows (from [`Self::gpu_ring_rows`]; `None` when
    /// they could not be read: then it is only looked up).
    pub(super) fn insert_gpu(
        &mut self,
        tenant: u64,
        parent: Option<BlockKey>,
        tokens: &[u32],
        cache: &dyn GpuCache,
        start: usize,
        ring_rows: Option<Vec<u8>>,
    ) -> Option<BlockKey> {
        debug_assert_eq!(start % BLOCK_TOKENS, 0);
        let key = Self::key(tenant, parent, tokens);
        let block = cache.blocks().get(start / BLOCK_TOKENS).copied();
        let (StorePool::Gpu { blocks, .. }, Some(block), Some(ring_rows)) =
            (&self.pool, block, ring_rows)
        else {
            return self.found(key, tenant, parent, tokens);
        };
        let blocks = Arc::clone(blocks);
        if let Some(found) = self.make_room_for(key, tenant, parent, tokens) {
            return found;
        }
        lock(&blocks).retain(block);
        let block = Block {
            ring_rows,
            ..Block::new(tenant, parent, tokens, Shared::Gpu(block))
        };
        self.add(key, block);
        Some(key)
    }

    /// The rows of the `blocks` blocks from position `start` on in every ring of `cache`, read
    /// at once, laid out for each block as [`Block::ring_rows`]; `None` when a ring no longer
    /// keeps them, or the device could not read them.
    pub(super) fn gpu_ring_rows(
        &self,
        cache: &dyn GpuCache,
        start: usize,
        blocks: usize,
    ) -> Option<Vec<Vec<u8>>> {
        let (row, span) = (self.row_bytes, BLOCK_TOKENS * self.row_bytes);
        let positions = start..start + blocks * BLOCK_TOKENS;
        let mut out = vec![Vec::new(); blocks];
        for (ring, slots) in cache.ring_slots().into_iter().enumerate() {
            if positions.end > cache.len() || cache.len() - positions.start > slots {
                return None;
            }
            let (mut keys, mut values) = (vec![0; blocks * span], vec![0; blocks * span]);
            for (slot, rows) in ring_runs(positions.clone(), slots) {
                let bytes = rows.start * row..rows.end * row;
                let (k, v) = (&mut keys[bytes.clone()], &mut values[bytes]);
                cache.read_ring(ring, slot * row, k, v).ok()?;
            }
            for (b, block) in out.iter_mut().enumerate() {
                block.extend_from_slice(&keys[b * span..(b + 1) * span]);
                block.extend_from_slice(&values[b * span..(b + 1) * span]);
            }
        }
        Some(out)
    }

    /// Makes the empty GPU cache `cache` hold the first `len` positions of the blocks `chain`
    /// (from [`Self::longest_prefix`]) as [`Self::restore`] does: their pool blocks listed by
    /// reference, the rows its rings keep written there.
    pub(super) fn restore_gpu(
        &self,
        chain: &[BlockKey],
        len: usize,
        cache: &mut dyn GpuCache,
    ) -> Result<(), CudaError> {
        let blocks: Vec<u32> = chain
            .iter()
            .filter_map(|key| match self.blocks[key].shared {
                Shared::Gpu(block) => Some(block),
                Shared::Cpu(_) => None,
            })
            .collect();
        cache.attach(&blocks, len);
        let row = self.row_bytes;
        for (ring, slots) in cache.ring_slots().into_iter().enumerate() {
            let kept = len.saturating_sub(slots)..len;
            let (mut keys, mut values) = (Vec::new(), Vec::new());
            for pos in kept.clone() {
                let first = 2 * ring * BLOCK_TOKENS * row;
                let (key, value) = self.ring_row(chain, first, row, pos);
                keys.extend_from_slice(key);
                values.extend_from_slice(value);
            }
            for (slot, rows) in ring_runs(kept, slots) {
                let bytes = rows.start * row..rows.end * row;
                let (k, v) = (&keys[bytes.clone()], &values[bytes]);
                cache.write_ring(ring, slot * row, k, v)?;
            }
        }
        Ok(())
    }

    /// The key and value rows of position `pos` in the blocks `chain`, of the ring whose rows
    /// start at byte `first` of a block's `ring_rows` and are `row_bytes` wide.
    fn ring_row(
        &self,
        chain: &[BlockKey],
        first: usize,
        row_bytes: usize,
        pos: usize,
    ) -> (&[u8], &[u8]) {
        let span = BLOCK_TOKENS * row_bytes;
        let block = &self.blocks[&chain[pos / BLOCK_TOKENS]];
        let (keys, values) = block.ring_rows[first..first + 2 * span].split_at(span);
        let row = (pos % BLOCK_TOKENS) * row_bytes..(pos % BLOCK_TOKENS + 1) * row_bytes;
        (&keys[row.clone()], &values[row])
    }

    /// `Some(key)` if `tenant` cached `tokens` after `parent` (marked as just used).
    fn found(
        &mut self,
        key: BlockKey,
        tenant: u64,
        parent: Option<BlockKey>,
        tokens: &[u32],
    ) -> Option<BlockKey> {
        self.find(key, tenant, parent, tokens)?;
        self.touch(key);
        Some(key)
    }

    /// `None` when a new block of `key` may be added: room was made for it. Otherwise the
    /// answer of an insert: the key when it is cached already, `None` when it cannot be
    /// (another block has its key, the parent was evicted, or the budget has no room).
    fn make_room_for(
        &mut self,
        key: BlockKey,
        tenant: u64,
        parent: Option<BlockKey>,
        tokens: &[u32],
    ) -> Option<Option<BlockKey>> {
        debug_assert_eq!(tokens.len(), BLOCK_TOKENS);
        if let Some(key) = self.found(key, tenant, parent, tokens) {
            return Some(Some(key));
        }
        if self.blocks.contains_key(&key) || parent.is_some_and(|p| !self.blocks.contains_key(&p)) {
            return Some(None);
        }
        // The parent is no leaf while its child is being made room for.
        self.adjust_children(parent, 1);
        if !self.make_room() {
            self.adjust_children(parent, -1);
            return Some(None);
        }
        None
    }

    /// Adds `block` as `key` (room made for it, its parent's child count raised), just used.
    fn add(&mut self, key: BlockKey, block: Block) {
        self.clock += 1;
        let block = Block {
            last_used: self.clock,
            ..block
        };
        self.blocks.insert(key, block);
    }

    fn adjust_children(&mut self, parent: Option<BlockKey>, by: isize) {
        if let Some(block) = parent.and_then(|p| self.blocks.get_mut(&p)) {
            block.children = block.children.saturating_add_signed(by);
        }
    }

    /// Marks the blocks `chain` as held by one more running sequence (`by` 1) or one fewer
    /// (`by` -1); held blocks are not evicted.
    pub(super) fn hold(&mut self, chain: &[BlockKey], by: isize) {
        for key in chain {
            if let Some(block) = self.blocks.get_mut(key) {
                block.users = block.users.saturating_add_signed(by);
            }
        }
    }

    /// Evicts least recently used leaves that no running sequence holds until one more block
    /// fits; false if it cannot fit.
    fn make_room(&mut self) -> bool {
        let per_block = self.bytes_per_block();
        if per_block > self.budget {
            return false;
        }
        while (self.blocks.len() + 1) * per_block > self.budget {
            let Some(victim) = self
                .blocks
                .iter()
                .filter(|(_, b)| b.children == 0 && b.users == 0)
                .min_by_key(|(_, b)| b.last_used)
                .map(|(&k, _)| k)
            else {
                return false;
            };
            let block = self.blocks.remove(&victim).expect("the victim is cached");
            self.adjust_children(block.parent, -1);
            self.give_back(block);
            self.evictions += 1;
        }
        true
    }

    fn give_back(&self, block: Block) {
        match (&self.pool, block.shared) {
            (StorePool::Cpu(pool), Shared::Cpu(shared)) => pool.give_back(shared),
            (StorePool::Gpu { blocks, .. }, Shared::Gpu(block)) => lock(blocks).release(block),
            _ => {}
        }
    }

    /// Drops every block.
    pub(super) fn clear(&mut self) {
        for (_, block) in std::mem::take(&mut self.blocks) {
            self.give_back(block);
        }
    }

    /// Blocks evicted so far.
    pub(super) fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Blocks held now.
    pub(super) fn blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Bytes the blocks hold now.
    pub(super) fn bytes(&self) -> usize {
        self.blocks.len() * self.bytes_per_block()
    }

    /// The most bytes the blocks may hold.
    pub(super) fn budget(&self) -> usize {
        self.budget
    }
}

impl Drop for BlockStore {
    /// Gives every block back to its pool (a GPU pool outlives the engine's store).
    fn drop(&mut self) {
        self.clear();
    }
}

/// The runs of consecutive slots that `positions` take in a ring of `slots` (at most
/// `slots` positions): each run's first slot and its positions' indices within `positions`.
fn ring_runs(positions: Range<usize>, slots: usize) -> impl Iterator<Item = (usize, Range<usize>)> {
    let count = positions.len();
    let first = positions.start % slots.max(1);
    let head = count.min(slots - first);
    [(first, 0..head), (0, head..count)]
        .into_iter()
        .filter(|(_, rows)| !rows.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use crate::loaded::LoadedModel;
    use rinfer_kernels::ops::KvType;

    fn config(name: &str) -> ModelConfig {
        let path = format!(
            "{}/../../tests/fixtures/models/{name}.gguf",
            env!("CARGO_MANIFEST_DIR")
        );
        LoadedModel::open(path).unwrap().model.config
    }

    /// Two caches of one pool, the first holding `n` positions whose rows are made of the
    /// position and the layer.
    fn filled(config: &ModelConfig, kv_type: KvType, n: usize) -> (KvCache, KvCache) {
        let mut caches = KvCache::try_pooled(config, kv_type, 128, 8, 2).unwrap();
        let target = caches.pop().unwrap();
        let mut cache = caches.pop().unwrap();
        cache.prepare(n).unwrap();
        let kv_dim = config.kv_dim();
        for layer in 0..config.layers {
            for pos in 0..n {
                let key = vec![(pos * 100 + layer) as f32; kv_dim];
                let value = vec![-((pos * 100 + layer) as f32); kv_dim];
                cache.store(layer, pos, &key, &value);
            }
        }
        cache.advance(n);
        (cache, target)
    }

    fn block(seed: u32) -> Vec<u32> {
        (0..BLOCK_TOKENS as u32).map(|i| seed * 1000 + i).collect()
    }

    fn row_bytes(config: &ModelConfig, kv_type: KvType) -> usize {
        kv_type.row_bytes(config.kv_dim()).unwrap()
    }

    fn store(config: &ModelConfig, budget: usize, cache: &KvCache) -> BlockStore {
        let rows = row_bytes(config, cache.kv_type());
        BlockStore::new(
            budget,
            config.layers,
            rows,
            StorePool::Cpu(cache.pool().clone()),
        )
    }

    #[test]
    fn restored_blocks_are_shared_and_ring_rows_equal_the_rows_stored_for_every_kv_type() {
        // Llama: full attention only; Gemma 3: sliding-window layers (rings of 16 + 8 slots).
        for name in ["llama-tiny-q4_k", "gemma3-tiny-q4_k_m"] {
            let config = config(name);
            for kv_type in KvType::ALL {
                let (source, mut target) = filled(&config, kv_type, 2 * BLOCK_TOKENS);
                let mut store = store(&config, 1 << 20, &source);
                let first = store.insert(0, None, &block(1), &source, 0);
                // The rings of the source no longer keep the first block's positions.
                let first = match first {
                    Some(first) => first,
                    None => {
                        assert!(name.starts_with("gemma3"), "{name}");
                        continue;
                    }
                };
                store.insert(0, Some(first), &block(2), &source, BLOCK_TOKENS);
                let tokens = [block(1), block(2), block(3)].concat();
                let chain = store.longest_prefix(0, &tokens, 8);
                assert_eq!(chain.len(), 2);
                let len = 2 * BLOCK_TOKENS - 3;
                store.restore(&chain, len, &mut target);
                assert_eq!(target.len(), len);
                for b in 0..2 {
                    assert!(Arc::ptr_eq(target.block(b), source.block(b)), "{name}");
                }
                for layer in 0..config.layers {
                    for pos in len.saturating_sub(target.ring_slots(layer))..len {
                        assert_eq!(
                            target.row_bytes(layer, pos),
                            source.row_bytes(layer, pos),
                            "{name} {kv_type}"
                        );
                    }
                }
                // A block takes the type's share of an f32 block.
                let f32_block = BlockStore::new(
                    0,
                    config.layers,
                    row_bytes(&config, KvType::F32),
                    StorePool::None,
                );
                let ratio = row_bytes(&config, KvType::F32) / row_bytes(&config, kv_type).max(1);
                assert!(store.block_bytes * ratio <= f32_block.block_bytes);
            }
        }
    }

    #[test]
    fn only_least_recently_used_leaves_no_sequence_holds_are_evicted_within_the_budget() {
        let config = config("llama-tiny-q4_k");
        let (cache, _) = filled(&config, KvType::F32, BLOCK_TOKENS);
        let rows = row_bytes(&config, KvType::F32);
        let one = BlockStore::new(usize::MAX, config.layers, rows, StorePool::None).block_bytes;
        let mut store = store(&config, 3 * one, &cache);
        let a0 = store.insert(0, None, &block(1), &cache, 0).unwrap();
        store.insert(0, Some(a0), &block(2), &cache, 0).unwrap();
        store.insert(0, None, &block(3), &cache, 0).unwrap();
        let a = [block(1), block(2)].concat();
        assert_eq!(store.longest_prefix(0, &a, 8).len(), 2);
        // Full: the least recently used leaf goes (the lone block 3), not the older root a0.
        store.insert(0, None, &block(4), &cache, 0).unwrap();
        assert_eq!(store.longest_prefix(0, &block(3), 8).len(), 0);
        assert_eq!(store.longest_prefix(0, &a, 8).len(), 2);
        // Block 4 is now the least recently used leaf.
        store.insert(0, None, &block(5), &cache, 0).unwrap();
        assert_eq!(store.longest_prefix(0, &block(4), 8).len(), 0);
        assert_eq!((store.evictions(), store.blocks()), (2, 3));
        assert!(store.bytes() <= store.budget());
        // A block a running sequence holds stays, however old: block 5 goes instead.
        let held = store.longest_prefix(0, &a, 8);
        store.hold(&held, 1);
        store.insert(0, None, &block(6), &cache, 0).unwrap();
        assert_eq!(store.longest_prefix(0, &a, 8).len(), 2);
        assert_eq!(store.longest_prefix(0, &block(5), 8).len(), 0);
        // With every other leaf held too, nothing fits.
        let six = store.longest_prefix(0, &block(6), 8);
        store.hold(&six, 1);
        assert_eq!(store.insert(0, None, &block(7), &cache, 0), None);
        store.hold(&six, -1);
        assert!(store.insert(0, None, &block(7), &cache, 0).is_some());
        // A block larger than the budget is never stored.
        let mut tiny = self::store(&config, one - 1, &cache);
        assert_eq!(tiny.insert(0, None, &block(1), &cache, 0), None);
    }

    #[test]
    fn a_tenant_finds_only_the_blocks_it_cached() {
        let config = config("llama-tiny-q4_k");
        let (cache, _) = filled(&config, KvType::F32, 2 * BLOCK_TOKENS);
        let mut store = store(&config, 1 << 20, &cache);
        let first = store.insert(1, None, &block(1), &cache, 0).unwrap();
        store.insert(1, Some(first), &block(2), &cache, BLOCK_TOKENS);
        let tokens = [block(1), block(2), block(3)].concat();
        assert_eq!(store.longest_prefix(1, &tokens, 8).len(), 2);
        assert!(store.longest_prefix(2, &tokens, 8).is_empty());
        assert!(store.longest_prefix(0, &tokens, 8).is_empty());
        // The other tenant's copy of the same prefix is its own block.
        let theirs = store.insert(2, None, &block(1), &cache, 0).unwrap();
        assert_ne!(theirs, first);
        assert_eq!(store.blocks(), 3);
    }
}
