//! The key/value cache of one sequence, its rows stored in a [`KvType`]: full-attention layers
//! in blocks it may share with other sequences and the prefix cache, sliding-window layers in
//! rings of its own.
//!
//! A full-attention layer's rows live in `KvBlock`s of 16 positions handed out by the engine's
//! `BlockPool`; the block table maps `pos / 16` to a block and `pos % 16` to its row, and
//! attention reads rows through it (`PagedRows`; a sliding-window layer's `RingRows`), so the
//! lookup of a key has no branch on where its layer keeps it. The cache writes only into blocks
//! it holds alone: `KvCache::prepare` replaces a shared block it is about to write into with
//! a copy of the positions it holds (copy on write of the tail only) and takes new blocks for
//! the positions past its table. The pool may hold `sequences × ⌈context / 16⌉` blocks (what
//! `MemoryPlan` counts and checks at start) plus the prefix cache's budget, so a sequence
//! always gets its next block; were that broken, the pass fails with `KvBlocksExhausted`,
//! never a panic.
//!
//! A sliding-window layer keeps a ring of `window + max_batch` slots, which has overwritten
//! positions older than `len - slots`; a cache is cut back only while every ring still holds
//! the window before the cut (`Rings::can_truncate`).
//!
//! A layer that reads an earlier layer's cache (Gemma 4's KV sharing) keeps nothing: attention
//! reads the earlier layer's rows, and the memory plan counts none for it.
//!
//! A recurrent layer of a hybrid model keeps no rows but its state after the last position
//! (a convolution window, state matrices), allocated with the cache. That state cannot be cut
//! back: a cache is cut only to empty (which zeroes it), to its checkpoint, or to a position
//! whose state a [`StateSnapshot`] taken there restores.
//!
//! The checkpoint is a copy of the recurrent state at one position (the engine keeps one at
//! the end of each prompt, [`KvCache::keep_checkpoint`]), allocated with the cache: cutting the
//! cache back to that position puts the state back, so a chat whose next prompt repeats the
//! last one and then differs from the reply continues from there. Cutting to a position before
//! it forgets it (the tokens after the cut will change).

use std::sync::Arc;

use rinfer_kernels::ops::{KeyValueRows, KvRow, KvRows, KvType};

use crate::config::ModelConfig;
use crate::error::ModelError;
use crate::kv_blocks::{BLOCK_TOKENS, BlockPool, KvBlock};

/// Where one layer keeps its keys and values.
enum LayerStore {
    /// A sliding-window layer.
    Ring(Ring),
    /// A full-attention layer: the `index`-th layer of every block of the table.
    Paged { index: usize },
    /// A recurrent layer: its state after the last position.
    Recurrent(RecurrentState),
    /// A layer that reads the cache of an earlier one (Gemma 4's KV sharing): it keeps nothing.
    Shared,
}

/// A sliding-window layer's ring of `slots` rows (`window + max_batch`, at most the context),
/// position `pos` in slot `pos % slots`.
struct Ring {
    keys: KvRows,
    /// `None` where the values are the keys.
    values: Option<KvRows>,
    slots: usize,
}

impl Ring {
    /// Bytes of its rows.
    fn bytes(&self) -> usize {
        self.keys.bytes() + self.values.as_ref().map_or(0, KvRows::bytes)
    }

    /// Stores the key and value rows of position `pos`, converted to the ring's type.
    fn store(&mut self, pos: usize, key: &[f32], value: &[f32]) {
        let slot = pos % self.slots;
        self.keys.store(slot, key);
        if let Some(values) = &mut self.values {
            values.store(slot, value);
        }
    }

    /// The stored bytes of the key and value rows of position `pos` (no value bytes where the
    /// values are the keys).
    fn row_bytes(&self, pos: usize) -> (&[u8], &[u8]) {
        let slot = pos % self.slots;
        let value = self.values.as_ref().map_or(&[][..], |v| v.row_bytes(slot));
        (self.keys.row_bytes(slot), value)
    }

    /// Sets the bytes of the key and value rows of position `pos`, as [`Self::row_bytes`]
    /// gives them.
    fn set_row_bytes(&mut self, pos: usize, key: &[u8], value: &[u8]) {
        let slot = pos % self.slots;
        self.keys.set_row_bytes(slot, key);
        if let Some(values) = &mut self.values {
            values.set_row_bytes(slot, value);
        }
    }
}

/// A recurrent layer's state after the last position of its sequence.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RecurrentState {
    /// The convolution's last inputs, oldest first.
    pub(crate) window: Vec<f32>,
    /// The state matrices (none for a short convolution).
    pub(crate) matrices: Vec<f32>,
}

/// The recurrent state of every recurrent layer of a cache at one position, to restore when
/// the cache is cut back there (speculation's rejected tokens, a cached prefix).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StateSnapshot {
    /// The position the state follows.
    pub(crate) len: usize,
    /// Per recurrent layer, in layer order.
    pub(crate) layers: Vec<RecurrentState>,
}

impl StateSnapshot {
    /// Bytes of the state it holds.
    pub fn bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|l| (l.window.len() + l.matrices.len()) * 4)
            .sum()
    }
}

/// The KV cache of one sequence.
///
/// Full-attention layers read position `pos` from block `pos / 16` of the cache's block table,
/// which may be shared with other sequences and with the prefix cache; the cache writes only
/// into blocks it holds alone, and copies a shared block (the positions before the first write)
/// before writing into it.
pub struct KvCache {
    layers: Vec<LayerStore>,
    /// The blocks of the full-attention layers, in position order.
    table: Vec<Arc<KvBlock>>,
    pool: BlockPool,
    context: usize,
    len: usize,
    /// The recurrent state kept at one position (at position 0: none), to go back to.
    checkpoint: StateSnapshot,
}

impl KvCache {
    /// An f32 cache for `context` positions, fed in batches of at most `max_batch` tokens.
    ///
    /// # Panics
    ///
    /// If the size overflows (see [`KvCache::try_new`], which returns that as an error).
    pub fn new(config: &ModelConfig, context: usize, max_batch: usize) -> Self {
        Self::try_new(config, context, max_batch).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A cache of `kv_type` rows for `context` positions, fed in batches of at most
    /// `max_batch` tokens.
    ///
    /// # Panics
    ///
    /// If the size overflows or the model's heads do not fit the type (see
    /// [`KvCache::try_with_type`], which returns that as an error).
    pub fn with_type(
        config: &ModelConfig,
        kv_type: KvType,
        context: usize,
        max_batch: usize,
    ) -> Self {
        Self::try_with_type(config, kv_type, context, max_batch).unwrap_or_else(|e| panic!("{e}"))
    }

    /// An f32 cache for `context` positions, fed in batches of at most `max_batch` tokens, or
    /// an error when its size overflows. It does not check the memory available: see
    /// [`crate::MemoryPlan`] for that.
    pub fn try_new(
        config: &ModelConfig,
        context: usize,
        max_batch: usize,
    ) -> Result<Self, ModelError> {
        Self::try_with_type(config, KvType::F32, context, max_batch)
    }

    /// A cache of `kv_type` rows for `context` positions, fed in batches of at most
    /// `max_batch` tokens, or an error when its size overflows or a head's width is not a
    /// whole number of the type's blocks. It has blocks of its own for every position,
    /// allocated now. It does not check the memory available: see [`crate::MemoryPlan`] for
    /// that.
    pub fn try_with_type(
        config: &ModelConfig,
        kv_type: KvType,
        context: usize,
        max_batch: usize,
    ) -> Result<Self, ModelError> {
        let mut caches = Self::try_pooled(config, kv_type, context, max_batch, 1)?;
        let cache = caches.pop().expect("one cache was asked for");
        cache.pool.preallocate(Self::blocks_for(context))?;
        Ok(cache)
    }

    /// `sequences` caches whose full-attention layers take blocks from one pool, which lets
    /// each of them hold a whole context's blocks at once (more once the prefix cache adds its
    /// budget); blocks are allocated when first needed and reused after.
    pub(crate) fn try_pooled(
        config: &ModelConfig,
        kv_type: KvType,
        context: usize,
        max_batch: usize,
        sequences: usize,
    ) -> Result<Vec<Self>, ModelError> {
        Self::check_type(config, kv_type)?;
        let overflow = || ModelError::SizeOverflow {
            what: format!("a KV cache of {context} positions"),
        };
        Self::bytes_for(config, kv_type, context, max_batch).ok_or_else(overflow)?;
        let paged = (0..config.layers)
            .filter(|&layer| config.window_of(layer).is_none() && config.keeps_kv(layer))
            .count();
        let capacity = Self::blocks_for(context)
            .checked_mul(sequences)
            .ok_or_else(overflow)?;
        let widths = (config.paged_kv_dim(), !config.values_in_keys());
        let pool = BlockPool::new(kv_type, widths, paged, capacity)?;
        (0..sequences)
            .map(|_| Self::in_pool(config, &pool, context, max_batch))
            .collect()
    }

    fn in_pool(
        config: &ModelConfig,
        pool: &BlockPool,
        context: usize,
        max_batch: usize,
    ) -> Result<Self, ModelError> {
        let overflow = || ModelError::SizeOverflow {
            what: format!("a KV cache of {context} positions"),
        };
        let mut paged = 0;
        let layers: Vec<_> = (0..config.layers)
            .map(|layer| {
                if let Some(recurrence) = config.recurrence_of(layer) {
                    let (window, matrices) = recurrence.state_floats();
                    return Ok(LayerStore::Recurrent(RecurrentState {
                        window: vec![0.0; window],
                        matrices: vec![0.0; matrices],
                    }));
                }
                if !config.keeps_kv(layer) {
                    return Ok(LayerStore::Shared);
                }
                if config.window_of(layer).is_none() {
                    paged += 1;
                    return Ok(LayerStore::Paged { index: paged - 1 });
                }
                let slots = Self::slots(config, layer, context, max_batch);
                let kv_dim = config.heads_of(layer).kv_dim();
                let rows = || KvRows::new(pool.kv_type(), slots, kv_dim).ok_or_else(overflow);
                Ok(LayerStore::Ring(Ring {
                    keys: rows()?,
                    values: match config.values_in_keys() {
                        true => None,
                        false => Some(rows()?),
                    },
                    slots,
                }))
            })
            .collect::<Result<_, ModelError>>()?;
        let checkpoint = StateSnapshot {
            len: 0,
            layers: layers
                .iter()
                .filter_map(|l| match l {
                    LayerStore::Recurrent(state) => Some(state.clone()),
                    _ => None,
                })
                .collect(),
        };
        Ok(Self {
            layers,
            checkpoint,
            table: Vec::with_capacity(Self::blocks_for(context)),
            pool: pool.clone(),
            context,
            len: 0,
        })
    }

    /// Refuses a type whose blocks would span two heads (q8_0 needs heads of a multiple of 32
    /// values, as in llama.cpp).
    pub fn check_type(config: &ModelConfig, kv_type: KvType) -> Result<(), ModelError> {
        let block = kv_type.block_values();
        let misfit = (0..config.layers)
            .map(|layer| config.heads_of(layer).head_dim)
            .find(|head_dim| !head_dim.is_multiple_of(block));
        match misfit {
            None => Ok(()),
            Some(head_dim) => Err(ModelError::InvalidConfig(format!(
                "a {kv_type} KV cache needs heads of a multiple of {block} values, and this \
                 model's have {head_dim}: choose --kv-type f16 or f32"
            ))),
        }
    }

    /// Positions `layer` keeps: a ring of `window + max_batch` slots on sliding-window layers,
    /// every position on the others.
    pub(crate) fn slots(
        config: &ModelConfig,
        layer: usize,
        context: usize,
        max_batch: usize,
    ) -> usize {
        match config.window_of(layer) {
            Some(window) => window.saturating_add(max_batch).min(context),
            None => context,
        }
    }

    /// Blocks that hold `positions` positions.
    pub(crate) fn blocks_for(positions: usize) -> usize {
        positions.div_ceil(BLOCK_TOKENS)
    }

    /// Bytes a cache of `kv_type` rows for `context` positions fed `max_batch` at a time
    /// holds at most (its rings, the blocks of a whole context, and its recurrent state twice:
    /// the state and its checkpoint), or `None` when that overflows the address space (more
    /// than `isize::MAX` bytes) or a row is not a whole number of the type's blocks.
    pub fn bytes_for(
        config: &ModelConfig,
        kv_type: KvType,
        context: usize,
        max_batch: usize,
    ) -> Option<usize> {
        let rows_per_position = if config.values_in_keys() { 1 } else { 2 };
        let paged_rows = Self::blocks_for(context).checked_mul(BLOCK_TOKENS)?;
        (0..config.layers)
            .try_fold(0usize, |total, layer| {
                if let Some(recurrence) = config.recurrence_of(layer) {
                    let (window, matrices) = recurrence.state_floats();
                    // The state and its checkpoint.
                    let bytes = window.checked_add(matrices)?.checked_mul(2 * 4)?;
                    return total.checked_add(bytes);
                }
                if !config.keeps_kv(layer) {
                    return Some(total);
                }
                let kv_dim = config.heads_of(layer).kv_dim();
                let row_bytes = kv_type.row_bytes(kv_dim)?.checked_mul(rows_per_position)?;
                let rows = match config.window_of(layer) {
                    Some(_) => Self::slots(config, layer, context, max_batch),
                    None => paged_rows,
                };
                total.checked_add(rows.checked_mul(row_bytes)?)
            })
            .filter(|&bytes| bytes <= isize::MAX as usize)
    }

    /// Bytes of the recurrent state of one sequence of `config`'s model (0 without recurrent
    /// layers).
    pub fn state_bytes(config: &ModelConfig) -> usize {
        (0..config.layers)
            .filter_map(|layer| config.recurrence_of(layer))
            .map(|r| {
                let (window, matrices) = r.state_floats();
                (window + matrices) * 4
            })
            .sum()
    }

    /// The type of the stored rows.
    pub fn kv_type(&self) -> KvType {
        self.pool.kv_type()
    }

    /// Positions stored so far (the position of the next token).
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

    /// Bytes the cache may hold: its rings, the blocks of a whole context (blocks shared
    /// with other caches count in each), its recurrent state and checkpoint.
    pub fn bytes(&self) -> usize {
        let rings: usize = self
            .layers
            .iter()
            .map(|l| match l {
                LayerStore::Ring(ring) => ring.bytes(),
                LayerStore::Paged { .. } | LayerStore::Shared => 0,
                LayerStore::Recurrent(state) => (state.window.len() + state.matrices.len()) * 4,
            })
            .sum();
        rings + self.checkpoint.bytes() + Self::blocks_for(self.context) * self.pool.block_bytes()
    }

    /// The pool its blocks come from.
    pub(crate) fn pool(&self) -> &BlockPool {
        &self.pool
    }

    /// Forgets everything (the rings are kept; the blocks go back to the pool unless another
    /// holder keeps them).
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Forgets positions from `len` on (blocks past the one holding position `len - 1` go
    /// back to the pool). A recurrent layer's state cannot be cut back: it is zeroed when the
    /// cache is cut to empty, restored from the checkpoint when cut to the checkpoint's
    /// position, and the caller restores a [`StateSnapshot`] taken at `len` for any other cut
    /// ([`Self::can_cut_to`]).
    pub fn truncate(&mut self, len: usize) {
        let to_checkpoint = len > 0 && len == self.checkpoint.len && len < self.len;
        self.cut(len);
        if to_checkpoint {
            put_states(&mut self.layers, &self.checkpoint);
        }
    }

    /// [`Self::truncate`] without going back to the checkpoint: the caller puts the state of
    /// position `len` back, or it stays that of the old end.
    fn cut(&mut self, len: usize) {
        if len < self.checkpoint.len {
            self.checkpoint.len = 0;
        }
        if len == 0 {
            for layer in &mut self.layers {
                if let LayerStore::Recurrent(state) = layer {
                    state.window.fill(0.0);
                    state.matrices.fill(0.0);
                }
            }
        }
        self.len = self.len.min(len);
        let keep = Self::blocks_for(self.len);
        while self.table.len() > keep {
            let block = self.table.pop().expect("the table is longer than `keep`");
            self.pool.give_back(block);
        }
    }

    /// Whether some layer carries a recurrent state.
    pub fn is_recurrent(&self) -> bool {
        self.layers
            .iter()
            .any(|l| matches!(l, LayerStore::Recurrent(_)))
    }

    /// Whether cutting the cache back to `len` keeps it exact without restoring a snapshot:
    /// always for attention alone; for a recurrent cache, only to empty, to its checkpoint or
    /// to where it is.
    pub fn can_cut_to(&self, len: usize) -> bool {
        !self.is_recurrent() || len == 0 || len >= self.len || Some(len) == self.checkpoint()
    }

    /// Keeps the recurrent state now, at position [`Self::len`], as the checkpoint that a cut
    /// back to this position restores (nothing without recurrent layers; it replaces the
    /// checkpoint kept before).
    pub fn keep_checkpoint(&mut self) {
        if self.is_recurrent() {
            let mut checkpoint = std::mem::take(&mut self.checkpoint);
            self.snapshot_into(&mut checkpoint);
            self.checkpoint = checkpoint;
        }
    }

    /// The position of the checkpoint, when one is kept (never 0: cutting to empty needs
    /// none).
    pub fn checkpoint(&self) -> Option<usize> {
        (self.checkpoint.len > 0).then_some(self.checkpoint.len)
    }

    /// The recurrent state of every recurrent layer now, at position [`Self::len`] (into
    /// `into`, reusing its buffers).
    pub fn snapshot_into(&self, into: &mut StateSnapshot) {
        into.len = self.len;
        let states = self.layers.iter().filter_map(|l| match l {
            LayerStore::Recurrent(state) => Some(state),
            _ => None,
        });
        into.layers.resize_with(
            self.layers
                .iter()
                .filter(|l| matches!(l, LayerStore::Recurrent(_)))
                .count(),
            || RecurrentState {
                window: Vec::new(),
                matrices: Vec::new(),
            },
        );
        for (to, from) in into.layers.iter_mut().zip(states) {
            to.window.clone_from(&from.window);
            to.matrices.clone_from(&from.matrices);
        }
    }

    /// The recurrent state now, at position [`Self::len`].
    pub fn snapshot(&self) -> StateSnapshot {
        let mut snapshot = StateSnapshot::default();
        self.snapshot_into(&mut snapshot);
        snapshot
    }

    /// Cuts the cache back to the snapshot's position and puts its recurrent state back.
    ///
    /// # Panics
    /// If the snapshot is past the cache's length or of another model.
    pub fn restore(&mut self, snapshot: &StateSnapshot) {
        assert!(snapshot.len <= self.len, "a snapshot past the cache's end");
        self.cut(snapshot.len);
        put_states(&mut self.layers, snapshot);
    }

    /// The state of recurrent layer `layer`, for the forward pass to continue (`None` on an
    /// attention layer).
    pub(crate) fn recurrent_state(&mut self, layer: usize) -> Option<&mut RecurrentState> {
        match &mut self.layers[layer] {
            LayerStore::Recurrent(state) => Some(state),
            _ => None,
        }
    }

    /// Layers.
    pub(crate) fn layers(&self) -> usize {
        self.layers.len()
    }

    /// Whether `layer` keeps its rows in a ring of its own (a sliding-window layer) rather
    /// than in blocks.
    pub(crate) fn is_ring(&self, layer: usize) -> bool {
        matches!(self.layers[layer], LayerStore::Ring(_))
    }

    /// Positions `layer` keeps: the ring's size on a sliding-window layer, the context on the
    /// others.
    pub(crate) fn ring_slots(&self, layer: usize) -> usize {
        match &self.layers[layer] {
            LayerStore::Ring(ring) => ring.slots,
            LayerStore::Paged { .. } | LayerStore::Recurrent(_) | LayerStore::Shared => {
                self.context
            }
        }
    }

    /// Bytes of one key (or value) row of `layer`.
    pub(crate) fn row_len(&self, layer: usize) -> usize {
        match &self.layers[layer] {
            LayerStore::Ring(ring) => ring.keys.row_bytes(0).len(),
            LayerStore::Paged { .. } => self.pool.row_bytes(),
            LayerStore::Recurrent(_) | LayerStore::Shared => 0,
        }
    }

    /// Whether `layer` still holds the rows of position `pos` (a ring overwrites old ones).
    pub(crate) fn keeps(&self, layer: usize, pos: usize) -> bool {
        pos < self.len && pos + self.ring_slots(layer) >= self.len
    }

    pub(crate) fn advance(&mut self, n: usize) {
        self.len += n;
    }

    /// Makes room for `n` more positions: the blocks they fall in are in the table and held by
    /// this cache alone (a shared block is replaced by a copy of its positions before the
    /// first one written). An error when the pool has no block left; the positions held do
    /// not change either way.
    pub(crate) fn prepare(&mut self, n: usize) -> Result<(), ModelError> {
        if n == 0 {
            return Ok(());
        }
        let first = self.len / BLOCK_TOKENS;
        let end = Self::blocks_for(self.len + n);
        for b in first..end.min(self.table.len()) {
            if Arc::get_mut(&mut self.table[b]).is_none() {
                let held = self.len.saturating_sub(b * BLOCK_TOKENS);
                let copy = self.pool.copy_of(&self.table[b], held)?;
                let shared = std::mem::replace(&mut self.table[b], copy);
                self.pool.give_back(shared);
            }
        }
        while self.table.len() < end {
            self.table.push(self.pool.take()?);
        }
        Ok(())
    }

    /// Block `b` of the table (it holds positions `b * 16..(b + 1) * 16`).
    pub(crate) fn block(&self, b: usize) -> &Arc<KvBlock> {
        &self.table[b]
    }

    /// Empties the cache, then takes `blocks` (from the prefix cache) as its first blocks and
    /// holds their first `len` positions; the rings are left for the caller to fill.
    pub(crate) fn attach(&mut self, blocks: impl IntoIterator<Item = Arc<KvBlock>>, len: usize) {
        self.clear();
        self.table.extend(blocks);
        debug_assert!(Self::blocks_for(len) <= self.table.len());
        self.len = len;
        self.truncate(len);
    }

    /// Stores the key and value rows of position `pos` in `layer`, converted to the cache's
    /// type. On a full-attention layer the position's block must have been made this cache's
    /// own by [`Self::prepare`].
    pub(crate) fn store(&mut self, layer: usize, pos: usize, key: &[f32], value: &[f32]) {
        match &mut self.layers[layer] {
            LayerStore::Ring(ring) => ring.store(pos, key, value),
            LayerStore::Paged { index } => {
                let block = Arc::get_mut(&mut self.table[pos / BLOCK_TOKENS])
                    .expect("`prepare` made the block of every position written this cache's own");
                block.store(*index, pos % BLOCK_TOKENS, key, value);
            }
            LayerStore::Recurrent(_) | LayerStore::Shared => {
                debug_assert!(false, "a recurrent or shared layer stores no rows");
            }
        }
    }

    /// The ring of sliding-window layer `layer`, for attention to read by position (`None`
    /// on a full-attention layer).
    #[inline]
    pub(crate) fn ring_rows(&self, layer: usize) -> Option<RingRows<'_>> {
        match &self.layers[layer] {
            LayerStore::Ring(Ring {
                keys,
                values,
                slots,
            }) => Some(RingRows {
                keys,
                values: values.as_ref().unwrap_or(keys),
                slots: *slots,
            }),
            LayerStore::Paged { .. } | LayerStore::Recurrent(_) | LayerStore::Shared => None,
        }
    }

    /// The blocks of full-attention layer `layer`, for attention to read by position (`None`
    /// on a sliding-window layer).
    #[inline]
    pub(crate) fn paged_rows(&self, layer: usize) -> Option<PagedRows<'_>> {
        match self.layers[layer] {
            LayerStore::Paged { index } => Some(PagedRows {
                table: &self.table,
                index,
            }),
            LayerStore::Ring(_) | LayerStore::Recurrent(_) | LayerStore::Shared => None,
        }
    }

    /// The stored bytes of the key and value rows of position `pos` in `layer`.
    pub(crate) fn row_bytes(&self, layer: usize, pos: usize) -> (&[u8], &[u8]) {
        match &self.layers[layer] {
            LayerStore::Ring(ring) => ring.row_bytes(pos),
            LayerStore::Paged { index } => {
                self.table[pos / BLOCK_TOKENS].row_bytes(*index, pos % BLOCK_TOKENS)
            }
            LayerStore::Recurrent(_) | LayerStore::Shared => (&[], &[]),
        }
    }

    /// Stores, in the ring of sliding-window layer `layer`, key and value rows taken by
    /// [`Self::row_bytes`] from a cache of the same type.
    pub(crate) fn store_ring_bytes(&mut self, layer: usize, pos: usize, key: &[u8], value: &[u8]) {
        if let LayerStore::Ring(ring) = &mut self.layers[layer] {
            ring.set_row_bytes(pos, key, value);
        }
    }
}

/// Puts the recurrent states of `snapshot` into the recurrent layers of `layers`.
///
/// # Panics
/// If the snapshot is of another model.
fn put_states(layers: &mut [LayerStore], snapshot: &StateSnapshot) {
    let states = layers.iter_mut().filter_map(|l| match l {
        LayerStore::Recurrent(state) => Some(state),
        _ => None,
    });
    let mut count = 0;
    for (to, from) in states.zip(&snapshot.layers) {
        assert_eq!(
            to.window.len(),
            from.window.len(),
            "a snapshot of another model"
        );
        to.window.copy_from_slice(&from.window);
        to.matrices.copy_from_slice(&from.matrices);
        count += 1;
    }
    assert_eq!(count, snapshot.layers.len(), "a snapshot of another model");
}

/// A sliding-window layer's ring of one sequence, as attention reads it. Attention is
/// monomorphized over this type and [`PagedRows`], so a key's lookup has no branch on where the
/// layer keeps it; it looks each key up once per task and key block.
pub(crate) struct RingRows<'c> {
    keys: &'c KvRows,
    values: &'c KvRows,
    slots: usize,
}

impl KeyValueRows for RingRows<'_> {
    fn key(&self, pos: usize) -> KvRow<'_> {
        self.keys.row(pos % self.slots)
    }

    fn value(&self, pos: usize) -> KvRow<'_> {
        self.values.row(pos % self.slots)
    }

    fn same_rows(&self, other: &Self) -> bool {
        std::ptr::eq(self.keys, other.keys)
    }
}

/// A full-attention layer's blocks of one sequence, as attention reads them: position `pos`
/// is row `pos % 16` of block `pos / 16`.
pub(crate) struct PagedRows<'c> {
    table: &'c [Arc<KvBlock>],
    /// The layer's place among the full-attention layers of a block.
    index: usize,
}

impl KeyValueRows for PagedRows<'_> {
    fn key(&self, pos: usize) -> KvRow<'_> {
        self.table[pos / BLOCK_TOKENS].key(self.index, pos % BLOCK_TOKENS)
    }

    fn value(&self, pos: usize) -> KvRow<'_> {
        self.table[pos / BLOCK_TOKENS].value(self.index, pos % BLOCK_TOKENS)
    }

    fn same_rows(&self, other: &Self) -> bool {
        std::ptr::eq(self.table, other.table) && self.index == other.index
    }
}

impl Drop for KvCache {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests;
