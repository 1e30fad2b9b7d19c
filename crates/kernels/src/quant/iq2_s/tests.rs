use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockIq2S, "IQ2_S", dequantize_random_blocks);
exact_dot_tests!(BlockIq2S, scale: |b, d| b.d = d, avx2: x86::vec_dot, neon: aarch64);
