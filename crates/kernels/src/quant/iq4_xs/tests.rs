use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockIq4Xs, "IQ4_XS", dequantize_random_blocks);
dot_tests!(BlockIq4Xs, scales: [d], avx2: x86::vec_dot,
    min_terms: no_min_terms,
    neon: aarch64,
);
