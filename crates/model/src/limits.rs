//! What a model and this machine can hold: the context a model's learned positions allow, and
//! the memory its KV caches and scratch buffers need, checked before anything is allocated.

use crate::config::ModelConfig;
use crate::error::ModelError;
use crate::forward::Model;
use crate::kv_cache::KvCache;
use crate::scratch::Scratch;
use crate::weights::Weights;
use rinfer_kernels::ops::KvType;
use rinfer_transformer::{Role, TensorName};

const MIB: usize = 1 << 20;

/// The longest context any run may ask for, in tokens (16 Mi, beyond any model's training):
/// a bound on every size computed from a context before the memory check.
pub const MAX_CONTEXT: usize = 1 << 24;

impl Model {
    /// The most positions the model can encode: the rows of its learned position table, or
    /// `None` for rotary positions, which have no hard limit.
    pub fn position_limit(&self) -> Option<usize> {
        self.transformer()
            .position_embd
            .as_ref()
            .map(|table| table.rows)
    }

    /// Refuses a context longer than [`Model::position_limit`] (or of zero positions).
    pub fn check_context(&self, context: usize) -> Result<(), ModelError> {
        if context == 0 {
            return Err(ModelError::InvalidConfig(
                "a context of 0 tokens holds nothing".into(),
            ));
        }
        match self.position_limit() {
            Some(limit) if context > limit => Err(ModelError::PositionsExceeded {
                needed: context,
                limit,
            }),
            _ => Ok(()),
        }
    }
}

/// Lowers the trained context of a model with learned positions to its position table's rows,
/// so that the default context never runs past the table.
pub(crate) fn fit_context_to_positions(
    config: &mut ModelConfig,
    weights: &Weights,
) -> Result<(), ModelError> {
    if let Some(table) = &weights.transformer.position_embd {
        if table.rows == 0 {
            return Err(ModelError::InvalidConfig(format!(
                "{} has no rows",
                TensorName::model(Role::PositionEmbd)
            )));
        }
        config.context_length = config.context_length.min(table.rows);
    }
    Ok(())
}

/// The KV caches and scratch buffers a run needs, sized before any is allocated.
///
/// ```
/// # fn demo(config: &rinfer_model::ModelConfig) -> Result<(), rinfer_model::ModelError> {
/// use rinfer_model::MemoryPlan;
///
/// use rinfer_model::KvType;
///
/// // Four sequences of 4096 positions with an f16 KV cache, prefilled 512 tokens at a time,
/// // one logits row each.
/// let plan = MemoryPlan::new(config, KvType::F16, 4096, 4, 512, 4)?;
/// plan.check_available()?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryPlan {
    /// The type of the KV caches' rows.
    pub kv_type: KvType,
    /// Positions of each sequence's KV cache.
    pub context: usize,
    /// Sequences, each with its own KV cache.
    pub sequences: usize,
    /// Bytes the KV caches hold at most, together: each sequence's rings and the blocks of a
    /// whole context (what the engine's block pool may hand the running sequences).
    pub kv_cache_bytes: usize,
    /// Bytes of the one set of scratch buffers.
    pub scratch_bytes: usize,
}

impl MemoryPlan {
    /// The KV caches (rows of `kv_type`) of `sequences` sequences of `context` positions, and
    /// scratch buffers for batches of `max_batch` tokens of which `logit_rows` ask for logits.
    /// An error when the sizes overflow or the model's heads do not fit `kv_type`.
    pub fn new(
        config: &ModelConfig,
        kv_type: KvType,
        context: usize,
        sequences: usize,
        max_batch: usize,
        logit_rows: usize,
    ) -> Result<Self, ModelError> {
        let overflow = || ModelError::SizeOverflow {
            what: Self::describe(context, sequences),
        };
        KvCache::check_type(config, kv_type)?;
        let kv_cache_bytes = KvCache::bytes_for(config, kv_type, context, max_batch)
            .and_then(|one| one.checked_mul(sequences))
            .ok_or_else(overflow)?;
        let scratch_bytes =
            Scratch::bytes_for(config, max_batch, logit_rows).ok_or_else(overflow)?;
        kv_cache_bytes
            .checked_add(scratch_bytes)
            .filter(|&total| total <= isize::MAX as usize)
            .ok_or_else(overflow)?;
        Ok(Self {
            kv_type,
            context,
            sequences,
            kv_cache_bytes,
            scratch_bytes,
        })
    }

    fn describe(context: usize, sequences: usize) -> String {
        let s = if sequences == 1 { "" } else { "s" };
        format!(
            "a KV cache of {context} positions for {sequences} sequence{s}, with its scratch buffers,"
        )
    }

    /// Bytes of the caches and scratch buffers together.
    pub fn total_bytes(&self) -> usize {
        self.kv_cache_bytes + self.scratch_bytes
    }

    /// Refuses the plan if it needs more than `available` bytes.
    pub fn check_fits(&self, available: u64) -> Result<(), ModelError> {
        if self.total_bytes() as u64 > available {
            return Err(ModelError::NotEnoughMemory {
                what: Self::describe(self.context, self.sequences),
                needed_mib: self.total_bytes().div_ceil(MIB) as u64,
                available_mib: available / MIB as u64,
            });
        }
        Ok(())
    }

    /// Refuses the plan if it needs more than the memory available now
    /// ([`available_memory_bytes`]); accepts it where that cannot be read.
    pub fn check_available(&self) -> Result<(), ModelError> {
        match available_memory_bytes() {
            Some(available) => self.check_fits(available),
            None => Ok(()),
        }
    }
}

/// The memory the system could give this process without swapping (`MemAvailable` of
/// `/proc/meminfo`), or `None` where that file is missing or unreadable. Two lines of parsing
/// instead of a system-information crate, which would bring far more than this one number.
pub fn available_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    meminfo_available(&meminfo)
}

/// Refuses to allocate `bytes` for `what` when they overflow or are more than the memory
/// available (a file may claim sizes far beyond its real bytes: a sparse file), so that the
/// allocation fails with an error instead of aborting the process.
pub fn check_allocation(
    what: impl FnOnce() -> String,
    bytes: Option<u64>,
) -> Result<(), ModelError> {
    let Some(bytes) = bytes else {
        return Err(ModelError::SizeOverflow { what: what() });
    };
    match available_memory_bytes() {
        Some(available) if bytes > available => Err(ModelError::NotEnoughMemory {
            what: what(),
            needed_mib: bytes.div_ceil(MIB as u64),
            available_mib: available / MIB as u64,
        }),
        _ => Ok(()),
    }
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn meminfo_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::meminfo_available;

    #[test]
    fn meminfo_available_reads_kib_as_bytes() {
        let text = "MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:    8000000 kB\n";
        assert_eq!(meminfo_available(text), Some(8_000_000 * 1024));
        assert_eq!(meminfo_available("MemTotal: 1 kB\n"), None);
    }
}
