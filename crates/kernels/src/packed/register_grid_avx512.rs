//! A grid of up to 1024 entries of sixteen bits held in registers, looked up 32 entries at a
//! time by word permutes: the IQ2 and IQ3 kernels keep their grids here, packed a few bits a
//! coordinate, where the scalar loads or gathers of whole grid words would cost more.

use std::arch::x86_64::*;

/// Most entries a [`RegisterGrid`] holds: 1024, in 32 registers (the compiler keeps what does
/// not fit beside the kernel's own in the L1 cache, read by the permutes' memory operand).
pub(super) const MAX_ENTRIES: usize = 1024;

/// A table of 64, 128, 256, 512 or 1024 sixteen-bit entries in registers.
pub(super) struct RegisterGrid {
    table: [__m512i; MAX_ENTRIES / 32],
    /// Pairs of registers in use, each 64 entries.
    pairs: usize,
}

impl RegisterGrid {
    /// The first `entries` (64, 128, 256, 512 or 1024) of `codes`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    pub(super) fn new(codes: &[u16; MAX_ENTRIES], entries: usize) -> Self {
        // SAFETY: each load reads 64 of the table's bytes; unaligned is allowed.
        let table = std::array::from_fn(|k| unsafe {
            _mm512_loadu_si512(codes[32 * k..32 * k + 32].as_ptr().cast())
        });
        Self {
            table,
            pairs: entries / 64,
        }
    }

    /// The entries at the 32 indices `index` (16-bit lanes, each below the table's length): one
    /// permute per pair of registers, then selects by the index bits above the sixth.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    pub(super) fn lookup(&self, index: __m512i) -> __m512i {
        let t = &self.table;
        let mut found = [_mm512_setzero_si512(); MAX_ENTRIES / 64];
        for (q, found) in found.iter_mut().enumerate().take(self.pairs) {
            *found = _mm512_permutex2var_epi16(t[2 * q], index, t[2 * q + 1]);
        }
        let (mut n, mut bit) = (self.pairs, 64);
        while n > 1 {
            let upper = _mm512_test_epi16_mask(index, _mm512_set1_epi16(bit));
            for q in 0..n / 2 {
                found[q] = _mm512_mask_blend_epi16(upper, found[2 * q], found[2 * q + 1]);
            }
            (n, bit) = (n / 2, bit * 2);
        }
        found[0]
    }
}
