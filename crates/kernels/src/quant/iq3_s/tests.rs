use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockIq3S, "IQ3_S", dequantize_random_blocks);
exact_dot_tests!(BlockIq3S, scale: |b, d| b.d = d, avx2: x86::vec_dot, neon: aarch64);
