//! Logits are bit-identical however the work is split: one batched prefill or token by token,
//! one thread or two, a sequence alone or beside fifteen others in one batch, for every KV cache
//! type.

mod common;

use common::{FIXTURE_MODELS, batched_logits_with, bits, default_model, fixture_model};
use rinfer_model::{KvCache, KvType, Logits, Model, Scratch, SeqBatch};

/// Logits of every position, feeding one token per forward call.
fn token_by_token_logits(model: &Model, kv_type: KvType, tokens: &[u32]) -> Vec<f32> {
    let mut cache = KvCache::with_type(&model.config, kv_type, tokens.len(), 1);
    let mut scratch = Scratch::new(&model.config, 1);
    let mut all = Vec::new();
    for &token in tokens {
        let logits = model
            .forward(&[token], &mut cache, &mut scratch, Logits::Last)
            .unwrap();
        all.extend_from_slice(logits);
    }
    all
}

fn in_pool<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

/// `tokens`' logits at every position when run in one batch beside `others`, each sequence
/// with its own cache, then one decode step for all of them together.
fn logits_beside(
    model: &Model,
    kv_type: KvType,
    tokens: &[u32],
    others: &[Vec<u32>],
) -> (Vec<f32>, Vec<f32>) {
    let c = &model.config;
    let total = tokens.len() + others.iter().map(Vec::len).sum::<usize>();
    let mut caches: Vec<KvCache> = (0..=others.len())
        .map(|_| KvCache::with_type(c, kv_type, total + 1, total))
        .collect();
    let mut scratch = Scratch::new(c, total);
    let prompts: Vec<&[u32]> = std::iter::once(tokens)
        .chain(others.iter().map(Vec::as_slice))
        .collect();
    let mut seqs = batch(&prompts, &mut caches, Logits::All);
    let prefill = model.forward_batch(&mut seqs, &mut scratch).unwrap()
        [..tokens.len() * c.vocab_size]
        .to_vec();
    let next: Vec<[u32; 1]> = (0..prompts.len()).map(|i| [i as u32 + 7]).collect();
    let mut seqs = batch(&next, &mut caches, Logits::Last);
    let decode = model.forward_batch(&mut seqs, &mut scratch).unwrap()[..c.vocab_size].to_vec();
    (prefill, decode)
}

/// One batch entry per sequence: its tokens, fed to its own cache, with `logits`.
fn batch<'a, T: AsRef<[u32]>>(
    tokens: &'a [T],
    caches: &'a mut [KvCache],
    logits: Logits,
) -> Vec<SeqBatch<'a>> {
    tokens
        .iter()
        .zip(caches.iter_mut())
        .map(|(tokens, cache)| SeqBatch {
            tokens: tokens.as_ref(),
            cache,
            logits,
        })
        .collect()
}

/// Fifteen prompts of different lengths and contents to run beside the one under test.
fn other_prompts(vocab: usize) -> Vec<Vec<u32>> {
    (0..15)
        .map(|i| {
            (0..1 + i % 6)
                .map(|j| ((i * 31 + j * 17 + 3) % vocab) as u32)
                .collect()
        })
        .collect()
}

fn check_model(model: &Model, kv_type: KvType, tokens: &[u32], name: &str) {
    let name = format!("{name} ({kv_type} KV)");
    let batched = bits(&batched_logits_with(model, kv_type, tokens));
    assert_eq!(
        batched,
        bits(&token_by_token_logits(model, kv_type, tokens)),
        "{name}: one batch vs token by token"
    );
    for threads in [1, 2, 3] {
        assert_eq!(
            batched,
            bits(&in_pool(threads, || batched_logits_with(
                model, kv_type, tokens
            ))),
            "{name}: {threads} threads"
        );
    }
    let others = other_prompts(model.config.vocab_size);
    let (alone_prefill, alone_decode) = logits_beside(model, kv_type, tokens, &[]);
    let (prefill, decode) = logits_beside(model, kv_type, tokens, &others);
    assert_eq!(
        batched,
        bits(&alone_prefill),
        "{name}: forward_batch of one"
    );
    assert_eq!(batched, bits(&prefill), "{name}: prefill beside 15 others");
    assert_eq!(
        bits(&alone_decode),
        bits(&decode),
        "{name}: decode beside 15 others"
    );
}

#[test]
fn fixture_models_give_the_same_bits_however_the_work_is_split() {
    for name in FIXTURE_MODELS {
        let model = fixture_model(name);
        let tokens = &common::reference_prompts(name)[1];
        for kv_type in common::kv_types(&model.config) {
            check_model(&model, kv_type, tokens, name);
        }
    }
}

#[test]
fn default_model_gives_the_same_bits_however_the_work_is_split() {
    let (model, _file) = Model::open_gguf(default_model()).unwrap();
    let tokens = [
        2, 818, 5279, 529, 7001, 563, 9079, 236764, 532, 506, 5279, 529,
    ];
    for kv_type in KvType::ALL {
        check_model(&model, kv_type, &tokens, "gemma3-270m");
    }
}
