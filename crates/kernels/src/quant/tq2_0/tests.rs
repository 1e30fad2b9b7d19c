use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockTq2_0, "TQ2_0", dequantize_random_blocks);
exact_dot_tests!(BlockTq2_0, scale: |b, d| b.d = d, avx2: x86::vec_dot, neon: aarch64);
