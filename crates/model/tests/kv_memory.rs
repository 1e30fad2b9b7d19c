//! A long run of requests with distinct prefixes keeps the process's memory flat: the KV
//! blocks of finished sequences and evicted prefixes go back to the pool and are reused, and
//! nothing else grows with the number of requests. One test in its own binary, so that no
//! other test's memory moves the process's resident size.

mod common;

use common::fixtures;
use rinfer_model::{DeviceRequest, Engine, EngineSettings, LoadedModel, Request, SamplingParams};

/// Resident bytes of this process (the second field of `/proc/self/statm`, in pages of 4 KiB),
/// or `None` where that file is missing.
fn resident_bytes() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[test]
fn a_long_run_of_distinct_prefixes_keeps_the_pool_and_the_resident_memory_flat() {
    let loaded = LoadedModel::open(fixtures().join("models/gemma3-tiny-q4_k_m.gguf")).unwrap();
    let settings = EngineSettings {
        max_batch: 8,
        prefix_cache_bytes: 1 << 20,
        ..EngineSettings::parallel(2, 160)
    };
    let mut engine = Engine::new(&loaded, settings, DeviceRequest::Cpu).unwrap();
    let mut run = |seed: u32| {
        let prompt = (0..40 + seed % 9)
            .map(|i| 3 + (seed * 131 + i * 17) % 900)
            .collect();
        let request = Request::new(prompt, 12).with_sampling(SamplingParams::greedy());
        engine.generate(request, |_| {}).unwrap();
        (engine.kv_pool_stats(), engine.prefix_stats())
    };
    for seed in 0..40 {
        run(seed);
    }
    let (warm_pool, warm_prefix) = run(40);
    let warm_resident = resident_bytes();
    for seed in 41..240 {
        let (pool, prefix) = run(seed);
        assert!(prefix.bytes <= prefix.budget, "{prefix:?}");
        assert_eq!(pool.blocks_allocated, warm_pool.blocks_allocated, "{seed}");
    }
    let (_, prefix) = run(240);
    assert!(prefix.evictions > warm_prefix.evictions + 400, "{prefix:?}");
    assert_eq!(prefix.requests, 241, "every request ran");
    if let (Some(before), Some(after)) = (warm_resident, resident_bytes()) {
        // 200 requests of about four blocks each went through: had any of them leaked, the
        // growth would be a multiple of the margin.
        let margin = 4 << 20;
        assert!(
            after <= before + margin,
            "resident memory grew from {before} to {after} bytes"
        );
    }
}
