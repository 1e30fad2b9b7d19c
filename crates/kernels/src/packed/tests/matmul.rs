//! Whole matrices through `matmul_packed`: the same bits for any batch split and thread count,
//! the checks on lengths and scratch, packing's page release, and the AMX kernels where AMX
//! runs.

use super::*;

/// A deterministic `rows × cols` matrix of `ty` and `tokens` activation rows.
fn matrix_case(ty: GgmlType, rows: usize, cols: usize, tokens: usize) -> (Vec<u8>, Vec<f32>) {
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    let x: Vec<f32> = (0..rows * cols)
        .map(|_| (next() % 2001) as f32 / 1000.0 - 1.0)
        .collect();
    let w = match ty {
        GgmlType::Q4_0 => bytemuck::cast_slice(&quantize::<BlockQ4_0>(&x)).to_vec(),
        // No IQ4_NL quantizer here: Q4_0's blocks carry the same bytes (a scale, 32 indices).
        GgmlType::Iq4Nl => bytemuck::cast_slice(&quantize::<BlockQ4_0>(&x)).to_vec(),
        GgmlType::Q5_0 => bytemuck::cast_slice(&quantize::<BlockQ5_0>(&x)).to_vec(),
        GgmlType::Q8_0 => bytemuck::cast_slice(&quantize::<BlockQ8_0>(&x)).to_vec(),
        GgmlType::Q4K => bytemuck::cast_slice(&quantize::<BlockQ4K>(&x)).to_vec(),
        GgmlType::Q5K => bytemuck::cast_slice(&quantize::<BlockQ5K>(&x)).to_vec(),
        GgmlType::Iq4Xs => bytemuck::cast_slice(&quantize::<BlockIq4Xs>(&x)).to_vec(),
        GgmlType::Q2K => bytemuck::cast_slice(&quantize::<BlockQ2K>(&x)).to_vec(),
        GgmlType::Q4_1 => bytemuck::cast_slice(&quantize::<BlockQ4_1>(&x)).to_vec(),
        GgmlType::Q5_1 => bytemuck::cast_slice(&quantize::<BlockQ5_1>(&x)).to_vec(),
        GgmlType::Q3K => bytemuck::cast_slice(&quantize::<BlockQ3K>(&x)).to_vec(),
        // No TQ1_0 quantizer here: random trit bytes (every byte decodes to trits) under
        // scales of 0.001 to 1.
        GgmlType::TQ1_0 => (0..rows * cols / 256)
            .flat_map(|_| {
                let d = f16::from_f32((next() % 1000 + 1) as f32 / 1000.0);
                let trits: Vec<u8> = (0..52).map(|_| next() as u8).collect();
                trits.into_iter().chain(d.to_bits().to_le_bytes())
            })
            .collect(),
        GgmlType::TQ2_0 => ternary_rows::<BlockTq2_0>(&x),
        GgmlType::Iq1S => ternary_rows::<BlockIq1S>(&x),
        GgmlType::Iq1M => ternary_rows::<BlockIq1M>(&x),
        // No IQ3 quantizer here: random indices, signs and levels (every byte decodes) under
        // scales of 0.001 to 1.
        GgmlType::Iq3Xxs | GgmlType::Iq3S => (0..rows * cols / 256)
            .flat_map(|_| {
                let d = f16::from_f32((next() % 1000 + 1) as f32 / 1000.0);
                let size = if ty == GgmlType::Iq3S { 110 } else { 98 };
                let codes: Vec<u8> = (2..size).map(|_| next() as u8).collect();
                d.to_bits().to_le_bytes().into_iter().chain(codes)
            })
            .collect(),
        // No quantizer here for the IQ2 types: random codes under scales of 0.001 to 1 (a
        // block's f16 scale is its first field).
        GgmlType::Iq2Xxs | GgmlType::Iq2Xs | GgmlType::Iq2S => (0..rows * cols / 256)
            .flat_map(|_| {
                let d = f16::from_f32((next() % 1000 + 1) as f32 / 1000.0);
                let codes: Vec<u8> = (2..ty.type_size()).map(|_| next() as u8).collect();
                d.to_bits().to_le_bytes().into_iter().chain(codes)
            })
            .collect(),
        // No quantizer here: random codes under exponents of 2^-8 to 2^-1.
        GgmlType::MXFP4 => (0..rows * cols / 32)
            .flat_map(|_| {
                let e = 120 + (next() % 8) as u8;
                std::iter::once(e).chain((0..16).map(|_| next() as u8).collect::<Vec<_>>())
            })
            .collect(),
        _ => bytemuck::cast_slice(&quantize::<BlockQ6K>(&x)).to_vec(),
    };
    let acts = (0..tokens * cols)
        .map(|_| (next() % 2001) as f32 / 100.0 - 10.0)
        .collect();
    (w, acts)
}

/// `x` quantized to the ternary format `B` (whose quantizer is for files, not the registry).
fn ternary_rows<B: crate::quant::QuantizeWeighted + Pod>(x: &[f32]) -> Vec<u8> {
    let blocks: Vec<B> = x
        .chunks_exact(B::ELEMS)
        .map(|x| B::quantize_weighted(x, None))
        .collect();
    bytemuck::cast_slice(&blocks).to_vec()
}

/// `w` packed with the scalar reference kernel, and with this CPU's kernel where it has one.
fn packings_here(w: &WeightMatrix<'_>) -> Vec<(&'static str, PackedMatrix)> {
    let reference = reference_packing(w);
    let mut packings = vec![("reference", reference)];
    if let Some(simd) = Kernels::detected().pack(w) {
        packings.push(("simd", simd));
    }
    packings
}

#[test]
fn matmul_packed_is_the_same_for_any_batch_and_thread_count() {
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Iq4Nl,
        GgmlType::Q5_0,
        GgmlType::Q8_0,
        GgmlType::MXFP4,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
        GgmlType::Iq4Xs,
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q4_1,
        GgmlType::Q5_1,
        GgmlType::TQ1_0,
        GgmlType::TQ2_0,
        GgmlType::Iq1S,
        GgmlType::Iq1M,
        GgmlType::Iq3Xxs,
        GgmlType::Iq3S,
        GgmlType::Iq2Xxs,
        GgmlType::Iq2Xs,
        GgmlType::Iq2S,
    ] {
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
        // Q4_1's and Q5_1's row-major kernels take the activation sums as Q8_1 keeps them, `d·Σa`
        // rounded to f16, which is off by more than the tolerance here; the packed kernels take
        // the exact integer sums, so they are held to the exact product of what they multiply.
        let want = match ty {
            GgmlType::Q4_1 | GgmlType::Q5_1 => exact_product(&w, &x),
            _ => row_major,
        };
        for (p, r) in batched.iter().zip(&want) {
            assert!(
                (p - r).abs() <= 1e-3 * r.abs().max(1.0),
                "{name}: packed {p} vs {r}"
            );
        }
        // The ternary and i-quant layouts keep the row-major reference's arithmetic: the very
        // same bits.
        let same_arithmetic = [
            GgmlType::Iq1S,
            GgmlType::Iq1M,
            GgmlType::Iq2Xxs,
            GgmlType::Iq2Xs,
            GgmlType::Iq2S,
            GgmlType::Iq3Xxs,
            GgmlType::Iq3S,
        ];
        if matches!(ty, GgmlType::TQ1_0 | GgmlType::TQ2_0) || same_arithmetic.contains(&ty) {
            assert_bits_eq(&batched, &want, name);
        }
    }
}

/// `W·x` in f64 over the dequantized weights and the activations as Q8_0 quantizes them.
fn exact_product(w: &WeightMatrix<'_>, x: &[f32]) -> Vec<f32> {
    let cols = w.cols();
    let mut weights = vec![0.0f32; w.rows() * cols];
    for (r, out) in weights.chunks_mut(cols).enumerate() {
        crate::dequantize_row(w.ty(), w.row(r), out).unwrap();
    }
    let acts: Vec<f32> = x
        .chunks(cols)
        .flat_map(|x| dequantize(&quantize::<BlockQ8_0>(x)))
        .collect();
    acts.chunks(cols)
        .flat_map(|a| {
            weights.chunks(cols).map(move |row| {
                let dot: f64 = row.iter().zip(a).map(|(&w, &a)| w as f64 * a as f64).sum();
                dot as f32
            })
        })
        .collect()
}

#[test]
fn matmul_packed_checks_lengths_and_scratch() {
    let (data, x) = matrix_case(GgmlType::Q5_0, 32, 64, 2);
    let w = WeightMatrix::new(GgmlType::Q5_0, 32, 64, &data).unwrap();
    let packed = reference_packing(&w);
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

#[test]
fn stacked_experts_multiply_as_if_each_were_packed_alone() {
    // Three experts of 48 rows stacked, as an expert tensor is: each expert's rows of the
    // stacked matrix give the bits of that expert packed on its own.
    let (experts, rows, cols, tokens) = (3, 48, 512, 5);
    for ty in [GgmlType::Q4K, GgmlType::Q6K, GgmlType::Q8_0] {
        let (data, x) = matrix_case(ty, experts * rows, cols, tokens);
        let stacked = WeightMatrix::new(ty, experts * rows, cols, &data).unwrap();
        let slab = data.len() / experts;
        for (name, packed) in packings_here(&stacked) {
            assert!((0..=experts).all(|e| packed.splits_at(e * rows)));
            for e in 0..experts {
                let alone = WeightMatrix::new(ty, rows, cols, &data[e * slab..(e + 1) * slab]);
                let alone = packings_here(&alone.unwrap())
                    .into_iter()
                    .find(|(n, _)| *n == name)
                    .unwrap()
                    .1;
                for n in [1, tokens] {
                    let x = &x[..n * cols];
                    let mut act = ActivationBuffer::for_matmul(n, cols, experts * rows);
                    let (mut part, mut want) = (vec![0.0; n * rows], vec![0.0; n * rows]);
                    let range = e * rows..(e + 1) * rows;
                    matmul_packed_rows(&packed, range, x, n, &mut act, &mut part).unwrap();
                    matmul_packed(&alone, x, n, &mut act, &mut want).unwrap();
                    assert_bits_eq(&part, &want, name);
                }
            }
        }
    }
}

#[test]
fn a_batch_of_products_gives_each_the_bits_it_gives_alone() {
    // Two stacked matrices of three 48-row experts, products over two inputs in any order.
    let (rows, cols) = (48, 512);
    for ty in [GgmlType::Q4K, GgmlType::Q6K, GgmlType::Q8_0] {
        let (gate, x) = matrix_case(ty, 3 * rows, cols, 2);
        let (up, _) = matrix_case(ty, 3 * rows, cols + 256, 0);
        let up = &up[..gate.len()];
        let gate = WeightMatrix::new(ty, 3 * rows, cols, &gate).unwrap();
        let up = WeightMatrix::new(ty, 3 * rows, cols, up).unwrap();
        for ((name, gate), (_, up)) in packings_here(&gate).into_iter().zip(packings_here(&up)) {
            let expert = |m, e: usize, input| RowsProduct {
                matrix: m,
                rows: e * rows..(e + 1) * rows,
                input,
            };
            let products = [
                expert(&gate, 2, 0),
                expert(&up, 2, 0),
                expert(&gate, 0, 1),
                expert(&up, 1, 1),
            ];
            let mut act = ActivationBuffer::for_matmul(2, cols, 0);
            let mut y = vec![0.0; products.len() * rows];
            matvec_packed_batch(&products, &x, 2, &mut act, &mut y).unwrap();
            for (p, got) in products.iter().zip(y.chunks(rows)) {
                let x = &x[p.input * cols..(p.input + 1) * cols];
                let mut want = vec![0.0; rows];
                matmul_packed_rows(p.matrix, p.rows.clone(), x, 1, &mut act, &mut want).unwrap();
                assert_bits_eq(got, &want, name);
            }
            let mut short = vec![0.0; rows];
            let bad = [RowsProduct {
                rows: 16..24,
                ..expert(&gate, 0, 0)
            }];
            let err = matvec_packed_batch(&bad, &x, 2, &mut act, &mut short[..8]);
            assert!(matches!(err, Err(KernelError::RowRange { .. })));
        }
    }
}

#[test]
fn shared_input_products_give_each_matrix_the_bits_it_gives_alone() {
    // q and k of Q4_K (k ending inside a row group) and v of Q6_K: one Q8_K input.
    let cols = 512;
    let shapes = [
        (GgmlType::Q4K, 96),
        (GgmlType::Q4K, 40),
        (GgmlType::Q6K, 48),
    ];
    let (_, x) = matrix_case(GgmlType::Q4K, 16, cols, 21);
    let data: Vec<Vec<u8>> = shapes
        .iter()
        .map(|&(ty, rows)| matrix_case(ty, rows, cols, 0).0)
        .collect();
    let matrices: Vec<WeightMatrix<'_>> = shapes
        .iter()
        .zip(&data)
        .map(|(&(ty, rows), d)| WeightMatrix::new(ty, rows, cols, d).unwrap())
        .collect();
    let packings: Vec<_> = matrices.iter().map(packings_here).collect();
    for kernel in 0..packings[0].len() {
        let ws: Vec<&PackedMatrix> = packings.iter().map(|p| &p[kernel].1).collect();
        let name = packings[0][kernel].0;
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            for n in [1, 3, 21] {
                let x = &x[..n * cols];
                let mut act = ActivationBuffer::for_matmul(n, cols, 96);
                let mut ys: Vec<Vec<f32>> = ws.iter().map(|w| vec![0.0; n * w.rows()]).collect();
                let mut outs: Vec<&mut [f32]> = ys.iter_mut().map(Vec::as_mut_slice).collect();
                pool.install(|| matmul_packed_shared(&ws, x, n, &mut act, &mut outs))
                    .unwrap();
                for (w, got) in ws.iter().zip(&ys) {
                    let mut want = vec![0.0; n * w.rows()];
                    matmul_packed(w, x, n, &mut act, &mut want).unwrap();
                    assert_bits_eq(got, &want, name);
                }
            }
        }
    }
}

#[test]
fn shared_input_products_need_one_width_and_activation_format() {
    let cols = 256;
    let (q4k, x) = matrix_case(GgmlType::Q4K, 16, cols, 1);
    let (q8, _) = matrix_case(GgmlType::Q8_0, 16, cols, 0);
    let (wide, _) = matrix_case(GgmlType::Q4K, 16, 2 * cols, 0);
    let q4k = WeightMatrix::new(GgmlType::Q4K, 16, cols, &q4k).unwrap();
    let q8 = WeightMatrix::new(GgmlType::Q8_0, 16, cols, &q8).unwrap();
    let wide = WeightMatrix::new(GgmlType::Q4K, 16, 2 * cols, &wide).unwrap();
    let (q4k, q8, wide) = (
        packings_here(&q4k).remove(0).1,
        packings_here(&q8).remove(0).1,
        packings_here(&wide).remove(0).1,
    );
    let mut act = ActivationBuffer::for_matmul(1, 2 * cols, 16);
    let (mut a, mut b) = (vec![0.0; 16], vec![0.0; 16]);
    for other in [&q8, &wide] {
        let err = matmul_packed_shared(&[&q4k, other], &x, 1, &mut act, &mut [&mut a, &mut b]);
        assert!(matches!(err, Err(KernelError::Unsupported { .. })));
    }
    let err = matmul_packed_shared(&[&q4k], &x, 1, &mut act, &mut [&mut a[..8]]);
    assert!(matches!(err, Err(KernelError::LengthMismatch { .. })));
    let err = matmul_packed_shared(&[&q4k, &q4k], &x, 1, &mut act, &mut [&mut a]);
    assert!(matches!(err, Err(KernelError::LengthMismatch { .. })));
}

#[test]
fn packed_row_ranges_must_fall_on_row_groups() {
    let (data, x) = matrix_case(GgmlType::Q8_0, 40, 64, 1);
    let w = WeightMatrix::new(GgmlType::Q8_0, 40, 64, &data).unwrap();
    let packed = reference_packing(&w);
    let mut act = ActivationBuffer::for_matvec(64);
    for bad in [8..40, 16..24, 32..48] {
        let mut y = vec![0.0; bad.len()];
        assert!(matches!(
            matmul_packed_rows(&packed, bad, &x, 1, &mut act, &mut y),
            Err(KernelError::RowRange { .. })
        ));
    }
    for good in [0..16, 16..40, 32..40] {
        let mut y = vec![0.0; good.len()];
        assert!(matmul_packed_rows(&packed, good, &x, 1, &mut act, &mut y).is_ok());
    }
}

#[test]
fn packing_releases_every_source_byte_once() {
    let (rows, cols) = (1000, 4096);
    let (data, _) = matrix_case(GgmlType::Q8_0, rows, cols, 0);
    let w = WeightMatrix::new(GgmlType::Q8_0, rows, cols, &data).unwrap();
    let released = std::sync::Mutex::new(Vec::new());
    let _ = pack_rows::<BlockQ8_0x16>(
        &w,
        byte_codes_reference::dot_group::<BlockQ8_0x16>,
        &|r: Range<usize>| released.lock().unwrap().push(r),
    );
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
    let a = pack_rows::<BlockQ4Kx16>(&aligned, dot_rows::<BlockQ4Kx16>, &|_| {});
    let b = pack_rows::<BlockQ4Kx16>(&misaligned, dot_rows::<BlockQ4Kx16>, &|_| {});
    assert!(a.blocks == b.blocks);
}

/// The AMX kernels match the reference bit for bit, for token counts that fill tiles partly
/// and wholly (and below the tile threshold, where they use VNNI): on the tile unit where AMX
/// runs, and on its software model (`amx::ModelTiles`) wherever AVX-512 VNNI does.
#[cfg(target_arch = "x86_64")]
mod amx_kernels {
    use super::*;
    use crate::packed::{Avx512Kernels, amx};

    /// The AMX kernel of `P` against its scalar reference `reference`: on the model where the
    /// CPU has AVX-512 VNNI, on the tile unit where AMX runs.
    fn check_amx<P: Avx512Kernels>(case: &CaseOf<P>, reference: ReferenceFn<P>) {
        if crate::cpu::detected() >= crate::Isa::Avx512Vnni {
            let model = P::DOT_AMX_MODEL.expect("the layout has an AMX kernel");
            check_kernel::<P>(case, P::pack, reference, model, "AMX model");
        }
        if amx::available() {
            let kernel = P::DOT_AMX.expect("the layout has an AMX kernel");
            check_kernel::<P>(case, P::pack, reference, kernel, "AMX");
        }
    }

    #[test]
    fn amx_availability_is_reported() {
        if !amx::available() {
            eprintln!(
                "AMX-INT8 is not usable here: the AMX kernels run only on the tile unit's model"
            );
        }
    }

    /// One bit-exactness property per AMX layout: `$blocks` blocks a row, which get scales
    /// from `$scales`; its outputs are held to `$reference`.
    macro_rules! amx_tests {
        ($(
            $name:ident: $packed:ty, blocks $blocks:expr, scales $scales:expr,
            reference $reference:expr;
        )*) => {
            proptest! {
                #![proptest_config(ProptestConfig::with_cases(64))]
                $(
                    #[test]
                    fn $name(case in group_case::<$packed>($blocks, 1..40, $scales)) {
                        check_amx::<$packed>(&case, $reference);
                    }
                )*
            }
        };
    }

    amx_tests! {
        q4_k_amx_matches_reference_bit_exact: BlockQ4Kx16, blocks 1..3,
            scales |b, d, m| (b.d, b.dmin) = (d, m), reference dot_rows::<BlockQ4Kx16>;
        q5_k_amx_matches_reference_bit_exact: BlockQ5Kx16, blocks 1..3,
            scales |b, d, m| (b.d, b.dmin) = (d, m), reference dot_rows::<BlockQ5Kx16>;
        q6_k_amx_matches_reference_bit_exact: BlockQ6Kx16, blocks 1..3,
            scales |b, d, _| b.d = d, reference dot_rows::<BlockQ6Kx16>;
        iq4_xs_amx_matches_reference_bit_exact: BlockIq4Xsx16, blocks 1..3,
            scales |b, d, _| b.d = d, reference dot_rows::<BlockIq4Xsx16>;
        q5_0_amx_matches_reference_bit_exact: BlockQ5_0x16, blocks 1..6,
            scales |b, d, _| b.d = d, reference byte_codes_reference::dot_group::<BlockQ5_0x16>;
        q4_0_amx_matches_reference_bit_exact: BlockQ4_0x16, blocks 1..6,
            scales |b, d, _| b.d = d, reference byte_codes_reference::dot_group::<BlockQ4_0x16>;
        iq4_nl_amx_matches_reference_bit_exact: BlockIq4Nlx16, blocks 1..6,
            scales |b, d, _| b.d = d, reference byte_codes_reference::dot_group::<BlockIq4Nlx16>;
        mxfp4_amx_matches_reference_bit_exact: BlockMxfp4x16, blocks 1..6,
            scales mxfp4_exponent, reference byte_codes_reference::dot_group::<BlockMxfp4x16>;
        q4_1_amx_matches_reference_bit_exact: BlockQ4_1x16, blocks 1..6,
            scales |b, d, m| (b.d, b.m) = (d, m),
            reference byte_codes_reference::dot_group::<BlockQ4_1x16>;
        q5_1_amx_matches_reference_bit_exact: BlockQ5_1x16, blocks 1..6,
            scales |b, d, m| (b.d, b.m) = (d, m),
            reference byte_codes_reference::dot_group::<BlockQ5_1x16>;
        q8_0_amx_matches_reference_bit_exact: BlockQ8_0x16, blocks 1..6,
            scales |b, d, _| b.d = d, reference byte_codes_reference::dot_group::<BlockQ8_0x16>;
    }
}
