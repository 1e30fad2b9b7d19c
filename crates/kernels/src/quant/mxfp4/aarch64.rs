//! NEON MXFP4 × Q8_0 dot products, with the float steps of the packed x86 kernel
//! (`mxfp4x16`): the codes' values looked up from the 16-entry table (`tbl`), exact integer
//! sums per block, one fused multiply-add per block.

use std::arch::aarch64::*;

use super::{BlockMxfp4, KVALUES, e8m0_to_f32_half};
use crate::quant::aarch64::table_nibbles_32;
use crate::quant::q8_0::aarch64::{ScaledCodes32, q8_0_kernels};

impl ScaledCodes32 for BlockMxfp4 {
    /// The table values the nibbles index.
    #[inline(always)]
    fn codes(&self) -> [int8x16_t; 2] {
        table_nibbles_32(&KVALUES, &self.qs)
    }

    #[inline(always)]
    fn scale(&self) -> f32 {
        e8m0_to_f32_half(self.e)
    }
}

q8_0_kernels!(BlockMxfp4);
