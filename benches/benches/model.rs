//! One decode step (a token after a 64-token context) and one 128-token prefill of the default
//! model, whose path `RINFER_TEST_MODEL` gives; skipped, saying so, when it is unset.

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rinfer_benches::default_model;
use rinfer_model::{KvCache, Logits, Model, Scratch};

/// Tokens of the prefill.
const PREFILL: usize = 128;

/// Tokens in the cache before the measured decode step.
const CONTEXT: usize = 64;

/// Deterministic prompt tokens within the vocabulary.
fn prompt(len: usize, vocab: usize) -> Vec<u32> {
    (0..len).map(|i| ((i * 7919 + 17) % vocab) as u32).collect()
}

fn forward(c: &mut Criterion) {
    let Some(path) = default_model() else {
        return;
    };
    let (model, _file) =
        Model::open_gguf(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let config = &model.config;
    let tokens = prompt(PREFILL, config.vocab_size);
    let mut group = c.benchmark_group("model");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));

    let mut cache = KvCache::new(config, PREFILL + 1, PREFILL);
    let mut scratch = Scratch::new(config, PREFILL);
    group.throughput(Throughput::Elements(PREFILL as u64));
    group.bench_function("prefill_128", |b| {
        b.iter(|| {
            cache.clear();
            model
                .forward(&tokens, &mut cache, &mut scratch, Logits::Last)
                .expect("prefill");
        })
    });

    cache.clear();
    model
        .forward(&tokens[..CONTEXT], &mut cache, &mut scratch, Logits::Last)
        .expect("context");
    group.throughput(Throughput::Elements(1));
    group.bench_function("decode_step", |b| {
        b.iter(|| {
            cache.truncate(CONTEXT);
            model
                .forward(
                    &tokens[CONTEXT..=CONTEXT],
                    &mut cache,
                    &mut scratch,
                    Logits::Last,
                )
                .expect("decode");
        })
    });
    group.finish();
}

criterion_group!(benches, forward);
criterion_main!(benches);
