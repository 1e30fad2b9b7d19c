//! The allocation that holds packed rows: zeroed by the kernel rather than by a pass of this
//! process.

use bytemuck::Pod;

/// `len` zeroed values in a fresh allocation.
///
/// A large zeroed allocation comes straight from the kernel's zero pages, so no memset runs
/// here: the packers' first writes fault the pages in, on every thread that packs.
pub(super) fn zeroed_blocks<P: Pod>(len: usize) -> Vec<P> {
    bytemuck::zeroed_vec::<P>(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_allocation_starts_zeroed_whatever_its_size() {
        for len in [0, 1, 1000, 3 << 20] {
            let blocks = zeroed_blocks::<u64>(len);
            assert_eq!(blocks.len(), len);
            assert!(blocks.iter().all(|&b| b == 0));
        }
    }
}
