//! `cargo xtask bench make-model [PATH]`: a llama-shaped model of 1.1 billion parameters
//! (TinyLlama's shape) with seeded random weights, quantized in llama.cpp's Q4_K_M mix, with a
//! synthetic SentencePiece vocabulary, so that rinfer and llama.cpp can be measured on a model
//! four times the size of the default one without downloading it. Its text is noise; its speed
//! is that of any model of its shape and types.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use rinfer_formats::GgmlType;
use rinfer_formats::gguf::{GgufWriter, MetadataValue};

use super::synthetic_vocab;

/// A llama model's dimensions.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
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
}

/// TinyLlama 1.1B's shape.
pub const LLAMA_1B: Shape = Shape {
    layers: 22,
    hidden: 2048,
    ffn: 5632,
    heads: 32,
    kv_heads: 4,
    vocab: 32_000,
    context: 2048,
};

/// The file name of the [`LLAMA_1B`] model in the models cache.
pub const FILE_NAME: &str = "llama-1b-synthetic-q4_k_m.gguf";

/// The seed of every weight; the same seed writes the same file.
const SEED: u64 = 0x5EED_0001;

/// Weights are uniform with this standard deviation (a usual initialisation scale).
const WEIGHT_STD: f32 = 0.02;

/// `general.file_type` of a Q4_K_M file (llama.cpp's `LLAMA_FTYPE_MOSTLY_Q4_K_M`).
const FILE_TYPE_Q4_K_M: u32 = 15;

/// Runs `make-model [PATH]`: writes the model to PATH (by default into the models cache).
pub fn run(args: &[String]) -> Result<()> {
    let path = match args {
        [] => super::cache::models_dir()?.join(FILE_NAME),
        [path] => PathBuf::from(path),
        _ => bail!("usage: cargo xtask bench make-model [PATH]"),
    };
    write(&LLAMA_1B, &path)?;
    println!("{}", path.display());
    Ok(())
}

/// The [`LLAMA_1B`] model in the models cache, written first if it is not there.
pub fn cached() -> Result<PathBuf> {
    let path = super::cache::models_dir()?.join(FILE_NAME);
    if !path.is_file() {
        write(&LLAMA_1B, &path)?;
    }
    Ok(path)
}

/// Writes a model of `shape` to `path` (through a temporary file, so a half-written model is
/// never left under the final name).
pub fn write(shape: &Shape, path: &Path) -> Result<()> {
    let start = Instant::now();
    eprintln!(
        "==> writing a synthetic {shape:?} llama model to {}",
        path.display()
    );
    let mut writer = GgufWriter::new();
    for (key, value) in metadata(shape) {
        writer.add_metadata(&key, value)?;
    }
    for (name, ty, dims) in tensors(shape) {
        let data = match ty {
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
        ("general.architecture".into(), Str("llama".into())),
        ("general.name".into(), Str("llama 1B synthetic".into())),
        ("general.file_type".into(), U32(FILE_TYPE_Q4_K_M)),
        ("general.quantization_version".into(), U32(2)),
    ];
    let llama = [
        ("context_length", u32(s.context)),
        ("embedding_length", u32(s.hidden)),
        ("block_count", u32(s.layers)),
        ("feed_forward_length", u32(s.ffn)),
        ("rope.dimension_count", u32(s.hidden / s.heads)),
        ("rope.freq_base", F32(10_000.0)),
        ("attention.head_count", u32(s.heads)),
        ("attention.head_count_kv", u32(s.kv_heads)),
        ("attention.layer_norm_rms_epsilon", F32(1e-5)),
        ("vocab_size", u32(s.vocab)),
    ];
    entries.extend(llama.into_iter().map(|(k, v)| (format!("llama.{k}"), v)));
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
        let layer = [
            ("attn_norm", GgmlType::F32, vec![hidden]),
            ("attn_q", GgmlType::Q4K, vec![hidden, hidden]),
            ("attn_k", GgmlType::Q4K, vec![hidden, kv]),
            ("attn_v", more_bits, vec![hidden, kv]),
            ("attn_output", GgmlType::Q4K, vec![hidden, hidden]),
            ("ffn_norm", GgmlType::F32, vec![hidden]),
            ("ffn_gate", GgmlType::Q4K, vec![hidden, ffn]),
            ("ffn_up", GgmlType::Q4K, vec![hidden, ffn]),
            ("ffn_down", more_bits, vec![ffn, hidden]),
        ];
        list.extend(
            layer
                .into_iter()
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
        layers: 8,
        hidden: 256,
        ffn: 512,
        heads: 4,
        kv_heads: 2,
        vocab: 1024,
        context: 128,
    };

    #[test]
    fn attn_v_and_ffn_down_get_q6_k_where_llama_cpp_q4_k_m_puts_it() {
        let more: Vec<usize> = (0..22).filter(|&i| use_more_bits(i, 22)).collect();
        assert_eq!(more, [0, 1, 4, 7, 10, 13, 16, 19, 20, 21]);
    }

    #[test]
    fn the_1b_shape_has_about_1_1_billion_parameters() {
        let params: u64 = tensors(&LLAMA_1B)
            .iter()
            .map(|(_, _, dims)| dims.iter().product::<u64>())
            .sum();
        assert!((1_090_000_000..1_110_000_000).contains(&params), "{params}");
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
