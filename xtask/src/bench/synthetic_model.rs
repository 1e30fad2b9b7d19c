//! `cargo xtask bench make-model [NAME] [PATH]`: models with seeded random weights in
//! llama.cpp's Q4_K_M mix and a synthetic SentencePiece vocabulary, so that rinfer and
//! llama.cpp can be measured on models larger than the default one without downloading them:
//! a llama of 1.1 billion parameters (TinyLlama's shape), a Qwen3-MoE of 5.1 billion with 64
//! experts, 6 used per token (about 13 % of the weights read per token; Qwen3-30B-A3B's layout
//! at a sixth of its size), and the hybrid and latent-attention families at the sizes people
//! run on CPUs: Qwen3.5-0.8B, LFM2-1.2B and a DeepSeek-V2-Lite cut to 3.3 billion; and two
//! embedding models for the embeddings bench, of bge-small-en-v1.5's shape (BERT, 33 million)
//! and nomic-embed-text-v1.5's (nomic-bert, 137 million), with the real WordPiece vocabulary
//! they share. Each family's tensors are data (`synthetic_families`), their types llama.cpp's
//! rules (`synthetic_quant_mix`). Their text and embeddings are noise; their speed is that of
//! any model of their shape and types.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use rinfer_formats::GgmlType;
use rinfer_formats::gguf::{GgufWriter, MetadataValue};

pub use super::synthetic_families::Shape;
use super::synthetic_families::{self, Family};
use super::synthetic_quant_mix::QuantMix;
use super::synthetic_shapes::LLAMA_1B;
pub use super::synthetic_shapes::{EMBEDDING_MODELS, MODELS};
use super::synthetic_vocab;

/// The synthetic language model called `name`.
pub fn by_name(name: &str) -> Option<&'static Shape> {
    find(&MODELS, name)
}

/// The synthetic embedding model called `name`.
pub fn embedding_by_name(name: &str) -> Option<&'static Shape> {
    find(&EMBEDDING_MODELS, name)
}

fn find(models: &[(&str, &'static Shape)], name: &str) -> Option<&'static Shape> {
    models
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
    let named = |name: &str| by_name(name).or_else(|| embedding_by_name(name));
    let (shape, rest) = match args.split_first() {
        Some((name, rest)) if named(name).is_some() => (named(name).unwrap_or(&LLAMA_1B), rest),
        _ => (&LLAMA_1B, args),
    };
    let path = match rest {
        [] => super::cache::models_dir()?.join(shape.file_name),
        [path] => PathBuf::from(path),
        _ => {
            let names: Vec<_> = MODELS
                .iter()
                .chain(&EMBEDDING_MODELS)
                .map(|m| m.0)
                .collect();
            bail!(
                "usage: cargo xtask bench make-model [{}] [PATH]",
                names.join("|")
            )
        }
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
/// never left under the final name); an encoder gets llama.cpp's bert-bge vocabulary.
pub fn write(shape: &Shape, path: &Path) -> Result<()> {
    let wordpiece = match shape.family.is_encoder() {
        true => Some(synthetic_vocab::bge_vocabulary()?),
        false => None,
    };
    write_with_vocabulary(shape, path, wordpiece.as_deref())
}

/// [`write`], an encoder's vocabulary copied from the GGUF `wordpiece`.
fn write_with_vocabulary(shape: &Shape, path: &Path, wordpiece: Option<&Path>) -> Result<()> {
    let start = Instant::now();
    eprintln!(
        "==> writing a synthetic {shape:?} model to {}",
        path.display()
    );
    let mut writer = GgufWriter::new();
    for (key, value) in metadata(shape, wordpiece)? {
        writer.add_metadata(&key, value)?;
    }
    for (name, ty, dims) in tensors(shape) {
        let data = match (ty, shape.family) {
            (GgmlType::F32, Family::Gemma4(g)) if name == "rope_freqs.weight" => {
                synthetic_families::gemma4_rope_freqs(shape, g)
            }
            (GgmlType::F32, _) => f32_values(&name, &dims),
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

/// The file's metadata: general, `<arch>.*`, and the synthetic SentencePiece vocabulary or, for
/// an encoder, the WordPiece one of the GGUF `wordpiece`.
fn metadata(s: &Shape, wordpiece: Option<&Path>) -> Result<Vec<(String, MetadataValue)>> {
    use MetadataValue::{String as Str, U32};
    let arch = s.family.arch();
    let mut entries = vec![
        ("general.architecture".into(), Str(arch.into())),
        (
            "general.name".into(),
            Str(format!("{} synthetic", s.file_name)),
        ),
        ("general.file_type".into(), U32(FILE_TYPE_Q4_K_M)),
        ("general.quantization_version".into(), U32(2)),
    ];
    entries.extend(
        synthetic_families::arch_metadata(s)
            .into_iter()
            .map(|(k, v)| (format!("{arch}.{k}"), v)),
    );
    match (s.family.is_encoder(), wordpiece) {
        (false, _) => entries.extend(
            synthetic_vocab::metadata(s.vocab)
                .into_iter()
                .map(|(k, v)| (k.to_string(), v)),
        ),
        (true, Some(path)) => entries.extend(synthetic_vocab::wordpiece_metadata(path, s.vocab)?),
        (true, None) => bail!("an encoder needs a WordPiece vocabulary"),
    }
    Ok(entries)
}

/// Every tensor's name, type and GGUF dims (innermost first), in file order.
fn tensors(s: &Shape) -> Vec<(String, GgmlType, Vec<u64>)> {
    let (hidden, vocab) = (s.hidden as u64, s.vocab as u64);
    let mut list = if s.family.is_encoder() {
        synthetic_families::encoder_model_tensors(s)
            .into_iter()
            .map(|(name, dims)| (name.to_string(), dims))
            .collect()
    } else {
        vec![
            ("token_embd.weight".to_string(), vec![hidden, vocab]),
            (s.family.output_norm().into(), vec![hidden]),
        ]
    };
    if !s.family.is_encoder() && !s.family.tied_embeddings() {
        list.push(("output.weight".into(), vec![hidden, vocab]));
    }
    if let Family::Gemma4(g) = s.family {
        list.extend(
            synthetic_families::gemma4_model_tensors(s, g)
                .into_iter()
                .map(|(name, dims)| (name.to_string(), dims)),
        );
    }
    for i in 0..s.layers {
        list.extend(
            synthetic_families::layer_tensors(s, i)
                .into_iter()
                .map(|(role, dims)| (format!("blk.{i}.{role}"), dims)),
        );
    }
    let experts = s.family.experts().map_or(0, |e| e.count);
    let mut mix = QuantMix::new(
        list.iter().map(|(name, _)| name.as_str()),
        s.layers,
        experts,
    );
    list.into_iter()
        .map(|(name, dims)| {
            let ty = mix.next_type(&name, &dims);
            (name, ty, dims)
        })
        .collect()
}

/// The values of an unquantized tensor: routers and convolution taps random (so that tokens
/// spread over the experts and the convolutions mix, as trained ones do); biases zero; the
/// delta net's `ssm_a` (stored as `-exp(A_log)`) minus one, so its state decays; norm weights
/// and scales one, as a freshly initialised model has.
fn f32_values(name: &str, dims: &[u64]) -> Vec<u8> {
    let count = dims.iter().product::<u64>() as usize;
    let constant = |v: f32| v.to_le_bytes().repeat(count);
    if name.ends_with(".bias") {
        constant(0.0)
    } else if name.ends_with(".ssm_a") {
        constant(-1.0)
    } else if dims.len() >= 2 {
        random_f32(name, dims)
    } else {
        constant(1.0)
    }
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
    use super::super::synthetic_families::{
        DeltaNet, Experts, Gemma4Layers, GlmMoe, LatentAttention, ShortConv,
    };
    use super::super::synthetic_shapes::*;
    use super::*;
    use rinfer_formats::gguf::GgufFile;

    const TINY: Shape = Shape {
        file_name: "tiny.gguf",
        family: Family::Llama,
        layers: 8,
        hidden: 256,
        ffn: 512,
        heads: 4,
        kv_heads: 2,
        head_dim: 64,
        vocab: 1024,
        context: 128,
        rope_base: 1e4,
        norm_eps: 1e-5,
    };

    const TINY_EXPERTS: Experts = Experts {
        count: 8,
        used: 2,
        ffn: 256,
    };

    /// Every family at tiny dims, each feature of the real shapes kept (a full-attention layer
    /// after three delta-net ones, a dense layer before the experts, conv and attention layers).
    const TINY_FAMILIES: [Shape; 7] = [
        Shape {
            file_name: "tiny-qwen3moe.gguf",
            family: Family::Qwen3Moe(TINY_EXPERTS),
            ffn: 256,
            ..TINY
        },
        Shape {
            file_name: "tiny-qwen35.gguf",
            family: Family::Qwen35(DeltaNet {
                full_attention_interval: 4,
                qk_heads: 2,
                v_heads: 4,
                state: 32,
                conv_kernel: 4,
                rope_dims: 32,
            }),
            layers: 4,
            heads: 2,
            kv_heads: 1,
            head_dim: 128,
            rope_base: 1e7,
            ..TINY
        },
        Shape {
            file_name: "tiny-lfm2.gguf",
            family: Family::Lfm2(ShortConv {
                attention_layers: &[2],
                taps: 3,
            }),
            layers: 4,
            ..TINY
        },
        Shape {
            file_name: "tiny-deepseek2.gguf",
            family: Family::DeepSeek2(
                LatentAttention {
                    q_lora: None,
                    kv_lora: 64,
                    nope: 32,
                    rope: 16,
                    v_head: 32,
                    shared_experts: 2,
                    leading_dense: 1,
                },
                TINY_EXPERTS,
            ),
            layers: 3,
            kv_heads: 1,
            head_dim: 48,
            ..TINY
        },
        Shape {
            file_name: "tiny-qwen35moe.gguf",
            family: Family::Qwen35Moe(
                DeltaNet {
                    full_attention_interval: 4,
                    qk_heads: 2,
                    v_heads: 4,
                    state: 32,
                    conv_kernel: 4,
                    rope_dims: 32,
                },
                TINY_EXPERTS,
            ),
            layers: 4,
            ffn: 256,
            heads: 2,
            kv_heads: 1,
            head_dim: 128,
            rope_base: 1e7,
            ..TINY
        },
        Shape {
            file_name: "tiny-glm4moe.gguf",
            family: Family::Glm4Moe(
                GlmMoe {
                    rope_dims: 32,
                    leading_dense: 1,
                    shared_experts: 1,
                },
                TINY_EXPERTS,
            ),
            layers: 3,
            ..TINY
        },
        Shape {
            file_name: "tiny-gemma4.gguf",
            family: Family::Gemma4(Gemma4Layers {
                full_attention_interval: 2,
                window: 16,
                sliding_head_dim: 64,
                full_rotated_pairs: 16,
                per_layer_input: 32,
                shared_kv_layers: 2,
                softcap: 30.0,
            }),
            layers: 4,
            heads: 4,
            kv_heads: 1,
            head_dim: 128,
            rope_base: 1e6,
            norm_eps: 1e-6,
            ..TINY
        },
    ];

    fn params(shape: &Shape) -> u64 {
        let tensors = tensors(shape);
        tensors
            .iter()
            .map(|(_, _, dims)| dims.iter().product::<u64>())
            .sum()
    }

    /// The share of `shape`'s weights one token reads.
    fn active_share(shape: &Shape) -> f64 {
        let total = params(shape);
        let experts = tensors(shape)
            .iter()
            .filter(|(name, _, _)| name.ends_with("_exps.weight"))
            .map(|(_, _, dims)| dims.iter().product::<u64>())
            .sum::<u64>();
        let e = shape.family.experts().expect("a mixture of experts");
        let active = total - experts + experts * e.used as u64 / e.count as u64;
        active as f64 / total as f64
    }

    #[test]
    fn the_real_shapes_have_the_parameter_counts_the_docs_give() {
        for (shape, millions) in [
            (&LLAMA_1B, 1_100..1_110),
            (&QWEN3_MOE, 5_000..5_200),
            (&QWEN35_0_8B, 700..800),
            (&LFM2_1_2B, 1_100..1_200),
            (&DEEPSEEK2_LITE_3B, 3_000..3_500),
            (&GEMMA4_E2B, 3_900..4_100),
            (&GLM4_MOE_AIR_3B, 3_400..3_600),
            (&QWEN35_MOE_4B, 4_200..4_400),
        ] {
            let params = params(shape) / 1_000_000;
            assert!(
                millions.contains(&params),
                "{}: {params} M",
                shape.file_name
            );
        }
    }

    /// The bytes of `shape`'s tensors in their Q4_K_M types.
    fn tensor_bytes(shape: &Shape) -> u64 {
        tensors(shape)
            .iter()
            .map(|(_, ty, dims)| {
                let values = dims.iter().product::<u64>();
                values / ty.block_size() as u64 * ty.type_size() as u64
            })
            .sum()
    }

    #[test]
    fn every_language_model_fits_in_about_three_gigabytes() {
        for (_, shape) in MODELS {
            let megabytes = tensor_bytes(shape) / 1_000_000;
            assert!(megabytes < 3_200, "{}: {megabytes} MB", shape.file_name);
        }
    }

    #[test]
    fn the_embedding_shapes_have_their_models_parameter_counts() {
        for (shape, millions) in [(&BGE_SMALL, 33..34), (&NOMIC_EMBED, 136..138)] {
            let params = params(shape) / 1_000_000;
            assert!(
                millions.contains(&params),
                "{}: {params} M",
                shape.file_name
            );
        }
    }

    #[test]
    fn tiny_encoders_load_and_embed_in_rinfer() {
        let vocabulary =
            crate::workspace_root().join("tests/fixtures/models/bert-embd-tiny-f32.gguf");
        for family in [Family::Bert, Family::NomicBert] {
            let shape = Shape {
                file_name: "tiny-encoder.gguf",
                family,
                layers: 2,
                hidden: 64,
                ffn: 128,
                heads: 4,
                kv_heads: 4,
                head_dim: 16,
                vocab: 3000,
                context: 512,
                rope_base: 1e3,
                norm_eps: 1e-12,
            };
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(shape.file_name);
            write_with_vocabulary(&shape, &path, Some(&vocabulary)).unwrap();
            let loaded = rinfer_model::LoadedModel::open(&path)
                .unwrap_or_else(|e| panic!("{family:?}: {e}"));
            let prompt = loaded
                .tokenizer
                .encode("the river ran low", true, false)
                .unwrap();
            assert_eq!(
                (prompt[0], prompt[prompt.len() - 1]),
                (101, 102),
                "[CLS] … [SEP]"
            );
            let mut engine = rinfer_model::Engine::new(
                &loaded,
                rinfer_model::EngineSettings::single(16),
                rinfer_model::DeviceRequest::Cpu,
            )
            .unwrap();
            let embedding = engine.embed(&[prompt]).unwrap().remove(0);
            assert_eq!(embedding.len(), 64, "{family:?}");
            assert!(embedding.iter().all(|x| x.is_finite()), "{family:?}");
        }
    }

    #[test]
    fn the_moe_shapes_read_a_small_share_of_their_weights_per_token() {
        let qwen = active_share(&QWEN3_MOE);
        assert!((0.1..0.15).contains(&qwen), "{qwen}");
        let deepseek = active_share(&DEEPSEEK2_LITE_3B);
        assert!((0.3..0.4).contains(&deepseek), "{deepseek}");
        let qwen35 = active_share(&QWEN35_MOE_4B);
        assert!((0.3..0.4).contains(&qwen35), "{qwen35}");
        let glm = active_share(&GLM4_MOE_AIR_3B);
        assert!((0.3..0.4).contains(&glm), "{glm}");
    }

    #[test]
    fn every_tensor_name_is_unique() {
        let models = MODELS.iter().chain(&EMBEDDING_MODELS).map(|&(_, s)| s);
        for shape in models.chain(&TINY_FAMILIES) {
            let tensors = tensors(shape);
            let names: std::collections::HashSet<_> = tensors.iter().map(|t| &t.0).collect();
            assert_eq!(names.len(), tensors.len(), "{}", shape.file_name);
        }
    }

    #[test]
    fn the_hybrids_get_llama_cpp_types_for_their_mixers() {
        let types: std::collections::HashMap<_, _> = tensors(&QWEN35_0_8B)
            .into_iter()
            .map(|(name, ty, _)| (name, ty))
            .collect();
        assert_eq!(types["token_embd.weight"], GgmlType::Q6K, "tied");
        assert_eq!(types["blk.0.attn_qkv.weight"], GgmlType::Q5K);
        assert_eq!(types["blk.0.ssm_conv1d.weight"], GgmlType::F32);
        assert_eq!(types["blk.3.attn_v.weight"], GgmlType::Q6K);
        assert_eq!(types["blk.15.attn_v.weight"], GgmlType::Q4K);
        let deepseek: std::collections::HashMap<_, _> = tensors(&DEEPSEEK2_LITE_3B)
            .into_iter()
            .map(|(name, ty, _)| (name, ty))
            .collect();
        assert_eq!(
            deepseek["blk.0.ffn_down.weight"],
            GgmlType::Q8_0,
            "10944 columns"
        );
        assert_eq!(
            deepseek["blk.1.attn_k_b.weight"],
            GgmlType::Q5_0,
            "128 columns"
        );
        assert_eq!(deepseek["blk.1.ffn_gate_inp.weight"], GgmlType::F32);
    }

    /// Writes `shape` into a temporary directory, loads it in rinfer and generates from it.
    fn generates_in_rinfer(shape: &Shape) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(shape.file_name);
        write(shape, &path).unwrap();
        let loaded = rinfer_model::LoadedModel::open(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", shape.file_name));
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
        let out = engine.generate(request, |_| {}).unwrap();
        assert!(!out.tokens.is_empty(), "{}", shape.file_name);
    }

    #[test]
    fn every_family_at_tiny_dims_loads_and_generates_in_rinfer() {
        for shape in &TINY_FAMILIES {
            generates_in_rinfer(shape);
        }
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
        generates_in_rinfer(&TINY);
    }
}
