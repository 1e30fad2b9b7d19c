use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockTq1_0, "TQ1_0", dequantize_random_blocks);
exact_dot_tests!(BlockTq1_0, scale: |b, d| b.d = d, avx2: x86::vec_dot, neon: aarch64);

#[test]
fn every_byte_decodes_to_ggml_trits() {
    // ggml packs trits t_0..t_4 as ⌈(Σ t_n · 3^(4−n)) · 256 / 243⌉; each decodes back.
    for code in 0..243u16 {
        let byte = (code * 256).div_ceil(243) as u8;
        let digits: Vec<i8> = (0..5)
            .map(|n| (code / 3u16.pow(4 - n) % 3) as i8 - 1)
            .collect();
        let decoded: Vec<i8> = (0..5).map(|n| trit(byte, n)).collect();
        assert_eq!(decoded, digits, "byte {byte}");
    }
}
