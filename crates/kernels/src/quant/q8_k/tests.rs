use super::*;
use crate::quant::testing::*;

#[test]
fn dequantize_matches_llama_cpp_bit_exact() {
    check_dequant_fixtures::<BlockQ8K>("Q8_K", true);
}

#[test]
fn quantize_matches_ggml_reference_bit_exact() {
    check_quantize_fixture::<BlockQ8K>("Q8_K");
}

#[test]
fn activation_quantize_matches_ggml_cpu_backend() {
    let x = fixture_f32("act_Q8_K.input.f32");
    let got = quantize::<BlockQ8K>(&x);
    assert_eq!(
        bytemuck::cast_slice::<_, u8>(&got),
        fixture("act_Q8_K.cpu.bin")
    );
}
