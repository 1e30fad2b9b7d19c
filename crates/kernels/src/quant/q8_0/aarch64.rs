//! NEON Q8_0 × Q8_0 dot products, with the float steps of the packed x86 kernel (`q8_0x16`).

use std::arch::aarch64::int8x16_t;

use super::BlockQ8_0;
use crate::quant::aarch64::{ScaledCodes32, load_i8x32, q8_0_kernels};

impl ScaledCodes32 for BlockQ8_0 {
    #[inline(always)]
    fn codes(&self) -> [int8x16_t; 2] {
        // SAFETY: NEON is part of every AArch64 CPU.
        unsafe { load_i8x32(&self.qs) }
    }

    #[inline(always)]
    fn scale(&self) -> f32 {
        self.d.to_f32()
    }
}

q8_0_kernels!(BlockQ8_0);
