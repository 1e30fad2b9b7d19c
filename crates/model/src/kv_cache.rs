//! The key/value cache of one sequence, allocated once, its rows stored in a [`KvType`].

use rinfer_kernels::ops::{KvRow, KvRows, KvType};

use crate::config::ModelConfig;
use crate::error::ModelError;

/// Keys and values of one layer: `slots` rows of `kv_dim` each. Sliding-window layers keep a
/// ring of `window + max_batch` slots; full layers keep one slot per context position.
struct LayerCache {
    keys: KvRows,
    values: KvRows,
    slots: usize,
}

/// The KV cache of one sequence.
pub struct KvCache {
    layers: Vec<LayerCache>,
    kv_type: KvType,
    context: usize,
    len: usize,
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
    /// whole number of the type's blocks. It does not check the memory available: see
    /// [`crate::MemoryPlan`] for that.
    pub fn try_with_type(
        config: &ModelConfig,
        kv_type: KvType,
        context: usize,
        max_batch: usize,
    ) -> Result<Self, ModelError> {
        Self::check_type(config, kv_type)?;
        let overflow = || ModelError::SizeOverflow {
            what: format!("a KV cache of {context} positions"),
        };
        Self::bytes_for(config, kv_type, context, max_batch).ok_or_else(overflow)?;
        let kv_dim = config.kv_dim();
        let layers = (0..config.layers)
            .map(|layer| {
                let slots = Self::slots(config, layer, context, max_batch);
                let rows = || KvRows::new(kv_type, slots, kv_dim).ok_or_else(overflow);
                Ok(LayerCache {
                    keys: rows()?,
                    values: rows()?,
                    slots,
                })
            })
            .collect::<Result<_, ModelError>>()?;
        Ok(Self {
            layers,
            kv_type,
            context,
            len: 0,
        })
    }

    /// Refuses a type whose blocks would span two heads (q8_0 needs heads of a multiple of 32
    /// values, as in llama.cpp).
    pub fn check_type(config: &ModelConfig, kv_type: KvType) -> Result<(), ModelError> {
        let block = kv_type.block_values();
        if config.head_dim.is_multiple_of(block) {
            Ok(())
        } else {
            Err(ModelError::InvalidConfig(format!(
                "a {kv_type} KV cache needs heads of a multiple of {block} values, and this \
                 model's have {}: choose --kv-type f16 or f32",
                config.head_dim
            )))
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

    /// Bytes a cache of `kv_type` rows for `context` positions fed `max_batch` at a time
    /// holds, or `None` when that overflows the address space (more than `isize::MAX` bytes) or
    /// a row is not a whole number of the type's blocks.
    pub fn bytes_for(
        config: &ModelConfig,
        kv_type: KvType,
        context: usize,
        max_batch: usize,
    ) -> Option<usize> {
        let row_bytes = kv_type.row_bytes(config.kv_dim())?.checked_mul(2)?;
        (0..config.layers)
            .try_fold(0usize, |total, layer| {
                let slots = Self::slots(config, layer, context, max_batch);
                total.checked_add(slots.checked_mul(row_bytes)?)
            })
            .filter(|&bytes| bytes <= isize::MAX as usize)
    }

    /// The type of the stored rows.
    pub fn kv_type(&self) -> KvType {
        self.kv_type
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

    /// Bytes the cache holds, allocated once.
    pub fn bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|l| l.keys.bytes() + l.values.bytes())
            .sum()
    }

    /// Forgets everything (the buffers are kept).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Forgets positions from `len` on.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Layers.
    pub(crate) fn layers(&self) -> usize {
        self.layers.len()
    }

    /// Positions `layer` keeps: the ring's size on a sliding-window layer, the context on the
    /// others.
    pub(crate) fn ring_slots(&self, layer: usize) -> usize {
        self.layers[layer].slots
    }

    /// Whether `layer` still holds the rows of position `pos` (a ring overwrites old ones).
    pub(crate) fn keeps(&self, layer: usize, pos: usize) -> bool {
        pos < self.len && pos + self.layers[layer].slots >= self.len
    }

    pub(crate) fn advance(&mut self, n: usize) {
        self.len += n;
    }

    /// Stores the key and value rows of position `pos` in `layer`, converted to the cache's
    /// type.
    pub(crate) fn store(&mut self, layer: usize, pos: usize, key: &[f32], value: &[f32]) {
        let cache = &mut self.layers[layer];
        let slot = pos % cache.slots;
        cache.keys.store(slot, key);
        cache.values.store(slot, value);
    }

    /// The key and value rows (all kv heads) of position `pos` in `layer`.
    #[inline]
    pub(crate) fn get(&self, layer: usize, pos: usize) -> (KvRow<'_>, KvRow<'_>) {
        let cache = &self.layers[layer];
        let slot = pos % cache.slots;
        (cache.keys.row(slot), cache.values.row(slot))
    }

    /// The stored bytes of the key and value rows of position `pos` in `layer`.
    pub(crate) fn row_bytes(&self, layer: usize, pos: usize) -> (&[u8], &[u8]) {
        let cache = &self.layers[layer];
        let slot = pos % cache.slots;
        (cache.keys.row_bytes(slot), cache.values.row_bytes(slot))
    }

    /// Stores key and value rows taken by [`Self::row_bytes`] from a cache of the same type.
    pub(crate) fn store_bytes(&mut self, layer: usize, pos: usize, key: &[u8], value: &[u8]) {
        let cache = &mut self.layers[layer];
        let slot = pos % cache.slots;
        cache.keys.set_row_bytes(slot, key);
        cache.values.set_row_bytes(slot, value);
    }
}
