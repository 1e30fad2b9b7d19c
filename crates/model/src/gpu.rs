//! The model on an NVIDIA GPU: the view the CUDA backend uploads from, and generation with
//! the GPU forward pass. `rinfer-cuda` sits below this crate, so this is where the model's own
//! configuration and weights are handed to it.

use std::time::Instant;

use rinfer_cuda::{
    FfnKind, GpuConfig, GpuKvCache, GpuModel, HostFfnUp, HostLayer, HostLinear, HostMatrix,
    HostModel, HostNorm, HostQkv, Norm, RopeConfig, Window,
};

use crate::config::{Ffn, ModelConfig, NormKind, Positional, RopeStyle};
use crate::error::ModelError;
use crate::forward::Model;
use crate::generate::{FinishReason, GenerateRequest, Generation, StopMatcher, Timings};
use crate::sampling::{Sampler, SamplingParams};
use crate::tokenizer::Tokenizer;
use crate::weights::{FfnUp, Linear, Matrix, NormWeights, Qkv};

impl Model {
    /// The model as the CUDA backend takes it: its configuration and borrowed views of every
    /// weight in its stored format.
    pub fn gpu_view(&self) -> HostModel<'_> {
        let w = &self.weights;
        let layers = w
            .layers
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let name = |role: &str| format!("blk.{i}.{role}.weight");
                HostLayer {
                    attn_norm: norm(&l.attn_norm),
                    qkv: match &l.qkv {
                        Qkv::Separate { q, k, v } => HostQkv::Separate {
                            q: linear(q, name("attn_q")),
                            k: linear(k, name("attn_k")),
                            v: linear(v, name("attn_v")),
                        },
                        Qkv::Fused(qkv) => HostQkv::Fused(linear(qkv, name("attn_qkv"))),
                    },
                    qk_norm: l
                        .qk_norm
                        .as_ref()
                        .map(|(q, k)| (q.as_slice(), k.as_slice())),
                    attn_output: linear(&l.attn_output, name("attn_output")),
                    post_attn_norm: l.post_attn_norm.as_ref().map(norm),
                    ffn_norm: l.ffn_norm.as_ref().map(norm),
                    ffn_up: match &l.ffn_up {
                        FfnUp::Gated { gate, up } => HostFfnUp::Gated {
                            gate: linear(gate, name("ffn_gate")),
                            up: linear(up, name("ffn_up")),
                        },
                        FfnUp::FusedGated(gate_up) => {
                            HostFfnUp::FusedGated(linear(gate_up, name("ffn_up")))
                        }
                        FfnUp::Plain(up) => HostFfnUp::Plain(linear(up, name("ffn_up"))),
                    },
                    ffn_down: linear(&l.ffn_down, name("ffn_down")),
                    post_ffn_norm: l.post_ffn_norm.as_ref().map(norm),
                }
            })
            .collect();
        let lm_head_name = if w.output.is_some() {
            "output.weight"
        } else {
            "token_embd.weight"
        };
        HostModel {
            config: gpu_config(&self.config),
            token_embd: matrix(&w.token_embd, "token_embd.weight".into()),
            position_embd: w
                .position_embd
                .as_ref()
                .map(|m| matrix(m, "position_embd.weight".into())),
            rope_freqs: w.rope_freqs.as_deref(),
            layers,
            output_norm: norm(&w.output_norm),
            lm_head: matrix(w.lm_head(), lm_head_name.into()),
            output_bias: w.output_bias.as_deref(),
        }
    }
}

/// The fields of `c` the GPU forward pass reads.
fn gpu_config(c: &ModelConfig) -> GpuConfig {
    GpuConfig {
        vocab_size: c.vocab_size,
        hidden: c.hidden,
        layers: c.layers,
        heads: c.heads,
        kv_heads: c.kv_heads,
        head_dim: c.head_dim,
        ffn_dim: c.ffn_dim,
        norm: match c.norm {
            NormKind::Rms => Norm::Rms,
            NormKind::Layer => Norm::Layer,
        },
        norm_eps: c.norm_eps,
        ffn: match c.ffn {
            Ffn::SiluGated => FfnKind::SiluGated,
            Ffn::GeluGated => FfnKind::GeluGated,
            Ffn::Gelu => FfnKind::Gelu,
        },
        rope: match c.positional {
            Positional::Rope(r) => Some(RopeConfig {
                neox: r.style == RopeStyle::Neox,
                dims: r.dims,
                base: r.base,
                base_local: r.base_local,
                linear_scale: r.linear_scale,
            }),
            Positional::Learned => None,
        },
        parallel_block: c.parallel_block,
        embedding_scale: c.embedding_scale,
        attention_scale: c.attention_scale,
        attn_softcap: c.attn_softcap,
        final_softcap: c.final_softcap,
        sliding_window: c.sliding_window.map(|w| Window {
            size: w.window,
            pattern: w.pattern,
        }),
    }
}

fn matrix(m: &Matrix, name: String) -> HostMatrix<'_> {
    HostMatrix {
        name,
        ty: m.ty,
        rows: m.rows,
        cols: m.cols,
        data: m.data(),
    }
}

fn linear(l: &Linear, name: String) -> HostLinear<'_> {
    HostLinear {
        weight: matrix(&l.weight, name),
        bias: l.bias.as_deref(),
    }
}

fn norm(n: &NormWeights) -> HostNorm<'_> {
    HostNorm {
        weight: &n.weight,
        bias: n.bias.as_deref(),
    }
}

/// Whether sampling with `p` is a plain argmax, which the GPU computes without copying logits.
fn is_plain_greedy(p: &SamplingParams) -> bool {
    p.temperature <= 0.0
        && p.repeat_penalty == 1.0
        && p.frequency_penalty == 0.0
        && p.presence_penalty == 0.0
        && p.logit_bias.is_empty()
}

/// [`generate`](crate::generate()) with the forward pass on `gpu` and the KV cache on the
/// device: the same sampling, streaming and stopping.
pub fn generate_on_gpu(
    gpu: &mut GpuModel,
    tokenizer: &Tokenizer,
    request: &GenerateRequest,
    cache: &mut GpuKvCache,
    mut on_text: impl FnMut(&str),
) -> Result<Generation, ModelError> {
    let prompt = &request.prompt;
    if prompt.is_empty() {
        return Err(ModelError::InvalidConfig("the prompt is empty".into()));
    }
    if prompt.len() + request.max_tokens > cache.context() {
        return Err(ModelError::ContextOverflow {
            prompt: prompt.len(),
            requested: request.max_tokens,
            context: cache.context(),
        });
    }
    cache.clear();
    let mut sampler = Sampler::new(request.sampling.clone(), gpu.config().vocab_size);
    prompt.iter().for_each(|&t| sampler.accept(t));
    let greedy = is_plain_greedy(&request.sampling);
    let mut logits = Vec::new();
    let mut step = |gpu: &mut GpuModel,
                    cache: &mut GpuKvCache,
                    sampler: &mut Sampler,
                    tokens: &[u32]|
     -> Result<u32, ModelError> {
        if greedy {
            return Ok(gpu.forward_argmax(tokens, cache)?);
        }
        logits.clear();
        logits.extend_from_slice(gpu.forward(tokens, cache, rinfer_cuda::Logits::Last)?);
        Ok(sampler.sample(&mut logits))
    };
    let mut stream = tokenizer.stream_decoder();
    let mut stops = StopMatcher::new(request.stop.clone());
    let mut timings = Timings {
        prompt_tokens: prompt.len(),
        ..Timings::default()
    };

    let start = Instant::now();
    let mut next = step(gpu, cache, &mut sampler, prompt)?;
    timings.prefill_s = start.elapsed().as_secs_f64();

    let decode_start = Instant::now();
    let mut tokens = Vec::with_capacity(request.max_tokens);
    let mut finish = FinishReason::Length;
    while tokens.len() < request.max_tokens {
        tokens.push(next);
        sampler.accept(next);
        if tokenizer.is_eog(next) {
            finish = FinishReason::Stop;
            break;
        }
        if let Some(piece) = stream.push(next)
            && stops.push(&piece, &mut on_text)
        {
            finish = FinishReason::Stop;
            break;
        }
        if tokens.len() == request.max_tokens {
            break;
        }
        next = step(gpu, cache, &mut sampler, &[next])?;
    }
    if finish == FinishReason::Length
        && let Some(rest) = stream.finish()
    {
        stops.push(&rest, &mut on_text);
    }
    if finish == FinishReason::Length || !stops.stopped {
        stops.flush(&mut on_text);
    }
    timings.decode_s = decode_start.elapsed().as_secs_f64();
    timings.generated_tokens = tokens.len();
    Ok(Generation {
        tokens,
        text: stops.text,
        finish,
        timings,
    })
}
