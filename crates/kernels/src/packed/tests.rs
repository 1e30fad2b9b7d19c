use proptest::prelude::*;

use super::q4_kx16::{self, BlockQ4Kx16};
use super::q5_0x16::{self, BlockQ5_0x16};
use super::q6_kx16::{self, BlockQ6Kx16};
use super::q8_0x16::{self, BlockQ8_0x16};
use super::rows::pack_rows;
use super::*;
use crate::dispatch::Kernels;
use crate::quant::q4_k::BlockQ4K;
use crate::quant::q5_0::BlockQ5_0;
use crate::quant::q6_k::BlockQ6K;
use crate::quant::q8_0::BlockQ8_0;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::testing::*;

/// `rows` random rows of `nb` Q5_0 blocks (codes random, all-zero or all-ones; scales from
/// [`f16_scale`]).
fn q5_0_rows(rows: usize, nb: usize) -> impl Strategy<Value = Vec<BlockQ5_0>> {
    (
        raw_blocks(size_of::<BlockQ5_0>(), rows * nb),
        prop::collection::vec(f16_scale(), rows * nb),
    )
        .prop_map(|(raw, d)| {
            let mut b: Vec<BlockQ5_0> = blocks(&raw);
            b.iter_mut().zip(d).for_each(|(b, d)| b.d = d);
            b
        })
}

/// `tokens` activation rows of `nb` blocks quantized to Q8_0, with their summaries.
fn q8_0_tokens(
    tokens: usize,
    nb: usize,
) -> impl Strategy<Value = (Vec<BlockQ8_0>, Vec<BlockSummary>)> {
    prop::collection::vec(activations(nb * 32), tokens).prop_map(|rows| {
        let a: Vec<BlockQ8_0> = rows.iter().flat_map(|x| quantize::<BlockQ8_0>(x)).collect();
        let s = a.iter().map(summary::q8_0).collect();
        (a, s)
    })
}

fn group_case() -> impl Strategy<Value = (Vec<BlockQ5_0>, usize, Vec<BlockQ8_0>, Vec<BlockSummary>)>
{
    (1usize..=ROWS, 1usize..6, 1usize..12).prop_flat_map(|(rows, nb, tokens)| {
        (q5_0_rows(rows, nb), Just(nb), q8_0_tokens(tokens, nb))
            .prop_map(|(w, nb, (a, s))| (w, nb, a, s))
    })
}

/// Packs row-major `w` (`nb` blocks per row) into one row group per sixteen rows.
fn pack_q5_0_rows(w: &[BlockQ5_0], nb: usize) -> Vec<BlockQ5_0x16> {
    let rows: Vec<&[BlockQ5_0]> = w.chunks(nb).collect();
    rows.chunks(ROWS)
        .flat_map(|group| {
            (0..nb).map(move |b| {
                let column: Vec<BlockQ5_0> = group.iter().map(|r| r[b]).collect();
                BlockQ5_0x16::pack(&column)
            })
        })
        .collect()
}

proptest! {
    #[test]
    fn packing_keeps_every_code_and_scale((w, nb, _, _) in group_case()) {
        let packed = pack_q5_0_rows(&w, nb);
        for (i, row) in w.chunks(nb).enumerate() {
            for (b, block) in row.iter().enumerate() {
                prop_assert_eq!(packed[b].d[i], block.d.to_bits());
                let codes: Vec<i32> = (0..32).map(|j| packed[b].code(i, j)).collect();
                prop_assert_eq!(codes, block.codes().to_vec());
            }
        }
        let rows = w.len() / nb;
        for (b, p) in packed.iter().enumerate() {
            for i in rows..ROWS {
                prop_assert_eq!(p.d[i], 0, "padding row {} of block {}", i, b);
                prop_assert!((0..32).all(|j| p.code(i, j) == 0));
            }
        }
    }

    #[test]
    fn reference_matches_dequantized_dot((w, nb, a, s) in group_case()) {
        let packed = pack_q5_0_rows(&w, nb);
        let tokens = a.len() / nb;
        let mut out = vec![[0.0; ROWS]; tokens];
        q5_0x16::dot_group(&packed, &a, &s, &mut out);
        for (t, out) in out.iter().enumerate() {
            for (i, row) in w.chunks(nb).enumerate() {
                let at = &a[t * nb..(t + 1) * nb];
                let magnitude = dot_magnitude(row, at) as f64;
                let (dw, da) = (dequantize(row), dequantize(at));
                let exact: f64 = dw.iter().zip(&da).map(|(x, y)| *x as f64 * *y as f64).sum();
                prop_assert!(
                    (out[i] as f64 - exact).abs() <= 1e-4 * magnitude + 1e-30,
                    "row {} token {}: {} vs {}", i, t, out[i], exact
                );
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_matches_reference_bit_exact((w, nb, a, s) in group_case()) {
        if has_avx512() {
            let packed = pack_q5_0_rows(&w, nb);
            let tokens = a.len() / nb;
            let mut want = vec![[0.0; ROWS]; tokens];
            q5_0x16::dot_group(&packed, &a, &s, &mut want);
            let mut got = vec![[0.0; ROWS]; tokens];
            // SAFETY: AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C were detected just above.
            unsafe { q5_0x16_avx512::dot_group(&packed, &a, &s, &mut got) };
            for (g, w) in got.iter().zip(&want) {
                assert_bits_eq(g, w, "packed Q5_0 AVX-512 vs reference");
            }
        }
    }
}

/// A deterministic `rows × cols` matrix of `ty` and `tokens` activation rows.
fn matrix_case(ty: GgmlType, rows: usize, cols: usize, tokens: usize) -> (Vec<u8>, Vec<f32>) {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let x: Vec<f32> = (0..rows * cols)
        .map(|_| (next() % 2001) as f32 / 1000.0 - 1.0)
        .collect();
    let w = match ty {
        GgmlType::Q5_0 => bytemuck::cast_slice(&quantize::<BlockQ5_0>(&x)).to_vec(),
        GgmlType::Q8_0 => bytemuck::cast_slice(&quantize::<BlockQ8_0>(&x)).to_vec(),
        GgmlType::Q4K => bytemuck::cast_slice(&quantize::<BlockQ4K>(&x)).to_vec(),
        _ => bytemuck::cast_slice(&quantize::<BlockQ6K>(&x)).to_vec(),
    };
    let acts = (0..tokens * cols)
        .map(|_| (next() % 2001) as f32 / 100.0 - 10.0)
        .collect();
    (w, acts)
}

/// `w` packed with the scalar reference kernel, and with this CPU's kernel where it has one.
fn packings_here(w: &WeightMatrix<'_>) -> Vec<(&'static str, PackedMatrix)> {
    let reference = match w.ty() {
        GgmlType::Q5_0 => PackedMatrix::pack_with::<BlockQ5_0x16>(w, q5_0x16::dot_group, &|_| {}),
        GgmlType::Q8_0 => PackedMatrix::pack_with::<BlockQ8_0x16>(w, q8_0x16::dot_group, &|_| {}),
        GgmlType::Q4K => PackedMatrix::pack_with::<BlockQ4Kx16>(w, q4_kx16::dot_group, &|_| {}),
        _ => PackedMatrix::pack_with::<BlockQ6Kx16>(w, q6_kx16::dot_group, &|_| {}),
    };
    let mut packings = vec![("reference", reference)];
    if let Some(simd) = Kernels::detected().pack(w) {
        packings.push(("simd", simd));
    }
    packings
}

#[test]
fn matmul_packed_is_the_same_for_any_batch_and_thread_count() {
    for ty in [GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q4K, GgmlType::Q6K] {
        check_batch_and_thread_invariance(ty);
    }
}

fn check_batch_and_thread_invariance(ty: GgmlType) {
    let (rows, cols, tokens) = (200, 512, 21);
    let (data, x) = matrix_case(ty, rows, cols, tokens);
    let w = WeightMatrix::new(ty, rows, cols, &data).unwrap();
    for (name, packed) in packings_here(&w) {
        let run = |threads: usize, x: &[f32], n: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut act = ActivationBuffer::for_matmul(n, cols, rows);
            let mut y = vec![0.0; n * rows];
            pool.install(|| matmul_packed(&packed, x, n, &mut act, &mut y))
                .unwrap();
            y
        };
        let batched = run(1, &x, tokens);
        for threads in [2, 3] {
            assert_bits_eq(&run(threads, &x, tokens), &batched, name);
        }
        let one_by_one: Vec<f32> = x.chunks(cols).flat_map(|x| run(2, x, 1)).collect();
        assert_bits_eq(&one_by_one, &batched, name);
        let mut act = ActivationBuffer::for_matmul(tokens, cols, rows);
        let mut row_major = vec![0.0; tokens * rows];
        crate::matmul(
            Kernels::detected(),
            &w,
            &x,
            tokens,
            &mut act,
            &mut row_major,
        )
        .unwrap();
        for (p, r) in batched.iter().zip(&row_major) {
            assert!(
                (p - r).abs() <= 1e-3 * r.abs().max(1.0),
                "{name}: packed {p} vs row-major {r}"
            );
        }
    }
}

#[test]
fn matmul_packed_checks_lengths_and_scratch() {
    let (data, x) = matrix_case(GgmlType::Q5_0, 32, 64, 2);
    let w = WeightMatrix::new(GgmlType::Q5_0, 32, 64, &data).unwrap();
    let packed = PackedMatrix::pack_with::<BlockQ5_0x16>(&w, q5_0x16::dot_group, &|_| {});
    let mut y = vec![0.0; 64];
    let mut small = ActivationBuffer::for_matvec(64);
    assert!(matches!(
        matmul_packed(&packed, &x, 2, &mut small, &mut y),
        Err(KernelError::ScratchTooSmall { .. })
    ));
    let mut act = ActivationBuffer::for_matmul(2, 64, 32);
    assert!(matches!(
        matmul_packed(&packed, &x[..10], 2, &mut act, &mut y),
        Err(KernelError::LengthMismatch { .. })
    ));
    assert!(matmul_packed(&packed, &x, 2, &mut act, &mut y).is_ok());
}

/// `rows` random rows of `nb` Q4_K super-blocks (codes and scales random, all-zero or
/// all-ones; scales from [`f16_scale`]).
fn q4_k_rows(rows: usize, nb: usize) -> impl Strategy<Value = Vec<BlockQ4K>> {
    (
        raw_blocks(size_of::<BlockQ4K>(), rows * nb),
        prop::collection::vec((f16_scale(), f16_scale()), rows * nb),
    )
        .prop_map(|(raw, d)| {
            let mut b: Vec<BlockQ4K> = blocks(&raw);
            b.iter_mut()
                .zip(d)
                .for_each(|(b, (d, m))| (b.d, b.dmin) = (d, m));
            b
        })
}

/// `tokens` activation rows of `nb` super-blocks quantized to Q8_K, with their summaries.
fn q8_k_tokens(
    tokens: usize,
    nb: usize,
) -> impl Strategy<Value = (Vec<BlockQ8K>, Vec<BlockSummary>)> {
    prop::collection::vec(activations(nb * 256), tokens).prop_map(|rows| {
        let a: Vec<BlockQ8K> = rows.iter().flat_map(|x| quantize::<BlockQ8K>(x)).collect();
        let mut s = vec![BlockSummary::default(); a.len() * 8];
        for (a, s) in a.iter().zip(s.chunks_mut(8)) {
            summary::q8_k(a, s);
        }
        (a, s)
    })
}

fn q4k_case() -> impl Strategy<Value = (Vec<BlockQ4K>, usize, Vec<BlockQ8K>, Vec<BlockSummary>)> {
    (1usize..=ROWS, 1usize..3, 1usize..7).prop_flat_map(|(rows, nb, tokens)| {
        (q4_k_rows(rows, nb), Just(nb), q8_k_tokens(tokens, nb))
            .prop_map(|(w, nb, (a, s))| (w, nb, a, s))
    })
}

/// Packs row-major Q4_K `w` (`nb` super-blocks per row, at most sixteen rows).
fn pack_q4k_rows(w: &[BlockQ4K], nb: usize) -> Vec<BlockQ4Kx16> {
    let rows: Vec<&[BlockQ4K]> = w.chunks(nb).collect();
    (0..nb)
        .map(|b| {
            let column: Vec<BlockQ4K> = rows.iter().map(|r| r[b]).collect();
            BlockQ4Kx16::pack(&column)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn q4k_packing_keeps_every_code_scale_and_min((w, nb, _, _) in q4k_case()) {
        let packed = pack_q4k_rows(&w, nb);
        for (i, row) in w.chunks(nb).enumerate() {
            for (b, block) in row.iter().enumerate() {
                let deq = dequantize(std::slice::from_ref(block));
                let p = &packed[b];
                let (d, dmin) = (block.d.to_f32(), block.dmin.to_f32());
                for j in 0..8 {
                    for l in 0..32 {
                        let want = deq[32 * j + l];
                        let got = d * p.sc[j][i] as f32 * p.code(i, j, l) as f32
                            - dmin * p.m[j / 2][2 * i + j % 2] as f32;
                        prop_assert!(got == want || (got - want).abs() <= 1e-6 * want.abs());
                    }
                }
            }
        }
    }

    #[test]
    fn q4k_reference_matches_dequantized_dot((w, nb, a, s) in q4k_case()) {
        let packed = pack_q4k_rows(&w, nb);
        let tokens = a.len() / nb;
        let mut out = vec![[0.0; ROWS]; tokens];
        q4_kx16::dot_group(&packed, &a, &s, &mut out);
        for (t, out) in out.iter().enumerate() {
            for (i, row) in w.chunks(nb).enumerate() {
                let at = &a[t * nb..(t + 1) * nb];
                let (dw, da) = (dequantize(row), dequantize(at));
                let exact: f64 = dw.iter().zip(&da).map(|(x, y)| *x as f64 * *y as f64).sum();
                let magnitude: f64 = dw.iter().zip(&da).map(|(x, y)| (*x as f64 * *y as f64).abs()).sum::<f64>()
                    + row.iter().map(|b| b.dmin.to_f32().abs() as f64 * 63.0 * 8.0 * 4064.0).sum::<f64>() * at[0].d.abs() as f64;
                prop_assert!(
                    (out[i] as f64 - exact).abs() <= 1e-4 * magnitude + 1e-30,
                    "row {} token {}: {} vs {}", i, t, out[i], exact
                );
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn q4k_avx512_matches_reference_bit_exact((w, nb, a, s) in q4k_case()) {
        if has_avx512() {
            let packed = pack_q4k_rows(&w, nb);
            let tokens = a.len() / nb;
            let mut want = vec![[0.0; ROWS]; tokens];
            q4_kx16::dot_group(&packed, &a, &s, &mut want);
            let mut got = vec![[0.0; ROWS]; tokens];
            // SAFETY: AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C were detected just above.
            unsafe { q4_kx16_avx512::dot_group(&packed, &a, &s, &mut got) };
            for (g, w) in got.iter().zip(&want) {
                assert_bits_eq(g, w, "packed Q4_K AVX-512 vs reference");
            }
        }
    }
}

/// `rows` random rows of `nb` Q6_K super-blocks (codes and group scales random, all-zero or
/// all-ones; super-scales from [`f16_scale`]).
fn q6_k_rows(rows: usize, nb: usize) -> impl Strategy<Value = Vec<BlockQ6K>> {
    (
        raw_blocks(size_of::<BlockQ6K>(), rows * nb),
        prop::collection::vec(f16_scale(), rows * nb),
    )
        .prop_map(|(raw, d)| {
            let mut b: Vec<BlockQ6K> = blocks(&raw);
            b.iter_mut().zip(d).for_each(|(b, d)| b.d = d);
            b
        })
}

fn q6k_case() -> impl Strategy<Value = (Vec<BlockQ6K>, usize, Vec<BlockQ8K>, Vec<BlockSummary>)> {
    (1usize..=ROWS, 1usize..3, 1usize..7).prop_flat_map(|(rows, nb, tokens)| {
        (q6_k_rows(rows, nb), Just(nb), q8_k_tokens(tokens, nb))
            .prop_map(|(w, nb, (a, s))| (w, nb, a, s))
    })
}

/// Packs row-major Q6_K `w` (`nb` super-blocks per row, at most sixteen rows).
fn pack_q6k_rows(w: &[BlockQ6K], nb: usize) -> Vec<BlockQ6Kx16> {
    let rows: Vec<&[BlockQ6K]> = w.chunks(nb).collect();
    (0..nb)
        .map(|b| {
            let column: Vec<BlockQ6K> = rows.iter().map(|r| r[b]).collect();
            BlockQ6Kx16::pack(&column)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn q6k_packing_keeps_every_code_and_scale((w, nb, _, _) in q6k_case()) {
        let packed = pack_q6k_rows(&w, nb);
        for (i, row) in w.chunks(nb).enumerate() {
            for (b, block) in row.iter().enumerate() {
                prop_assert_eq!(packed[b].d[i], block.d.to_bits());
                for (g, &sc) in block.scales.iter().enumerate() {
                    prop_assert_eq!(packed[b].sc[g][i], sc);
                }
                let codes: Vec<i32> = (0..256).map(|c| packed[b].code(i, c) - 32).collect();
                let want: Vec<i32> = block.codes().iter().map(|&q| q as i32).collect();
                prop_assert_eq!(codes, want);
            }
        }
    }

    #[test]
    fn q6k_reference_matches_dequantized_dot((w, nb, a, s) in q6k_case()) {
        let packed = pack_q6k_rows(&w, nb);
        let tokens = a.len() / nb;
        let mut out = vec![[0.0; ROWS]; tokens];
        q6_kx16::dot_group(&packed, &a, &s, &mut out);
        for (t, out) in out.iter().enumerate() {
            for (i, row) in w.chunks(nb).enumerate() {
                let at = &a[t * nb..(t + 1) * nb];
                let magnitude = dot_magnitude(row, at) as f64;
                let (dw, da) = (dequantize(row), dequantize(at));
                let exact: f64 = dw.iter().zip(&da).map(|(x, y)| *x as f64 * *y as f64).sum();
                prop_assert!(
                    (out[i] as f64 - exact).abs() <= 1e-4 * magnitude + 1e-30,
                    "row {} token {}: {} vs {}", i, t, out[i], exact
                );
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn q6k_avx512_matches_reference_bit_exact((w, nb, a, s) in q6k_case()) {
        if has_avx512() {
            let packed = pack_q6k_rows(&w, nb);
            let tokens = a.len() / nb;
            let mut want = vec![[0.0; ROWS]; tokens];
            q6_kx16::dot_group(&packed, &a, &s, &mut want);
            let mut got = vec![[0.0; ROWS]; tokens];
            // SAFETY: AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C were detected just above.
            unsafe { q6_kx16_avx512::dot_group(&packed, &a, &s, &mut got) };
            for (g, w) in got.iter().zip(&want) {
                assert_bits_eq(g, w, "packed Q6_K AVX-512 vs reference");
            }
        }
    }
}

/// `rows` random rows of `nb` Q8_0 blocks (codes random, all-zero or all-ones, which is -1;
/// scales from [`f16_scale`]).
fn q8_0_rows(rows: usize, nb: usize) -> impl Strategy<Value = Vec<BlockQ8_0>> {
    (
        raw_blocks(size_of::<BlockQ8_0>(), rows * nb),
        prop::collection::vec(f16_scale(), rows * nb),
    )
        .prop_map(|(raw, d)| {
            let mut b: Vec<BlockQ8_0> = blocks(&raw);
            b.iter_mut().zip(d).for_each(|(b, d)| b.d = d);
            b
        })
}

fn q8_0_case() -> impl Strategy<Value = (Vec<BlockQ8_0>, usize, Vec<BlockQ8_0>, Vec<BlockSummary>)>
{
    (1usize..=ROWS, 1usize..6, 1usize..12).prop_flat_map(|(rows, nb, tokens)| {
        (q8_0_rows(rows, nb), Just(nb), q8_0_tokens(tokens, nb))
            .prop_map(|(w, nb, (a, s))| (w, nb, a, s))
    })
}

/// Packs row-major Q8_0 `w` (`nb` blocks per row, at most sixteen rows).
fn pack_q8_0_rows(w: &[BlockQ8_0], nb: usize) -> Vec<BlockQ8_0x16> {
    let rows: Vec<&[BlockQ8_0]> = w.chunks(nb).collect();
    (0..nb)
        .map(|b| {
            let column: Vec<BlockQ8_0> = rows.iter().map(|r| r[b]).collect();
            BlockQ8_0x16::pack(&column)
        })
        .collect()
}

proptest! {
    #[test]
    fn q8_0_packing_keeps_every_code_and_scale((w, nb, _, _) in q8_0_case()) {
        let packed = pack_q8_0_rows(&w, nb);
        for (i, row) in w.chunks(nb).enumerate() {
            for (b, block) in row.iter().enumerate() {
                prop_assert_eq!(packed[b].d[i], block.d.to_bits());
                let codes: Vec<i32> = (0..32).map(|j| packed[b].code(i, j) - 128).collect();
                let want: Vec<i32> = block.qs.iter().map(|&q| q as i32).collect();
                prop_assert_eq!(codes, want);
            }
        }
    }

    #[test]
    fn q8_0_reference_matches_dequantized_dot((w, nb, a, s) in q8_0_case()) {
        let packed = pack_q8_0_rows(&w, nb);
        let tokens = a.len() / nb;
        let mut out = vec![[0.0; ROWS]; tokens];
        q8_0x16::dot_group(&packed, &a, &s, &mut out);
        for (t, out) in out.iter().enumerate() {
            for (i, row) in w.chunks(nb).enumerate() {
                let at = &a[t * nb..(t + 1) * nb];
                let magnitude = dot_magnitude(row, at) as f64;
                let (dw, da) = (dequantize(row), dequantize(at));
                let exact: f64 = dw.iter().zip(&da).map(|(x, y)| *x as f64 * *y as f64).sum();
                prop_assert!(
                    (out[i] as f64 - exact).abs() <= 1e-4 * magnitude + 1e-30,
                    "row {} token {}: {} vs {}", i, t, out[i], exact
                );
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn q8_0_avx512_matches_reference_bit_exact((w, nb, a, s) in q8_0_case()) {
        if has_avx512() {
            let packed = pack_q8_0_rows(&w, nb);
            let tokens = a.len() / nb;
            let mut want = vec![[0.0; ROWS]; tokens];
            q8_0x16::dot_group(&packed, &a, &s, &mut want);
            let mut got = vec![[0.0; ROWS]; tokens];
            // SAFETY: AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C were detected just above.
            unsafe { q8_0x16_avx512::dot_group(&packed, &a, &s, &mut got) };
            for (g, w) in got.iter().zip(&want) {
                assert_bits_eq(g, w, "packed Q8_0 AVX-512 vs reference");
            }
        }
    }
}

#[test]
fn packing_releases_every_source_byte_once() {
    let (rows, cols) = (1000, 4096);
    let (data, _) = matrix_case(GgmlType::Q8_0, rows, cols, 0);
    let w = WeightMatrix::new(GgmlType::Q8_0, rows, cols, &data).unwrap();
    let released = std::sync::Mutex::new(Vec::new());
    let _ = pack_rows::<BlockQ8_0x16>(&w, q8_0x16::dot_group, &|r: Range<usize>| {
        released.lock().unwrap().push(r)
    });
    let released = released.into_inner().unwrap();
    assert!(released.len() > 1, "one release per slab: {released:?}");
    for pair in released.windows(2) {
        assert_eq!(pair[0].end, pair[1].start);
    }
    assert_eq!(released.first().map(|r| r.start), Some(0));
    assert_eq!(released.last().map(|r| r.end), Some(data.len()));
}

#[test]
fn misaligned_rows_pack_the_same() {
    let (rows, cols) = (40, 512);
    let (data, _) = matrix_case(GgmlType::Q4K, rows, cols, 0);
    let mut shifted = vec![0u8; data.len() + 1];
    shifted[1..].copy_from_slice(&data);
    let aligned = WeightMatrix::new(GgmlType::Q4K, rows, cols, &data).unwrap();
    let misaligned = WeightMatrix::new(GgmlType::Q4K, rows, cols, &shifted[1..]).unwrap();
    let a = pack_rows::<BlockQ4Kx16>(&aligned, q4_kx16::dot_group, &|_| {});
    let b = pack_rows::<BlockQ4Kx16>(&misaligned, q4_kx16::dot_group, &|_| {});
    assert!(a.blocks == b.blocks);
}
