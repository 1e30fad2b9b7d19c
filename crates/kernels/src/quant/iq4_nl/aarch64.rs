//! NEON IQ4_NL × Q8_0 dot products, with the float steps of the packed x86 kernel (`nibbles`).

use std::arch::aarch64::*;

use super::{BlockIq4Nl, KVALUES};
use crate::quant::aarch64::table_nibbles_32;
use crate::quant::q8_0::aarch64::{ScaledCodes32, q8_0_kernels};

impl ScaledCodes32 for BlockIq4Nl {
    /// The table values the nibbles index.
    #[inline(always)]
    fn codes(&self) -> [int8x16_t; 2] {
        table_nibbles_32(&KVALUES, &self.qs)
    }

    #[inline(always)]
    fn scale(&self) -> f32 {
        self.d.to_f32()
    }
}

q8_0_kernels!(BlockIq4Nl);
