//! The key/value cache of one sequence, allocated once.

use crate::config::ModelConfig;
use crate::error::ModelError;

/// Keys and values of one layer: `[slots, kv_dim]` each. Sliding-window layers keep a ring of
/// `window + max_batch` slots; full layers keep one slot per context position.
struct LayerCache {
    keys: Vec<f32>,
    values: Vec<f32>,
    slots: usize,
}

/// The KV cache of one sequence.
pub struct KvCache {
    layers: Vec<LayerCache>,
    kv_dim: usize,
    context: usize,
    len: usize,
}

impl KvCache {
    /// A cache for `context` positions, fed in batches of at most `max_batch` tokens.
    ///
    /// # Panics
    ///
    /// If the size overflows (see [`KvCache::try_new`], which returns that as an error).
    pub fn new(config: &ModelConfig, context: usize, max_batch: usize) -> Self {
        Self::try_new(config, context, max_batch).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A cache for `context` positions, fed in batches of at most `max_batch` tokens, or an
    /// error when its size overflows. It does not check the memory available: see
    /// [`crate::MemoryPlan`] for that.
    pub fn try_new(
        config: &ModelConfig,
        context: usize,
        max_batch: usize,
    ) -> Result<Self, ModelError> {
        Self::bytes_for(config, context, max_batch).ok_or_else(|| ModelError::SizeOverflow {
            what: format!("a KV cache of {context} positions"),
        })?;
        let kv_dim = config.kv_dim();
        let layers = (0..config.layers)
            .map(|layer| {
                let slots = Self::slots(config, layer, context, max_batch);
                LayerCache {
                    keys: vec![0.0; slots * kv_dim],
                    values: vec![0.0; slots * kv_dim],
                    slots,
                }
            })
            .collect();
        Ok(Self {
            layers,
            kv_dim,
            context,
            len: 0,
        })
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

    /// Bytes a cache for `context` positions fed `max_batch` at a time holds, or `None` when
    /// that overflows the address space (more than `isize::MAX` bytes).
    pub fn bytes_for(config: &ModelConfig, context: usize, max_batch: usize) -> Option<usize> {
        let row_bytes = config
            .kv_dim()
            .checked_mul(2 * std::mem::size_of::<f32>())?;
        (0..config.layers)
            .try_fold(0usize, |total, layer| {
                let slots = Self::slots(config, layer, context, max_batch);
                total.checked_add(slots.checked_mul(row_bytes)?)
            })
            .filter(|&bytes| bytes <= isize::MAX as usize)
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
            .map(|l| (l.keys.len() + l.values.len()) * std::mem::size_of::<f32>())
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

    /// Key and value floats of one position in one layer.
    pub(crate) fn kv_dim(&self) -> usize {
        self.kv_dim
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

    /// Stores the key and value rows of position `pos` in `layer`.
    pub(crate) fn store(&mut self, layer: usize, pos: usize, key: &[f32], value: &[f32]) {
        let cache = &mut self.layers[layer];
        let slot = (pos % cache.slots) * self.kv_dim;
        cache.keys[slot..slot + self.kv_dim].copy_from_slice(key);
        cache.values[slot..slot + self.kv_dim].copy_from_slice(value);
    }

    /// The key and value rows (all kv heads) of position `pos` in `layer`.
    #[inline]
    pub(crate) fn get(&self, layer: usize, pos: usize) -> (&[f32], &[f32]) {
        let cache = &self.layers[layer];
        let slot = (pos % cache.slots) * self.kv_dim;
        (
            &cache.keys[slot..slot + self.kv_dim],
            &cache.values[slot..slot + self.kv_dim],
        )
    }
}
