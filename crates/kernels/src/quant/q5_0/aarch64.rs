//! NEON Q5_0 × Q8_0 dot products, with the float steps of the packed x86 kernel (`q5_0x16`).

use std::arch::aarch64::*;

use super::BlockQ5_0;
use crate::quant::aarch64::{fifth_bits_32, nibbles_32};
use crate::quant::q8_0::aarch64::{ScaledCodes32, q8_0_kernels};

impl ScaledCodes32 for BlockQ5_0 {
    /// The nibbles with their fifth bits, less 16.
    #[inline(always)]
    fn codes(&self) -> [int8x16_t; 2] {
        // SAFETY: NEON is part of every AArch64 CPU.
        unsafe {
            let (low, high) = (nibbles_32(&self.qs), fifth_bits_32(self.qh));
            [0, 1].map(|i| {
                vsubq_s8(
                    vreinterpretq_s8_u8(vorrq_u8(low[i], high[i])),
                    vdupq_n_s8(16),
                )
            })
        }
    }

    #[inline(always)]
    fn scale(&self) -> f32 {
        self.d.to_f32()
    }
}

q8_0_kernels!(BlockQ5_0);
