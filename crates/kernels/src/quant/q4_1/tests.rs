use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockQ4_1, "Q4_1", dequantize, quantize);
affine_dot_tests!(BlockQ4_1, avx2: x86::vec_dot, neon: aarch64);
