//! The upload plan: every weight goes to the GPU in its stored format (sizes are exactly the
//! stored bytes), the KV cache and buffers are sized like the CPU's, and models the kernels
//! cannot run are refused at load with an error naming the tensor.

mod common;

use common::*;
use rinfer_cuda::kernels::KvElement;
use rinfer_cuda::{CudaError, GpuModel, LoadOptions, UploadPlan};
use rinfer_formats::GgmlType;
use rinfer_transformer::{Qkv, Stage};

#[test]
fn weights_are_uploaded_in_their_stored_bytes_and_a_tied_head_once() {
    let s = Storage::new();
    let model = model(&s);
    let plan = UploadPlan::new(&model, &options(64, 8)).unwrap();
    let q8 = |rows, cols| matrix_bytes(GgmlType::Q8_0, rows, cols);
    let per_layer = q8(HEADS * HEAD_DIM, HIDDEN)
        + 2 * q8(KV_HEADS * HEAD_DIM, HIDDEN)
        + q8(HIDDEN, HEADS * HEAD_DIM)
        + 2 * q8(FFN, HIDDEN)
        + q8(HIDDEN, FFN);
    let matrices: usize = plan.matrices.iter().map(|m| m.bytes).sum();
    assert_eq!(matrices, q8(VOCAB, HIDDEN) + LAYERS * per_layer);
    assert!(plan.tied_lm_head);
    assert_eq!(plan.matrices.len(), 1 + LAYERS * 7);
    // Two norms per layer plus the output norm, f32.
    assert_eq!(plan.vector_bytes, 4 * HIDDEN * (2 * LAYERS + 1));
    assert_eq!(plan.weight_bytes(), matrices + plan.vector_bytes);
}

#[test]
fn the_kv_cache_keeps_a_ring_on_sliding_window_layers() {
    let s = Storage::new();
    let plan = UploadPlan::new(&model(&s), &options(64, 8)).unwrap();
    // Window 16, pattern 3: layers 0 and 1 slide (16 + 8 slots), layer 2 is global (64).
    assert_eq!(plan.kv_slots, vec![24, 24, 64]);
    let kv_dim = KV_HEADS * HEAD_DIM;
    assert_eq!(plan.kv_bytes, 2 * 4 * kv_dim * (24 + 24 + 64));
    let f16 = LoadOptions {
        kv: KvElement::F16,
        ..options(64, 8)
    };
    let half = UploadPlan::new(&model(&s), &f16).unwrap();
    assert_eq!(
        half.kv_bytes,
        2 * 2 * kv_dim * (24 + 24 + 64),
        "f16 keys and values"
    );
    // Layers 0 and 1 keep rings of their own, layer 2's rows are blocks of the shared pool:
    // a whole context of blocks for each sequence.
    let four = LoadOptions {
        sequences: 4,
        ..options(64, 8)
    };
    let four = UploadPlan::new(&model(&s), &four).unwrap();
    assert_eq!(four.kv_pool_index, vec![None, None, Some(0)]);
    assert_eq!(four.kv_pool_blocks, 4 * 64 / 16);
    assert_eq!(four.kv_bytes, 4 * plan.kv_bytes);
    let rows = (16 * kv_dim) as i64;
    assert_eq!(four.kv_block_strides(), vec![rows, rows, rows]);
    assert_eq!(plan.buffers.logits, 8 * VOCAB);
    let last_only = LoadOptions {
        all_logits: false,
        ..options(64, 8)
    };
    let lean = UploadPlan::new(&model(&s), &last_only).unwrap();
    assert_eq!(lean.buffers.logits, VOCAB);
    assert_eq!(plan.buffers.qkv, 8 * (HEADS + 2 * KV_HEADS) * HEAD_DIM);
    assert_eq!(
        plan.total_bytes(),
        plan.weight_bytes() + plan.kv_bytes + plan.buffers.bytes()
    );
    // Decode attention is split for the longest span any layer attends: the context.
    assert!(plan.splits.splits * plan.splits.split_len >= 64);
}

#[test]
fn the_batched_decode_gets_a_logits_row_partials_and_cache_tables_per_sequence() {
    let s = Storage::new();
    let last_only = |sequences| LoadOptions {
        all_logits: false,
        sequences,
        ..options(64, 8)
    };
    let one = UploadPlan::new(&model(&s), &last_only(1)).unwrap();
    assert_eq!(one.decode_rows, 1);
    assert_eq!(one.buffers.logits, VOCAB);
    let four = UploadPlan::new(&model(&s), &last_only(4)).unwrap();
    assert_eq!(four.decode_rows, 4);
    assert_eq!(four.buffers.logits, 4 * VOCAB);
    assert_eq!(four.buffers.partials, 4 * one.buffers.partials);
    // Keys, values and block table of every layer, one address per row each.
    assert_eq!(four.buffers.cache_tables, 3 * LAYERS * 4);
    assert_eq!(
        four.buffers.bytes() - one.buffers.bytes(),
        4 * (3 * VOCAB + 3 * one.buffers.partials) + 8 * 3 * LAYERS * 3
    );
    // No more rows than a batch holds.
    let many = UploadPlan::new(&model(&s), &last_only(100)).unwrap();
    assert_eq!(many.decode_rows, 8);
    // A sequence that guesses ahead feeds its guesses as decode rows too.
    let guessing = |sequences, guesses| LoadOptions {
        guesses,
        ..last_only(sequences)
    };
    let two = UploadPlan::new(&model(&s), &guessing(2, 2)).unwrap();
    assert_eq!(two.decode_rows, 6);
    assert_eq!(two.buffers.logits, 6 * VOCAB);
    assert_eq!(
        two.kv_pool_blocks,
        2 * 64 / 16,
        "guesses take no blocks of their own"
    );
    let capped = UploadPlan::new(&model(&s), &guessing(2, 5)).unwrap();
    assert_eq!(capped.decode_rows, 8);
}

#[test]
fn an_unsupported_block_format_is_refused_naming_the_tensor() {
    let s = Storage::new();
    let mut model = model(&s);
    for stage in &mut model.blocks[1].stages {
        if let Stage::Qkv(Qkv::Separate { k, .. }) = stage {
            k.weight = matrix(&s, GgmlType::NVFP4, k.weight.rows, HIDDEN);
        }
    }
    let error = UploadPlan::new(&model, &options(64, 8)).unwrap_err();
    assert!(
        matches!(error, CudaError::UnsupportedType { .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(message.contains("blk.1.attn_k.weight") && message.contains("NVFP4"));
    assert!(message.contains("--device cpu"), "{message}");
}

#[test]
fn shapes_the_kernels_cannot_take_are_refused() {
    let s = Storage::new();
    let mut wide = model(&s);
    wide.head_dim = 512;
    assert!(UploadPlan::new(&wide, &options(64, 8)).is_err());

    let mut short = model(&s);
    short.token_embd.data = &s.bytes[..10];
    let message = UploadPlan::new(&short, &options(64, 8))
        .unwrap_err()
        .to_string();
    assert!(message.contains("token_embd"), "{message}");

    let mut odd = model(&s);
    odd.hidden = 48;
    assert!(UploadPlan::new(&odd, &options(64, 8)).is_err());

    assert!(UploadPlan::new(&model(&s), &options(0, 8)).is_err());
}

#[test]
fn a_model_too_large_for_the_free_memory_names_the_sizes() {
    let s = Storage::new();
    let plan = UploadPlan::new(&model(&s), &options(64, 8)).unwrap();
    assert!(plan.check_fits(8 << 30).is_ok());
    let message = plan.check_fits(100 << 20).unwrap_err().to_string();
    assert!(message.contains("100 MiB are free"), "{message}");
    assert!(message.contains("--ctx"), "{message}");
}

#[test]
fn loading_without_a_gpu_is_an_error_not_a_panic() {
    let s = Storage::new();
    // This machine (and CI) has no CUDA driver: a build without the feature says so, a build
    // with it finds no libcuda. On a GPU machine the load succeeds.
    match GpuModel::load(&model(&s), &options(64, 8)) {
        Ok(gpu) => assert!(!gpu.info().name.is_empty()),
        Err(CudaError::NotBuilt) if !rinfer_cuda::BUILT_WITH_CUDA => {}
        Err(CudaError::NoDriver { searched }) if rinfer_cuda::BUILT_WITH_CUDA => {
            assert!(searched.contains("libcuda"), "{searched}");
        }
        Err(other) => panic!("unexpected error: {other}"),
    }
}

#[test]
fn an_invalid_model_is_refused_before_the_device_is_touched() {
    let s = Storage::new();
    let mut model = model(&s);
    model.kv_heads = 3;
    let error = GpuModel::load(&model, &options(64, 8))
        .err()
        .expect("an error");
    assert!(matches!(error, CudaError::Unsupported(_)), "{error}");
}

#[test]
fn expert_layers_upload_each_projection_stacked_and_size_the_route_buffers() {
    let s = Storage::new();
    let dense = UploadPlan::new(&model(&s), &options(64, 8)).unwrap();
    let plan = UploadPlan::new(&moe_model(&s), &options(64, 8)).unwrap();
    let q8 = |rows, cols| matrix_bytes(GgmlType::Q8_0, rows, cols);
    let dense_ffn = 2 * q8(FFN, HIDDEN) + q8(HIDDEN, FFN);
    let experts = q8(EXPERTS, HIDDEN) + EXPERTS * 3 * q8(EXPERT_FFN, HIDDEN);
    assert_eq!(
        plan.weight_bytes(),
        dense.weight_bytes() - dense_ffn + experts
    );
    let names: Vec<&str> = plan.matrices.iter().map(|m| m.name.as_str()).collect();
    for stacked in ["ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"] {
        let name = format!("blk.{MOE_LAYER}.{stacked}.weight");
        assert_eq!(names.iter().filter(|&&n| n == name).count(), 1);
    }
    let b = &plan.buffers;
    assert_eq!(b.router, 8 * EXPERTS);
    assert_eq!(b.routes, 8 * USED);
    assert_eq!(b.expert_gate_up, 8 * USED * 2 * EXPERT_FFN);
    assert_eq!(b.expert_out, 8 * USED * HIDDEN);
    assert_eq!(dense.buffers.router + dense.buffers.expert_out, 0);
    // Layers 0 and 2 stay dense: the dense gate | up buffer stays.
    assert_eq!(b.gate_up, 8 * 2 * FFN);
    assert!(plan.buffers.bytes() > dense.buffers.bytes());
}

#[test]
fn a_model_of_expert_layers_only_has_no_dense_ffn_buffer() {
    let s = Storage::new();
    let mut model = moe_model(&s);
    for layer in 0..LAYERS {
        model.blocks[layer] = model.blocks[MOE_LAYER].clone();
    }
    // The dense width no layer uses is not checked either.
    model.ffn_dim = 100;
    let plan = UploadPlan::new(&model, &options(64, 8)).unwrap();
    assert_eq!(plan.buffers.gate_up, 0);
    assert_eq!(plan.buffers.expert_gate_up, 8 * USED * 2 * EXPERT_FFN);
}

#[test]
fn more_routed_rows_than_one_launch_takes_are_refused() {
    let s = Storage::new();
    let message = UploadPlan::new(&moe_model(&s), &options(64, 40_000))
        .unwrap_err()
        .to_string();
    assert!(message.contains("experts"), "{message}");
}

fn options(context: usize, max_batch: usize) -> LoadOptions {
    LoadOptions {
        ordinal: 0,
        context,
        max_batch,
        all_logits: true,
        sequences: 1,
        nvrtc: Default::default(),
        kv: KvElement::F32,
        guesses: 0,
        cached_blocks: 0,
    }
}
