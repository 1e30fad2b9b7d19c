//! NEON MXFP4 × Q8_0 dot products, with the float steps of the packed x86 kernel
//! (`mxfp4x16`): the codes' values looked up from the 16-entry table (`tbl`), exact integer
//! sums per block, one fused multiply-add per block.

use super::{BlockMxfp4, KVALUES, e8m0_to_f32_half};
use crate::quant::q8_0::aarch64::q8_0_kernels;

q8_0_kernels!(BlockMxfp4, table: KVALUES, scale: |b| e8m0_to_f32_half(b.e));
