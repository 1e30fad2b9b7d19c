//! The prefix cache: keys and values of token blocks that earlier sequences computed, indexed
//! by chained block hashes, so that a new sequence whose prompt starts with the same tokens
//! copies them into its KV cache instead of computing them again.
//!
//! A block is [`BLOCK_TOKENS`] tokens at positions `[b * BLOCK_TOKENS, (b + 1) * BLOCK_TOKENS)`
//! with every layer's key and value rows of those positions. Its key hashes its parent's key
//! and its own tokens, so one key names a whole prefix; a lookup also compares the stored
//! tokens and parent, so a hash collision can never hand out another prefix's rows. Only leaf
//! blocks (no cached child) are evicted, least recently used first, so every cached block's
//! whole prefix is cached too and the store never holds more than its byte budget.
//!
//! The rows of position `p` depend only on tokens `0..=p`, and the kernels give the same rows
//! whatever the batch split, so copied rows are bit-identical to recomputed ones.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::kv_cache::KvCache;

/// Tokens per cached block.
pub const BLOCK_TOKENS: usize = 16;

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
        if self.prompt_tokens == 0 {
            0.0
        } else {
            self.cached_tokens as f64 / self.prompt_tokens as f64
        }
    }
}

struct Block {
    parent: Option<BlockKey>,
    tokens: Vec<u32>,
    /// Per layer: the stored bytes of the `BLOCK_TOKENS` key rows, then of the value rows, in
    /// the KV cache's type.
    rows: Vec<u8>,
    last_used: u64,
    children: usize,
}

/// Cached blocks within a byte budget.
pub(super) struct BlockStore {
    blocks: HashMap<BlockKey, Block>,
    budget: usize,
    block_bytes: usize,
    clock: u64,
    evictions: u64,
}

impl BlockStore {
    /// An empty store of at most `budget` bytes for blocks of `layers` layers of key and value
    /// rows of `row_bytes` bytes each (a KV cache's rows, whatever their type).
    pub(super) fn new(budget: usize, layers: usize, row_bytes: usize) -> Self {
        Self {
            blocks: HashMap::new(),
            budget,
            block_bytes: layers * 2 * BLOCK_TOKENS * row_bytes,
            clock: 0,
            evictions: 0,
        }
    }

    fn key(parent: Option<BlockKey>, tokens: &[u32]) -> BlockKey {
        let mut hasher = DefaultHasher::new();
        parent.hash(&mut hasher);
        tokens.hash(&mut hasher);
        hasher.finish()
    }

    /// The block of `key` if it holds `tokens` after `parent`.
    fn find(&self, key: BlockKey, parent: Option<BlockKey>, tokens: &[u32]) -> Option<&Block> {
        self.blocks
            .get(&key)
            .filter(|b| b.parent == parent && b.tokens == tokens)
    }

    fn touch(&mut self, key: BlockKey) {
        self.clock += 1;
        if let Some(block) = self.blocks.get_mut(&key) {
            block.last_used = self.clock;
        }
    }

    /// The keys of the longest run of cached blocks that `tokens` starts with, at most
    /// `max_blocks` of them (marked as just used).
    pub(super) fn longest_prefix(&mut self, tokens: &[u32], max_blocks: usize) -> Vec<BlockKey> {
        let mut chain = Vec::new();
        for block in tokens.chunks_exact(BLOCK_TOKENS).take(max_blocks) {
            let parent = chain.last().copied();
            let key = Self::key(parent, block);
            if self.find(key, parent, block).is_none() {
                break;
            }
            self.touch(key);
            chain.push(key);
        }
        chain
    }

    /// Writes the rows of the blocks `chain` (from [`Self::longest_prefix`]) into `cache`, which
    /// then holds exactly that prefix. Sliding-window layers get only the positions their ring
    /// keeps.
    pub(super) fn restore(&self, chain: &[BlockKey], cache: &mut KvCache) {
        cache.clear();
        let total = chain.len() * BLOCK_TOKENS;
        let row_bytes = self.block_bytes / (cache.layers() * 2 * BLOCK_TOKENS).max(1);
        let span = BLOCK_TOKENS * row_bytes;
        for (b, key) in chain.iter().enumerate() {
            let block = &self.blocks[key];
            for layer in 0..cache.layers() {
                let oldest = total.saturating_sub(cache.ring_slots(layer));
                let rows = &block.rows[layer * 2 * span..(layer + 1) * 2 * span];
                let (keys, values) = rows.split_at(span);
                for i in 0..BLOCK_TOKENS {
                    let pos = b * BLOCK_TOKENS + i;
                    if pos >= oldest {
                        let row = i * row_bytes..(i + 1) * row_bytes;
                        cache.store_bytes(layer, pos, &keys[row.clone()], &values[row]);
                    }
                }
            }
        }
        cache.advance(total);
    }

    /// Caches the block of `tokens` at positions `start..start + BLOCK_TOKENS` of `cache`,
    /// following the cached block `parent` (`None` for the first block), and returns its key;
    /// `None` when it cannot: the parent was evicted, the cache no longer keeps those rows, or
    /// the budget has no room.
    pub(super) fn insert(
        &mut self,
        parent: Option<BlockKey>,
        tokens: &[u32],
        cache: &KvCache,
        start: usize,
    ) -> Option<BlockKey> {
        debug_assert_eq!(tokens.len(), BLOCK_TOKENS);
        let key = Self::key(parent, tokens);
        if self.find(key, parent, tokens).is_some() {
            self.touch(key);
            return Some(key);
        }
        if self.blocks.contains_key(&key)
            || parent.is_some_and(|p| !self.blocks.contains_key(&p))
            || !(0..cache.layers()).all(|layer| {
                cache.keeps(layer, start) && cache.keeps(layer, start + BLOCK_TOKENS - 1)
            })
        {
            return None;
        }
        // The parent is no leaf while its child is being made room for.
        self.adjust_children(parent, 1);
        if !self.make_room() {
            self.adjust_children(parent, -1);
            return None;
        }
        let mut rows = Vec::with_capacity(self.block_bytes);
        for layer in 0..cache.layers() {
            for values in [false, true] {
                for pos in start..start + BLOCK_TOKENS {
                    let (k, v) = cache.row_bytes(layer, pos);
                    rows.extend_from_slice(if values { v } else { k });
                }
            }
        }
        debug_assert_eq!(rows.len(), self.block_bytes);
        self.clock += 1;
        let block = Block {
            parent,
            tokens: tokens.to_vec(),
            rows,
            last_used: self.clock,
            children: 0,
        };
        self.blocks.insert(key, block);
        Some(key)
    }

    fn adjust_children(&mut self, parent: Option<BlockKey>, by: isize) {
        if let Some(block) = parent.and_then(|p| self.blocks.get_mut(&p)) {
            block.children = block.children.saturating_add_signed(by);
        }
    }

    /// Evicts least recently used leaves until one more block fits; false if it cannot fit.
    fn make_room(&mut self) -> bool {
        if self.block_bytes > self.budget {
            return false;
        }
        while (self.blocks.len() + 1) * self.block_bytes > self.budget {
            let Some(victim) = self
                .blocks
                .iter()
                .filter(|(_, b)| b.children == 0)
                .min_by_key(|(_, b)| b.last_used)
                .map(|(&k, _)| k)
            else {
                return false;
            };
            let block = self.blocks.remove(&victim).expect("the victim is cached");
            self.adjust_children(block.parent, -1);
            self.evictions += 1;
        }
        true
    }

    /// Drops every block.
    pub(super) fn clear(&mut self) {
        self.blocks.clear();
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
        self.blocks.len() * self.block_bytes
    }

    /// The most bytes the blocks may hold.
    pub(super) fn budget(&self) -> usize {
        self.budget
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use crate::loaded::LoadedModel;
    use rinfer_kernels::ops::KvType;

    fn config() -> ModelConfig {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/models/llama-tiny-q4_k.gguf"
        );
        LoadedModel::open(path).unwrap().model.config
    }

    /// A cache holding `n` positions whose rows are made of the position and the layer.
    fn filled(config: &ModelConfig, kv_type: KvType, n: usize) -> KvCache {
        let mut cache = KvCache::with_type(config, kv_type, 128, 8);
        let kv_dim = config.kv_dim();
        for layer in 0..config.layers {
            for pos in 0..n {
                let key = vec![(pos * 100 + layer) as f32; kv_dim];
                let value = vec![-((pos * 100 + layer) as f32); kv_dim];
                cache.store(layer, pos, &key, &value);
            }
        }
        cache.advance(n);
        cache
    }

    fn block(seed: u32) -> Vec<u32> {
        (0..BLOCK_TOKENS as u32).map(|i| seed * 1000 + i).collect()
    }

    fn row_bytes(config: &ModelConfig, kv_type: KvType) -> usize {
        kv_type.row_bytes(config.kv_dim()).unwrap()
    }

    #[test]
    fn restored_rows_equal_the_rows_stored_for_every_kv_type() {
        let config = config();
        for kv_type in KvType::ALL {
            let source = filled(&config, kv_type, 2 * BLOCK_TOKENS);
            let mut store = BlockStore::new(1 << 20, config.layers, row_bytes(&config, kv_type));
            let first = store.insert(None, &block(1), &source, 0).unwrap();
            store.insert(Some(first), &block(2), &source, BLOCK_TOKENS);
            let tokens = [block(1), block(2), block(3)].concat();
            let chain = store.longest_prefix(&tokens, 8);
            assert_eq!(chain.len(), 2);
            let mut target = KvCache::with_type(&config, kv_type, 128, 8);
            store.restore(&chain, &mut target);
            assert_eq!(target.len(), 2 * BLOCK_TOKENS);
            for layer in 0..config.layers {
                for pos in 0..2 * BLOCK_TOKENS {
                    assert_eq!(
                        target.row_bytes(layer, pos),
                        source.row_bytes(layer, pos),
                        "{kv_type}"
                    );
                }
            }
            // A block takes the type's share of an f32 block.
            let f32_block = BlockStore::new(0, config.layers, row_bytes(&config, KvType::F32));
            let ratio = row_bytes(&config, KvType::F32) / row_bytes(&config, kv_type).max(1);
            assert!(store.block_bytes * ratio <= f32_block.block_bytes);
        }
    }

    #[test]
    fn only_least_recently_used_leaves_are_evicted_within_the_budget() {
        let config = config();
        let cache = filled(&config, KvType::F32, BLOCK_TOKENS);
        let rows = row_bytes(&config, KvType::F32);
        let one = BlockStore::new(usize::MAX, config.layers, rows).block_bytes;
        let mut store = BlockStore::new(3 * one, config.layers, rows);
        let a0 = store.insert(None, &block(1), &cache, 0).unwrap();
        store.insert(Some(a0), &block(2), &cache, 0).unwrap();
        store.insert(None, &block(3), &cache, 0).unwrap();
        let a = [block(1), block(2)].concat();
        assert_eq!(store.longest_prefix(&a, 8).len(), 2);
        // Full: the least recently used leaf goes (the lone block 3), not the older root a0.
        store.insert(None, &block(4), &cache, 0).unwrap();
        assert_eq!(store.longest_prefix(&block(3), 8).len(), 0);
        assert_eq!(store.longest_prefix(&a, 8).len(), 2);
        // Block 4 is now the least recently used leaf.
        store.insert(None, &block(5), &cache, 0).unwrap();
        assert_eq!(store.longest_prefix(&block(4), 8).len(), 0);
        assert_eq!((store.evictions(), store.blocks()), (2, 3));
        assert!(store.bytes() <= store.budget());
        // A block larger than the budget is never stored.
        let mut tiny = BlockStore::new(one - 1, config.layers, rows);
        assert_eq!(tiny.insert(None, &block(1), &cache, 0), None);
    }
}
