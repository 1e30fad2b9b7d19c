use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockIq4Nl, "IQ4_NL", dequantize_random_blocks);
dot_tests!(BlockIq4Nl, scales: [d], avx2: x86::vec_dot,
    min_terms: no_min_terms,
    neon: aarch64,
);
