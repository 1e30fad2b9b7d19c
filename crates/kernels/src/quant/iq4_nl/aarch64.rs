//! NEON IQ4_NL × Q8_0 dot products, with the float steps of the packed x86 kernel (`nibbles`).

use super::{BlockIq4Nl, KVALUES};
use crate::quant::q8_0::aarch64::q8_0_kernels;

q8_0_kernels!(BlockIq4Nl, table: KVALUES, scale: |b| b.d.to_f32());
