//! Intel AMX: whether this process may use the tile units, the tile configuration of the
//! packed byte-code kernels, and the few tile instructions they run, written with `asm!`
//! (Rust 1.95's AMX intrinsics are unstable).
//!
//! A process must ask Linux for permission to use tile data (`arch_prctl`) before the first
//! tile instruction, or that instruction faults: [`crate::cpu`] asks once while it detects the
//! CPU, and reports [`Isa::Amx`] only where the CPU has AMX-TILE and AMX-INT8 and the permission
//! was granted.

use std::arch::asm;

/// Tile rows a kernel fills at most: one per token.
pub(super) const MAX_TOKENS: usize = 16;

/// Whether the AMX kernels may run in this process: the detected level includes AMX.
#[cfg(test)]
pub(crate) fn available() -> bool {
    crate::cpu::detected() >= crate::Isa::Amx
}

/// The 64-byte tile configuration `ldtilecfg` reads (palette 1).
#[repr(C, align(64))]
pub(super) struct TileConfig {
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
    /// The tiles of a byte-code product of `tokens` tokens (at most [`MAX_TOKENS`]) against
    /// one 32-value block of sixteen rows: tile 0 sums (`tokens × 16` i32), tile 1 the tokens'
    /// activation bytes (`tokens × 32`), tile 2 the weight codes (8 rows of 16 × 4 bytes).
    pub(super) fn byte_codes(tokens: usize) -> Self {
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

/// The tile unit, configured for one kernel call and released when dropped.
pub(super) struct Tiles(());

impl Tiles {
    /// Loads `config`.
    ///
    /// # Safety
    /// [`available`] must have returned `true`.
    #[inline]
    pub(super) unsafe fn configure(config: &TileConfig) -> Self {
        // SAFETY: the caller checked AMX and the permission; `config` is a valid palette-1
        // configuration of 64 readable bytes.
        unsafe { asm!("ldtilecfg [{}]", in(reg) config, options(nostack, readonly)) };
        Tiles(())
    }

    /// Tile 0 = 0.
    #[inline]
    pub(super) fn zero_sums(&mut self) {
        // SAFETY: tiles are configured (`self` exists); tilezero touches no memory.
        unsafe { asm!("tilezero tmm0", options(nostack, nomem)) };
    }

    /// Tile 1 = the configured rows of 32 bytes at `first`, `stride` bytes apart.
    ///
    /// # Safety
    /// Every row `first + r * stride .. + 32` for the configured rows must be readable.
    #[inline]
    pub(super) unsafe fn load_activations(&mut self, first: *const i8, stride: usize) {
        // SAFETY: the caller vouches for the rows; tiles are configured.
        unsafe {
            asm!("tileloadd tmm1, [{0} + {1}]", in(reg) first, in(reg) stride,
                 options(nostack, readonly))
        };
    }

    /// Tile 2 = the eight 64-byte rows of `codes`.
    #[inline]
    pub(super) fn load_codes(&mut self, codes: &[u8; 512]) {
        // SAFETY: eight rows of 64 bytes at stride 64 are exactly `codes`; tiles are configured.
        unsafe {
            asm!("tileloadd tmm2, [{0} + {1}]", in(reg) codes.as_ptr(), in(reg) 64usize,
                 options(nostack, readonly))
        };
    }

    /// Tile 0 += signed activations (tile 1) · unsigned codes (tile 2), four bytes at a time.
    #[inline]
    pub(super) fn dot(&mut self) {
        // SAFETY: tiles are configured; tdpbsud touches no memory.
        unsafe { asm!("tdpbsud tmm0, tmm1, tmm2", options(nostack, nomem)) };
    }

    /// Writes tile 0's rows to `sums` (one row of sixteen i32 per token).
    #[inline]
    pub(super) fn store_sums(&mut self, sums: &mut [[i32; 16]; MAX_TOKENS]) {
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
