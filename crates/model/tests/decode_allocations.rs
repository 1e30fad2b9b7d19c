//! After warm-up, a decode step (forward pass plus sampling) makes no heap allocation, on any
//! thread and with every KV cache type: every buffer is sized once when the cache, scratch and
//! sampler are created.
//!
//! The decode loop runs on a worker of the thread pool, as the engine runs it: rayon queues the
//! jobs of a worker in its own deque, whereas jobs sent in from outside the pool go through a
//! shared queue that allocates a block now and then.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{FIXTURE_MODELS, default_model, fixture_model};
use rinfer_model::{KvCache, KvType, Logits, Model, Sampler, SamplingParams, Scratch};

struct CountingAllocator;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts them.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `realloc`'s contract, which we pass on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Heap allocations made by `steps` decode steps with a `kv_type` cache after a prompt and two
/// warm-up steps.
fn allocations_per_decode(model: &Model, kv_type: KvType, steps: usize) -> usize {
    let c = &model.config;
    let prompt: Vec<u32> = (0..8)
        .map(|i| (i * 7 + 2) as u32 % c.vocab_size as u32)
        .collect();
    let mut cache = KvCache::with_type(c, kv_type, prompt.len() + steps + 2, prompt.len());
    let mut scratch = Scratch::new(c, prompt.len());
    let params = SamplingParams {
        temperature: 0.8,
        top_k: 40,
        top_p: 0.95,
        min_p: 0.05,
        repeat_penalty: 1.1,
        frequency_penalty: 0.1,
        presence_penalty: 0.1,
        ..SamplingParams::default()
    };
    let mut sampler = Sampler::new(params, c.vocab_size);
    let mut logits = vec![0.0; c.vocab_size];
    let mut step = |token: u32, cache: &mut KvCache, scratch: &mut Scratch| {
        logits.copy_from_slice(
            model
                .forward(&[token], cache, scratch, Logits::Last)
                .unwrap(),
        );
        let next = sampler.sample(&mut logits);
        sampler.accept(next);
        next
    };
    model
        .forward(&prompt, &mut cache, &mut scratch, Logits::Last)
        .unwrap();
    let mut token = step(prompt[0], &mut cache, &mut scratch);
    token = step(token, &mut cache, &mut scratch);
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for _ in 0..steps {
        token = step(token, &mut cache, &mut scratch);
    }
    ALLOCATIONS.load(Ordering::SeqCst) - before
}

#[test]
fn decode_steps_do_not_allocate() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    for name in FIXTURE_MODELS {
        let model = fixture_model(name);
        for kv_type in common::kv_types(&model.config) {
            assert_eq!(
                pool.install(|| allocations_per_decode(&model, kv_type, 16)),
                0,
                "{name} {kv_type}"
            );
        }
    }
    let (model, _file) = Model::open_gguf(default_model()).unwrap();
    for kv_type in KvType::ALL {
        assert_eq!(
            pool.install(|| allocations_per_decode(&model, kv_type, 8)),
            0,
            "gemma3-270m {kv_type}"
        );
    }
}
