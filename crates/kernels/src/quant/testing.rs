//! Test helpers: fixture loading, the SIMD-versus-reference comparison, and the macros that
//! stamp out the tests every block format shares ([`fixture_tests`], [`dot_tests`],
//! [`affine_dot_tests`]), so that each format's `tests.rs` says only what is its own.

use bytemuck::Pod;
use half::f16;
use proptest::prelude::*;

use super::q8_1::BlockQ8_1;
use super::q8_k::BlockQ8K;
use super::scale_min_k::ScaleMinK;
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

/// f16 scale values: moderate, zero, subnormal and near the f16 maximum. Drawn as integers:
/// proptest's sampler of positive f32 ranges can trip its own debug assertion.
pub(crate) fn f16_scale() -> impl Strategy<Value = f16> {
    prop_oneof![
        4 => (1_000u32..50_000, any::<bool>()).prop_map(|(m, neg)| {
            let m = m as f32 * 1e-6;
            f16::from_f32(if neg { -m } else { m })
        }),
        1 => Just(f16::ZERO),
        1 => (1u16..0x400).prop_map(f16::from_bits),
        1 => (30_000u32..65_504).prop_map(|m| f16::from_f32(m as f32)),
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

/// `n` random blocks whose scale fields `patch` sets from two f16 scales drawn by
/// [`f16_scale`] (the code bits stay random, all-zero or all-ones).
pub(crate) fn blocks_with_scales<B: Pod + std::fmt::Debug>(
    n: usize,
    patch: fn(&mut B, f16, f16),
) -> impl Strategy<Value = Vec<B>> {
    (
        raw_blocks(size_of::<B>(), n),
        prop::collection::vec(f16_scale(), n),
        prop::collection::vec(f16_scale(), n),
    )
        .prop_map(move |(raw, d, m)| {
            let mut b: Vec<B> = blocks(&raw);
            for ((b, d), m) in b.iter_mut().zip(d).zip(m) {
                patch(b, d, m);
            }
            b
        })
}

/// Random weight rows of 1 to 9 blocks from [`blocks_with_scales`].
pub(crate) fn weight_blocks<B: Pod + std::fmt::Debug>(
    patch: fn(&mut B, f16, f16),
) -> impl Strategy<Value = Vec<B>> {
    (1usize..10).prop_flat_map(move |n| blocks_with_scales(n, patch))
}

/// A weight row from [`weight_blocks`] and an f32 activation row of matching length.
pub(crate) fn dot_case<W: VecDot + std::fmt::Debug>(
    patch: fn(&mut W, f16, f16),
) -> impl Strategy<Value = (Vec<W>, Vec<f32>)> {
    weight_blocks(patch).prop_flat_map(|w| {
        let n = w.len() * W::ELEMS;
        (Just(w), activations(n))
    })
}

/// Whether the AVX2 kernels can run here.
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx2() -> bool {
    crate::cpu::detected() >= crate::cpu::Isa::Avx2
}

/// Whether the AVX-512 kernels can run here.
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx512() -> bool {
    crate::cpu::has_avx512()
}

/// Checks the activation quantizer byte for byte on `act_<name>.input.f32` against each of
/// the outputs `act_<name>.<output>.bin` (ggml's reference and its CPU backend).
pub(crate) fn check_activation_fixtures<B: Quantize>(name: &str, outputs: &[&str]) {
    let x = fixture_f32(&format!("act_{name}.input.f32"));
    let got = quantize::<B>(&x);
    let got: &[u8] = bytemuck::cast_slice(&got);
    for output in outputs {
        assert_eq!(
            got,
            fixture(&format!("act_{name}.{output}.bin")),
            "{output}"
        );
    }
}

/// A bound on the min terms of a weight row against activations: they cancel against the
/// scaled codes, so rounding scales with them rather than with the (possibly small)
/// dequantized weights. Formats without min terms pass [`no_min_terms`].
pub(crate) type MinTerms<W> = fn(&[W], &[<W as VecDot>::Activation]) -> f32;

/// The [`MinTerms`] of a format that has none.
pub(crate) fn no_min_terms<W: VecDot>(_: &[W], _: &[W::Activation]) -> f32 {
    0.0
}

/// The [`MinTerms`] of a [`ScaleMinK`] format (Q4_K, Q5_K): `sum |dmin * m_j| * |a_i|` over
/// the 6-bit sub-block mins `m_j` packed in its scales.
pub(crate) fn packed_mins_magnitude<W: ScaleMinK>(w: &[W], a: &[BlockQ8K]) -> f32 {
    let a = dequantize(a);
    let mut sum = 0.0f64;
    for (b, a) in w.iter().zip(a.chunks_exact(256)) {
        let (_, dmin, scales) = b.header();
        for (j, a) in a.chunks_exact(32).enumerate() {
            let (_, m) = super::util::scale_min_k4(j, scales);
            let mins = (dmin.to_f32() * m as f32).abs() as f64;
            sum += mins * a.iter().map(|v| v.abs() as f64).sum::<f64>();
        }
    }
    sum as f32
}

/// Checks the reference dot product of `w` and `x` (quantized to `W::Activation`) against the
/// dequantized dot, as [`assert_reference_dot`] with `min_terms` as the extra magnitude.
pub(crate) fn check_reference_dot<W: VecDot>(w: &[W], x: &[f32], min_terms: MinTerms<W>) {
    let a = quantize::<W::Activation>(x);
    assert_reference_dot(w, &a, min_terms(w, &a));
}

/// `n` test values spread deterministically over a range: `((i · step) mod modulus − centre) /
/// scale` for `i` in `0..n`.
pub(crate) fn spread_values(
    n: usize,
    step: usize,
    modulus: usize,
    centre: f32,
    scale: f32,
) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * step % modulus) as f32 - centre) / scale)
        .collect()
}

/// How a SIMD dot kernel must agree with the reference dot product.
#[derive(Clone, Copy)]
pub(crate) enum DotMatch<W: VecDot> {
    /// Within [`DOT_RTOL`] of the dot magnitude plus twice these min terms (and, on AArch64,
    /// the dot-product-extension kernel gives the NEON kernel's bits).
    Close(MinTerms<W>),
    /// Bit for bit: for kernels whose integer sums are exact and whose float steps are the
    /// reference's (the format has no min terms).
    Exact,
}

impl<W: VecDot> DotMatch<W> {
    /// The min terms the reference dot product is checked with.
    pub(crate) fn min_terms(self) -> MinTerms<W> {
        match self {
            DotMatch::Close(min_terms) => min_terms,
            DotMatch::Exact => no_min_terms,
        }
    }
}

/// Where AVX2 runs, checks the kernel `avx2` against the reference dot product of `w` and `x`
/// (quantized to `W::Activation`) as `want` says.
#[cfg(target_arch = "x86_64")]
pub(crate) fn check_avx2_dot<W: VecDot>(
    w: &[W],
    x: &[f32],
    avx2: unsafe fn(&[W], &[W::Activation]) -> f32,
    want: DotMatch<W>,
) {
    if !has_avx2() {
        return;
    }
    let a = quantize::<W::Activation>(x);
    // SAFETY: AVX2, FMA and F16C were detected just above, all an AVX2 dot kernel needs.
    let simd = unsafe { avx2(w, &a) };
    match want {
        DotMatch::Close(min_terms) => {
            let magnitude = dot_magnitude(w, &a) + 2.0 * min_terms(w, &a);
            assert_dot_close(simd, W::vec_dot(w, &a), magnitude);
        }
        DotMatch::Exact => assert_same_dot(simd, W::vec_dot(w, &a), "simd"),
    }
}

/// Checks that the dot product `got` is `reference` bit for bit (any NaN matching any NaN).
fn assert_same_dot(got: f32, reference: f32, what: &str) {
    assert!(
        got.to_bits() == reference.to_bits() || (got.is_nan() && reference.is_nan()),
        "{what} {got} vs reference {reference}"
    );
}

/// A NEON dot kernel under test.
#[cfg(target_arch = "aarch64")]
pub(crate) type NeonDot<W> = unsafe fn(&[W], &[<W as VecDot>::Activation]) -> f32;

/// Checks the NEON kernel `neon` against the reference dot product of `w` and `x` (quantized
/// to `W::Activation`) as `want` says, and, where the CPU has the dot-product extension,
/// `dotprod` too: against the reference bit for bit when `want` is [`DotMatch::Exact`], else
/// against `neon`'s bits.
#[cfg(target_arch = "aarch64")]
pub(crate) fn check_neon_dots<W: VecDot>(
    w: &[W],
    x: &[f32],
    neon: NeonDot<W>,
    dotprod: NeonDot<W>,
    want: DotMatch<W>,
) {
    use crate::cpu::{Isa, detected};
    let a = quantize::<W::Activation>(x);
    let reference = W::vec_dot(w, &a);
    // SAFETY: every AArch64 CPU has NEON, all the plain NEON kernels need.
    let got = unsafe { neon(w, &a) };
    match want {
        DotMatch::Close(min_terms) => {
            let magnitude = dot_magnitude(w, &a) + 2.0 * min_terms(w, &a);
            assert_dot_close(got, reference, magnitude);
        }
        DotMatch::Exact => assert_same_dot(got, reference, "NEON kernel"),
    }
    if detected() >= Isa::Dotprod {
        // SAFETY: the dot-product extension was detected just above.
        let with_sdot = unsafe { dotprod(w, &a) };
        match want {
            DotMatch::Close(_) => {
                assert_bits_eq(&[with_sdot], &[got], "dotprod kernel against the NEON one");
            }
            DotMatch::Exact => assert_same_dot(with_sdot, reference, "dotprod kernel"),
        }
    }
}

/// How the tests read and set the f16 scale `d` and min `m` of an affine block (`d * q + m`)
/// dotted against Q8_1.
#[derive(Clone, Copy)]
pub(crate) struct AffineScales<W> {
    /// The block's `(d, m)`.
    pub(crate) get: fn(&W) -> (f16, f16),
    /// Sets the block's `d` and `m`.
    pub(crate) set: fn(&mut W, f16, f16),
}

/// Quantizes `x` to Q8_1, rejecting the case where a block's f16 sum `s` overflows: activations
/// whose code sum times scale passes 65504 overflow it, in ggml too. That is a limit of the
/// format, not something these tests can check.
fn q8_1_with_finite_sums(x: &[f32]) -> Result<Vec<BlockQ8_1>, TestCaseError> {
    let a = quantize::<BlockQ8_1>(x);
    prop_assume!(a.iter().all(|b| b.s.is_finite()));
    Ok(a)
}

/// Checks the reference dot product of an affine `w` against the exact dot. Q8_1 carries its
/// own rounded sum `s` (which stays non-zero even when the f16 scale underflows), so the exact
/// value pairs the min with `s` just as ggml's dot product does; the scaled codes are checked
/// against the dequantized weights.
pub(crate) fn check_affine_reference_dot<W: VecDot<Activation = BlockQ8_1>>(
    w: &[W],
    x: &[f32],
    scales: AffineScales<W>,
) -> Result<(), TestCaseError> {
    let a = q8_1_with_finite_sums(x)?;
    let (dw, da) = (dequantize(w), dequantize(&a));
    let (mut exact, mut magnitude) = (0.0f64, 0.0f64);
    for ((b, ab), (wv, av)) in w.iter().zip(&a).zip(dw.chunks(32).zip(da.chunks(32))) {
        let (m, s) = ((scales.get)(b).1.to_f32() as f64, ab.s.to_f32() as f64);
        for (&wi, &ai) in wv.iter().zip(av) {
            exact += (wi as f64 - m) * ai as f64;
            magnitude += (wi as f64 - m).abs() * (ai as f64).abs() + m.abs() * (ai as f64).abs();
        }
        exact += m * s;
        magnitude += (m * s).abs();
    }
    let got = W::vec_dot(w, &a) as f64;
    prop_assert!(
        (got - exact).abs() <= 1e-4 * magnitude + 1e-30,
        "{got} vs {exact}"
    );
    Ok(())
}

/// `sum |d_w d_a| * |q_w| * |q_a| + |m * s|` over blocks: the scale of the rounding of both the
/// code sums and the min terms, which the SIMD kernel adds in another order.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn affine_magnitude<W: BlockFormat>(w: &[W], a: &[BlockQ8_1], scales: AffineScales<W>) -> f32 {
    let mut sum = 0.0f64;
    let mut codes = vec![0.0f32; W::ELEMS];
    for (x, y) in w.iter().zip(a) {
        let mut unit = *x;
        (scales.set)(&mut unit, f16::ONE, f16::ZERO);
        unit.dequantize(&mut codes);
        let (d, m) = (scales.get)(x);
        let d = (d.to_f32() as f64 * y.d.to_f32() as f64).abs();
        let q: f64 = codes
            .iter()
            .zip(&y.qs)
            .map(|(c, &v)| (*c as f64 * v as f64).abs())
            .sum();
        sum += d * q + (m.to_f32() as f64 * y.s.to_f32() as f64).abs();
    }
    sum as f32
}

/// Where AVX2 runs, checks the kernel `avx2` of an affine `w` against the reference dot
/// product within [`DOT_RTOL`] of [`affine_magnitude`].
#[cfg(target_arch = "x86_64")]
pub(crate) fn check_affine_avx2_dot<W: VecDot<Activation = BlockQ8_1>>(
    w: &[W],
    x: &[f32],
    avx2: unsafe fn(&[W], &[BlockQ8_1]) -> f32,
    scales: AffineScales<W>,
) -> Result<(), TestCaseError> {
    if !has_avx2() {
        return Ok(());
    }
    let a = q8_1_with_finite_sums(x)?;
    // SAFETY: AVX2, FMA and F16C were detected just above, all an AVX2 dot kernel needs.
    let simd = unsafe { avx2(w, &a) };
    assert_dot_close(simd, W::vec_dot(w, &a), affine_magnitude(w, &a, scales));
    Ok(())
}

/// [`check_neon_dots`] for an affine `w` against Q8_1, within [`DOT_RTOL`] of
/// [`affine_magnitude`].
#[cfg(target_arch = "aarch64")]
pub(crate) fn check_affine_neon_dots<W: VecDot<Activation = BlockQ8_1>>(
    w: &[W],
    x: &[f32],
    neon: NeonDot<W>,
    dotprod: NeonDot<W>,
    scales: AffineScales<W>,
) -> Result<(), TestCaseError> {
    use crate::cpu::{Isa, detected};
    let a = q8_1_with_finite_sums(x)?;
    // SAFETY: every AArch64 CPU has NEON, all the plain NEON kernels need.
    let got = unsafe { neon(w, &a) };
    assert_dot_close(got, W::vec_dot(w, &a), affine_magnitude(w, &a, scales));
    if detected() >= Isa::Dotprod {
        // SAFETY: the dot-product extension was detected just above.
        let with_sdot = unsafe { dotprod(w, &a) };
        assert_bits_eq(&[with_sdot], &[got], "dotprod kernel against the NEON one");
    }
    Ok(())
}

/// Stamps out the fixture tests of block format `$block`, whose files are named `$name`:
/// - `dequantize`: the reference dequantizer matches llama.cpp bit for bit on both fixture sets
///   (random blocks and the reference quantizer's output);
/// - `dequantize, quantize`: that, and the reference quantizer matches ggml byte for byte;
/// - `dequantize_random_blocks`: the dequantizer matches gguf's numpy one on random blocks
///   (for formats without a reference quantizer fixture).
macro_rules! fixture_tests {
    ($block:ty, $name:literal, dequantize) => {
        #[test]
        fn dequantize_matches_llama_cpp_bit_exact() {
            $crate::quant::testing::check_dequant_fixtures::<$block>($name, true);
        }
    };
    ($block:ty, $name:literal, dequantize, quantize) => {
        $crate::quant::testing::fixture_tests!($block, $name, dequantize);

        #[test]
        fn quantize_matches_ggml_reference_bit_exact() {
            $crate::quant::testing::check_quantize_fixture::<$block>($name);
        }
    };
    ($block:ty, $name:literal, dequantize_random_blocks) => {
        #[test]
        fn dequantize_matches_gguf_numpy_bit_exact() {
            $crate::quant::testing::check_dequant_fixtures::<$block>($name, false);
        }
    };
}
pub(crate) use fixture_tests;

/// Stamps out the dot-product properties of weight format `$block` on rows from
/// [`dot_case`], whose random f16 scales go to the fields `scales: [..]` (`d` and, for formats
/// with one, the min scale): the reference dot product matches the dequantized dot
/// ([`check_reference_dot`]) and the AVX2 kernel `avx2` matches the reference
/// ([`check_avx2_dot`]), both allowing for `min_terms`; with `neon: module`, the module's NEON
/// kernels do too ([`check_neon_dots`]).
macro_rules! dot_tests {
    (
        $block:ty,
        scales: [$d:ident $(, $m:ident)?],
        avx2: $avx2:expr,
        min_terms: $min_terms:expr
        $(, neon: $neon:ident)? $(,)?
    ) => {
        $crate::quant::testing::dot_tests!(
            @cases $block,
            |b, d, _m| {
                b.$d = d;
                $(b.$m = _m;)?
            },
            $avx2,
            $crate::quant::testing::DotMatch::Close($min_terms)
            $(, $neon)?
        );
    };
    (@cases $block:ty, $patch:expr, $avx2:expr, $want:expr $(, $neon:ident)?) => {
        fn dot_operands()
        -> impl ::proptest::strategy::Strategy<Value = (Vec<$block>, Vec<f32>)> {
            $crate::quant::testing::dot_case::<$block>($patch)
        }

        /// How the SIMD kernels must agree with the reference.
        fn want() -> $crate::quant::testing::DotMatch<$block> {
            $want
        }

        ::proptest::proptest! {
            #[test]
            fn reference_dot_matches_dequantized_dot((w, x) in dot_operands()) {
                $crate::quant::testing::check_reference_dot(&w, &x, want().min_terms());
            }

            #[cfg(target_arch = "x86_64")]
            #[test]
            fn avx2_dot_matches_reference((w, x) in dot_operands()) {
                $crate::quant::testing::check_avx2_dot(&w, &x, $avx2, want());
            }

            $(
                #[cfg(target_arch = "aarch64")]
                #[test]
                fn neon_dots_match_reference((w, x) in dot_operands()) {
                    $crate::quant::testing::check_neon_dots(
                        &w,
                        &x,
                        $neon::vec_dot_neon,
                        $neon::vec_dot_dotprod,
                        want(),
                    );
                }
            )?
        }
    };
}
pub(crate) use dot_tests;

/// The dot-product properties of weight format `$block` whose SIMD kernels are bit-exact: on
/// rows from [`dot_case`] (random, all-zero and all-ones code bits; `$patch` sets the block
/// `$b`'s scale from the drawn f16 `$d`), the reference dot product matches the dequantized dot
/// ([`check_reference_dot`]), and the AVX2 kernel `$avx2` and, with `neon: module`, the
/// module's NEON kernels give the reference's bits ([`DotMatch::Exact`]).
macro_rules! exact_dot_tests {
    (
        $block:ty,
        scale: |$b:ident, $d:ident| $patch:expr,
        avx2: $avx2:expr
        $(, neon: $neon:ident)? $(,)?
    ) => {
        $crate::quant::testing::dot_tests!(
            @cases $block,
            |$b, $d, _| $patch,
            $avx2,
            $crate::quant::testing::DotMatch::Exact
            $(, $neon)?
        );
    };
}
pub(crate) use exact_dot_tests;

/// [`dot_tests`] for an affine format `$block` (fields `d` and `m`) dotted against Q8_1:
/// [`check_affine_reference_dot`] and [`check_affine_avx2_dot`] with the kernel `$avx2`, and
/// with `neon: module`, [`check_affine_neon_dots`] with the module's NEON kernels.
macro_rules! affine_dot_tests {
    ($block:ty, avx2: $avx2:expr $(, neon: $neon:ident)? $(,)?) => {
        const SCALES: $crate::quant::testing::AffineScales<$block> =
            $crate::quant::testing::AffineScales {
                get: |b| (b.d, b.m),
                set: |b, d, m| (b.d, b.m) = (d, m),
            };

        ::proptest::proptest! {
            #[test]
            fn reference_dot_matches_dequantized_dot(
                (w, x) in $crate::quant::testing::dot_case::<$block>(SCALES.set)
            ) {
                $crate::quant::testing::check_affine_reference_dot(&w, &x, SCALES)?;
            }

            #[cfg(target_arch = "x86_64")]
            #[test]
            fn avx2_dot_matches_reference(
                (w, x) in $crate::quant::testing::dot_case::<$block>(SCALES.set)
            ) {
                $crate::quant::testing::check_affine_avx2_dot(&w, &x, $avx2, SCALES)?;
            }

            $(
                #[cfg(target_arch = "aarch64")]
                #[test]
                fn neon_dots_match_reference(
                    (w, x) in $crate::quant::testing::dot_case::<$block>(SCALES.set)
                ) {
                    $crate::quant::testing::check_affine_neon_dots(
                        &w,
                        &x,
                        $neon::vec_dot_neon,
                        $neon::vec_dot_dotprod,
                        SCALES,
                    )?;
                }
            )?
        }
    };
}
pub(crate) use affine_dot_tests;

/// Checks that quantizing `x` and decoding it back lands within `rtol` of each block's largest
/// magnitude, for formats without a ggml quantizer fixture.
pub(crate) fn check_quantize_round_trip<B: Quantize>(x: &[f32], rtol: f32) {
    let back = dequantize(&quantize::<B>(x));
    for (i, (xb, bb)) in x.chunks(B::ELEMS).zip(back.chunks(B::ELEMS)).enumerate() {
        let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        for (v, b) in xb.iter().zip(bb) {
            assert!(
                (v - b).abs() <= rtol * amax,
                "block {i}: {v} came back as {b}"
            );
        }
    }
}

/// A SIMD row quantizer under test.
#[cfg(target_arch = "x86_64")]
pub(crate) type RowQuantizer<B> = unsafe fn(&[f32], &mut [B]);

/// Checks an AVX-512 row quantizer byte for byte against [`Quantize::quantize`] on `x`
/// (whole blocks), or skips with a message where the CPU has no AVX-512.
#[cfg(target_arch = "x86_64")]
pub(crate) fn check_row_quantizer<B: Quantize>(simd: RowQuantizer<B>, x: &[f32]) {
    if !has_avx512() {
        eprintln!("skipped: this CPU has no AVX-512");
        return;
    }
    let mut got = vec![B::zeroed(); x.len() / B::ELEMS];
    // SAFETY: AVX-512 was detected above.
    unsafe { simd(x, &mut got) };
    for (i, (g, x)) in got.iter().zip(x.chunks_exact(B::ELEMS)).enumerate() {
        let want = B::quantize(x);
        assert_eq!(
            bytemuck::bytes_of(g),
            bytemuck::bytes_of(&want),
            "block {i} of {x:?}"
        );
    }
}

/// Rows of `n` values that test a quantizer's edges: zeros, ties of `+a` and `-a`, exact
/// halves, tiny and huge magnitudes, and NaN, infinities and subnormals among ordinary values
/// or alone.
#[cfg(target_arch = "x86_64")]
pub(crate) fn quantizer_edge_rows(n: usize) -> Vec<Vec<f32>> {
    let mut rows: Vec<Vec<f32>> = vec![
        vec![0.0; n],
        vec![-0.0; n],
        vec![1.0; n],
        (0..n).map(|i| (i % 256) as f32 - 128.0).collect(),
        (0..n)
            .map(|i| if i % 2 == 0 { 3.0 } else { -3.0 })
            .collect(),
        (0..n)
            .map(|i| if i % 2 == 0 { -3.0 } else { 3.0 })
            .collect(),
        (0..n).map(|i| (i % 64) as f32 * 0.5 - 16.0).collect(),
        (0..n).map(|i| (i % 255) as f32 - 127.0).collect(),
        vec![f32::MIN_POSITIVE / 8.0; n],
        vec![f32::MAX; n],
    ];
    for special in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e-42, -1e-42] {
        let mut row: Vec<f32> = (0..n).map(|i| (i as f32).sin()).collect();
        row[n / 3] = special;
        rows.push(row);
        let mut alone = vec![0.0; n];
        alone[n - 1] = special;
        rows.push(alone);
        let mut with_tiny = vec![1e-40; n];
        with_tiny[0] = special;
        rows.push(with_tiny);
    }
    rows
}
