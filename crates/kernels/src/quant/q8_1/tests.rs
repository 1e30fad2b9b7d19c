use super::*;
use crate::quant::testing::*;

#[test]
fn activation_quantize_matches_ggml_bit_exact() {
    let x = fixture_f32("act_Q8_1.input.f32");
    let got = quantize::<BlockQ8_1>(&x);
    let got: &[u8] = bytemuck::cast_slice(&got);
    assert_eq!(got, fixture("act_Q8_1.ref.bin"));
    assert_eq!(got, fixture("act_Q8_1.cpu.bin"));
}
