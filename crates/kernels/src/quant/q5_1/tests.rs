use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockQ5_1, "Q5_1", dequantize, quantize);
affine_dot_tests!(BlockQ5_1, avx2: x86::vec_dot, neon: aarch64);
