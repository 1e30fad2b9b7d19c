//! The GPU forward pass, run on the host: the exact launch sequence the CUDA runtime executes
//! (`rinfer_cuda::program::StepBuilder`), every kernel compiled from the CUDA sources for the
//! host and run under the CUDA emulation of `crates/cuda/tests/host`, with host addresses in
//! place of device ones. Prefill (batched kernels, tiled attention) and decode (matvec, split-K
//! attention, device argmax) must give the CPU forward pass's logits on every fixture
//! architecture, within the fixtures' tolerances: the CPU reference runs on dequantized weights
//! in f32, as the GPU's f32 kernels do (1e-4 with f32 KV caches on both sides; with the default
//! f16 caches, keys and values rounded to nearest even on both sides and the GPU's prefill
//! attention on f16 tensor cores, 0.05: see `F16_KV`); a decode step of quantized weights runs
//! the integer matvecs over q8_1 activations, which add quantization noise (the fixtures'
//! tolerance for an engine that quantizes activations). Mixture-of-experts fixtures run the router, the routing
//! kernel and the by-expert-id products, so their logits also show the GPU routes each row to
//! the CPU's experts with the CPU's weights; gpt-oss adds attention sinks, YaRN RoPE, the
//! clamped SwiGLU and expert biases.

mod common;
mod gpu_emulation;

use common::fixture_model;
use gpu_emulation::{
    EmulateLaunch, Emulated, HostCache, load_options, run, with_emulator, with_host_gpu,
};
use rinfer_cuda::LoadOptions;
use rinfer_cuda::kernels::KvElement;
use rinfer_cuda::program::{Arg, KernelRef};
use rinfer_formats::GgmlType;
use rinfer_model::weights::{Cpu, Linear, Matrix, Weights};
use rinfer_model::{KvCache, KvType, Logits, Model, Scratch};
use rinfer_transformer::{Mapper, Tensor};

/// `m` with every row dequantized to F32.
fn to_f32(m: &Matrix) -> Matrix {
    let mut values = vec![0.0f32; m.rows * m.cols];
    for (r, row) in values.chunks_exact_mut(m.cols).enumerate() {
        rinfer_kernels::dequantize_row(m.ty, m.row(r), row).unwrap();
    }
    let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    Matrix::from_owned(GgmlType::F32, m.rows, m.cols, bytes)
}

/// Maps every matrix to F32 and keeps every vector.
struct ToF32;

impl<'t> Mapper<'t, Cpu, Cpu> for ToF32 {
    type Error = std::convert::Infallible;

    fn matrix(&mut self, _: &Tensor, m: &'t Matrix) -> Result<Matrix, Self::Error> {
        Ok(to_f32(m))
    }

    fn vector(&mut self, _: &Tensor, v: &'t Vec<f32>) -> Result<Vec<f32>, Self::Error> {
        Ok(v.clone())
    }

    fn experts(&mut self, _: &Tensor, e: &'t Vec<Linear>) -> Result<Vec<Linear>, Self::Error> {
        Ok(e.iter()
            .map(|l| Linear {
                weight: to_f32(&l.weight),
                bias: l.bias.clone(),
            })
            .collect())
    }
}

/// The model with every matrix in F32, so the CPU forward pass keeps activations in f32.
fn dequantized(model: &Model) -> Model {
    let Ok(transformer) = model.transformer().map(&mut ToF32);
    Model::new(model.config.clone(), Weights { transformer })
}

/// How far the GPU's logits may be from the CPU's: the largest absolute difference at a
/// share of the positions (the others unbounded: a routing flip), and the mean.
#[derive(Clone, Copy)]
struct Tolerance {
    max: f64,
    positions_within_max: f64,
    mean: f64,
}

impl Tolerance {
    /// `max` at every position, and `mean`.
    const fn everywhere(max: f64, mean: f64) -> Self {
        Self {
            max,
            positions_within_max: 1.0,
            mean,
        }
    }
}

/// The f32 kernels against the CPU's f32 arithmetic (measured: about 5e-6).
const F32_KERNELS: Tolerance = Tolerance::everywhere(1e-4, 1e-5);

/// Weights and activations rounded to bf16 on tensor cores against the CPU's f32 arithmetic:
/// the fixtures' tolerance for quantized models whose engine rounds activations (README §3.4,
/// max 0.5, mean 0.06; the bf16 activations are at least as exact as ggml's q8). Measured on
/// 40 positions: max 0.19, mean 0.022.
const TENSOR_CORES: Tolerance = Tolerance::everywhere(0.5, 0.06);

/// The same for mixture-of-experts models, where rounding can flip a near-tie of the router:
/// the fixtures' tolerance for quantized MoE models computed exactly (README §3.4, 1.5 at
/// 95 % of the positions, mean 0.25). Measured: mixtral-tiny-q8_0 2.16 at one of 40
/// positions, mean 0.035.
const MOE_TENSOR_CORES: Tolerance = Tolerance {
    max: 1.5,
    positions_within_max: 0.95,
    mean: 0.25,
};

/// An f16 KV cache on both sides: a key or value that the CPU and the GPU compute a few f32
/// ulps apart can round to neighbouring halves (2^-11 apart, relative), and the GPU's prefill
/// attention over an f16 cache runs on tensor cores with the scaled queries and the softmax
/// weights rounded to f16 (as llama.cpp's CUDA flash attention rounds them), where the CPU
/// attends in f32; the decode steps read the keys that prefill computed. Measured on the f32
/// fixtures: max 0.019, mean 1.8e-3 (gpt-oss-tiny-f32, 40 positions).
const F16_KV: Tolerance = Tolerance::everywhere(0.05, 5e-3);

/// A q8_0 KV cache on both sides, quantized by the same rule: a key or value that the CPU and
/// the GPU compute a few f32 ulps apart can round to neighbouring codes, a step of 1/127 of
/// its block's largest magnitude. Measured: max 4.3e-6 on the three fixtures of
/// `a_q8_0_cache_matches_the_cpus` (no code rounded apart), within `F32_KERNELS`.
const Q8_0_KV: Tolerance = Tolerance::everywhere(0.05, 5e-3);

/// A step whose integer matvecs quantize the activations to q8_1 (as llama.cpp does), against
/// the f32 reference: the reference fixtures' suggested tolerance for an engine that quantizes
/// activations like ggml (max 0.5, mean 0.06).
const QUANTIZED_ACTIVATIONS: Tolerance = Tolerance::everywhere(0.5, 0.06);

fn compare(name: &str, what: &str, gpu: &[f32], cpu: &[f32], tolerance: Tolerance) {
    let vocab = gpu.len().min(cpu.len()).max(1);
    compare_positions(name, what, gpu, cpu, vocab, tolerance);
}

/// `gpu` and `cpu` hold rows of `vocab` logits, one per position.
fn compare_positions(
    name: &str,
    what: &str,
    gpu: &[f32],
    cpu: &[f32],
    vocab: usize,
    tolerance: Tolerance,
) {
    let diffs: Vec<f64> = gpu
        .iter()
        .zip(cpu)
        .map(|(&g, &c)| (g as f64 - c as f64).abs())
        .collect();
    let mean = diffs.iter().sum::<f64>() / diffs.len() as f64;
    let position_max: Vec<f64> = diffs
        .chunks(vocab)
        .map(|row| row.iter().cloned().fold(0.0, f64::max))
        .collect();
    let within = position_max.iter().filter(|&&m| m <= tolerance.max).count();
    let needed = (tolerance.positions_within_max * position_max.len() as f64).ceil() as usize;
    let max = position_max.iter().cloned().fold(0.0, f64::max);
    assert!(
        within >= needed && mean <= tolerance.mean,
        "{name} {what}: {within} of {} positions within {} (max {max}), mean |gpu - cpu| {mean}",
        position_max.len(),
        tolerance.max
    );
}

/// The weights the GPU program runs on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum GpuWeights {
    /// The fixture's: its quantized matrices (the experts' too) on tensor cores in prefill,
    /// on the q8_1 matvecs in decode.
    Stored,
    /// Dequantized to F32, as the CPU reference's: the f32 kernels throughout, which agree
    /// with the CPU tightly.
    Dequantized,
}

/// Prefills `prompt_len` tokens of fixture `name` and decodes two more, on the GPU program
/// (with `weights`) and on the CPU (the weights dequantized to F32), both with KV caches of
/// `kv`, and compares every position's logits.
fn check_fixture(
    emulate: &EmulateLaunch,
    name: &str,
    prompt_len: u32,
    tolerance: Tolerance,
    weights: GpuWeights,
    kv: KvElement,
) {
    let (kv_type, tolerance) = match kv {
        KvElement::F32 => (KvType::F32, tolerance),
        KvElement::F16 if tolerance.max < F16_KV.max => (KvType::F16, F16_KV),
        KvElement::F16 => (KvType::F16, tolerance),
        KvElement::Q8_0 if tolerance.max < Q8_0_KV.max => (KvType::Q8_0, Q8_0_KV),
        KvElement::Q8_0 => (KvType::Q8_0, tolerance),
    };
    let model = fixture_model(name);
    let reference = dequantized(&model);
    let tensor_cores = weights == GpuWeights::Stored && !name.ends_with("-f32");
    let vocab = model.config.vocab_size;
    let prompt: Vec<u32> = (0..prompt_len)
        .map(|i| (i * 37 + 5) % vocab as u32)
        .collect();
    let decoded = [7u32 % vocab as u32, 123 % vocab as u32];
    let context = prompt.len() + decoded.len();

    // CPU reference: every prompt position, then one decode step per token.
    let mut cache = KvCache::with_type(&model.config, kv_type, context, prompt.len());
    let mut scratch = Scratch::new(&model.config, prompt.len());
    let cpu_prompt = reference
        .forward(&prompt, &mut cache, &mut scratch, Logits::All)
        .unwrap()
        .to_vec();
    let cpu_decode: Vec<Vec<f32>> = decoded
        .iter()
        .map(|&t| {
            reference
                .forward(&[t], &mut cache, &mut scratch, Logits::Last)
                .unwrap()
                .to_vec()
        })
        .collect();

    // The GPU program on host buffers.
    let options = LoadOptions {
        all_logits: true,
        kv,
        ..load_options(context, prompt.len(), 1)
    };
    let on_gpu = match weights {
        GpuWeights::Stored => &model,
        GpuWeights::Dequantized => &reference,
    };
    with_host_gpu(emulate, on_gpu, &options, |gpu| {
        let Emulated {
            builder,
            buffers,
            mut pool,
            ..
        } = gpu;
        let mut cache = pool.new_cache();
        let mut launches = Vec::new();

        for (i, &t) in prompt.iter().enumerate() {
            buffers.tokens[i] = t as i32;
            buffers.positions[i] = i as i32;
        }
        pool.reserve(emulate, &mut cache, prompt.len());
        let addresses = pool.addresses(&mut cache);
        builder.prefill(prompt.len(), &addresses, 0, prompt.len(), &mut launches);
        cache.len = prompt.len();
        let kernels = |f: fn(&KernelRef) -> bool| launches.iter().filter(|l| f(&l.kernel)).count();
        let mma = kernels(|k| matches!(k, KernelRef::Mma(_) | KernelRef::MmaById(_)));
        let f32_matmul = kernels(|k| matches!(k, KernelRef::Matmul(_) | KernelRef::MatmulById(_)));
        if tensor_cores {
            assert!(mma > 0, "{name}: no matmul on tensor cores");
        } else {
            assert_eq!(mma, 0, "{name}: a matmul on tensor cores");
            assert!(f32_matmul > 0, "{name}: no batched matmul");
        }
        run(emulate, &launches);
        compare_positions(
            name,
            "prefill",
            &buffers.logits()[..prompt.len() * vocab],
            &cpu_prompt,
            vocab,
            tolerance,
        );

        for (step, (&t, cpu)) in decoded.iter().zip(&cpu_decode).enumerate() {
            buffers.tokens[0] = t as i32;
            buffers.positions[0] = (prompt.len() + step) as i32;
            launches.clear();
            pool.reserve(emulate, &mut cache, 1);
            builder.decode_token(&addresses, &mut launches);
            run(emulate, &launches);
            cache.len += 1;
            let integer = launches.iter().any(|l| {
                matches!(
                    l.kernel,
                    KernelRef::MatvecQ8_1(_) | KernelRef::MatvecBatchQ8_1(_)
                )
            });
            let tolerance = if integer && tolerance.max < QUANTIZED_ACTIVATIONS.max {
                QUANTIZED_ACTIVATIONS
            } else {
                tolerance
            };
            // After a prefill on tensor cores, the bf16 keys and values and the q8_1 activations
            // can flip a near-tie of a mixture of experts' router, moving the whole row: its
            // tolerance is a share of positions (checked on the prefill above), which one decode
            // row cannot express.
            if tensor_cores && model.config.experts.is_some() {
                continue;
            }
            compare(name, "decode", &buffers.logits()[..vocab], cpu, tolerance);
            let best = (0..vocab)
                .max_by(|&a, &b| cpu[a].total_cmp(&cpu[b]).then(b.cmp(&a)))
                .unwrap();
            let margin = cpu
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != best)
                .map(|(_, &l)| cpu[best] - l)
                .fold(f32::INFINITY, f32::min);
            if f64::from(margin) > tolerance.max {
                assert_eq!(buffers.argmax[0] as usize, best, "{name}: device argmax");
            }
        }
    });
}

/// The dense fixture architectures the GPU runs.
const DENSE: [&str; 6] = [
    "llama-tiny-q8_0",
    "qwen2-tiny-q4_k_m",
    "qwen3-tiny-q5_k_m",
    "gemma3-tiny-q4_k_m",
    "phi2-tiny-q3_k_m",
    "gpt2-tiny-q2_k",
];

/// The fixtures of the batched decode's checks: plain GQA with Q8_0 and Q4_K products (q8_1
/// matvecs), sliding-window rings (gemma3), experts (qwen3moe).
const ROWS_OF_DECODE: [&str; 3] = [
    "llama-tiny-q8_0",
    "gemma3-tiny-q4_k_m",
    "qwen3moe-tiny-q4_k_m",
];

/// Runs `check` on each named fixture in turn, under one emulator.
fn on_fixtures(names: &[&str], check: impl Fn(&EmulateLaunch, &str)) {
    with_emulator(|emulate| names.iter().for_each(|name| check(emulate, name)));
}

#[test]
fn gpu_program_matches_the_cpu_forward_on_every_fixture_architecture() {
    let experts = [
        "qwen3moe-tiny-f32",
        "qwen3moe-tiny-q4_k_m",
        "mixtral-tiny-f32",
        "mixtral-tiny-q8_0",
        "gpt-oss-tiny-f32",
        "gpt-oss-tiny-mxfp4",
    ];
    on_fixtures(&[&DENSE[..], &experts].concat(), |emulate, name| {
        // Every stage through the f32 kernels, tightly (the weights dequantized on both
        // sides), with an f32 then the default f16 cache.
        for kv in [KvElement::F32, KvElement::F16] {
            check_fixture(emulate, name, 9, F32_KERNELS, GpuWeights::Dequantized, kv);
        }
    });
}

/// A q8_0 KV cache: stored a block of 32 values per warp, read by the f32 kernels of decode
/// and prefill attention, against the CPU's q8_0 cache (every stage through the f32 kernels,
/// the weights dequantized on both sides). The fixtures whose heads are a multiple of 32 wide.
#[test]
fn a_q8_0_cache_matches_the_cpus() {
    on_fixtures(
        &["llama-tiny-q8_0", "gemma3-tiny-q4_k_m", "qwen3moe-tiny-f32"],
        |emulate, name| {
            check_fixture(
                emulate,
                name,
                9,
                F32_KERNELS,
                GpuWeights::Dequantized,
                KvElement::Q8_0,
            );
        },
    );
}

/// The fixtures' own weights, on prompts shorter and longer than a tensor-core tile: quantized
/// matrices run on tensor cores in prefill, within the fixtures' tolerance for rounded
/// activations; F32 matrices keep the f32 kernels and their tight agreement.
#[test]
fn prefill_on_tensor_cores_matches_the_cpu_forward() {
    let experts = [
        "qwen3moe-tiny-q4_k_m",
        "mixtral-tiny-q8_0",
        "gpt-oss-tiny-mxfp4",
    ];
    let f32_experts = ["qwen3moe-tiny-f32", "gpt-oss-tiny-f32"];
    let runs = [
        (&DENSE[..], TENSOR_CORES),
        (&experts[..], MOE_TENSOR_CORES),
        (&f32_experts[..], F32_KERNELS),
    ];
    for (names, tolerance) in runs {
        on_fixtures(names, |emulate, name| {
            for prompt_len in [5, 40] {
                let weights = GpuWeights::Stored;
                check_fixture(
                    emulate,
                    name,
                    prompt_len,
                    tolerance,
                    weights,
                    KvElement::F16,
                );
            }
        });
    }
}

/// llama.cpp's files of the i-quants and the ternary types (quantized with an importance
/// matrix; their other matrices Q2_K–Q5_K): a short and a long prompt on tensor cores, then
/// decode on the integer matvecs, within the tolerance of those kernels as for the other
/// quantized fixtures.
#[test]
fn iq_and_ternary_models_match_the_cpu_forward() {
    on_fixtures(
        &[
            "iq/llama-tiny-iq1_s",
            "iq/llama-tiny-iq2_xxs",
            "iq/llama-tiny-iq3_s",
            "iq/llama-tiny-tq2_0",
        ],
        |emulate, name| {
            let weights = GpuWeights::Stored;
            check_fixture(emulate, name, 9, TENSOR_CORES, weights, KvElement::F32);
            check_fixture(emulate, name, 40, TENSOR_CORES, weights, KvElement::F16);
        },
    );
}

/// Three sequences with prompts of different lengths decode together, each row over its own
/// cache at its own position: every row gets the CPU's logits for that sequence decoded alone,
/// over two steps (the second with one sequence sitting out, then that one as a batch of one).
/// A row's logits are the same bit for bit whatever the order of the rows (each kernel computes
/// a row on its own), and the same as the single-sequence program's within the fixtures'
/// tolerance (`max |batched - alone|` is printed: 0 where the decode matvec and the batched
/// matmul share their per-token arithmetic, as now).
fn check_batched_decode(emulate: &EmulateLaunch, name: &str) {
    let model = fixture_model(name);
    let reference = dequantized(&model);
    let vocab = model.config.vocab_size as u32;
    let lengths = [3usize, 9, 6];
    let prompts: Vec<Vec<u32>> = (0..lengths.len())
        .map(|s| {
            let offset = 11 * s as u32;
            (0..lengths[s] as u32)
                .map(|i| (i * 37 + 5 + offset) % vocab)
                .collect()
        })
        .collect();
    let tokens = |s: usize, step: usize| ((7 + 13 * s + 101 * step) as u32) % vocab;
    let longest = lengths.iter().max().copied().unwrap();
    let context = longest + 2;

    // CPU reference: each sequence alone, its prompt then two decode steps.
    let cpu: Vec<[Vec<f32>; 2]> = prompts
        .iter()
        .enumerate()
        .map(|(s, prompt)| {
            let mut cache = KvCache::with_type(&model.config, KvType::F16, context, longest);
            let mut scratch = Scratch::new(&model.config, longest);
            reference
                .forward(prompt, &mut cache, &mut scratch, Logits::Last)
                .unwrap();
            [0, 1].map(|step| {
                reference
                    .forward(&[tokens(s, step)], &mut cache, &mut scratch, Logits::Last)
                    .unwrap()
                    .to_vec()
            })
        })
        .collect();

    let options = load_options(context, longest, lengths.len());
    with_host_gpu(emulate, &model, &options, |mut gpu| {
        let plan = gpu.pool.plan.clone();
        assert_eq!(plan.decode_rows, lengths.len());
        let mut caches = gpu.prefilled(&prompts);

        // Step 1: each sequence alone (on a fork of its cache, which copies the block it writes
        // into), then all three together in two orders.
        let alone: Vec<Vec<f32>> = (0..caches.len())
            .map(|s| {
                let mut fork = gpu.pool.fork(&caches[s]);
                gpu.decode_token(tokens(s, 0), &mut fork)
            })
            .collect();
        let mut forks: Vec<HostCache> = caches.iter().map(|c| gpu.pool.fork(c)).collect();
        let reordered = gpu.decode(
            &[(2, tokens(2, 0)), (0, tokens(0, 0)), (1, tokens(1, 0))],
            &mut forks,
            &plan,
        );
        let batched = gpu.decode(
            &[(0, tokens(0, 0)), (1, tokens(1, 0)), (2, tokens(2, 0))],
            &mut caches,
            &plan,
        );
        // A mixture of experts' router can flip a near-tie under the q8_1 rounding of the
        // activations and move a whole row: the fixtures' MoE tolerance is a share of positions,
        // which one decode row cannot express, so MoE rows are held to their single-sequence GPU
        // decode here (bit for bit below) and to the CPU in the 9-token test.
        let moe = model.config.experts.is_some();
        let against_cpu = |what: &str, row: &[f32], cpu: &[f32]| {
            if !moe {
                compare(name, what, row, cpu, QUANTIZED_ACTIVATIONS);
            }
        };
        let mut worst = 0.0f32;
        for (s, row) in batched.iter().enumerate() {
            against_cpu("batched decode", row, &cpu[s][0]);
            compare(name, "batched vs alone", row, &alone[s], F32_KERNELS);
            let order = [1, 2, 0][s];
            assert!(
                *row == reordered[order],
                "{name}: sequence {s}'s logits depend on the order of the rows"
            );
            let diff = row.iter().zip(&alone[s]).map(|(a, b)| (a - b).abs());
            worst = diff.fold(worst, f32::max);
        }
        println!("{name}: max |batched - alone| = {worst:e}");

        // Step 2: sequences 1 and 0 together, then 2 as a batch of one.
        let pair = gpu.decode(&[(1, tokens(1, 1)), (0, tokens(0, 1))], &mut caches, &plan);
        against_cpu("batched decode, step 2", &pair[0], &cpu[1][1]);
        against_cpu("batched decode, step 2", &pair[1], &cpu[0][1]);
        let single = gpu.decode(&[(2, tokens(2, 1))], &mut caches, &plan);
        against_cpu("batch of one, step 2", &single[0], &cpu[2][1]);
    });
}

#[test]
fn batched_decode_gives_each_sequence_its_own_logits() {
    // And gpt-oss's sinks and experts with biases.
    let names = [&ROWS_OF_DECODE[..], &["gpt-oss-tiny-mxfp4"]].concat();
    on_fixtures(&names, check_batched_decode);
}

/// Four sequences feed several tokens each in one decode pass, as a sequence verifying its
/// guesses does (its last token and the guesses, at successive positions of its cache): 18
/// rows, more than one q8_1 matvec launch takes and than the tensor-core matmul starts at.
/// Every row's logits are bit for bit those of its token decoded alone, one row a pass: a row
/// attends to its own cache up to its position (the rows before it stored by the same pass),
/// and no kernel's per-row arithmetic depends on the number of rows.
fn check_rows_of_one_sequence(emulate: &EmulateLaunch, name: &str) {
    let model = fixture_model(name);
    let vocab = model.config.vocab_size;
    let feeds = [3usize, 5, 5, 5];
    let token = |s: usize, i: usize| ((7 + 13 * s + 101 * i) % vocab) as u32;
    let fed: Vec<Vec<u32>> = (0..feeds.len())
        .map(|s| (0..feeds[s]).map(|i| token(s, i)).collect())
        .collect();
    let prompts: Vec<Vec<u32>> = (0..feeds.len())
        .map(|s| {
            (0..4 + 3 * s)
                .map(|i| ((i * 37 + 5 + 11 * s) % vocab) as u32)
                .collect()
        })
        .collect();
    let rows: usize = feeds.iter().sum();
    let options = LoadOptions {
        guesses: 4,
        ..load_options(32, rows, feeds.len())
    };
    with_host_gpu(emulate, &model, &options, |mut gpu| {
        let plan = gpu.pool.plan.clone();
        assert_eq!(plan.decode_rows, rows);
        let mut caches = gpu.prefilled(&prompts);
        let alone: Vec<Vec<f32>> = (0..caches.len())
            .flat_map(|s| {
                let mut fork = gpu.pool.fork(&caches[s]);
                let mut logits = Vec::new();
                for &t in &fed[s] {
                    logits.push(
                        gpu.decode_rows(&mut [(&[t][..], &mut fork)], &plan)
                            .to_vec(),
                    );
                }
                logits
            })
            .collect();
        let mut seqs: Vec<(&[u32], &mut HostCache)> = fed
            .iter()
            .map(Vec::as_slice)
            .zip(caches.iter_mut())
            .collect();
        let together = gpu.decode_rows(&mut seqs, &plan);
        for (row, (together, alone)) in together.chunks_exact(vocab).zip(&alone).enumerate() {
            assert!(
                together == &alone[..],
                "{name}: row {row} of the pass differs from its token decoded alone"
            );
        }
        assert!(
            caches
                .iter()
                .zip(&prompts)
                .zip(feeds)
                .all(|((c, p), n)| c.len == p.len() + n)
        );
    });
}

#[test]
fn a_sequences_rows_in_a_decode_pass_get_the_logits_of_decoding_alone() {
    on_fixtures(&ROWS_OF_DECODE, check_rows_of_one_sequence);
}

/// Two sequences share the blocks of a 20-token prompt (the first block full, the second
/// holding 4 positions), as a cached prefix or the `n` choices of one request do: B forks A
/// (its rings copied), B then A append tokens of their own, B copying the shared block before
/// writing into it. Each one's logits are bit for bit those of the same tokens run cold, from
/// an empty cache in the same chunks: the warm prefix changes nothing, and B's writes never
/// reach A's keys.
fn check_shared_prefix(emulate: &EmulateLaunch, name: &str) {
    let model = fixture_model(name);
    let vocab = model.config.vocab_size as u32;
    let prefix: Vec<u32> = (0..20).map(|i| (i * 37 + 5) % vocab).collect();
    let own = |s: u32| -> Vec<u32> { (0..5).map(|i| (i * 11 + 7 + 50 * s) % vocab).collect() };
    with_host_gpu(emulate, &model, &load_options(32, 20, 2), |mut gpu| {
        let cold = |gpu: &mut Emulated, s: u32| {
            let mut cache = gpu.pool.new_cache();
            gpu.step(&prefix, &mut cache);
            gpu.step(&own(s), &mut cache)
        };
        let (cold_a, cold_b) = (cold(&mut gpu, 0), cold(&mut gpu, 1));
        let mut a = gpu.pool.new_cache();
        gpu.step(&prefix, &mut a);
        let mut b = gpu.pool.fork(&a);
        assert_eq!(b.blocks, a.blocks, "{name}: the prefix's blocks are shared");
        let warm_b = gpu.step(&own(1), &mut b);
        assert_ne!(
            b.blocks[1], a.blocks[1],
            "{name}: B copied the block it wrote into"
        );
        assert_eq!(
            b.blocks[0], a.blocks[0],
            "{name}: the full block stays shared"
        );
        let warm_a = gpu.step(&own(0), &mut a);
        assert!(
            warm_b == cold_b,
            "{name}: B over the shared prefix differs from B cold"
        );
        assert!(
            warm_a == cold_a,
            "{name}: A differs from A cold after B wrote"
        );
    });
}

#[test]
fn sequences_sharing_a_prefix_get_the_logits_of_their_cold_runs() {
    // Full-attention layers only (llama), and sliding-window rings copied on fork (gemma3).
    on_fixtures(
        &["llama-tiny-q8_0", "gemma3-tiny-q4_k_m"],
        check_shared_prefix,
    );
}

/// A prompt run in steps cut anywhere, down to one token, gives the bits of the whole prompt
/// in one step: its last token's logits, and the keys and values that the next decoded token
/// attends to (its logits are compared). So a prompt whose last token alone is computed again
/// over its cached rest, as the engine does when the prefix cache holds the whole prompt,
/// equals its cold run.
fn check_prefill_cuts(emulate: &EmulateLaunch, name: &str, kv: KvElement) {
    let model = fixture_model(name);
    let vocab = model.config.vocab_size as u32;
    let prompt: Vec<u32> = (0..23).map(|i| (i * 37 + 5) % vocab).collect();
    let next = 11 % vocab;
    let options = LoadOptions {
        kv,
        ..load_options(32, 23, 2)
    };
    with_host_gpu(emulate, &model, &options, |mut gpu| {
        let mut whole = gpu.pool.new_cache();
        let cold = gpu.step(&prompt, &mut whole);
        let cold_next = gpu.decode_token(next, &mut whole);
        for cuts in [&[22, 1][..], &[1, 5, 13, 4], &[16, 7]] {
            let mut cache = gpu.pool.new_cache();
            let mut last = Vec::new();
            let mut at = 0;
            for &n in cuts {
                last = gpu.step(&prompt[at..at + n], &mut cache);
                at += n;
            }
            assert!(
                last == cold,
                "{name}, {kv:?} cache: the prompt cut {cuts:?} differs from it whole"
            );
            assert!(
                gpu.decode_token(next, &mut cache) == cold_next,
                "{name}, {kv:?} cache: decoding after the prompt cut {cuts:?} differs"
            );
        }
    });
}

#[test]
fn a_prompt_cut_into_steps_anywhere_gives_the_bits_of_the_whole_prompt() {
    // Q8_0 and Q4_K products on tensor cores, sliding-window rings (gemma3), experts grouped
    // by expert (qwen3moe); over the f16 cache (flash attention on tensor cores) and a q8_0
    // one (the f32 tiles).
    on_fixtures(&ROWS_OF_DECODE, |emulate, name| {
        for kv in [KvElement::F16, KvElement::Q8_0] {
            check_prefill_cuts(emulate, name, kv);
        }
    });
}

/// A decode step's products of one q8_1 type and width share launches: q, k and v, then gate
/// and up (every matrix of llama-tiny-q8_0 is Q8_0), so a layer runs four product launches;
/// q and k rotate in one; each norm adds the residual before it and quantizes its output for
/// the products after it in its own launch (the output norm too), and the activation and
/// decode attention's merge quantize theirs, leaving no launch of its own for a q8_1
/// quantization. Each launch's bits are those of the launches it replaces (the kernel checks),
/// and the step's logits the CPU's (`check_fixture`).
#[test]
fn a_decode_steps_products_of_one_type_share_launches() {
    with_emulator(|emulate| {
        let model = fixture_model("llama-tiny-q8_0");
        with_host_gpu(emulate, &model, &load_options(16, 8, 1), |mut gpu| {
            let mut cache = gpu.pool.new_cache();
            gpu.step(&[1, 2, 3], &mut cache);
            let addresses = gpu.pool.addresses(&mut cache);
            let mut launches = Vec::new();
            gpu.builder.decode_token(&addresses, &mut launches);
            let count =
                |f: fn(&KernelRef) -> bool| launches.iter().filter(|l| f(&l.kernel)).count();
            let layers = model.config.layers;
            let products = count(|k| matches!(k, KernelRef::MatvecQ8_1(_)));
            assert_eq!(products, 4 * layers + 1, "four a layer, and the head");
            assert_eq!(count(|k| matches!(k, KernelRef::Fixed("rope"))), layers);
            let fused = count(|k| matches!(k, KernelRef::Fixed("add_rms_norm")));
            assert_eq!(fused, 2 * layers + 1, "every norm, with its residual add");
            assert_eq!(count(|k| matches!(k, KernelRef::Fixed("rms_norm"))), 0);
            assert_eq!(count(|k| matches!(k, KernelRef::Fixed("add_inplace"))), 0);
            let quantizations = count(|k| matches!(k, KernelRef::Fixed("quantize_q8_1")));
            assert_eq!(quantizations, 0);
            let merges = launches.iter().filter(|l| {
                matches!(l.kernel, KernelRef::Fixed("attention_decode_combine"))
                    && l.args().iter().rev().take(2).all(|a| *a != Arg::Ptr(0))
            });
            assert_eq!(merges.count(), layers, "each merge quantizes its output");
            let activations = count(|k| matches!(k, KernelRef::Fixed("gated_activation_q8_1")));
            assert_eq!(activations, layers);
        });
    });
}
