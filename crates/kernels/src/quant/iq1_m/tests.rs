use bytemuck::Zeroable;

use super::*;
use crate::quant::testing::*;

fixture_tests!(BlockIq1M, "IQ1_M", dequantize_random_blocks);
exact_dot_tests!(BlockIq1M, scale: |b, d| b.set_d(d), avx2: x86::vec_dot, neon: aarch64);

#[test]
fn shift_signs_and_scales_follow_ggml() {
    // Group 1's nibble: index bits 0b101, negative shift; half sub-block 5's scale 6.
    let mut b = BlockIq1M::zeroed();
    b.qh[0] = 0xD0;
    b.scales[2] = 6 << 3;
    b.set_d(f16::ONE);
    assert_eq!((b.delta_sign(0), b.delta_sign(1)), (1, -1));
    assert_eq!(b.entry(1), IQ1S_GRID[5 << 8]);
    assert_eq!((b.scale(5), b.scale(4)), (13, 1));
    assert_eq!(b.d(), f16::ONE);
    let mut out = [0.0; QK_K];
    b.dequantize(&mut out);
    let want = IQ1S_GRID[5 << 8].to_le_bytes()[0] as i8 as f32 - 0.125;
    assert_eq!(out[8], want);
}
