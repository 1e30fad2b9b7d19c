//! Where a new sequence starts, and what it does not compute again: the free slot whose cache
//! still holds the longest exact prefix of its prompt, or the prefix cache's blocks taken into
//! a slot when they cover more; and how the blocks of running sequences reach the prefix cache.
//!
//! On a GPU the prefix cache keeps blocks of the device's pool by reference in the same way,
//! and copies of its rings' rows (for models without recurrent layers: it keeps no states
//! there); a sequence that takes them lists the blocks in its block table and gets the rows its
//! rings keep written back. The device copies a shared block before writing into it, so the
//! first block where the new prompt diverges is copied on write.
//! Only a GPU sequence's prompt positions are reused, never its generated tokens' (their rows
//! come from other kernels than a prompt's: [`reusable`]).
//!
//! A slot's cache keeps what its last sequence left (its tokens are remembered), so a chat that
//! resends its history continues in place. Both sources are reused only by sequences of the
//! same tenant ([`super::Request::tenant`]) as the one that computed them. Sliding-window layers keep a ring that has
//! overwritten old positions, so a cache is cut back only as far as every ring still holds the
//! window before the cut ([`Rings::can_truncate`]). The prefix cache keeps its blocks' ring
//! rows, so a prefix taken from it is cut anywhere: to the token before the prompt's last.
//!
//! A hybrid model's recurrent layers keep only their state after the last position, which
//! cannot be cut back ([`Rings::can_cut`]): its slot is reused in place when the new prompt
//! continues everything the cache holds, or up to the checkpoint the cache keeps at the end of
//! its last prompt (a copy of the state there, `KvCache::keep_checkpoint`), as llama.cpp's
//! context checkpoints do: a chat whose next prompt repeats the last one, then the reply as
//! tokenized again (which need not be the tokens generated), reuses that whole prompt. From the
//! prefix cache it is reused up to the last whole block that kept its state. Its prompts are
//! fed in chunks that end on block boundaries, so that the blocks it stores keep their states.

use super::Engine;
use super::executor::SeqCache;
use super::prefix_cache::{BLOCK_TOKENS, BlockKey, BlockStore};
use super::sequence::Sequence;
use crate::config::ModelConfig;
use crate::kv_cache::KvCache;

/// The window and ring size of each sliding-window layer, and whether the model has
/// recurrent layers.
pub(super) struct Rings {
    rings: Vec<(usize, usize)>,
    pub(super) recurrent: bool,
}

impl Rings {
    /// The rings of caches of `context` positions fed `max_batch` at a time.
    pub(super) fn new(config: &ModelConfig, context: usize, max_batch: usize) -> Self {
        let rings = (0..config.layers)
            .filter_map(|layer| {
                let window = config.window_of(layer)?;
                Some((window, KvCache::slots(config, layer, context, max_batch)))
            })
            .collect();
        let recurrent = (0..config.layers).any(|layer| config.recurrence_of(layer).is_some());
        Self { rings, recurrent }
    }

    /// Whether a cache holding `held` positions may be cut back to `keep` and stay exact
    /// without restoring a recurrent state: the rings allow it and, with recurrent layers,
    /// nothing is cut or everything is.
    pub(super) fn can_cut(&self, held: usize, keep: usize) -> bool {
        self.can_truncate(held, keep) && (!self.recurrent || keep == 0 || keep >= held)
    }

    /// Whether a cache holding `held` positions, cut back to `keep`, still holds every row that
    /// a query at position `keep` or later may attend to.
    pub(super) fn can_truncate(&self, held: usize, keep: usize) -> bool {
        keep >= held
            || self.rings.iter().all(|&(window, slots)| {
                held <= slots || keep.saturating_sub(window) >= held - slots
            })
    }
}

/// Where a new sequence starts: its slot, the prompt tokens its cache already holds, and the
/// prefix cache's keys of the blocks among them.
pub(super) struct Placement {
    pub(super) slot: usize,
    pub(super) reused: usize,
    pub(super) chain: Vec<BlockKey>,
}

impl Engine<'_> {
    /// Takes a free slot for `prompt` and leaves in its cache the longest exact cached prefix
    /// (never the whole prompt: the last token's logits are needed), whose blocks the new
    /// sequence holds, all of them computed by sequences of `tenant`. `None` when no slot is
    /// free.
    pub(super) fn place(&mut self, prompt: &[u32], tenant: u64) -> Option<Placement> {
        let limit = prompt.len().saturating_sub(1);
        let (at, in_place) = self
            .free
            .iter()
            .enumerate()
            .map(|(at, &slot)| (at, self.in_place(slot, prompt, limit, tenant)))
            .max_by_key(|&(at, n)| (n, at))?;
        let slot = self.free.remove(at);
        let mut chain = match self.caches[slot] {
            SeqCache::Cpu(_) if self.rings.recurrent => {
                // Whole blocks only, ending where a state was kept.
                let mut chain = self
                    .store
                    .longest_prefix(tenant, prompt, limit / BLOCK_TOKENS);
                chain.truncate(self.store.stateful_prefix(&chain));
                chain
            }
            SeqCache::Cpu(_) => {
                self.store
                    .longest_prefix(tenant, prompt, limit.div_ceil(BLOCK_TOKENS))
            }
            SeqCache::Cuda(_) => {
                self.store
                    .longest_prefix(tenant, prompt, limit.div_ceil(BLOCK_TOKENS))
            }
        };
        let from_store = (chain.len() * BLOCK_TOKENS).min(limit);
        let cache = &mut self.caches[slot];
        let reused = match cache {
            SeqCache::Cpu(cache) if from_store > in_place => {
                self.store.restore(&chain, from_store, cache);
                from_store
            }
            SeqCache::Cuda(cache) if from_store > in_place => {
                match self.store.restore_gpu(&chain, from_store, &mut **cache) {
                    Ok(()) => from_store,
                    // The device could not write the rings: the prompt is computed instead.
                    Err(_) => {
                        cache.truncate(0);
                        chain.clear();
                        0
                    }
                }
            }
            _ => {
                cache.truncate(in_place);
                in_place
            }
        };
        self.store.hold(&chain, 1);
        self.histories[slot].clear();
        Some(Placement {
            slot,
            reused,
            chain,
        })
    }

    /// Prompt tokens (at most `limit`) that `slot`'s cache holds and may keep for `tenant`.
    fn in_place(&self, slot: usize, prompt: &[u32], limit: usize, tenant: u64) -> usize {
        if self.owners[slot] != tenant {
            return 0;
        }
        let held = &self.histories[slot];
        let common = held
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count()
            .min(limit);
        if self.rings.can_cut(held.len(), common) {
            return common;
        }
        // A recurrent state goes back to the checkpoint kept at its last prompt's end.
        match self.caches[slot].checkpoint() {
            Some(at) if at <= common && self.rings.can_truncate(held.len(), at) => at,
            _ => 0,
        }
    }

    /// Frees `seq`'s slot, remembering the tokens its cache holds (none if it failed).
    pub(super) fn release(&mut self, seq: &Sequence<'_>) {
        let history = &mut self.histories[seq.slot];
        // An embedding's keys are not reused: an encoder's depend on the whole sequence.
        *history = if seq.failed || seq.pooling.is_some() {
            Vec::new()
        } else {
            seq.fed(0..reusable(seq, &self.caches[seq.slot]))
        };
        self.owners[seq.slot] = seq.tenant;
        self.store.hold(&seq.chain, -1);
        self.free.push(seq.slot);
    }
}

/// Offers the blocks of `seq` that `cache` now completes to the prefix cache (a sequence
/// stops offering blocks once one cannot be stored); the sequence holds those it stored.
pub(super) fn capture(store: &mut BlockStore, seq: &mut Sequence<'_>, cache: &SeqCache) {
    let ready = (reusable(seq, cache) / BLOCK_TOKENS).saturating_sub(seq.chain.len());
    if !seq.capturing || ready == 0 {
        return;
    }
    // A GPU's ring rows of every new block, read in one go (not read when the store could
    // not keep a block: the blocks are then only looked up).
    let mut ring_rows = match cache {
        SeqCache::Cuda(cache) if store.holds_gpu_blocks() => {
            let start = seq.chain.len() * BLOCK_TOKENS;
            store.gpu_ring_rows(&**cache, start, ready)
        }
        _ => None,
    }
    .map(Vec::into_iter);
    for _ in 0..ready {
        if !seq.capturing {
            break;
        }
        let start = seq.chain.len() * BLOCK_TOKENS;
        let tokens = seq.fed(start..start + BLOCK_TOKENS);
        let parent = seq.chain.last().copied();
        let stored = match cache {
            SeqCache::Cpu(cache) => store.insert(seq.tenant, parent, &tokens, cache, start),
            SeqCache::Cuda(cache) => {
                let rows = ring_rows.as_mut().and_then(Iterator::next);
                store.insert_gpu(seq.tenant, parent, &tokens, &**cache, start, rows)
            }
        };
        match stored {
            Some(key) => {
                store.hold(&[key], 1);
                seq.chain.push(key);
            }
            None => seq.capturing = false,
        }
    }
}

/// How many of the positions `cache` holds for `seq` a later prompt may take: all of them on
/// the CPU, whose kernels give a row the same bits whether its token was in a prompt or
/// decoded; on a GPU only the prompt's. There a decoded token's row comes from the decode
/// kernels (one row each, q8_1 matrix-vector products, split-K attention) and the same token
/// in a prompt from the prefill kernels (tensor cores), whose bits differ, so a chat's earlier
/// reply is computed again as part of the next prompt, and that prompt gives what it gives
/// cold.
fn reusable(seq: &Sequence<'_>, cache: &SeqCache) -> usize {
    match cache {
        SeqCache::Cpu(cache) => cache.len(),
        SeqCache::Cuda(cache) => cache.len().min(seq.prompt_len()),
    }
}

#[cfg(test)]
mod tests {
    use super::Rings;

    #[test]
    fn a_ring_is_cut_back_only_while_it_still_holds_the_window_before_the_cut() {
        // One sliding layer: window 8, ring of 12 slots.
        let rings = Rings {
            rings: vec![(8, 12)],
            recurrent: false,
        };
        assert!(rings.can_truncate(10, 3), "nothing overwritten yet");
        assert!(rings.can_truncate(30, 30), "nothing cut");
        assert!(
            rings.can_truncate(30, 26),
            "positions 18.. are held, 18..26 needed"
        );
        assert!(
            !rings.can_truncate(30, 25),
            "position 17 is needed but overwritten"
        );
        let full = Rings {
            rings: Vec::new(),
            recurrent: false,
        };
        assert!(full.can_truncate(1000, 1), "full layers keep everything");
        let recurrent = Rings {
            rings: Vec::new(),
            recurrent: true,
        };
        assert!(recurrent.can_cut(10, 10) && recurrent.can_cut(10, 0));
        assert!(
            !recurrent.can_cut(10, 9),
            "a recurrent state is not cut back"
        );
    }
}
