//! `cargo xtask bench make-model [llama-1b|qwen3moe] [PATH]`: models with seeded random weights
//! in llama.cpp's Q4_K_M mix and a synthetic SentencePiece vocabulary, so that rinfer and
//! llama.cpp can be measured on models larger than the default one without downloading them:
//! a llama of 1.1 billion parameters (TinyLlama's shape) and a Qwen3-MoE of 5.1 billion with
//! 64 experts, 6 used per token (about 13 % of the weights read per token; Qwen3-30B-A3B's
//! layout at a sixth of its size). Their text is noise; their speed is that of any model of
//! their shape and types.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use rinfer_formats::GgmlType;
use rinfer_formats::gguf::{GgufWriter, MetadataValue};

use super::synthetic_vocab;

/// The experts of a mixture-of-experts feed-forward block.
#[derive(Clone, Copy, Debug)]
pub struct Experts {
    /// Experts per layer.
    pub count: usize,
    /// Experts the router picks per token.
    pub used: usize,
    /// Feed-forward width of one expert.
    pub ffn: usize,
}

/// A synthetic model's architecture and dimensions.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// The GGUF architecture: `llama` (dense) or `qwen3moe` (with [`Shape::experts`]).
    pub arch: &'static str,
    /// The name of the model's file in the models cache.
    pub file_name: &'static str,
    /// Decoder blocks.
    pub layers: usize,
    /// Embedding width.
    pub hidden: usize,
    /// Feed-forward width.
    pub ffn: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Trained context length.
    pub context: usize,
    /// The experts, for a mixture of experts.
    pub experts: Option<Experts>,
}

/// TinyLlama 1.1B's shape.
pub const LLAMA_1B: Shape = Shape {
    arch: "llama",
    file_name: "llama-1b-synthetic-q4_k_m.gguf",
    layers: 22,
    hidden: 2048,
    ffn: 5632,
    heads: 32,
    kv_heads: 4,
    vocab: 32_000,
    context: 2048,
    experts: None,
};

/// A Qwen3-MoE of 5.1 billion parameters: 16 layers of 64 experts, 6 used per token.
pub const QWEN3_MOE: Shape = Shape {
    arch: "qwen3moe",
    file_name: "qwen3moe-5b-synthetic-q4_k_m.gguf",
    layers: 16,
    hidden: 2048,
    ffn: 768,
    heads: 32,
    kv_heads: 4,
    vocab: 32_000,
    context: 4096,
    experts: Some(Experts {
        count: 64,
        used: 6,
        ffn: 768,
    }),
};

/// The synthetic models, by the name the bench options give them.
pub const MODELS: [(&str, &Shape); 2] = [("llama-1b", &LLAMA_1B), ("qwen3moe", &QWEN3_MOE)];

/// The synthetic model called `name`.
pub fn by_name(name: &str) -> Option<&'static Shape> {
    MODELS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, shape)| shape)
}

/// The seed of every weight; the same seed writes the same file.
const SEED: u64 = 0x5EED_0001;

/// Weights are uniform with this standard deviation (a usual initialisation scale).
const WEIGHT_STD: f32 = 0.02;

/// `general.file_type` of a Q4_K_M file (llama.cpp's `LLAMA_FTYPE_MOSTLY_Q4_K_M`).
const FILE_TYPE_Q4_K_M: u32 = 15;

/// Runs `make-model [NAME] [PATH]`: writes the model NAME (`llama-1b` by default) to PATH (by
/// default into the models cache).
pub fn run(args: &[String]) -> Result<()> {
    const USAGE: &str = "usage: cargo xtask bench make-model [llama-1b|qwen3moe] [PATH]";
    let (shape, rest) = match args.split_first() {
        Some((name, rest)) if by_name(name).is_some() => (by_name(name).unwrap_or(&LLAMA_1B), rest),
        _ => (&LLAMA_1B, args),
    };
    let path = match rest {
        [] => super::cache::models_dir()?.join(shape.file_name),
        [path] => PathBuf::from(path),
        _ => bail!(USAGE),
    };
    write(shape, &path)?;
    println!("{}", path.display());
    Ok(())
}

/// The model of `shape` in the models cache, written first if it is not there.
pub fn cached(shape: &Shape) -> Result<PathBuf> {
    let path = super::cache::models_dir()?.join(shape.file_name);
    if !path.is_file() {
        write(shape, &path)?;
    }
    Ok(path)
}

/// Writes a model of `shape` to `path` (through a temporary file, so a half-written model is
/// never left under the final name).
pub fn write(shape: &Shape, path: &Path) -> Result<()> {
    let start = Instant::now();
    eprintln!(
        "==> writing a synthetic {shape:?} model to {}",
        path.display()
    );
    let mut writer = GgufWriter::new();
    for (key, value) in metadata(shape) {
        writer.add_metadata(&key, value)?;
    }
    for (name, ty, dims) in tensors(shape) {
        let data = match ty {
            // Routers: random, so that tokens spread over the experts as trained ones do.
            GgmlType::F32 if name.ends_with("ffn_gate_inp.weight") => random_f32(&name, &dims),
            // Norm weights: ones, as a freshly initialised model has.
            GgmlType::F32 => 1f32
                .to_le_bytes()
                .repeat(dims.iter().product::<u64>() as usize),
            _ => random_quantized(&name, ty, &dims)?,
        };
        writer.add_tensor(&name, ty, &dims, data)?;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let partial = path.with_extension("gguf.partial");
    writer.write_file(&partial)?;
    std::fs::rename(&partial, path)
        .with_context(|| format!("cannot move {} into place", partial.display()))?;
    eprintln!("==> written in {:.0} s", start.elapsed().as_secs_f64());
    Ok(())
}

fn metadata(s: &Shape) -> Vec<(String, MetadataValue)> {
    use MetadataValue::{F32, String as Str, U32};
    let u32 = |n: usize| U32(n as u32);
    let mut entries = vec![
        ("general.architecture".into(), Str(s.arch.into())),
        (
            "general.name".into(),
            Str(format!("{} synthetic", s.file_name)),
        ),
        ("general.file_type".into(), U32(FILE_TYPE_Q4_K_M)),
        ("general.quantization_version".into(), U32(2)),
    ];
    let head_dim = s.hidden / s.heads;
    let mut arch = vec![
        ("context_length", u32(s.context)),
        ("embedding_length", u32(s.hidden)),
        ("block_count", u32(s.layers)),
        ("feed_forward_length", u32(s.ffn)),
        ("rope.dimension_count", u32(head_dim)),
        (
            "rope.freq_base",
            F32(if s.experts.is_some() { 1e6 } else { 1e4 }),
        ),
        ("attention.head_count", u32(s.heads)),
        ("attention.head_count_kv", u32(s.kv_heads)),
        ("attention.layer_norm_rms_epsilon", F32(1e-5)),
        ("vocab_size", u32(s.vocab)),
    ];
    if let Some(e) = s.experts {
        arch.extend([
            ("attention.key_length", u32(head_dim)),
            ("attention.value_length", u32(head_dim)),
            ("expert_count", u32(e.count)),
            ("expert_used_count", u32(e.used)),
            ("expert_feed_forward_length", u32(e.ffn)),
        ]);
    }
    entries.extend(
        arch.into_iter()
            .map(|(k, v)| (format!("{}.{k}", s.arch), v)),
    );
    entries.extend(
        synthetic_vocab::metadata(s.vocab)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v)),
    );
    entries
}

/// Every tensor's name, type and GGUF dims (innermost first), in file order.
fn tensors(s: &Shape) -> Vec<(String, GgmlType, Vec<u64>)> {
    let (hidden, ffn, vocab) = (s.hidden as u64, s.ffn as u64, s.vocab as u64);
    let kv = (s.hidden / s.heads * s.kv_heads) as u64;
    let mut list = vec![
        (
            "token_embd.weight".to_string(),
            GgmlType::Q4K,
            vec![hidden, vocab],
        ),
        ("output_norm.weight".into(), GgmlType::F32, vec![hidden]),
        ("output.weight".into(), GgmlType::Q6K, vec![hidden, vocab]),
    ];
    for i in 0..s.layers {
        let more_bits = if use_more_bits(i, s.layers) {
            GgmlType::Q6K
        } else {
            GgmlType::Q4K
        };
        let attention = [
            ("attn_norm", GgmlType::F32, vec![hidden]),
            ("attn_q", GgmlType::Q4K, vec![hidden, hidden]),
            ("attn_k", GgmlType::Q4K, vec![hidden, kv]),
            ("attn_v", more_bits, vec![hidden, kv]),
            ("attn_output", GgmlType::Q4K, vec![hidden, hidden]),
            ("ffn_norm", GgmlType::F32, vec![hidden]),
        ];
        let head_dim = (s.hidden / s.heads) as u64;
        let ffn_block = match s.experts {
            None => vec![
                ("ffn_gate", GgmlType::Q4K, vec![hidden, ffn]),
                ("ffn_up", GgmlType::Q4K, vec![hidden, ffn]),
                ("ffn_down", more_bits, vec![ffn, hidden]),
            ],
            Some(e) => {
                let (n, eff) = (e.count as u64, e.ffn as u64);
                vec![
                    ("attn_q_norm", GgmlType::F32, vec![head_dim]),
                    ("attn_k_norm", GgmlType::F32, vec![head_dim]),
                    ("ffn_gate_inp", GgmlType::F32, vec![hidden, n]),
                    ("ffn_gate_exps", GgmlType::Q4K, vec![hidden, eff, n]),
                    ("ffn_up_exps", GgmlType::Q4K, vec![hidden, eff, n]),
                    ("ffn_down_exps", more_bits, vec![eff, hidden, n]),
                ]
            }
        };
        list.extend(
            attention
                .into_iter()
                .chain(ffn_block)
                .map(|(role, ty, dims)| (format!("blk.{i}.{role}.weight"), ty, dims)),
        );
    }
    list
}

/// llama.cpp's Q4_K_M rule for `attn_v` and `ffn_down` of layer `i` of `n`: Q6_K in the first
/// and last eighth of the layers and in every third layer between, Q4_K elsewhere.
fn use_more_bits(i: usize, n: usize) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// A tensor of uniform random values quantized to `ty`, row by row on every core; each row's
/// values depend only on the seed, the tensor's name and the row, never on the threads.
fn random_quantized(name: &str, ty: GgmlType, dims: &[u64]) -> Result<Vec<u8>> {
    let cols = dims[0] as usize;
    let rows = dims[1..].iter().product::<u64>() as usize;
    let row_bytes = cols / ty.block_size() * ty.type_size();
    let tensor_seed = name.bytes().fold(SEED, |h, b| splitmix(h ^ u64::from(b)));
    let mut data = vec![0u8; rows * row_bytes];
    let workers = std::thread::available_parallelism().map_or(1, usize::from);
    let rows_per_worker = rows.div_ceil(workers);
    std::thread::scope(|scope| {
        let chunks = data.chunks_mut(rows_per_worker * row_bytes).enumerate();
        let handles: Vec<_> = chunks
            .map(|(worker, chunk)| {
                scope.spawn(move || {
                    let mut values = vec![0f32; cols];
                    for (r, out) in chunk.chunks_mut(row_bytes).enumerate() {
                        let row = (worker * rows_per_worker + r) as u64;
                        fill_uniform(&mut values, tensor_seed ^ splitmix(row));
                        rinfer_kernels::quantize_row(ty, &values, out)?;
                    }
                    Ok::<(), rinfer_kernels::KernelError>(())
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join()
                .map_err(|_| anyhow::anyhow!("a quantizing thread panicked"))?
                .with_context(|| format!("cannot quantize {name} to {}", ty.name()))
        })
    })?;
    Ok(data)
}

/// A tensor of uniform random f32 values (little-endian bytes), drawn as [`random_quantized`]
/// draws its rows.
fn random_f32(name: &str, dims: &[u64]) -> Vec<u8> {
    let tensor_seed = name.bytes().fold(SEED, |h, b| splitmix(h ^ u64::from(b)));
    let mut values = vec![0f32; dims.iter().product::<u64>() as usize];
    fill_uniform(&mut values, tensor_seed);
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Fills `values` with uniform numbers of standard deviation [`WEIGHT_STD`] drawn from `seed`.
fn fill_uniform(values: &mut [f32], seed: u64) {
    let half_width = WEIGHT_STD * 3f32.sqrt();
    let mut state = seed;
    for v in values {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let unit = (splitmix(state) >> 40) as f32 / (1u64 << 24) as f32;
        *v = (2.0 * unit - 1.0) * half_width;
    }
}

/// SplitMix64's output function: a well-mixed 64-bit hash of `x`.
fn splitmix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rinfer_formats::gguf::GgufFile;

    const TINY: Shape = Shape {
        arch: "llama",
        file_name: "tiny.gguf",
        layers: 8,
        hidden: 256,
        ffn: 512,
        heads: 4,
        kv_heads: 2,
        vocab: 1024,
        context: 128,
        experts: None,
    };

    const TINY_MOE: Shape = Shape {
        arch: "qwen3moe",
        file_name: "tiny-moe.gguf",
        ffn: 256,
        experts: Some(Experts {
            count: 8,
            used: 2,
            ffn: 256,
        }),
        ..TINY
    };

    #[test]
    fn attn_v_and_ffn_down_get_q6_k_where_llama_cpp_q4_k_m_puts_it() {
        let more: Vec<usize> = (0..22).filter(|&i| use_more_bits(i, 22)).collect();
        assert_eq!(more, [0, 1, 4, 7, 10, 13, 16, 19, 20, 21]);
    }

    #[test]
    fn the_1b_shape_has_about_1_1_billion_parameters() {
        let params = params(&LLAMA_1B);
        assert!((1_090_000_000..1_110_000_000).contains(&params), "{params}");
    }

    fn params(shape: &Shape) -> u64 {
        let tensors = tensors(shape);
        tensors
            .iter()
            .map(|(_, _, dims)| dims.iter().product::<u64>())
            .sum()
    }

    #[test]
    fn the_moe_shape_has_about_5_billion_parameters_of_which_a_tenth_are_read_per_token() {
        let total = params(&QWEN3_MOE);
        assert!((5_000_000_000..5_200_000_000).contains(&total), "{total}");
        let experts = tensors(&QWEN3_MOE)
            .iter()
            .filter(|(name, _, _)| name.ends_with("_exps.weight"))
            .map(|(_, _, dims)| dims.iter().product::<u64>())
            .sum::<u64>();
        let active = total - experts + experts * 6 / 64;
        let share = active as f64 / total as f64;
        assert!((0.1..0.15).contains(&share), "{share}");
    }

    #[test]
    fn a_tiny_moe_model_routes_and_generates_in_rinfer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("moe.gguf");
        write(&TINY_MOE, &path).unwrap();
        let loaded = rinfer_model::LoadedModel::open(&path).unwrap();
        let prompt = loaded
            .tokenizer
            .encode("the river ran low", true, false)
            .unwrap();
        let request = rinfer_model::Request::new(prompt, 2)
            .with_sampling(rinfer_model::SamplingParams::greedy());
        let mut engine = rinfer_model::Engine::new(
            &loaded,
            rinfer_model::EngineSettings::single(16),
            rinfer_model::DeviceRequest::Cpu,
        )
        .unwrap();
        assert!(!engine.generate(request, |_| {}).unwrap().tokens.is_empty());
    }

    #[test]
    fn a_tiny_model_is_deterministic_and_loads_in_rinfer() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.gguf"), dir.path().join("b.gguf"));
        write(&TINY, &a).unwrap();
        write(&TINY, &b).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());

        let file = GgufFile::open(&a).unwrap();
        let ty = |name: &str| file.tensors().find(|t| t.name() == name).unwrap().ty();
        assert_eq!(ty("output.weight"), GgmlType::Q6K);
        assert_eq!(ty("token_embd.weight"), GgmlType::Q4K);
        assert_eq!(ty("blk.0.ffn_down.weight"), GgmlType::Q6K);
        assert_eq!(ty("blk.2.attn_v.weight"), GgmlType::Q4K);

        let loaded = rinfer_model::LoadedModel::open(&a).unwrap();
        assert_eq!(loaded.model.config.kv_heads, 2);
        let prompt = loaded
            .tokenizer
            .encode("the river ran low", true, false)
            .unwrap();
        assert_eq!(prompt[0], 1, "BOS first");
        assert!(
            prompt.len() > 2 && prompt[1..].iter().all(|&t| t >= 259),
            "{prompt:?}"
        );
        let request = rinfer_model::Request::new(prompt, 2)
            .with_sampling(rinfer_model::SamplingParams::greedy());
        let mut engine = rinfer_model::Engine::new(
            &loaded,
            rinfer_model::EngineSettings::single(16),
            rinfer_model::DeviceRequest::Cpu,
        )
        .unwrap();
        let out = engine.generate(request, |_| {}).unwrap();
        assert!(!out.tokens.is_empty());
    }
}
