use super::*;
use crate::loaded::LoadedModel;

/// The configuration of the fixture model `name`.
fn config_of(name: &str) -> ModelConfig {
    let path = format!(
        "{}/../../tests/fixtures/models/{name}.gguf",
        env!("CARGO_MANIFEST_DIR")
    );
    LoadedModel::open(path).unwrap().model.config
}

fn config() -> ModelConfig {
    config_of("llama-tiny-q4_k")
}

/// Writes rows made of `seed`, the position and the layer at `n` more positions of `cache`.
fn write(cache: &mut KvCache, config: &ModelConfig, n: usize, seed: f32) {
    cache.prepare(n).unwrap();
    for layer in 0..config.layers {
        for pos in cache.len()..cache.len() + n {
            let row = vec![seed + (pos * 100 + layer) as f32; config.kv_dim()];
            cache.store(layer, pos, &row, &row);
        }
    }
    cache.advance(n);
}

#[test]
fn rows_read_through_the_block_table_are_the_rows_stored_for_every_kv_type() {
    let config = config();
    for kv_type in KvType::ALL {
        let mut cache = KvCache::with_type(&config, kv_type, 50, 8);
        let mut reference = KvCache::with_type(&config, kv_type, 50, 8);
        // Across block boundaries, in uneven batches.
        for n in [5, 13, 20, 12] {
            write(&mut cache, &config, n, 0.5);
        }
        write(&mut reference, &config, 50, 0.5);
        assert_eq!(cache.table.len(), 4);
        for layer in 0..config.layers {
            for pos in 0..50 {
                assert_eq!(cache.row_bytes(layer, pos), reference.row_bytes(layer, pos));
            }
        }
    }
}

#[test]
fn writing_after_a_shared_partial_block_copies_it_and_leaves_the_other_holder_unchanged() {
    let config = config();
    let mut caches = KvCache::try_pooled(&config, KvType::F16, 64, 8, 2).unwrap();
    let (mut b, mut a) = (caches.pop().unwrap(), caches.pop().unwrap());
    write(&mut a, &config, 40, 0.0);
    let before: Vec<_> = (0..40).map(|pos| a.row_bytes(0, pos).0.to_vec()).collect();
    // `b` takes `a`'s three blocks, holding 20 positions: its second block is shared and
    // partly filled.
    b.attach((0..3).map(|i| Arc::clone(a.block(i))), 20);
    assert_eq!(
        b.table.len(),
        2,
        "blocks past the held positions are not taken"
    );
    assert!(Arc::ptr_eq(b.block(1), a.block(1)));
    let in_use = a.pool().stats().blocks_in_use;
    write(&mut b, &config, 6, 1000.0);
    assert!(
        Arc::ptr_eq(b.block(0), a.block(0)),
        "the full block stays shared"
    );
    assert!(
        !Arc::ptr_eq(b.block(1), a.block(1)),
        "the written block is a copy"
    );
    assert_eq!(
        a.pool().stats().blocks_in_use,
        in_use + 1,
        "one block copied"
    );
    for (pos, row) in before.iter().enumerate() {
        assert_eq!(a.row_bytes(0, pos).0, row.as_slice(), "a: {pos}");
    }
    for pos in 0..20 {
        assert_eq!(b.row_bytes(0, pos), a.row_bytes(0, pos), "b keeps {pos}");
    }
    for pos in 20..26 {
        assert_ne!(b.row_bytes(0, pos), a.row_bytes(0, pos), "b wrote {pos}");
    }
}

#[test]
fn truncating_and_dropping_give_blocks_back_to_the_pool() {
    let config = config();
    let mut caches = KvCache::try_pooled(&config, KvType::F32, 64, 8, 2).unwrap();
    let pool = caches[0].pool().clone();
    write(&mut caches[0], &config, 40, 0.0);
    assert_eq!(pool.stats().blocks_in_use, 3);
    caches[0].truncate(17);
    assert_eq!(pool.stats().blocks_in_use, 2);
    // A full context each, and no more.
    write(&mut caches[1], &config, 64, 0.0);
    write(&mut caches[0], &config, 47, 0.0);
    assert_eq!(pool.stats().blocks_in_use, 8);
    // Past the plan, the pool refuses with an error.
    let err = caches[0].prepare(1).unwrap_err();
    assert!(matches!(err, ModelError::KvBlocksExhausted { capacity: 8 }));
    drop(caches);
    let stats = pool.stats();
    assert_eq!((stats.blocks_in_use, stats.blocks_allocated), (0, 8));
}

#[test]
fn a_latent_attention_cache_keeps_one_row_per_position_whose_values_are_its_keys() {
    let config = config_of("deepseek2-tiny-f32");
    let mla = config.mla.unwrap();
    assert_eq!((config.kv_heads, config.kv_dim()), (1, mla.latent()));
    // `rope + kv_lora` f32 values per position and layer, no value rows.
    let bytes = KvCache::bytes_for(&config, KvType::F32, 64, 8).unwrap();
    assert_eq!(bytes, config.layers * 64 * mla.latent() * 4);
    let mut cache = KvCache::new(&config, 64, 8);
    assert_eq!(cache.bytes(), bytes);
    cache.prepare(1).unwrap();
    let key: Vec<f32> = (0..config.kv_dim()).map(|i| i as f32).collect();
    cache.store(1, 0, &key, &[]);
    cache.advance(1);
    let rows = cache.paged_rows(1).unwrap();
    let mut value = vec![0.0; key.len()];
    rows.value(0).decode(&mut value);
    assert_eq!(value, key);
}

#[test]
fn a_recurrent_cache_cut_back_to_its_checkpoint_gets_the_state_kept_there() {
    let config = config_of("qwen35-tiny-f32");
    let recurrent = (0..config.layers)
        .find(|&layer| config.recurrence_of(layer).is_some())
        .unwrap();
    let mut cache = KvCache::new(&config, 64, 8);
    assert_eq!(
        KvCache::bytes_for(&config, KvType::F32, 64, 8),
        Some(cache.bytes()),
        "the plan counts the checkpoint"
    );
    // Runs `n` positions whose state is made of `seed`.
    let run = |cache: &mut KvCache, n: usize, seed: f32| {
        cache.prepare(n).unwrap();
        cache.advance(n);
        let state = cache.recurrent_state(recurrent).unwrap();
        state.matrices.fill(seed);
        state.window.fill(seed);
    };
    let state = |cache: &mut KvCache| cache.recurrent_state(recurrent).unwrap().clone();
    run(&mut cache, 10, 1.0);
    assert_eq!(cache.checkpoint(), None);
    assert!(!cache.can_cut_to(5));
    cache.keep_checkpoint();
    let kept = state(&mut cache);
    run(&mut cache, 7, 2.0);
    assert!(cache.can_cut_to(10) && !cache.can_cut_to(12) && !cache.can_cut_to(9));
    cache.truncate(10);
    assert_eq!((cache.len(), state(&mut cache)), (10, kept));
    assert_eq!(cache.checkpoint(), Some(10), "kept for another cut");
    // A snapshot taken past the checkpoint restores its own state and keeps the checkpoint.
    run(&mut cache, 3, 3.0);
    let snapshot = cache.snapshot();
    run(&mut cache, 3, 4.0);
    cache.restore(&snapshot);
    assert_eq!(state(&mut cache).window[0], 3.0);
    assert_eq!(cache.checkpoint(), Some(10));
    // Cutting before it forgets it: the tokens after the cut will change.
    cache.truncate(9);
    assert_eq!(cache.checkpoint(), None);
}
