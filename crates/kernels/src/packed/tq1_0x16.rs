//! TQ1_0 repacked sixteen rows at a time for AVX-512, in the source's size: each row's 52
//! trit bytes (48 `qs` bytes of five trits, then 4 `qh` bytes of four) cut into thirteen
//! chunks of four, chunk `c` of row `i` in 32-bit lane `i` of the chunk's 64-byte vector, and the
//! rows' f16 scales side by side.
//!
//! Trit `n` of the four bytes of a chunk stands for four consecutive values (see
//! [`first_value`]), so one vector of trits `n` (each byte times `3ⁿ` modulo 256, the trit the
//! high byte of three times that, as the source format defines it) meets one broadcast quad of
//! activations in one `vpdpbusd`, sixteen rows at once.
//!
//! The arithmetic, which the SIMD kernel reproduces bit for bit: per row and super-block the
//! exact integer `S = Σ trit·a − Σa` (trits `0..3` standing for `trit − 1`; `Σa` from Q8_K's
//! `bsums`), then `acc = acc + S · (d_w · d_a)` with the multiply and the add rounded apart,
//! super-blocks in order. That is the row-major reference's arithmetic, so a packed product
//! gives each row the bits the reference dot product gives it.

use super::ROWS;
#[cfg(test)]
use crate::operands::BlockSummary;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::tq1_0::BlockTq1_0;

/// Chunks of four bytes per row: twelve of `qs`, one of `qh`.
pub(super) const CHUNKS: usize = 13;

/// The chunk of `qh`, whose bytes hold four trits rather than five.
pub(super) const QH_CHUNK: usize = 12;

/// Trits per byte of chunk `c`.
pub(super) const fn trits_in(c: usize) -> usize {
    if c == QH_CHUNK { 4 } else { 5 }
}

/// The first of the four values that trit `n` of chunk `c`'s bytes stand for (byte `jj` of the
/// chunk for value `first_value(c, n) + jj`): TQ1_0 keeps the trits `n` of `qs[0..32]` as values
/// `32n..32n + 32`, those of `qs[32..48]` as `160 + 16n..`, and those of `qh` as `240 + 4n..`.
pub(super) const fn first_value(c: usize, n: usize) -> usize {
    match c {
        0..8 => 32 * n + 4 * c,
        QH_CHUNK => 240 + 4 * n,
        _ => 160 + 16 * n + 4 * (c - 8),
    }
}

packed_format! {
    /// One super-block of sixteen rows.
    BlockTq1_0x16: BlockTq1_0 => BlockQ8K, scale d {
        /// `qs[c][4i + jj]`: row `i`'s trit byte `4c + jj` (of its `qs`, then its `qh`).
        qs: [[u8; 4 * ROWS]; CHUNKS],
    }
    fn pack_row(&mut self, i, block) {
        let bytes = block.qs.iter().chain(&block.qh);
        for (k, &byte) in bytes.enumerate() {
            self.qs[k / 4][4 * i + k % 4] = byte;
        }
    }
}

impl BlockTq1_0x16 {
    /// Row `i`'s value `v` as its trit (0, 1 or 2, standing for `trit − 1`).
    #[cfg(test)]
    pub(crate) fn trit(&self, i: usize, v: usize) -> i32 {
        let (c, n) = (0..CHUNKS)
            .flat_map(|c| (0..trits_in(c)).map(move |n| (c, n)))
            .find(|&(c, n)| (first_value(c, n)..first_value(c, n) + 4).contains(&v))
            .expect("every value has a trit");
        let byte = self.qs[c][4 * i + v - first_value(c, n)];
        crate::quant::tq1_0::trit(byte, n) as i32 + 1
    }
}

/// The scalar reference (tests only), which the SIMD kernel reproduces bit for bit.
#[cfg(test)]
impl super::reference::RowReference for BlockTq1_0x16 {
    fn fold_row(&self, acc: f32, i: usize, y: &BlockQ8K, _: &[BlockSummary]) -> f32 {
        let dot: i32 = (0..256).map(|v| self.trit(i, v) * y.qs[v] as i32).sum();
        let a_sum: i32 = y.bsums.iter().map(|&s| s as i32).sum();
        let d = half::f16::from_bits(self.d[i]).to_f32() * y.d;
        acc + (dot - a_sum) as f32 * d
    }
}
