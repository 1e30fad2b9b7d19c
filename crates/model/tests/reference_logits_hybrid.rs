//! The hybrid fixture models (LFM2's short convolutions, Qwen3.5's gated delta nets beside
//! gated attention, Qwen3.5-MoE's with mixture-of-experts FFNs) against llama.cpp's tokens,
//! logits and greedy continuations, within the fixtures README's tolerances for the new
//! architectures (§3.4); and their recurrent state is exact however a prompt is split into
//! passes.

mod common;

use common::reference::{F32_NEW_ARCHS, Q8_0_NEW_ARCHS, Tolerance, check_model};
use common::{bits, fixture_model};
use rinfer_model::{KvCache, Logits, Scratch};

/// F32 weights: the architecture itself, exactly (README §3.4, F32 new dense/hybrid archs),
/// greedy ids matched up to a near-tied reference step.
const F32_HYBRID: Tolerance = Tolerance {
    greedy_margin: 1e-3,
    ..F32_NEW_ARCHS
};

/// Q8_0 weights of a hybrid MoE model, activations quantized as ggml does: the stricter of
/// README §3.4's bounds for the Q8_0 new architectures and for quantized MoE models (near-tied
/// reference logits may swap the argmax at a few positions), and the quantized models'
/// last-position cosine, which no routing flip moves on these prompts.
const Q8_0_HYBRID_MOE: Tolerance = Tolerance {
    argmax_share: 0.97,
    ..Q8_0_NEW_ARCHS
};

#[test]
fn lfm2_f32_matches_llama_cpp() {
    check_model("lfm2-tiny-f32", &F32_HYBRID);
}

#[test]
fn lfm2_q8_0_matches_llama_cpp() {
    check_model("lfm2-tiny-q8_0", &Q8_0_NEW_ARCHS);
}

#[test]
fn qwen35_f32_matches_llama_cpp() {
    check_model("qwen35-tiny-f32", &F32_HYBRID);
}

#[test]
fn qwen35_q8_0_matches_llama_cpp() {
    check_model("qwen35-tiny-q8_0", &Q8_0_NEW_ARCHS);
}

#[test]
fn qwen35moe_f32_matches_llama_cpp() {
    check_model("qwen35moe-tiny-f32", &F32_HYBRID);
}

#[test]
fn qwen35moe_q8_0_matches_llama_cpp() {
    check_model("qwen35moe-tiny-q8_0", &Q8_0_HYBRID_MOE);
}

/// A prompt fed in one pass, token by token, and in uneven chunks gives the same logits bit
/// for bit, on one thread and on several: the recurrent state sees the same arithmetic.
#[test]
fn recurrent_state_is_exact_across_batch_splits_and_threads() {
    for name in ["lfm2-tiny-q8_0", "qwen35-tiny-f32", "qwen35moe-tiny-q8_0"] {
        let model = fixture_model(name);
        let tokens = &common::reference_prompts(name)[0];
        let n = tokens.len();
        let vocab = model.config.vocab_size;
        let mut want = Vec::new();
        let mut scratch = Scratch::new(&model.config, n);
        let mut cache = KvCache::new(&model.config, n, n);
        let all = model
            .forward(tokens, &mut cache, &mut scratch, Logits::All)
            .unwrap();
        want.extend(bits(all));
        for chunk in [1, 3, 7] {
            let run = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                pool.install(|| {
                    let mut cache = KvCache::new(&model.config, n, n);
                    let mut scratch = Scratch::new(&model.config, n);
                    let mut got = Vec::new();
                    for part in tokens.chunks(chunk) {
                        let logits = model
                            .forward(part, &mut cache, &mut scratch, Logits::All)
                            .unwrap();
                        got.extend(bits(logits));
                    }
                    got
                })
            };
            for threads in [1, 3] {
                let got = run(threads);
                assert_eq!(got.len(), n * vocab);
                assert!(
                    got == want,
                    "{name}: chunks of {chunk} on {threads} threads"
                );
            }
        }
        // Cutting the cache to empty zeroes the state: the prompt runs again identically.
        cache.clear();
        let again = model
            .forward(tokens, &mut cache, &mut scratch, Logits::All)
            .unwrap();
        assert!(bits(again) == want, "{name}: after clear");
    }
}
