//! Sizes a model or a machine cannot hold are errors before any work: positions past a learned
//! position table, KV caches whose size overflows or exceeds the memory, sampling parameters
//! out of range.

mod common;

use std::sync::Arc;

use rinfer_formats::gguf::{GgufFile, GgufWriter, MetadataValue};
use rinfer_model::{
    KvCache, KvType, Logits, MemoryPlan, Model, ModelError, SamplingParams, Scratch,
};

use common::{fixture_model, fixtures};

/// Rows of the gpt2 fixture's position table.
const GPT2_POSITIONS: usize = 512;

/// The gpt2 fixture with its `gpt2.context_length` replaced by `context`.
fn gpt2_claiming_context(context: u32) -> Model {
    let path = fixtures().join("models/gpt2-tiny-q2_k.gguf");
    let file = GgufFile::open(path).unwrap();
    let mut writer = GgufWriter::from_file(&file).unwrap();
    writer.set_metadata("gpt2.context_length", MetadataValue::U32(context));
    let file = GgufFile::from_bytes(writer.to_bytes()).unwrap();
    Model::from_gguf(&Arc::new(file)).unwrap()
}

#[test]
fn a_learned_position_table_bounds_the_trained_context() {
    let model = gpt2_claiming_context(4096);
    assert_eq!(model.position_limit(), Some(GPT2_POSITIONS));
    assert_eq!(model.config.context_length, GPT2_POSITIONS);
}

#[test]
fn a_context_longer_than_the_position_table_is_refused() {
    let model = fixture_model("gpt2-tiny-q2_k");
    assert!(model.check_context(GPT2_POSITIONS).is_ok());
    let err = model.check_context(1024).unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::PositionsExceeded {
                needed: 1024,
                limit: GPT2_POSITIONS
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("at most 512"), "{err}");
    // Rotary positions have no table to run past.
    let llama = fixture_model("llama-tiny-q8_0");
    assert_eq!(llama.position_limit(), None);
    assert!(llama.check_context(1 << 20).is_ok());
}

#[test]
fn the_forward_pass_refuses_a_position_past_the_table_instead_of_panicking() {
    // A cache larger than the table, as a caller that skipped `check_context` would make.
    let model = gpt2_claiming_context(4096);
    let mut cache = KvCache::new(&model.config, GPT2_POSITIONS + 8, 64);
    let mut scratch = Scratch::new(&model.config, 64);
    let tokens = vec![1u32; 64];
    for _ in 0..GPT2_POSITIONS / 64 {
        model
            .forward(&tokens, &mut cache, &mut scratch, Logits::Last)
            .unwrap();
    }
    let err = model
        .forward(&[1], &mut cache, &mut scratch, Logits::Last)
        .unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::PositionsExceeded {
                needed: 513,
                limit: GPT2_POSITIONS
            }
        ),
        "{err}"
    );
    assert_eq!(
        cache.len(),
        GPT2_POSITIONS,
        "the failed pass changed the cache"
    );
}

#[test]
fn a_kv_cache_whose_size_overflows_is_an_error_not_a_panic() {
    let model = fixture_model("gemma3-tiny-q4_k_m");
    let err = KvCache::try_new(&model.config, 1 << 62, 512).err().unwrap();
    assert!(matches!(err, ModelError::SizeOverflow { .. }), "{err}");
    assert_eq!(
        KvCache::bytes_for(&model.config, KvType::F32, usize::MAX, 1),
        None
    );
    let small = KvCache::try_new(&model.config, 64, 8).unwrap();
    assert_eq!(
        KvCache::bytes_for(&model.config, KvType::F32, 64, 8),
        Some(small.bytes())
    );
}

#[test]
fn the_memory_plan_matches_what_is_allocated() {
    let model = fixture_model("gemma3-tiny-q4_k_m");
    let c = &model.config;
    for kv_type in KvType::ALL {
        let plan = MemoryPlan::new(c, kv_type, 128, 3, 16, 3).unwrap();
        let cache = KvCache::with_type(c, kv_type, 128, 16);
        let scratch = Scratch::with_logit_rows(c, 16, 3);
        assert_eq!(plan.kv_type, kv_type);
        assert_eq!(plan.kv_cache_bytes, 3 * cache.bytes(), "{kv_type}");
        assert_eq!(plan.scratch_bytes, scratch.bytes());
    }
}

#[test]
fn the_memory_plan_halves_the_kv_cache_at_f16_and_takes_17_32nds_at_q8_0() {
    let model = fixture_model("gemma3-tiny-q4_k_m");
    let c = &model.config;
    let bytes = |kv_type| MemoryPlan::new(c, kv_type, 4096, 4, 512, 4).unwrap();
    let (f32_plan, f16_plan, q8_plan) =
        (bytes(KvType::F32), bytes(KvType::F16), bytes(KvType::Q8_0));
    assert_eq!(f16_plan.kv_cache_bytes * 2, f32_plan.kv_cache_bytes);
    assert_eq!(q8_plan.kv_cache_bytes * 64, f32_plan.kv_cache_bytes * 17);
    assert_eq!(f16_plan.scratch_bytes, f32_plan.scratch_bytes);
}

#[test]
fn a_smaller_kv_type_fits_more_parallel_sequences_in_the_same_memory() {
    let model = fixture_model("gemma3-tiny-q4_k_m");
    let c = &model.config;
    let plan = |kv_type, sequences| MemoryPlan::new(c, kv_type, 4096, sequences, 512, sequences);
    // The memory of 8 sequences at f32: f16 fits about twice as many, q8_0 a bit more.
    let available = plan(KvType::F32, 8).unwrap().total_bytes() as u64;
    let most = |kv_type| {
        (1..64)
            .take_while(|&n| plan(kv_type, n).unwrap().check_fits(available).is_ok())
            .last()
            .unwrap()
    };
    assert_eq!(most(KvType::F32), 8);
    assert!(most(KvType::F16) >= 15, "{}", most(KvType::F16));
    assert!(most(KvType::Q8_0) > most(KvType::F16));
}

#[test]
fn a_q8_0_kv_cache_is_refused_when_its_blocks_would_span_two_heads() {
    let model = fixture_model("gemma3-tiny-q4_k_m");
    let mut c = model.config.clone();
    c.head_dim = 40;
    let err = MemoryPlan::new(&c, KvType::Q8_0, 64, 1, 8, 1).unwrap_err();
    assert!(err.to_string().contains("multiple of 32"), "{err}");
    assert!(KvCache::try_with_type(&c, KvType::Q8_0, 64, 8).is_err());
    assert!(KvCache::try_with_type(&c, KvType::F16, 64, 8).is_ok());
}

#[test]
fn a_plan_beyond_the_available_memory_names_both_sizes() {
    let model = fixture_model("gemma3-tiny-q4_k_m");
    let plan = MemoryPlan::new(&model.config, KvType::F32, 1_000_000_000, 1, 512, 1).unwrap();
    let err = plan.check_fits(8 << 30).unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, ModelError::NotEnoughMemory { .. }),
        "{message}"
    );
    assert!(message.contains("1000000000 positions"), "{message}");
    assert!(message.contains("8192 MiB"), "{message}");
    assert!(plan.check_fits(u64::MAX).is_ok());

    let err =
        MemoryPlan::new(&model.config, KvType::F32, 1 << 62, 100_000, 512, 100_000).unwrap_err();
    assert!(matches!(err, ModelError::SizeOverflow { .. }), "{err}");
}

#[test]
fn sampling_parameters_out_of_range_are_refused_by_name() {
    let with = |f: fn(&mut SamplingParams)| {
        let mut p = SamplingParams::default();
        f(&mut p);
        p.validate().err().map(|e| e.field)
    };
    assert_eq!(with(|_| {}), None);
    assert_eq!(with(|p| p.temperature = f32::NAN), Some("temperature"));
    assert_eq!(with(|p| p.temperature = -0.5), Some("temperature"));
    assert_eq!(with(|p| p.temperature = 0.0), None);
    assert_eq!(with(|p| p.top_p = 0.0), Some("top_p"));
    assert_eq!(with(|p| p.top_p = 1.5), Some("top_p"));
    assert_eq!(with(|p| p.min_p = -0.1), Some("min_p"));
    assert_eq!(with(|p| p.min_p = f32::NAN), Some("min_p"));
    assert_eq!(with(|p| p.repeat_penalty = -1.0), Some("repeat_penalty"));
    assert_eq!(
        with(|p| p.repeat_penalty = f32::INFINITY),
        Some("repeat_penalty")
    );
    assert_eq!(
        with(|p| p.frequency_penalty = 3.0),
        Some("frequency_penalty")
    );
    assert_eq!(
        with(|p| p.presence_penalty = f32::NAN),
        Some("presence_penalty")
    );
    assert_eq!(
        with(|p| p.logit_bias = vec![(1, f32::NAN)]),
        Some("logit_bias")
    );
    assert_eq!(with(|p| p.logit_bias = vec![(1, f32::NEG_INFINITY)]), None);
}
