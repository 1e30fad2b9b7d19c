//! The quantizers that take importance weights against ggml's own: `weighted.bin` in
//! `tests/fixtures/quantize_weighted` holds four rows of 512 values (one sub-block all zero),
//! one weight per column, and what ggml's `quantize_<type>` wrote for them with the weights and
//! without, made by `gen.c` beside it from llama.cpp's `ggml-quants.c` (the vendored copy of
//! llama-cpp-python 0.3.36, built for baseline x86-64 as ggml-base is).

use std::path::PathBuf;

use rinfer_formats::GgmlType;
use rinfer_kernels::{can_quantize_weighted, quantize_rows_weighted};

/// One case of the fixture: a type, whether weights were passed, and ggml's bytes.
struct Case {
    ty: GgmlType,
    weighted: bool,
    bytes: Vec<u8>,
}

/// The rows, their length, the weights and the cases.
fn fixture() -> (Vec<f32>, usize, Vec<f32>, Vec<Case>) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/quantize_weighted/weighted.bin");
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut at = 0;
    let mut u32_at = || {
        let v = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
        at += 4;
        v as usize
    };
    let (nrow, n) = (u32_at(), u32_at());
    let floats = |from: usize, count: usize| -> Vec<f32> {
        data[from..from + 4 * count]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect()
    };
    let x = floats(8, nrow * n);
    let w = floats(8 + 4 * nrow * n, n);
    let mut at = 8 + 4 * (nrow * n + n);
    let mut cases = Vec::new();
    while at < data.len() {
        let word =
            |i: usize| u32::from_le_bytes(data[at + 4 * i..at + 4 * i + 4].try_into().unwrap());
        let (id, weighted, len) = (word(0), word(1) != 0, word(2) as usize);
        let ty = GgmlType::from_id(id).expect("a ggml type id");
        cases.push(Case {
            ty,
            weighted,
            bytes: data[at + 12..at + 12 + len].to_vec(),
        });
        at += 12 + len;
    }
    (x, n, w, cases)
}

/// The types whose weighted quantizer rinfer has, each checked against ggml.
const IMPLEMENTED: &[GgmlType] = &[
    GgmlType::Q2K,
    GgmlType::Q3K,
    GgmlType::Q4K,
    GgmlType::Q5K,
    GgmlType::Q6K,
    GgmlType::TQ2_0,
    GgmlType::Iq1S,
    GgmlType::Iq1M,
    GgmlType::Iq2Xxs,
    GgmlType::Iq2Xs,
    GgmlType::Iq2S,
    GgmlType::Iq3Xxs,
    GgmlType::Iq3S,
    GgmlType::Iq4Nl,
    GgmlType::Iq4Xs,
];

#[test]
fn weighted_quantizers_write_ggml_bytes_with_and_without_weights() {
    let (x, n, w, cases) = fixture();
    for &ty in IMPLEMENTED {
        assert!(can_quantize_weighted(ty, true), "{ty}");
        let of_type: Vec<&Case> = cases.iter().filter(|c| c.ty == ty).collect();
        assert!(!of_type.is_empty(), "{ty} is not in the fixture");
        for case in of_type {
            let mut out = vec![0u8; case.bytes.len()];
            let weights = case.weighted.then_some(&w[..]);
            quantize_rows_weighted(ty, &x, n, weights, &mut out).unwrap();
            let block = ty.type_size();
            if let Some(i) = out.iter().zip(&case.bytes).position(|(a, b)| a != b) {
                panic!(
                    "{ty} (weights: {}): first differing byte {i}, block {} of row length {n}",
                    case.weighted,
                    i / block
                );
            }
        }
    }
}

#[test]
fn the_quantizers_ggml_asserts_weights_in_need_weights() {
    let (x, n, _, _) = fixture();
    for ty in [GgmlType::Iq1S, GgmlType::Iq2Xxs, GgmlType::Iq2Xs] {
        assert!(!can_quantize_weighted(ty, false));
        let mut out = vec![0u8; x.len() / ty.block_size() * ty.type_size()];
        assert!(quantize_rows_weighted(ty, &x, n, None, &mut out).is_err());
    }
}

#[test]
fn weights_of_another_length_and_types_without_a_weighted_quantizer_are_refused() {
    let (x, n, w, _) = fixture();
    let mut out = vec![0u8; x.len() / 256 * 144];
    assert!(quantize_rows_weighted(GgmlType::Q4K, &x, n, Some(&w[..n - 1]), &mut out).is_err());
    let mut out = vec![0u8; x.len() / 32 * 18];
    assert!(quantize_rows_weighted(GgmlType::Q4_0, &x, n, Some(&w), &mut out).is_err());
    let mut out = vec![0u8; x.len() / 32 * 34];
    assert!(quantize_rows_weighted(GgmlType::Q8_0, &x, n, Some(&w), &mut out).is_ok());
}
