//! The element types of KV rows as the vector kernels read them: one f32 value at a time, exactly
//! as [`crate::ops::KvRow::decode`] gives it (f16 widens exactly; a q8_0 value is `q as f32 * d`,
//! one rounding), so a kernel that reads a row in place computes what it computes on the
//! decoded row.

use half::f16;

use crate::quant::q8_0::BlockQ8_0;

/// Values per q8_0 block.
pub(super) const Q8_0_BLOCK: usize = 32;

/// A row of values of one element type.
pub(super) trait RowValues {
    /// Value `e` as f32.
    fn value(&self, e: usize) -> f32;
}

impl RowValues for [f32] {
    #[inline]
    fn value(&self, e: usize) -> f32 {
        self[e]
    }
}

impl RowValues for [f16] {
    #[inline]
    fn value(&self, e: usize) -> f32 {
        self[e].to_f32()
    }
}

impl RowValues for [BlockQ8_0] {
    #[inline]
    fn value(&self, e: usize) -> f32 {
        let block = &self[e / Q8_0_BLOCK];
        block.qs[e % Q8_0_BLOCK] as f32 * block.d.to_f32()
    }
}
