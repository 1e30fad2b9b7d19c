use proptest::prelude::*;

use super::*;

fn values(n: usize) -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(
        prop_oneof![
            4 => -8.0f32..8.0,
            1 => -100.0f32..100.0,
            1 => prop::sample::select(vec![0.0f32, -0.0, 1e-30, -1e-30, 1e-7, 88.0, -88.0, 200.0, -200.0]),
        ],
        n,
    )
}

fn case() -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
    (0usize..40).prop_flat_map(|n| (values(n), values(n)))
}

/// SIMD against reference: within a few ulp of the result, plus the reference's own rounding
/// in `1 + tanh(u)` (a few 1e-8 of `|gate · up|`, or of `|x|` without a gate, which leaves it 0
/// where the sigmoid form still has a tiny value), or both negligible (the clamped SIMD
/// exponential gives some 1e-36 where the reference underflows to 0).
fn assert_close(act: Activation, got: &[f32], want: &[f32], input: impl Fn(usize) -> f32) {
    for (i, (s, r)) in got.iter().zip(want).enumerate() {
        let tol = 4e-6 * r.abs().max(s.abs()) + 2e-7 * input(i).abs() + 1e-30;
        assert!(
            (s - r).abs() <= tol,
            "{act:?}[{i}]: simd {s} vs reference {r}"
        );
    }
}

/// [`assert_close`] for the gated activation `act` of `gate` and `up`.
fn check_gated(k: &VectorKernels, act: Activation, gate: &[f32], up: &[f32]) {
    let mut want = gate.to_vec();
    super::super::activation::gated_inplace(act, &mut want, up);
    let mut got = gate.to_vec();
    k.gated_inplace(act, &mut got, up);
    assert_close(act, &got, &want, |i| gate[i] * up[i]);
}

/// [`assert_close`] for the activation `act` of `x`, without a gate.
fn check_activated(k: &VectorKernels, act: Activation, x: &[f32]) {
    let mut want = x.to_vec();
    super::super::activation::apply(act, &mut want);
    let mut got = x.to_vec();
    k.activate_inplace(act, &mut got);
    assert_close(act, &got, &want, |i| x[i]);
}

proptest! {
    #[test]
    fn simd_activations_match_reference(x in (0usize..40).prop_flat_map(values)) {
        for k in simd_tables() {
            check_activated(&k, Activation::GeluTanh, &x);
            check_activated(&k, Activation::Silu, &x);
        }
    }

    #[test]
    fn simd_gated_activations_match_reference((gate, up) in case()) {
        let k = VectorKernels::detected();
        check_gated(k, Activation::Silu, &gate, &up);
        check_gated(k, Activation::GeluTanh, &gate, &up);
        check_gated(k, Activation::GeluErf, &gate, &up);
    }

}

fn same_bits(got: &[f32], want: &[f32]) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()))
}

/// The SIMD tables this CPU can run: each instruction set's above scalar, up to the detected one.
fn simd_tables() -> Vec<VectorKernels> {
    Isa::ALL[1..]
        .iter()
        .copied()
        .filter(|&isa| isa <= crate::cpu::detected())
        .map(VectorKernels::for_isa)
        .collect()
}

/// Checks that `dots` (a table's kernel for `H` queries against the same keys) gives each
/// query, on every table and the scalar one, the scores and maximum bits
/// [`scaled_dots_reference`] gives it alone.
fn check_heads<const H: usize>(
    queries: [&[f32]; H],
    keys: &[f32],
    scale: f32,
    dots: impl Fn(&VectorKernels, [&[f32]; H], &[f32], f32, [&mut [f32]; H]) -> [f32; H],
) -> Result<(), TestCaseError> {
    let n = keys.len().checked_div(queries[0].len()).unwrap_or(0);
    let mut want = [(); H].map(|_| vec![0.0; n]);
    let mut want_max = [0.0; H];
    for ((q, want), max) in queries.iter().zip(&mut want).zip(&mut want_max) {
        *max = scaled_dots_reference(q, keys, scale, want);
    }
    let scalar = VectorKernels::for_isa(Isa::Scalar);
    for k in simd_tables().iter().chain([&scalar]) {
        let mut got = [(); H].map(|_| vec![f32::NAN; n]);
        let got_max = dots(k, queries, keys, scale, got.each_mut().map(|g| &mut g[..]));
        for (g, w) in got.iter().zip(&want) {
            prop_assert!(same_bits(g, w));
        }
        prop_assert!(same_bits(&got_max, &want_max));
    }
    Ok(())
}

/// A query and up to 40 key rows as long as it (a vector width, a tail, or both).
fn rows_case() -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
    (0usize..150, 0usize..40).prop_flat_map(|(len, n)| (values(len), values(len * n)))
}

proptest! {
    #[test]
    fn scaled_dots_are_the_same_on_every_instruction_set(
        (q, keys) in rows_case(),
        scale in 0.01f32..2.0,
    ) {
        let n = if q.is_empty() { 0 } else { keys.len() / q.len() };
        let mut want = vec![0.0; n];
        let want_max = scaled_dots_reference(&q, &keys, scale, &mut want);
        for k in &simd_tables() {
        let mut got = vec![f32::NAN; n];
        let got_max = k.scaled_dots(&q, &keys, scale, &mut got);
        prop_assert!(same_bits(&got, &want), "{:?} vs {:?}", got, want);
        prop_assert!(same_bits(&[got_max], &[want_max]));
        prop_assert!(n > 0 || got_max == f32::NEG_INFINITY);
        // A key's score does not depend on the keys scored beside it.
        for j in 0..n {
            let mut alone = [0.0];
            k.scaled_dots(&q, &keys[j * q.len()..(j + 1) * q.len()], scale, &mut alone);
            prop_assert!(same_bits(&alone, &want[j..j + 1]));
        }
        }
        // And close to the exact dot product.
        for (kk, w) in keys.chunks_exact(q.len().max(1)).zip(&want) {
            let exact: f64 = q.iter().zip(kk).map(|(a, b)| *a as f64 * *b as f64).sum();
            let magnitude: f64 = q.iter().zip(kk).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum();
            let scale = scale as f64;
            prop_assert!((*w as f64 - exact * scale).abs() <= 1e-5 * magnitude * scale + 1e-30);
        }
    }

    #[test]
    fn scaled_dots_of_a_pair_are_each_querys_own(
        (q, keys) in rows_case(),
        scale in 0.01f32..2.0,
    ) {
        let other: Vec<f32> = q.iter().rev().map(|v| v * 0.5 - 1.0).collect();
        check_heads([&q, &other], &keys, scale, VectorKernels::scaled_dots_pair)?;
    }

    #[test]
    fn scaled_dots_of_a_quad_are_each_querys_own(
        (q, keys) in rows_case(),
        scale in 0.01f32..2.0,
    ) {
        let queries: [Vec<f32>; 4] =
            std::array::from_fn(|i| q.iter().map(|v| v * (i as f32 - 1.5)).collect());
        check_heads(queries.each_ref().map(|q| &q[..]), &keys, scale, VectorKernels::scaled_dots_quad)?;
    }

    #[test]
    fn axpy_rows_is_the_same_on_every_instruction_set(
        (y, rows) in rows_case(),
        w in prop::collection::vec(-10.0f32..10.0, 40),
    ) {
        let n = if y.is_empty() { 0 } else { rows.len() / y.len() };
        let mut want = y.clone();
        axpy_rows_reference(&w[..n], &rows, &mut want);
        for k in &simd_tables() {
            let mut got = y.clone();
            k.axpy_rows(&w[..n], &rows, &mut got);
            prop_assert!(same_bits(&got, &want));
            // Rows added in two calls give the bits of one call.
            let half = n / 2;
            let mut split = y.clone();
            k.axpy_rows(&w[..half], &rows[..half * y.len()], &mut split);
            k.axpy_rows(&w[half..n], &rows[half * y.len()..], &mut split);
            prop_assert!(same_bits(&split, &want));
        }
    }

    #[test]
    fn axpy_rows_pair_gives_each_output_the_bits_of_axpy_rows(
        (y, rows) in rows_case(),
        w in prop::collection::vec(-10.0f32..10.0, 80),
    ) {
        let n = if y.is_empty() { 0 } else { rows.len() / y.len() };
        let (w0, w1) = (&w[..n], &w[40..40 + n]);
        let mut want = [y.clone(), y.iter().map(|v| -v).collect::<Vec<f32>>()];
        axpy_rows_reference(w0, &rows, &mut want[0]);
        axpy_rows_reference(w1, &rows, &mut want[1]);
        for k in simd_tables().iter().chain([VectorKernels::for_isa(Isa::Scalar)].iter()) {
            let mut got = [y.clone(), y.iter().map(|v| -v).collect::<Vec<f32>>()];
            let [g0, g1] = &mut got;
            k.axpy_rows_pair([w0, w1], &rows, [g0, g1]);
            prop_assert!(same_bits(&got[0], &want[0]));
            prop_assert!(same_bits(&got[1], &want[1]));
        }
    }

    #[test]
    fn exp_shifted_is_within_a_few_ulp_of_the_reference(
        x in prop::collection::vec(-120.0f32..10.0, 0..40),
        max in -5.0f32..10.0,
    ) {
        let mut want = x.clone();
        exp_shifted_reference(&mut want, max);
        let mut got = x.clone();
        VectorKernels::detected().exp_shifted(&mut got, max);
        for (g, w) in got.iter().zip(&want) {
            prop_assert!((g - w).abs() <= 4e-7 * w.abs() + 1e-37, "{} vs {}", g, w);
        }
        // Each value's result is its own, wherever it stands in the slice.
        for (i, &v) in x.iter().enumerate() {
            let mut alone = [v];
            VectorKernels::detected().exp_shifted(&mut alone, max);
            prop_assert!(same_bits(&alone, &got[i..i + 1]));
        }
    }
}

#[test]
fn f16_to_f32_is_exact_on_every_instruction_set_for_every_f16() {
    // Every bit pattern, at every offset of a vector (and a tail).
    let src: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    let mut want = vec![0.0f32; src.len()];
    f16_to_f32_reference(&src, &mut want);
    for k in &simd_tables() {
        for skip in [0, 3] {
            let mut got = vec![0.0f32; src.len() - skip];
            k.f16_to_f32(&src[skip..], &mut got);
            assert!(
                got.iter()
                    .zip(&want[skip..])
                    .all(|(g, w)| g.to_bits() == w.to_bits())
            );
        }
    }
}

#[test]
fn scalar_table_is_the_reference() {
    let k = VectorKernels::for_isa(Isa::Scalar);
    let (gate, up) = (vec![0.5f32, -1.5, 3.0], vec![2.0f32, 1.0, -1.0]);
    let mut got = gate.clone();
    k.gated_inplace(Activation::GeluTanh, &mut got, &up);
    let want: Vec<f32> = gate
        .iter()
        .zip(&up)
        .map(|(g, u)| gelu_tanh(*g) * u)
        .collect();
    assert_eq!(got, want);
    let mut got = gate.clone();
    k.activate_inplace(Activation::GeluTanh, &mut got);
    let want: Vec<f32> = gate.iter().map(|&g| gelu_tanh(g)).collect();
    assert_eq!(got, want);
}
