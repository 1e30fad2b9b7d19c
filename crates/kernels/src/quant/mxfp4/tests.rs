//! The shared fixtures hold no MXFP4 vectors, so `MXFP4.random_blocks.*` were written for this
//! crate from the fixtures README's definition by an independent implementation (Python,
//! `ldexp` in f64 rounded to f32): random codes at moderate exponents, every edge exponent
//! (0, 1, 2, 127, 128, 254, 255: subnormal scales and overflow to infinity), all-ones and
//! all-zero codes, and fully random blocks.

use proptest::prelude::*;

use super::*;
use crate::quant::testing::*;

#[test]
fn dequantize_matches_the_definition_bit_exact() {
    check_dequant_fixtures::<BlockMxfp4>("MXFP4", false);
}

#[test]
fn half_scale_is_two_to_the_exponent_minus_128_for_every_exponent() {
    for e in 0..=255u8 {
        let want = 2f64.powi(e as i32 - 128) as f32;
        assert_eq!(e8m0_to_f32_half(e).to_bits(), want.to_bits(), "e = {e}");
    }
}

/// Rows of 1 to 9 blocks with random codes and exponents where products stay finite (and
/// sometimes the subnormal ones), beside an f32 activation row of matching length.
fn dot_operands() -> impl Strategy<Value = (Vec<BlockMxfp4>, Vec<f32>)> {
    let exponent = prop_oneof![4 => 100u8..150, 1 => 0u8..2];
    (1usize..10)
        .prop_flat_map(move |n| {
            (
                raw_blocks(size_of::<BlockMxfp4>(), n),
                prop::collection::vec(exponent.clone(), n),
            )
        })
        .prop_map(|(raw, e)| {
            let mut w: Vec<BlockMxfp4> = blocks(&raw);
            w.iter_mut().zip(e).for_each(|(b, e)| b.e = e);
            w
        })
        .prop_flat_map(|w| {
            let n = w.len() * 32;
            (Just(w), activations(n))
        })
}

proptest! {
    #[test]
    fn reference_dot_matches_dequantized_dot((w, x) in dot_operands()) {
        check_reference_dot(&w, &x, no_min_terms);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_dot_matches_reference((w, x) in dot_operands()) {
        check_avx2_dot(&w, &x, x86::vec_dot, DotMatch::Close(no_min_terms));
    }

    #[cfg(target_arch = "aarch64")]
    #[test]
    fn neon_dots_match_reference((w, x) in dot_operands()) {
        check_neon_dots(
            &w,
            &x,
            aarch64::vec_dot_neon,
            aarch64::vec_dot_dotprod,
            DotMatch::Close(no_min_terms),
        );
    }
}

/// A block whose values are codes times its scale comes back unchanged; other values take the
/// nearest code, never one farther than half a step.
#[test]
fn quantize_keeps_representable_values_and_rounds_others_to_the_nearest_code() {
    use crate::quant::Quantize;
    let exact: Vec<f32> = (0..32).map(|j| KVALUES[j % 16] as f32 * 0.25).collect();
    let block = BlockMxfp4::quantize(&exact);
    let mut back = [0.0f32; 32];
    block.dequantize(&mut back);
    assert_eq!(back.to_vec(), exact);

    let x: Vec<f32> = (0..32).map(|j| (j as f32 - 15.5) * 0.37).collect();
    let block = BlockMxfp4::quantize(&x);
    block.dequantize(&mut back);
    let d = e8m0_to_f32_half(block.e);
    for (v, b) in x.iter().zip(&back) {
        assert!((v - b).abs() <= 2.0 * d + 1e-6, "{v} became {b}");
    }
    assert_eq!(
        BlockMxfp4::quantize(&[0.0; 32]),
        BlockMxfp4 { e: 0, qs: [0; 16] }
    );
}
