use half::f16;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

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
/// in `1 + tanh(u)` (a few 1e-8 of `|gate · up|`, which leaves it 0 where the sigmoid form still
/// has a tiny value), or both negligible (the clamped SIMD exponential gives some 1e-36 where
/// the reference underflows to 0).
fn check_gated(k: &VectorKernels, act: Activation, gate: &[f32], up: &[f32]) {
    let mut want = gate.to_vec();
    super::super::activation::gated_inplace(act, &mut want, up);
    let mut got = gate.to_vec();
    k.gated_inplace(act, &mut got, up);
    for (i, (s, r)) in got.iter().zip(&want).enumerate() {
        let tol = 4e-6 * r.abs().max(s.abs()) + 2e-7 * (gate[i] * up[i]).abs() + 1e-30;
        assert!(
            (s - r).abs() <= tol,
            "{act:?}[{i}]: simd {s} vs reference {r}"
        );
    }
}

proptest! {
    #[test]
    fn simd_gated_activations_match_reference((gate, up) in case()) {
        let k = VectorKernels::detected();
        check_gated(k, Activation::Silu, &gate, &up);
        check_gated(k, Activation::GeluTanh, &gate, &up);
        check_gated(k, Activation::GeluErf, &gate, &up);
    }

    #[test]
    fn simd_axpy_matches_reference((x, y) in case(), a in -10.0f32..10.0) {
        let mut want = y.clone();
        axpy_reference(a, &x[..], &mut want);
        let mut got = y.clone();
        VectorKernels::detected().axpy(a, &x, &mut got);
        for (i, ((g, w), x)) in got.iter().zip(&want).zip(&x).enumerate() {
            // Fused and unfused differ by at most one rounding of the product.
            let tol = 1e-6 * (a * x).abs() + 1e-6 * w.abs() + 1e-37;
            prop_assert!((g - w).abs() <= tol, "axpy[{}]: {} vs {}", i, g, w);
        }
    }
}

fn rows4() -> impl Strategy<Value = (Vec<f32>, [Vec<f32>; 4])> {
    (0usize..70).prop_flat_map(|n| (values(n), [values(n), values(n), values(n), values(n)]))
}

proptest! {
    #[test]
    fn dot4_is_the_same_on_every_instruction_set((q, k) in rows4()) {
        let k = [&k[0][..], &k[1][..], &k[2][..], &k[3][..]];
        let want = dot4_reference(&q, k);
        let got = VectorKernels::detected().dot4(&q, k);
        for (g, w) in got.iter().zip(&want) {
            prop_assert!(g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()), "{} vs {}", g, w);
        }
        // And close to the exact dot product.
        for (kk, w) in k.iter().zip(&want) {
            let exact: f64 = q.iter().zip(*kk).map(|(a, b)| *a as f64 * *b as f64).sum();
            let magnitude: f64 = q.iter().zip(*kk).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum();
            prop_assert!((*w as f64 - exact).abs() <= 1e-5 * magnitude + 1e-30);
        }
    }

    #[test]
    fn axpy4_is_four_axpys((x, y) in rows4(), a in prop::array::uniform4(-10.0f32..10.0)) {
        let k = VectorKernels::detected();
        let y = &y[0];
        let x = [&x[..], &y[..], &x[..], &y[..]];
        let mut want = y.clone();
        for (a, x) in a.into_iter().zip(x) {
            k.axpy(a, x, &mut want);
        }
        let mut got = y.clone();
        k.axpy4(a, x, &mut got);
        prop_assert!(got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits()));
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
}

/// f16 values of every kind: ordinary, subnormal, zeros of both signs, ±65504, and any finite
/// bit pattern.
fn f16_values(n: usize) -> impl Strategy<Value = Vec<f16>> {
    let finite = any::<u16>()
        .prop_map(f16::from_bits)
        .prop_filter("finite", |v| v.is_finite());
    prop::collection::vec(
        prop_oneof![
            4 => (-8.0f32..8.0).prop_map(f16::from_f32),
            2 => finite,
            1 => prop::sample::select(vec![
                f16::ZERO, f16::NEG_ZERO, f16::MAX, f16::MIN,
                f16::MIN_POSITIVE_SUBNORMAL, f16::from_bits(0x83ff), f16::MIN_POSITIVE,
            ]),
        ],
        n,
    )
}

/// q8_0 blocks with any finite scale (subnormal and ±65504 among them) and any codes.
fn q8_0_blocks(blocks: usize) -> impl Strategy<Value = Vec<BlockQ8_0>> {
    let scale = prop_oneof![
        3 => (1e-3f32..0.1).prop_map(f16::from_f32),
        1 => prop::sample::select(vec![
            f16::ZERO, f16::MAX, f16::MIN, f16::MIN_POSITIVE_SUBNORMAL, f16::from_bits(0x8201),
        ]),
    ];
    prop::collection::vec(
        (scale, prop::array::uniform32(any::<i8>())).prop_map(|(d, qs)| BlockQ8_0 { d, qs }),
        blocks,
    )
}

fn decoded(row: KvRow<'_>) -> Vec<f32> {
    let mut out = vec![0.0; row.len()];
    row.decode(&mut out);
    out
}

fn same_bits(got: &[f32], want: &[f32]) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()))
}

/// On the scalar table and this CPU's: each kernel on `rows` read in place gives, bit for bit,
/// what the f32 kernel gives on the decoded rows.
fn check_rows_read_in_place(
    q: &[f32],
    a: [f32; 4],
    rows: [KvRow<'_>; 4],
) -> Result<(), TestCaseError> {
    let plain = rows.map(decoded);
    let plain_refs = [&plain[0][..], &plain[1][..], &plain[2][..], &plain[3][..]];
    for k in [
        &VectorKernels::for_isa(Isa::Scalar),
        VectorKernels::detected(),
    ] {
        let got = k.dot4_rows(q, rows);
        prop_assert!(same_bits(&got, &k.dot4(q, plain_refs)), "dot4 {:?}", got);
        prop_assert!(same_bits(&got, &dot4_reference(q, plain_refs)));
        let mut got = q.to_vec();
        k.axpy4_rows(a, rows, &mut got);
        let mut want = q.to_vec();
        k.axpy4(a, plain_refs, &mut want);
        prop_assert!(same_bits(&got, &want), "axpy4");
        let mut got = q.to_vec();
        k.axpy_row(a[0], rows[0], &mut got);
        let mut want = q.to_vec();
        k.axpy(a[0], plain_refs[0], &mut want);
        prop_assert!(same_bits(&got, &want), "axpy");
    }
    Ok(())
}

fn f16_case() -> impl Strategy<Value = (Vec<f32>, [Vec<f16>; 4])> {
    (0usize..70).prop_flat_map(|n| {
        (
            values(n),
            [f16_values(n), f16_values(n), f16_values(n), f16_values(n)],
        )
    })
}

fn q8_0_case() -> impl Strategy<Value = (Vec<f32>, [Vec<BlockQ8_0>; 4])> {
    (0usize..4).prop_flat_map(|blocks| {
        (
            values(blocks * 32),
            [
                q8_0_blocks(blocks),
                q8_0_blocks(blocks),
                q8_0_blocks(blocks),
                q8_0_blocks(blocks),
            ],
        )
    })
}

proptest! {
    #[test]
    fn f16_rows_read_in_place_match_the_f32_kernels_on_their_values(
        (q, k) in f16_case(),
        a in prop::array::uniform4(-10.0f32..10.0),
    ) {
        let rows = [0, 1, 2, 3].map(|i| KvRow::F16(&k[i]));
        check_rows_read_in_place(&q, a, rows)?;
    }

    #[test]
    fn q8_0_rows_read_in_place_match_the_f32_kernels_on_their_values(
        (q, k) in q8_0_case(),
        a in prop::array::uniform4(-10.0f32..10.0),
    ) {
        let rows = [0, 1, 2, 3].map(|i| KvRow::Q8_0(&k[i]));
        check_rows_read_in_place(&q, a, rows)?;
    }

    #[test]
    fn rows_of_mixed_types_match_the_f32_kernels_on_their_values(
        (q, k) in q8_0_case(),
        a in prop::array::uniform4(-10.0f32..10.0),
    ) {
        let plain: Vec<Vec<f32>> = k.iter().map(|r| decoded(KvRow::Q8_0(r))).collect();
        let halves: Vec<f16> = plain[1].iter().map(|&v| f16::from_f32(v)).collect();
        let rows = [KvRow::Q8_0(&k[0]), KvRow::F16(&halves), KvRow::F32(&plain[2]), KvRow::Q8_0(&k[3])];
        check_rows_read_in_place(&q, a, rows)?;
    }
}
