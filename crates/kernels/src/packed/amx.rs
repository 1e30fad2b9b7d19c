//! Intel AMX: whether this process may use the tile units, the tile configuration of the
//! packed kernels, and the few tile instructions they run ([`TileUnit`]), written with `asm!`
//! (Rust 1.95's AMX intrinsics are unstable). The kernels are written over [`TileUnit`], so
//! that tests also run them on a software model of the unit where the CPU has no AMX.
//!
//! A process must ask Linux for permission to use tile data (`arch_prctl`) before the first
//! tile instruction, or that instruction faults: [`crate::cpu`] asks once while it detects the
//! CPU, and reports [`Isa::Amx`] only where the CPU has AMX-TILE and AMX-INT8 and the permission
//! was granted.

use std::arch::asm;
use std::arch::x86_64::*;

use super::ROWS;
use super::fold_avx512::token_chunks;
use crate::operands::BlockSummary;
use crate::quant::BlockFormat;

/// Tile rows a kernel fills at most: one per token.
pub(super) const MAX_TOKENS: usize = 16;

/// Fewer tokens than this run on the VNNI kernel: a tile product costs about as much however
/// few of its rows are used.
const MIN_TOKENS: usize = 4;

/// An AMX kernel's calls: the tokens of `out` (with their activation blocks `a` and summaries
/// `s`, `blocks` blocks a token) [`MAX_TOKENS`] at a time, each chunk to `tiles`, or to `vnni`
/// where it has fewer than fill a tile usefully.
#[inline(always)]
pub(super) fn by_tile_chunks<A: BlockFormat>(
    out: &mut [[f32; ROWS]],
    a: &[A],
    s: &[BlockSummary],
    blocks: usize,
    mut vnni: impl FnMut(&mut [[f32; ROWS]], &[A], &[BlockSummary]),
    mut tiles: impl FnMut(&mut [[f32; ROWS]], &[A], &[BlockSummary]),
) {
    for (out, a, s) in token_chunks(out, a, s, blocks, MAX_TOKENS) {
        match out.len() < MIN_TOKENS {
            true => vnni(out, a, s),
            false => tiles(out, a, s),
        }
    }
}

/// Whether the AMX kernels may run in this process: the detected level includes AMX.
#[cfg(test)]
pub(crate) fn available() -> bool {
    crate::cpu::detected() >= crate::Isa::Amx
}

/// The 64-byte tile configuration `ldtilecfg` reads (palette 1).
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    /// Bytes per row of each tile.
    colsb: [u16; 16],
    /// Rows of each tile.
    rows: [u8; 16],
}

const _: () = assert!(size_of::<TileConfig>() == 64);

impl TileConfig {
    /// The tiles of a product of `tokens` tokens (at most [`MAX_TOKENS`]) against 32 values
    /// of sixteen rows ([`TileUnit::configure`]).
    fn byte_codes(tokens: usize) -> Self {
        debug_assert!((1..=MAX_TOKENS).contains(&tokens));
        let mut config = TileConfig {
            palette: 1,
            start_row: 0,
            reserved: [0; 14],
            colsb: [0; 16],
            rows: [0; 16],
        };
        config.colsb[..3].copy_from_slice(&[64, 32, 64]);
        config.rows[..3].copy_from_slice(&[tokens as u8, tokens as u8, 8]);
        config
    }
}

/// The tile operations of the packed kernels: a product of the configured rows (one per
/// token) of 32 activation bytes with sixteen rows' 32 codes, into sixteen i32 sums per token.
pub(super) trait TileUnit: Sized {
    /// The unit configured for `tokens` tokens (at most [`MAX_TOKENS`]): tile 0 their sums
    /// (`tokens × 16` i32), tile 1 their activation bytes (`tokens × 32`), tile 2 the weight
    /// codes (8 rows of 16 × 4 bytes).
    ///
    /// # Safety
    /// For the tile unit itself, [`available`] must have returned `true`.
    unsafe fn configure(tokens: usize) -> Self;

    /// Tile 0 = 0.
    fn zero_sums(&mut self);

    /// Tile 1 = the configured rows of 32 signed bytes at `first`, `stride` bytes apart.
    ///
    /// # Safety
    /// Every row `first + r * stride .. + 32` for the configured rows must be readable.
    unsafe fn load_activations(&mut self, first: *const i8, stride: usize);

    /// Tile 2 = the eight 64-byte rows of `codes` (row `k`, bytes `4n..4n + 4`: weight row
    /// `n`'s unsigned codes `4k..4k + 4`).
    fn load_codes(&mut self, codes: &[u8; 512]);

    /// Tile 0 += signed activations (tile 1) · unsigned codes (tile 2), four bytes at a time:
    /// sum `n` of token `m` gains `Σ_k Σ_i a[m][4k + i] · codes[k][4n + i]`.
    fn dot(&mut self);

    /// Writes tile 0's rows to `sums` (one row of sixteen i32 per token).
    fn store_sums(&mut self, sums: &mut [[i32; 16]; MAX_TOKENS]);
}

/// The exact dots of the configured tokens' 32 activation bytes (token `t`'s at
/// `first + t * stride`) with sixteen rows' code vectors `codes` (vector `g`: each row's codes
/// `4g..4g + 4`), token `t`'s sixteen in `sums[t]`.
///
/// # Safety
/// As [`TileUnit::load_activations`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) unsafe fn dot_codes<T: TileUnit>(
    tiles: &mut T,
    codes: [__m512i; 8],
    (first, stride): (*const i8, usize),
    sums: &mut [[i32; 16]; MAX_TOKENS],
) {
    let mut code_bytes = [0u8; 512];
    for (g, q) in codes.into_iter().enumerate() {
        // SAFETY: writes exactly the 64 bytes `64g..64g + 64` of `code_bytes`.
        unsafe { _mm512_storeu_si512(code_bytes[64 * g..].as_mut_ptr().cast(), q) };
    }
    tiles.zero_sums();
    // SAFETY: the caller vouches for the rows.
    unsafe { tiles.load_activations(first, stride) };
    tiles.load_codes(&code_bytes);
    tiles.dot();
    tiles.store_sums(sums);
}

/// The tile unit, configured for one kernel call and released when dropped.
pub(super) struct Tiles(());

impl TileUnit for Tiles {
    #[inline]
    unsafe fn configure(tokens: usize) -> Self {
        let config = TileConfig::byte_codes(tokens);
        // SAFETY: the caller checked AMX and the permission; `config` is a valid palette-1
        // configuration of 64 readable bytes.
        unsafe { asm!("ldtilecfg [{}]", in(reg) &config, options(nostack, readonly)) };
        Tiles(())
    }

    #[inline]
    fn zero_sums(&mut self) {
        // SAFETY: tiles are configured (`self` exists); tilezero touches no memory.
        unsafe { asm!("tilezero tmm0", options(nostack, nomem)) };
    }

    #[inline]
    unsafe fn load_activations(&mut self, first: *const i8, stride: usize) {
        // SAFETY: the caller vouches for the rows; tiles are configured.
        unsafe {
            asm!("tileloadd tmm1, [{0} + {1}]", in(reg) first, in(reg) stride,
                 options(nostack, readonly))
        };
    }

    #[inline]
    fn load_codes(&mut self, codes: &[u8; 512]) {
        // SAFETY: eight rows of 64 bytes at stride 64 are exactly `codes`; tiles are configured.
        unsafe {
            asm!("tileloadd tmm2, [{0} + {1}]", in(reg) codes.as_ptr(), in(reg) 64usize,
                 options(nostack, readonly))
        };
    }

    #[inline]
    fn dot(&mut self) {
        // SAFETY: tiles are configured; tdpbsud touches no memory.
        unsafe { asm!("tdpbsud tmm0, tmm1, tmm2", options(nostack, nomem)) };
    }

    #[inline]
    fn store_sums(&mut self, sums: &mut [[i32; 16]; MAX_TOKENS]) {
        // SAFETY: tile 0 has at most MAX_TOKENS rows of 64 bytes, written at stride 64 into
        // `sums`; tiles are configured.
        unsafe {
            asm!("tilestored [{0} + {1}], tmm0", in(reg) sums.as_mut_ptr(), in(reg) 64usize,
                 options(nostack))
        };
    }
}

impl Drop for Tiles {
    fn drop(&mut self) {
        // SAFETY: tiles are configured; tilerelease returns the unit to its initial state.
        unsafe { asm!("tilerelease", options(nostack, nomem)) };
    }
}

/// A software model of the tile unit, exact to the instructions' definition: the AMX kernels'
/// tests run on it where the CPU has no AMX.
#[cfg(test)]
pub(super) struct ModelTiles {
    rows: usize,
    sums: [[i32; 16]; MAX_TOKENS],
    activations: [[i8; 32]; MAX_TOKENS],
    codes: [u8; 512],
}

#[cfg(test)]
impl TileUnit for ModelTiles {
    unsafe fn configure(tokens: usize) -> Self {
        assert!((1..=MAX_TOKENS).contains(&tokens));
        ModelTiles {
            rows: tokens,
            sums: [[0; 16]; MAX_TOKENS],
            activations: [[0; 32]; MAX_TOKENS],
            codes: [0; 512],
        }
    }

    fn zero_sums(&mut self) {
        self.sums = [[0; 16]; MAX_TOKENS];
    }

    unsafe fn load_activations(&mut self, first: *const i8, stride: usize) {
        for (r, row) in self.activations.iter_mut().enumerate().take(self.rows) {
            // SAFETY: the caller vouches that the configured rows are readable.
            let bytes = unsafe { std::slice::from_raw_parts(first.add(r * stride), 32) };
            row.copy_from_slice(bytes);
        }
    }

    fn load_codes(&mut self, codes: &[u8; 512]) {
        self.codes = *codes;
    }

    fn dot(&mut self) {
        for (sums, a) in self.sums.iter_mut().zip(&self.activations).take(self.rows) {
            for (n, sum) in sums.iter_mut().enumerate() {
                for k in 0..8 {
                    for i in 0..4 {
                        *sum += i32::from(a[4 * k + i]) * i32::from(self.codes[64 * k + 4 * n + i]);
                    }
                }
            }
        }
    }

    fn store_sums(&mut self, sums: &mut [[i32; 16]; MAX_TOKENS]) {
        sums[..self.rows].copy_from_slice(&self.sums[..self.rows]);
    }
}
