use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockQ3K, "Q3_K", dequantize, quantize);
dot_tests!(BlockQ3K, scales: [d], avx2: x86::vec_dot,
    min_terms: no_min_terms,
    neon: aarch64,
);
