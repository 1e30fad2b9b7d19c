//! The block bookkeeping of the GPU's paged KV cache: which blocks of a device pool each
//! sequence's table lists, and how many tables list each block.
//!
//! The pool holds blocks of [`KV_BLOCK`] positions of every full-attention layer (the CPU's
//! `kv_blocks` layout and block size); a sequence's cache is a table of block ids, position
//! `pos` in block `table[pos / KV_BLOCK]`, row `pos % KV_BLOCK`, and the attention kernels read
//! keys and values through it (`attention.cu`). Sequences share the blocks of a common prefix by
//! listing the same ids ([`BlockAllocator::fork`]); a block listed by more than one table is
//! never written: before a step writes positions `from..to`, [`BlockAllocator::prepare`]
//! replaces each shared block among them by a fresh one and returns the copies the device must
//! make first (copy on write), and takes fresh blocks for positions past the table. The
//! allocator never hands out more than its capacity: a table that cannot grow is an error,
//! never a panic.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::error::CudaError;

pub use crate::launch::KV_BLOCK;

/// A pool's allocator as its model, its caches and the engine's prefix cache share it.
pub type SharedBlocks = Arc<Mutex<BlockAllocator>>;

/// The allocator behind `blocks`, even if a thread panicked while holding it (its counts are
/// updated one block at a time, so they stay consistent).
pub fn lock(blocks: &Mutex<BlockAllocator>) -> MutexGuard<'_, BlockAllocator> {
    blocks.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reference counts of the blocks of a pool and its free list.
#[derive(Clone, Debug)]
pub struct BlockAllocator {
    /// How many tables list each block (0: free).
    refs: Vec<u32>,
    /// The free blocks, the next one taken last.
    free: Vec<u32>,
}

/// One copy on write: the whole block `from` (every layer, keys and values) into `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockCopy {
    /// The shared block.
    pub from: u32,
    /// The writer's fresh block.
    pub to: u32,
}

impl BlockAllocator {
    /// A pool of `blocks` free blocks.
    pub fn new(blocks: usize) -> Self {
        Self {
            refs: vec![0; blocks],
            free: (0..blocks as u32).rev().collect(),
        }
    }

    /// Blocks in the pool.
    pub fn capacity(&self) -> usize {
        self.refs.len()
    }

    /// Blocks no table lists.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// How many tables list `block`.
    pub fn refs(&self, block: u32) -> u32 {
        self.refs[block as usize]
    }

    fn take(&mut self) -> Result<u32, CudaError> {
        let block = self.free.pop().ok_or(CudaError::KvBlocksExhausted {
            capacity: self.refs.len(),
        })?;
        self.refs[block as usize] = 1;
        Ok(block)
    }

    /// Lists `block` once more: a holder beside the tables (the engine's prefix cache) keeps
    /// it from being freed or written in place.
    pub fn retain(&mut self, block: u32) {
        self.refs[block as usize] += 1;
    }

    /// Lists `block` once fewer; it is free when nothing lists it.
    pub fn release(&mut self, block: u32) {
        let refs = &mut self.refs[block as usize];
        *refs -= 1;
        if *refs == 0 {
            self.free.push(block);
        }
    }

    /// Readies `table` for writing positions `from..to`: a block among them that another
    /// table lists too is replaced by a fresh block, its copy appended to `copies` (the
    /// device copies it before the step writes), and blocks are taken for positions past the
    /// table. On an error (the pool is exhausted) the table covers what it covered before, its
    /// copies made so far kept in `copies` (each a block it now holds alone, so still valid).
    pub fn prepare(
        &mut self,
        table: &mut Vec<u32>,
        from: usize,
        to: usize,
        copies: &mut Vec<BlockCopy>,
    ) -> Result<(), CudaError> {
        if from >= to {
            return Ok(());
        }
        let first = from / KV_BLOCK;
        let last = (to - 1) / KV_BLOCK;
        for index in first..table.len().min(last + 1) {
            let block = table[index];
            if self.refs(block) > 1 {
                let fresh = self.take()?;
                self.release(block);
                copies.push(BlockCopy {
                    from: block,
                    to: fresh,
                });
                table[index] = fresh;
            }
        }
        while table.len() <= last {
            let fresh = self.take()?;
            table.push(fresh);
        }
        Ok(())
    }

    /// A new table sharing the blocks of `table` that hold positions `0..len`.
    pub fn fork(&mut self, table: &[u32], len: usize) -> Vec<u32> {
        let shared = &table[..len.div_ceil(KV_BLOCK).min(table.len())];
        for &block in shared {
            self.retain(block);
        }
        shared.to_vec()
    }

    /// Gives back the blocks of `table` past those holding positions `0..len`.
    pub fn truncate(&mut self, table: &mut Vec<u32>, len: usize) {
        let keep = len.div_ceil(KV_BLOCK).min(table.len());
        for block in table.drain(keep..) {
            self.release(block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool of `blocks` blocks, a table holding its first `len` positions, and the copies
    /// list (empty).
    fn pool_holding(blocks: usize, len: usize) -> (BlockAllocator, Vec<u32>, Vec<BlockCopy>) {
        let mut pool = BlockAllocator::new(blocks);
        let (mut table, mut copies) = (Vec::new(), Vec::new());
        pool.prepare(&mut table, 0, len, &mut copies).unwrap();
        assert!(copies.is_empty());
        (pool, table, copies)
    }

    #[test]
    fn a_table_takes_a_block_per_sixteen_positions_and_gives_them_back() {
        let (mut pool, mut table, mut copies) = pool_holding(4, 17);
        assert_eq!(table.len(), 2);
        pool.prepare(&mut table, 17, 32, &mut copies).unwrap();
        assert_eq!(
            (table.len(), pool.free()),
            (2, 2),
            "positions 17..32 are in block 1"
        );
        pool.truncate(&mut table, 16);
        assert_eq!((table.len(), pool.free()), (1, 3));
        pool.truncate(&mut table, 0);
        assert_eq!(pool.free(), 4);
    }

    #[test]
    fn a_shared_prefix_is_listed_by_reference_and_copied_only_where_written() {
        let (mut pool, mut a, mut copies) = pool_holding(8, 20);
        let mut b = pool.fork(&a, 20);
        assert_eq!(b, a, "both blocks of 20 positions are shared");
        assert_eq!((pool.refs(a[0]), pool.refs(a[1])), (2, 2));
        assert_eq!(pool.free(), 6, "sharing takes no block");
        // B writes position 20, in the shared block 1: it gets a copy; block 0 stays shared.
        pool.prepare(&mut b, 20, 21, &mut copies).unwrap();
        assert_eq!(
            copies,
            [BlockCopy {
                from: a[1],
                to: b[1]
            }]
        );
        assert_ne!(b[1], a[1]);
        assert_eq!(b[0], a[0]);
        assert_eq!(
            (pool.refs(a[0]), pool.refs(a[1]), pool.refs(b[1])),
            (2, 1, 1)
        );
        // A now holds its block 1 alone and writes in place.
        copies.clear();
        pool.prepare(&mut a, 20, 21, &mut copies).unwrap();
        assert!(copies.is_empty());
        // Dropping both gives every block back.
        pool.truncate(&mut a, 0);
        pool.truncate(&mut b, 0);
        assert_eq!(pool.free(), 8);
    }

    #[test]
    fn an_exhausted_pool_is_an_error_and_the_table_stays_usable() {
        let (mut pool, mut a, mut copies) = pool_holding(2, 32);
        let error = pool.prepare(&mut a, 32, 33, &mut copies).unwrap_err();
        assert!(matches!(
            error,
            CudaError::KvBlocksExhausted { capacity: 2 }
        ));
        assert_eq!(a.len(), 2);
        let mut b = pool.fork(&a, 32);
        assert!(
            pool.prepare(&mut b, 20, 21, &mut copies).is_err(),
            "no block to copy into"
        );
        assert_eq!(b, a, "the shared table is unchanged");
    }
}
