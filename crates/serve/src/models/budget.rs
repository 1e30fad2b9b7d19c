//! The memory budget of the loaded models: what one needs, as its memory plan estimates it,
//! and which idle models to unload, least recently used first, to make room for another.

use std::time::Instant;

use rinfer_model::{LoadedModel, MemoryPlan};

use crate::scheduler::Ready;

/// Bytes a loaded model may hold: its weights (and its draft model's), the KV caches and
/// scratch buffers of its memory plan, and its prefix cache's budget (which grows as used).
pub fn estimate_bytes(ready: &Ready) -> u64 {
    let weights = |loaded: &LoadedModel| -> u64 {
        let by_type = loaded.model.weights.bytes_by_type();
        by_type.iter().map(|&(_, bytes)| bytes as u64).sum()
    };
    let settings = ready.settings;
    let plan = MemoryPlan::new(
        &ready.loaded.model.config,
        settings.kv_type.unwrap_or_default(),
        settings.context,
        settings.max_sequences,
        settings.max_batch,
        settings.max_sequences,
    )
    // A plan that overflows is refused when the engine starts; it never gets this far.
    .map_or(0, |plan| plan.total_bytes() as u64);
    weights(&ready.loaded)
        .saturating_add(ready.draft.as_ref().map_or(0, weights))
        .saturating_add(plan)
        .saturating_add(settings.prefix_cache_bytes as u64)
}

/// A model that holds part of the budget: loaded, or loading.
#[derive(Clone, Copy, Debug)]
pub struct Holder {
    /// Bytes it holds.
    pub bytes: u64,
    /// When a request last named it.
    pub last_used: Instant,
    /// Loaded with no request in flight: it may be unloaded.
    pub idle: bool,
}

/// Which of `holders` to unload so that `needed` more bytes fit in `budget`: idle ones, least
/// recently used first, no more than needed. A model larger than the budget on its own still
/// loads once nothing else is loaded. `None` when the models with requests in flight (or
/// loading) leave no room.
pub fn evictions(holders: &[Holder], needed: u64, budget: u64) -> Option<Vec<usize>> {
    let mut held: u64 = holders.iter().map(|h| h.bytes).sum();
    let fits = |held: u64| held.saturating_add(needed) <= budget;
    let mut idle: Vec<usize> = (0..holders.len()).filter(|&i| holders[i].idle).collect();
    idle.sort_by_key(|&i| holders[i].last_used);
    let mut chosen = Vec::new();
    for i in idle {
        if fits(held) {
            break;
        }
        chosen.push(i);
        held -= holders[i].bytes;
    }
    (fits(held) || chosen.len() == holders.len()).then_some(chosen)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn holders(specs: &[(u64, u64, bool)]) -> Vec<Holder> {
        let start = Instant::now();
        specs
            .iter()
            .map(|&(bytes, age, idle)| Holder {
                bytes,
                last_used: start - Duration::from_secs(age),
                idle,
            })
            .collect()
    }

    #[test]
    fn nothing_is_unloaded_while_the_budget_has_room() {
        let loaded = holders(&[(30, 5, true), (30, 1, true)]);
        assert_eq!(evictions(&loaded, 40, 100), Some(vec![]));
    }

    #[test]
    fn the_least_recently_used_idle_models_go_first_and_no_more_than_needed() {
        // Used 5, 9 and 1 seconds ago.
        let loaded = holders(&[(30, 5, true), (30, 9, true), (30, 1, true)]);
        assert_eq!(evictions(&loaded, 30, 100), Some(vec![1]));
        assert_eq!(evictions(&loaded, 60, 100), Some(vec![1, 0]));
    }

    #[test]
    fn a_model_with_requests_in_flight_is_never_unloaded() {
        let loaded = holders(&[(30, 9, false), (30, 5, true), (30, 1, true)]);
        assert_eq!(evictions(&loaded, 30, 100), Some(vec![1]));
        // Even the idle ones together do not make room: nothing is unloaded.
        let busy = holders(&[(60, 9, false), (30, 1, true)]);
        assert_eq!(evictions(&busy, 50, 100), None);
    }

    #[test]
    fn a_model_over_the_budget_alone_loads_once_everything_idle_is_unloaded() {
        let loaded = holders(&[(30, 9, true), (30, 5, true)]);
        assert_eq!(evictions(&loaded, 500, 100), Some(vec![0, 1]));
        assert_eq!(evictions(&[], 500, 100), Some(vec![]));
        let busy = holders(&[(30, 9, false)]);
        assert_eq!(evictions(&busy, 500, 100), None);
    }
}
