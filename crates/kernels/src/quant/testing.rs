//! Test helpers: fixture loading and the SIMD-versus-reference comparison.

use bytemuck::Pod;
use proptest::prelude::*;

use super::{BlockFormat, Quantize, VecDot};

/// Reads a file of `tests/fixtures/quant/` (copied from the shared llama.cpp fixtures).
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/quant/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Reads a raw little-endian f32 fixture.
pub(crate) fn fixture_f32(name: &str) -> Vec<f32> {
    blocks(&fixture(name))
}

/// Copies raw bytes into properly aligned blocks.
pub(crate) fn blocks<B: Pod>(bytes: &[u8]) -> Vec<B> {
    assert_eq!(bytes.len() % size_of::<B>(), 0);
    bytes
        .chunks_exact(size_of::<B>())
        .map(bytemuck::pod_read_unaligned)
        .collect()
}

/// Asserts two f32 slices are bit-identical, naming the first differing index.
pub(crate) fn assert_bits_eq(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(
            g.to_bits(),
            w.to_bits(),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

/// Dequantizes blocks with the scalar reference.
pub(crate) fn dequantize<B: BlockFormat>(blocks: &[B]) -> Vec<f32> {
    let mut out = vec![0.0; blocks.len() * B::ELEMS];
    for (b, o) in blocks.iter().zip(out.chunks_exact_mut(B::ELEMS)) {
        b.dequantize(o);
    }
    out
}

/// Checks the reference dequantizer bit for bit against llama.cpp on both fixture sets
/// (`<name>.random_blocks` and, when `with_quantize_set`, `<name>.quantize_output`).
pub(crate) fn check_dequant_fixtures<B: BlockFormat>(name: &str, with_quantize_set: bool) {
    let mut sets = vec!["random_blocks"];
    if with_quantize_set {
        sets.push("quantize_output");
    }
    for set in sets {
        let raw = fixture(&format!("{name}.{set}.bin"));
        let want = fixture_f32(&format!("{name}.{set}.dequant.f32"));
        assert_bits_eq(
            &dequantize(&blocks::<B>(&raw)),
            &want,
            &format!("{name}.{set}"),
        );
        let mut via_row = vec![0.0; want.len()];
        crate::dequantize_row(B::TYPE, &raw, &mut via_row).expect("dequantize_row");
        assert_bits_eq(&via_row, &want, &format!("{name}.{set} via dequantize_row"));
    }
}

/// Quantizes `x` block by block with the reference quantizer.
pub(crate) fn quantize<B: Quantize>(x: &[f32]) -> Vec<B> {
    x.chunks_exact(B::ELEMS).map(B::quantize).collect()
}

/// Checks the reference quantizer byte for byte against ggml on `<name>.quantize_*`.
pub(crate) fn check_quantize_fixture<B: Quantize>(name: &str) {
    let x = fixture_f32(&format!("{name}.quantize_input.f32"));
    let want = fixture(&format!("{name}.quantize_output.bin"));
    let got = quantize::<B>(&x);
    let got: &[u8] = bytemuck::cast_slice(&got);
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.chunks(B::BYTES).zip(want.chunks(B::BYTES)).enumerate() {
        assert_eq!(g, w, "{name}: block {i} differs");
    }
    let mut via_row = vec![0u8; want.len()];
    crate::quantize_row(B::TYPE, &x, &mut via_row).expect("quantize_row");
    assert_eq!(via_row, want, "{name} via quantize_row");
}

/// Dot products accumulate blocks in a different order in SIMD and in the reference, so they
/// agree to a relative `DOT_RTOL` of the magnitude `sum |w_i| * |a_i|` (plus the min terms of
/// affine formats), not bit for bit. Integer parts are exact in both.
pub(crate) const DOT_RTOL: f32 = 1e-5;

/// Asserts a SIMD dot product matches the reference within [`DOT_RTOL`] of `magnitude`.
pub(crate) fn assert_dot_close(simd: f32, reference: f32, magnitude: f32) {
    if simd == reference {
        return;
    }
    let tol = DOT_RTOL * magnitude + f32::MIN_POSITIVE;
    assert!(
        (simd - reference).abs() <= tol,
        "simd {simd} vs reference {reference}: diff {} > tol {tol}",
        (simd - reference).abs()
    );
}

/// `sum |w_i| * |a_i|` over the dequantized operands, the natural scale of a dot's rounding.
pub(crate) fn dot_magnitude<W: VecDot>(w: &[W], a: &[W::Activation]) -> f32 {
    let w = dequantize(w);
    let a = dequantize(a);
    w.iter()
        .zip(&a)
        .map(|(x, y)| (x.abs() as f64) * (y.abs() as f64))
        .sum::<f64>() as f32
}

/// f16 scale values: moderate, zero, subnormal and near the f16 maximum.
pub(crate) fn f16_scale() -> impl Strategy<Value = half::f16> {
    prop_oneof![
        4 => (1e-3f32..5e-2, any::<bool>()).prop_map(|(m, neg)| half::f16::from_f32(if neg { -m } else { m })),
        1 => Just(half::f16::ZERO),
        1 => (1u16..0x400).prop_map(half::f16::from_bits),
        1 => (30000f32..65504.0).prop_map(half::f16::from_f32),
    ]
}

/// Raw block bytes: random, all-zero or all-ones, for `n_blocks` blocks of `bytes` each.
pub(crate) fn raw_blocks(bytes: usize, n_blocks: usize) -> impl Strategy<Value = Vec<u8>> {
    let n = bytes * n_blocks;
    prop_oneof![
        4 => prop::collection::vec(any::<u8>(), n),
        1 => Just(vec![0u8; n]),
        1 => Just(vec![0xFFu8; n]),
    ]
}

/// Activation rows of `n` values (`n` may be 0): random at several magnitudes, all zero, or
/// one spike.
pub(crate) fn activations(n: usize) -> impl Strategy<Value = Vec<f32>> {
    prop_oneof![
        4 => (prop::collection::vec(-1.0f32..1.0, n), prop_oneof![Just(1e-6f32), Just(1.0f32), Just(1e4f32)])
            .prop_map(|(v, s)| v.into_iter().map(|x| x * s).collect()),
        1 => Just(vec![0.0f32; n]),
        1 => (0..n.max(1), -1e3f32..1e3).prop_map(move |(i, v)| {
            let mut x = vec![0.0f32; n];
            if let Some(slot) = x.get_mut(i) {
                *slot = v;
            }
            x
        }),
    ]
}

/// Asserts the reference dot product equals the f64 dot of the dequantized operands within
/// `1e-4` of their magnitude (`extra_magnitude` adds the min terms of affine formats).
pub(crate) fn assert_reference_dot<W: VecDot>(w: &[W], a: &[W::Activation], extra_magnitude: f32) {
    let dw = dequantize(w);
    let da = dequantize(a);
    let exact: f64 = dw.iter().zip(&da).map(|(x, y)| *x as f64 * *y as f64).sum();
    let magnitude = dot_magnitude(w, a) as f64 + extra_magnitude as f64;
    let got = W::vec_dot(w, a) as f64;
    assert!(
        (got - exact).abs() <= 1e-4 * magnitude + 1e-30,
        "reference dot {got} vs dequantized {exact} (magnitude {magnitude})"
    );
}

/// Random weight rows of 1 to 9 blocks whose scale fields `patch` sets from two f16 scales
/// drawn by [`f16_scale`] (the code bits stay random, all-zero or all-ones).
pub(crate) fn weight_blocks<B: Pod + std::fmt::Debug>(
    patch: fn(&mut B, half::f16, half::f16),
) -> impl Strategy<Value = Vec<B>> {
    (1usize..10)
        .prop_flat_map(|n| {
            (
                raw_blocks(size_of::<B>(), n),
                prop::collection::vec(f16_scale(), n),
                prop::collection::vec(f16_scale(), n),
            )
        })
        .prop_map(move |(raw, d, m)| {
            let mut b: Vec<B> = blocks(&raw);
            for ((b, d), m) in b.iter_mut().zip(d).zip(m) {
                patch(b, d, m);
            }
            b
        })
}

/// A weight row from [`weight_blocks`] and an f32 activation row of matching length.
pub(crate) fn dot_case<W: VecDot + std::fmt::Debug>(
    patch: fn(&mut W, half::f16, half::f16),
) -> impl Strategy<Value = (Vec<W>, Vec<f32>)> {
    weight_blocks(patch).prop_flat_map(|w| {
        let n = w.len() * W::ELEMS;
        (Just(w), activations(n))
    })
}

/// Whether the AVX2 kernels can run here.
pub(crate) fn has_avx2() -> bool {
    crate::cpu::detected() >= crate::cpu::Isa::Avx2
}

/// Whether the AVX-512 kernels can run here.
pub(crate) fn has_avx512() -> bool {
    crate::cpu::detected() >= crate::cpu::Isa::Avx512
}
