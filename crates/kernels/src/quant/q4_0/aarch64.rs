//! NEON Q4_0 × Q8_0 dot products, with the float steps of the packed x86 kernel (`nibbles`).

use std::arch::aarch64::*;

use super::BlockQ4_0;
use crate::quant::aarch64::nibbles_32;
use crate::quant::q8_0::aarch64::{ScaledCodes32, q8_0_kernels};

impl ScaledCodes32 for BlockQ4_0 {
    /// The nibbles, less 8.
    #[inline(always)]
    fn codes(&self) -> [int8x16_t; 2] {
        // SAFETY: NEON is part of every AArch64 CPU.
        unsafe { nibbles_32(&self.qs).map(|n| vsubq_s8(vreinterpretq_s8_u8(n), vdupq_n_s8(8))) }
    }

    #[inline(always)]
    fn scale(&self) -> f32 {
        self.d.to_f32()
    }
}

q8_0_kernels!(BlockQ4_0);
