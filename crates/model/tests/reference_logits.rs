//! Logits of every fixture model against llama.cpp's, within the fixtures' stated tolerances.

mod common;

use common::reference::{argmax, check_greedy, cosine, last_logits, log_sum_exp, refs};
use common::{case_tokens, fixtures};
use rinfer_model::{KvCache, Logits, Model, Scratch};

/// Tolerances of the fixtures README §3.4 for one model class.
struct Tolerance {
    max_abs: f64,
    mean_abs: f64,
    argmax_margin: f64,
    /// Least cosine similarity of the full-vocabulary logits at the last position.
    min_cosine: f64,
    /// Positions per case whose logits may move past `max_abs` (and their argmax with them):
    /// a mixture of experts flips a routing decision where two experts' scores nearly tie
    /// (README §3.4, "routing is discontinuous").
    routing_flips: usize,
}

/// F32 weights, RMSNorm and SwiGLU (README §3.4).
const F32_RMS: Tolerance = Tolerance {
    max_abs: 1e-3,
    mean_abs: 1e-4,
    argmax_margin: 0.0,
    min_cosine: 0.99999,
    routing_flips: 0,
};
const F32_GELU: Tolerance = Tolerance {
    max_abs: 1e-2,
    mean_abs: 2e-3,
    argmax_margin: 1e-2,
    min_cosine: 0.99999,
    routing_flips: 0,
};
/// Quantized weights, activations quantized as ggml does (README §3.4).
const QUANTIZED: Tolerance = Tolerance {
    max_abs: 0.5,
    mean_abs: 0.06,
    argmax_margin: 0.5,
    min_cosine: 0.995,
    routing_flips: 0,
};

/// F32 gemma4 with exact tanh GELU: attention scale 1.0 on RMS-normed q and k makes it
/// sensitive (README §3.4).
const F32_GEMMA4: Tolerance = Tolerance {
    max_abs: 0.1,
    mean_abs: 5e-3,
    argmax_margin: 0.1,
    min_cosine: 0.99999,
    routing_flips: 0,
};
/// F32 gemma4 with experts: as [`F32_GEMMA4`], but the GELU differences (exact here, ggml's
/// f16 table in llama.cpp) reach the routers, so a near-tie may pick another expert at a
/// position (observed: one position of the 300, 0.46).
const F32_GEMMA4_EXPERTS: Tolerance = Tolerance {
    routing_flips: 1,
    ..F32_GEMMA4
};
/// Q8_0 gemma4 (README §3.4, the exact-math class: 1.5 per position, mean 0.15). rinfer
/// quantizes activations as ggml does but computes GELU exactly rather than through ggml's f16
/// table, which the Q8_0 products amplify: observed max 0.98, mean 0.048, cosine ≥ 0.9996.
const Q8_0_GEMMA4: Tolerance = Tolerance {
    max_abs: 1.5,
    mean_abs: 0.15,
    argmax_margin: 1.0,
    min_cosine: 0.995,
    routing_flips: 0,
};

fn open_fixture(name: &str) -> Model {
    let (model, _file) = Model::open_gguf(fixtures().join(format!("models/{name}.gguf"))).unwrap();
    model
}

fn check_model(name: &str, tol: &Tolerance) {
    check_against_refs(&open_fixture(name), name, tol);
}

/// Checks `model` against the llama.cpp references of the fixture model `name`.
fn check_against_refs(model: &Model, name: &str, tol: &Tolerance) {
    let vocab = model.config.vocab_size;
    for case in refs(name)["cases"].as_array().unwrap() {
        let tokens = case_tokens(case);
        let n = tokens.len();
        let mut cache = KvCache::new(&model.config, n, n);
        let mut scratch = Scratch::new(&model.config, n);
        let logits = model
            .forward(&tokens, &mut cache, &mut scratch, Logits::All)
            .unwrap();
        let (mut max_abs, mut sum_abs, mut count, mut flips) = (0f64, 0f64, 0usize, 0usize);
        for i in 0..n {
            let row = &logits[i * vocab..(i + 1) * vocab];
            let ids = case["top_ids"][i].as_array().unwrap();
            let expected = case["top_logits"][i].as_array().unwrap();
            let mut position_max = 0f64;
            for (id, want) in ids.iter().zip(expected) {
                let got = row[id.as_u64().unwrap() as usize] as f64;
                let diff = (got - want.as_f64().unwrap()).abs();
                position_max = position_max.max(diff);
                sum_abs += diff;
                count += 1;
            }
            if position_max > tol.max_abs && flips < tol.routing_flips {
                flips += 1;
                continue;
            }
            max_abs = max_abs.max(position_max);
            let lse = case["logsumexp"][i].as_f64().unwrap();
            assert!(
                (log_sum_exp(row) - lse).abs() <= tol.max_abs,
                "{name} {} pos {i}: logsumexp {} vs {lse}",
                case["case"],
                log_sum_exp(row)
            );
            let margin = case["top2_margin"][i].as_f64().unwrap();
            if margin > tol.argmax_margin {
                assert_eq!(
                    argmax(row) as u64,
                    case["argmax"][i].as_u64().unwrap(),
                    "{name} {} pos {i}: argmax (margin {margin})",
                    case["case"]
                );
            }
        }
        let mean_abs = sum_abs / count as f64;
        let cos = cosine(&logits[(n - 1) * vocab..n * vocab], &last_logits(case));
        eprintln!(
            "{name} {}: max abs {max_abs:.2e} mean abs {mean_abs:.2e} last cosine {cos:.6} \
             ({flips} routing flips)",
            case["case"]
        );
        assert!(
            cos >= tol.min_cosine,
            "{name} {}: last-position cosine {cos}",
            case["case"]
        );
        assert!(
            max_abs <= tol.max_abs,
            "{name} {}: max abs {max_abs}",
            case["case"]
        );
        assert!(
            mean_abs <= tol.mean_abs,
            "{name} {}: mean abs {mean_abs}",
            case["case"]
        );
    }
}

#[test]
fn gemma3_f32_matches_llama_cpp() {
    check_model("gemma3-tiny-f32", &F32_GELU);
}

#[test]
fn gemma4_f32_matches_llama_cpp() {
    check_model("gemma4-tiny-f32", &F32_GEMMA4);
}

/// Gemma 4 whose last two layers (sliding, full) read the KV caches of layers 1 and 2.
#[test]
fn gemma4_kv_sharing_matches_llama_cpp() {
    check_model("gemma4-kvshare-tiny-f32", &F32_GEMMA4);
}

/// Gemma 4 with eight experts (top 2) beside the dense FFN on every layer.
#[test]
fn gemma4_experts_match_llama_cpp() {
    check_model("gemma4-moe-tiny-f32", &F32_GEMMA4_EXPERTS);
}

/// The same experts with each layer's gate and up stored as one `ffn_gate_up_exps`.
#[test]
fn gemma4_fused_gate_up_experts_match_llama_cpp() {
    check_model("gemma4-moe-fused-tiny-f32", &F32_GEMMA4_EXPERTS);
}

#[test]
fn gemma4_q8_0_matches_llama_cpp() {
    check_model("gemma4-tiny-q8_0", &Q8_0_GEMMA4);
}

#[test]
fn gemma3_q4_k_m_matches_llama_cpp() {
    check_model("gemma3-tiny-q4_k_m", &QUANTIZED);
}

#[test]
fn qwen2_q4_k_m_matches_llama_cpp() {
    check_model("qwen2-tiny-q4_k_m", &QUANTIZED);
}

#[test]
fn qwen3_q5_k_m_matches_llama_cpp() {
    check_model("qwen3-tiny-q5_k_m", &QUANTIZED);
}

#[test]
fn phi2_q3_k_m_matches_llama_cpp() {
    check_model("phi2-tiny-q3_k_m", &QUANTIZED);
}

#[test]
fn gpt2_q2_k_matches_llama_cpp() {
    check_model("gpt2-tiny-q2_k", &QUANTIZED);
}

#[test]
fn llama_q8_0_matches_llama_cpp() {
    check_model("llama-tiny-q8_0", &QUANTIZED);
}

#[test]
fn llama_q4_k_matches_llama_cpp() {
    check_model("llama-tiny-q4_k", &QUANTIZED);
}

/// The Hugging Face safetensors twin of llama3bpe-tiny (unpermuted q/k, rotate-half RoPE) gives
/// the logits llama.cpp computed from its GGUF twin.
#[test]
fn safetensors_twin_matches_its_gguf_twin() {
    let model = Model::open_safetensors(fixtures().join("llama3bpe-tiny-hf")).unwrap();
    check_against_refs(&model, "llama3bpe-tiny-f32", &F32_RMS);
}

/// A checkpoint of a `model_type` rinfer does not load is refused by name.
#[test]
fn safetensors_checkpoint_of_an_unknown_model_type_is_refused() {
    let dir = std::env::temp_dir().join(format!("rinfer-unknown-arch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let twin = fixtures().join("llama3bpe-tiny-hf");
    let config = std::fs::read_to_string(twin.join("config.json")).unwrap();
    std::fs::write(
        dir.join("config.json"),
        config.replace("\"llama\"", "\"gpt_neox\""),
    )
    .unwrap();
    std::fs::copy(
        twin.join("model.safetensors"),
        dir.join("model.safetensors"),
    )
    .unwrap();
    let err = Model::open_safetensors(&dir).err().unwrap().to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(err.contains("gpt_neox"), "{err}");
}

/// Gemma 4's greedy continuation, token by token through its sliding-window rings and its
/// full-attention blocks (and, with KV sharing, through the caches of earlier layers; with
/// experts, through a routing per token), equals llama.cpp's up to the first step whose margin
/// is below the F32 tolerance (README §3.4).
#[test]
fn gemma4_f32_greedy_matches_llama_cpp() {
    for name in [
        "gemma4-tiny-f32",
        "gemma4-kvshare-tiny-f32",
        "gemma4-moe-tiny-f32",
        "gemma4-moe-fused-tiny-f32",
    ] {
        let model = open_fixture(name);
        let compared: usize = refs(name)["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|case| check_greedy(&model, name, case, F32_GEMMA4.argmax_margin))
            .sum();
        assert!(
            compared >= 8,
            "{name}: only {compared} greedy steps compared"
        );
    }
}

/// The layers that share an earlier layer's KV cache keep none: the cache of the KV-sharing
/// model is exactly that of its first three layers (the base model's).
#[test]
fn gemma4_shared_layers_allocate_no_kv_cache() {
    let shared = open_fixture("gemma4-kvshare-tiny-f32");
    let base = open_fixture("gemma4-tiny-f32");
    assert_eq!(shared.config.layers, 5);
    assert_eq!(shared.config.kv_source_of(3), Some(1));
    assert_eq!(shared.config.kv_source_of(4), Some(2));
    let kv = rinfer_kernels::ops::KvType::F32;
    let bytes = |m: &Model| KvCache::bytes_for(&m.config, kv, 256, 32).unwrap();
    assert_eq!(bytes(&shared), bytes(&base));
    assert_eq!(
        KvCache::new(&shared.config, 256, 32).bytes(),
        KvCache::new(&base.config, 256, 32).bytes()
    );
}
