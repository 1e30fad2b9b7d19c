use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockIq2Xxs, "IQ2_XXS", dequantize_random_blocks);
exact_dot_tests!(BlockIq2Xxs, scale: |b, d| b.d = d, avx2: x86::vec_dot, neon: aarch64);
