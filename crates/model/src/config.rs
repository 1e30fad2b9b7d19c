//! One description of a decoder-only transformer: dimensions plus typed features.
//!
//! Every architecture maps its GGUF metadata into a [`ModelConfig`]; at load the configuration
//! produces the [`Transformer`] the forward passes run (see [`ModelConfig::transformer`]), so
//! no executor ever reads the architecture's name.

use rinfer_kernels::ops;
use rinfer_transformer::Role;
use rinfer_transformer::{
    AttentionParams, Block, Classifier, DeltaNetWeights, Experts, FfnUp, GateUpDown, LatentQ,
    Linear, Norm, NormWeights, PerLayerInputs, Presence, Qkv, RopeParams, Router, Stage,
    Transformer,
};

mod experts_beside_dense;

pub use rinfer_transformer::{DeltaNet, Ffn, Gating, Heads, Mla, NormKind, Recurrence, ShortConv};

/// Which dimension pairs RoPE rotates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs `(2i, 2i+1)` (llama.cpp's NORM mode; GGUF llama q/k are permuted for it).
    Interleaved,
    /// Pairs `(i, i + n_rot/2)` (GPT-NeoX).
    Neox,
}

/// How positions are encoded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Positional {
    /// Rotary embeddings on q and k.
    Rope(Rope),
    /// A learned `position_embd` table added to the token embeddings.
    Learned,
}

/// Rotary embedding parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rope {
    /// Pair layout.
    pub style: RopeStyle,
    /// Leading dimensions of each head that rotate (the rest pass through).
    pub dims: usize,
    /// Leading dimensions that rotate on sliding-window layers (gemma4's are narrower).
    pub dims_local: usize,
    /// Frequency base on full-attention layers.
    pub base: f32,
    /// Frequency base on sliding-window layers.
    pub base_local: f32,
    /// Positions are divided by this (linear scaling; 1 for none). Per-frequency factors
    /// (Llama 3.1's long-context scaling) come from the optional `rope_freqs` tensor instead.
    pub linear_scale: f32,
    /// YaRN context extension (gpt-oss); `linear_scale` is then its factor.
    pub yarn: Option<YarnScaling>,
}

/// YaRN scaling as the GGUF metadata gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct YarnScaling {
    /// The context length the model was trained at before the extension.
    pub original_context: usize,
}

/// How an embedding is made from the final hidden states of a sequence's tokens (GGUF
/// `{arch}.pooling_type`, llama.cpp's `llama_pooling_type`); each token's state is taken after
/// the output norm, when the model has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The average over every token, special tokens included (1).
    Mean,
    /// The first token's state (`[CLS]`) (2).
    Cls,
    /// The last token's state (3): a decoder embedder appends an end token for it.
    Last,
    /// A ranker's scores (4): one state pooled, then the classifier head ([`Rank`]).
    Rank(Rank),
}

impl Pooling {
    /// llama.cpp's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Mean => "mean",
            Self::Cls => "cls",
            Self::Last => "last",
            Self::Rank(_) => "rank",
        }
    }

    /// Values per pooled row: the hidden width, or a ranker's labels.
    pub fn width(self, hidden: usize) -> usize {
        match self {
            Self::Rank(rank) => rank.labels,
            Self::Mean | Self::Cls | Self::Last => hidden,
        }
    }
}

/// How a ranker (pooling type 4, a cross-encoder or a decoder reranker) scores a sequence,
/// as llama.cpp's `build_pooling` does: the state of the first token (an encoder) or of the
/// last (a decoder), or the mean of all (`{arch}.classifier.pooling_type` = 1), through the
/// architecture's [`RankHead`]; the first of its `labels` values is the relevance score.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rank {
    /// Values the head puts out (`{arch}.classifier.output_labels`, 1 without it).
    pub labels: usize,
    /// The head reads the mean of every token's state.
    pub mean: bool,
    /// The head; `None` where rinfer knows no classifier for the architecture.
    pub head: Option<RankHead>,
}

/// A ranker's classifier, by architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankHead {
    /// BERT: `tanh(cls · x + b)` (each part where the file has it), then `cls.output · x + b`.
    Bert,
    /// Qwen3-Reranker: `cls.output · x` (the LM head's "yes" and "no" rows), then a softmax.
    Qwen3,
}

/// Mixture-of-experts feed-forward blocks: a router picks `used` of `count` experts per token.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoeConfig {
    /// Experts per layer.
    pub count: usize,
    /// Experts each token runs (top-k).
    pub used: usize,
    /// Inner width of one expert.
    pub ffn_dim: usize,
    /// How the router's scores become weights.
    pub gating: Gating,
    /// The shape of each expert.
    pub ffn: Ffn,
    /// The routed weights are multiplied by this (`expert_weights_scale`; 1 for none).
    pub weights_scale: f32,
    /// The router has a selection bias (`exp_probs_b`) added to its scores to choose.
    pub selection_bias: bool,
    /// The first this many layers run the dense FFN instead (`leading_dense_block_count`).
    pub leading_dense: usize,
    /// Shared experts every token runs beside its routed ones.
    pub shared: Option<SharedExpertsConfig>,
    /// The dense FFN runs beside the experts (Gemma 4): each output post-normed on its own
    /// (`post_ffw_norm_1`, `post_ffw_norm_2`), the experts reading `pre_ffw_norm_2`, the
    /// router its own norm of the residual stream (`ffn_gate_inp.scale`, over √hidden), each
    /// expert's output scaled by `ffn_down_exps.scale` where the file has it.
    pub dense_beside: bool,
    /// A file may store each layer's expert gate and up projections as one tensor,
    /// `ffn_gate_up_exps` (each expert's gate rows, then its up rows), instead of
    /// `ffn_gate_exps` and `ffn_up_exps`: the architectures llama.cpp loads with
    /// `create_tensor_gate_up_exps` (or, for Gemma 4, its own check of the fused tensor).
    pub fused_gate_up: bool,
}

/// The shared experts of a mixture-of-experts layer, run as one gated FFN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedExpertsConfig {
    /// Their inner widths summed.
    pub ffn_dim: usize,
    /// Their output is scaled per token by `sigmoid(ffn_gate_inp_shexp · h)` (Qwen3.5-MoE).
    pub gated: bool,
}

impl MoeConfig {
    /// Whether `layer` runs the experts (and not the dense FFN).
    pub fn applies_to(&self, layer: usize) -> bool {
        layer >= self.leading_dense
    }
}

/// Sliding-window attention on some layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingWindow {
    /// A query may attend keys at most `window - 1` positions back.
    pub window: usize,
    /// Layer `i` uses the window iff `i % pattern < pattern - 1` (pattern 1: every layer),
    /// unless [`ModelConfig::layer_attention`] lists the layers.
    pub pattern: usize,
}

/// One layer's attention, where the layers differ in more than their window (gemma4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerAttention {
    /// Its heads.
    pub heads: Heads,
    /// Whether its window slides.
    pub sliding: bool,
    /// The earlier layer whose KV cache it reads, keeping none of its own (Gemma 4's KV
    /// sharing); `None`: it stores its own keys and values.
    pub kv_source: Option<usize>,
}

impl SlidingWindow {
    /// Whether layer `layer` is a sliding-window layer.
    pub fn applies_to(&self, layer: usize) -> bool {
        self.pattern <= 1 || layer % self.pattern < self.pattern - 1
    }
}

/// The layers of a hybrid model that mix positions by a recurrence instead of attention.
#[derive(Clone, Debug, PartialEq)]
pub struct RecurrentLayers {
    /// Per layer, whether it is recurrent.
    pub layers: Vec<bool>,
    /// What those layers run.
    pub recurrence: Recurrence,
}

/// Everything the forward pass needs to know about a model.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// The GGUF architecture name, for messages.
    pub arch: String,
    /// Vocabulary size (rows of the embedding table).
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden: usize,
    /// Number of decoder blocks.
    pub layers: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (fewer than `heads` under GQA).
    pub kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Inner width of the feed-forward block.
    pub ffn_dim: usize,
    /// The longest context the model was trained for.
    pub context_length: usize,
    /// Normalisation kind.
    pub norm: NormKind,
    /// Normalisation epsilon.
    pub norm_eps: f32,
    /// Feed-forward shape.
    pub ffn: Ffn,
    /// Position encoding.
    pub positional: Positional,
    /// Per-head RMSNorm of q and k before RoPE.
    pub qk_norm: bool,
    /// Attention and FFN both read the same normed input and add to the residual together (phi2).
    pub parallel_block: bool,
    /// Extra norms on the attention and FFN outputs before the residual add (gemma2/3).
    pub post_norms: bool,
    /// Token embeddings are multiplied by this (gemma: sqrt(hidden)).
    pub embedding_scale: Option<f32>,
    /// Attention score scale, usually `1/sqrt(head_dim)`.
    pub attention_scale: f32,
    /// `tanh` soft-capping of attention scores.
    pub attn_softcap: Option<f32>,
    /// `tanh` soft-capping of the final logits.
    pub final_softcap: Option<f32>,
    /// Sliding-window attention.
    pub sliding_window: Option<SlidingWindow>,
    /// Mixture-of-experts FFNs in place of the dense one on every layer.
    pub experts: Option<MoeConfig>,
    /// A learned sink logit per head joins each attention softmax (gpt-oss).
    pub attention_sinks: bool,
    /// Each layer's heads and window, where they differ from layer to layer (gemma4); `None`:
    /// every layer has the heads above, and [`SlidingWindow::pattern`] picks the windows.
    pub layer_attention: Option<Vec<LayerAttention>>,
    /// Every value head RMS-normed without a scale (gemma4).
    pub value_norm: bool,
    /// Width of each layer's per-layer input (gemma4's per-layer embeddings).
    pub per_layer_input: Option<usize>,
    /// Each layer's output is multiplied by its one-value `layer_output_scale` (gemma4).
    pub layer_output_scale: bool,
    /// Multi-head latent attention (DeepSeek-V2/V3): `heads` query heads over one latent kv
    /// head of `head_dim = rope + kv_lora` values, whose values are its keys.
    pub mla: Option<Mla>,
    /// Layers that run a recurrence in place of attention (hybrid models).
    pub recurrent: Option<RecurrentLayers>,
    /// Each head's attention output is multiplied by `sigmoid` of a gate its query projection
    /// also gives (Qwen3.5).
    pub gated_attention: bool,
    /// How the weights are laid out in tensors.
    pub layout: TensorLayout,
    /// Whether a token attends only to the tokens before it (a decoder); an encoder's tokens
    /// see the whole sequence.
    pub causal: bool,
    /// BERT's post-norm layout: token types and a norm of the embeddings, a norm of the
    /// residual stream after each residual add, no norm before the attention, the FFN or
    /// the head.
    pub post_norm: bool,
    /// How the model pools an embedding, when it is an embedding model (`None`: a language
    /// model only).
    pub pooling: Option<Pooling>,
}

/// How an architecture stores q, k and v.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QkvLayout {
    /// `attn_q`, `attn_k` and `attn_v`.
    Separate,
    /// One `attn_qkv`, output q | k | v.
    Fused,
    /// `attn_q`, `attn_k`, and `attn_v` where a layer has it (gemma4: the values of a layer
    /// without one are its keys).
    OptionalValue,
}

/// The tensors an architecture stores its weights in, beyond what the features imply (q/k
/// norms, post norms, sinks and experts each bring their own tensors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorLayout {
    /// Fused or separate q, k, v.
    pub qkv: QkvLayout,
    /// A gated FFN's gate and up in one `ffn_up` matrix, output gate | up (phi3).
    pub fused_gate_up: bool,
    /// The biases of the projections (q, k, v, output, FFN, router, LM head).
    pub biases: Presence,
    /// The tensor of the norm before the FFN: `ffn_norm` (gpt-oss: `post_attention_norm`).
    pub ffn_norm: Role,
    /// Whether a file must hold the q/k norms when the model has them (GLM-4.5 files may not).
    pub qk_norm: Presence,
    /// The tensor of the norm before the LM head: `output_norm` (LFM2: `token_embd_norm`).
    pub output_norm: Role,
}

impl TensorLayout {
    /// Separate q, k, v, separate gate and up, optional biases, `ffn_norm`.
    pub const LLAMA: TensorLayout = TensorLayout {
        qkv: QkvLayout::Separate,
        fused_gate_up: false,
        biases: Presence::Optional,
        ffn_norm: Role::FfnNorm,
        qk_norm: Presence::Required,
        output_norm: Role::OutputNorm,
    };
}

impl ModelConfig {
    /// The heads of `layer`.
    pub fn heads_of(&self, layer: usize) -> Heads {
        match self.layer_attention.as_ref().and_then(|l| l.get(layer)) {
            Some(attention) => attention.heads,
            None => Heads {
                heads: self.heads,
                kv_heads: self.kv_heads,
                head_dim: self.head_dim,
            },
        }
    }

    /// Width of all query heads together, on the widest layer.
    pub fn q_dim(&self) -> usize {
        (0..self.layers)
            .map(|layer| self.heads_of(layer).q_dim())
            .max()
            .unwrap_or(0)
    }

    /// Width of all key (or value) heads together, on the widest layer.
    pub fn kv_dim(&self) -> usize {
        (0..self.layers)
            .map(|layer| self.heads_of(layer).kv_dim())
            .max()
            .unwrap_or(0)
    }

    /// Width of the key (or value) rows of the full-attention layers, which share the KV
    /// cache's blocks (the configuration is refused when they differ).
    pub fn paged_kv_dim(&self) -> usize {
        (0..self.layers)
            .filter(|&layer| self.window_of(layer).is_none())
            .map(|layer| self.heads_of(layer).kv_dim())
            .max()
            .unwrap_or_else(|| self.kv_dim())
    }

    /// Whether attention reads each position's values from its key row, so a cache keeps no
    /// value rows (latent attention's one row per position).
    pub fn values_in_keys(&self) -> bool {
        self.mla.is_some()
    }

    /// Whether `layer` runs mixture-of-experts FFNs.
    pub fn is_moe_layer(&self, layer: usize) -> bool {
        self.experts.is_some_and(|moe| moe.applies_to(layer))
    }

    /// What `layer` runs in place of attention, if it is a recurrent layer.
    pub fn recurrence_of(&self, layer: usize) -> Option<Recurrence> {
        let r = self.recurrent.as_ref()?;
        r.layers
            .get(layer)
            .copied()
            .unwrap_or(false)
            .then_some(r.recurrence)
    }

    /// Whether `layer` keeps keys and values (every layer but the recurrent ones).
    pub fn has_attention(&self, layer: usize) -> bool {
        self.recurrence_of(layer).is_none()
    }

    /// The earlier layer whose KV cache `layer` reads, where it keeps none of its own.
    pub fn kv_source_of(&self, layer: usize) -> Option<usize> {
        self.layer_attention.as_ref()?.get(layer)?.kv_source
    }

    /// Whether `layer` stores keys and values in a cache of its own (not a recurrent layer,
    /// not one that reads another layer's cache).
    pub fn keeps_kv(&self, layer: usize) -> bool {
        self.has_attention(layer) && self.kv_source_of(layer).is_none()
    }

    /// The attention window of `layer`, if it slides.
    pub fn window_of(&self, layer: usize) -> Option<usize> {
        let sw = self.sliding_window?;
        let slides = match &self.layer_attention {
            Some(layers) => layers.get(layer).is_some_and(|l| l.sliding),
            None => sw.applies_to(layer),
        };
        slides.then_some(sw.window)
    }

    /// The transformer this configuration describes: every layer's stages with their
    /// parameters, and which tensors hold their weights (the loader fills it; the CPU and GPU
    /// forward passes walk it).
    pub fn transformer(&self) -> Transformer<Presence> {
        let norm = |role| self.norm(role);
        let learned = matches!(self.positional, Positional::Learned);
        Transformer {
            vocab_size: self.vocab_size,
            hidden: self.hidden,
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            ffn_dim: self.ffn_dim,
            embedding_scale: self.embedding_scale,
            token_embd: Presence::Required,
            position_embd: learned.then_some(Presence::Required),
            token_types: self.post_norm.then_some(Presence::Required),
            embedding_norm: self.post_norm.then(|| norm(Role::TokenEmbdNorm)),
            causal: self.causal,
            rope_freqs: (!learned).then_some(Presence::Optional),
            per_layer_inputs: self.per_layer_input.map(|width| PerLayerInputs {
                width,
                token_embd: Presence::Required,
                model_proj: Presence::Required,
                proj_norm: norm(Role::PerLayerProjNorm),
            }),
            blocks: (0..self.layers).map(|layer| self.block(layer)).collect(),
            output_norm: (!self.post_norm).then(|| norm(self.layout.output_norm)),
            output: Some(Presence::Optional),
            output_bias: Some(Presence::Optional),
            final_softcap: self.final_softcap,
            classifier: self.classifier(),
        }
    }

    /// A ranker's classifier: the tensors its [`RankHead`] reads, each optional as in
    /// llama.cpp (a file without them scores the pooled state itself).
    fn classifier(&self) -> Option<Classifier<Presence>> {
        let Some(Pooling::Rank(rank)) = self.pooling else {
            return None;
        };
        let optional = |bias: bool| Linear {
            weight: Presence::Optional,
            bias: bias.then_some(Presence::Optional),
        };
        let (dense, output) = match rank.head? {
            RankHead::Bert => (Some(optional(true)), Some(optional(true))),
            RankHead::Qwen3 => (None, Some(optional(false))),
        };
        Some(Classifier {
            dense,
            output,
            labels: rank.labels,
        })
    }

    /// A norm held by the tensor `role`, with its bias under LayerNorm.
    fn norm(&self, role: Role) -> NormWeights<Presence> {
        NormWeights {
            role,
            params: Norm {
                kind: self.norm,
                eps: self.norm_eps,
            },
            weight: Presence::Required,
            bias: (self.norm == NormKind::Layer).then_some(Presence::Required),
        }
    }

    /// A projection, with the bias the layout declares.
    fn linear(&self) -> Linear<Presence> {
        Linear {
            weight: Presence::Required,
            bias: Some(self.layout.biases),
        }
    }

    /// The stage of a recurrent layer that runs `recurrence`, in place of attention.
    fn recurrent_stage(&self, recurrence: Recurrence) -> Stage<Presence> {
        let required = || Linear {
            weight: Presence::Required,
            bias: None,
        };
        match recurrence {
            Recurrence::ShortConv(conv) => Stage::ShortConv {
                conv,
                in_proj: required(),
                kernel: Presence::Required,
                out_proj: required(),
            },
            Recurrence::DeltaNet(net) => Stage::DeltaNet {
                net,
                weights: DeltaNetWeights {
                    qkv: required(),
                    gate: required(),
                    kernel: Presence::Required,
                    dt_bias: Presence::Required,
                    a: Presence::Required,
                    beta: required(),
                    alpha: required(),
                    norm: Presence::Required,
                    output: required(),
                },
            },
        }
    }

    /// The stages of `layer`.
    fn block(&self, layer: usize) -> Block<Presence> {
        let norm = |role| self.norm(role);
        let mut stages = if self.post_norm {
            Vec::new()
        } else {
            vec![Stage::AttentionNorm(norm(Role::AttnNorm))]
        };
        match self.recurrence_of(layer) {
            Some(recurrence) => stages.push(self.recurrent_stage(recurrence)),
            None => self.attention_stages(layer, &mut stages),
        }
        self.ffn_stages(layer, &mut stages);
        if self.per_layer_input.is_some() {
            stages.push(Stage::PerLayerInput {
                gate: self.linear(),
                proj: self.linear(),
                norm: norm(Role::PerLayerPostNorm),
            });
        }
        if self.layer_output_scale {
            stages.push(Stage::OutputScale(Presence::Required));
        }
        Block {
            heads: self.heads_of(layer),
            stages,
        }
    }

    /// The attention stages of `layer`, from the projections to the output's post norm.
    fn attention_stages(&self, layer: usize, stages: &mut Vec<Stage<Presence>>) {
        let norm = |role| self.norm(role);
        let window = self.window_of(layer);
        let source = self.kv_source_of(layer);
        let qkv = match (self.mla, self.layout.qkv, self.gated_attention) {
            _ if source.is_some() => Stage::Qkv(Qkv::QueryOnly { q: self.linear() }),
            (Some(mla), _, _) => self.latent_qkv(mla),
            (None, _, true) => Stage::Qkv(Qkv::GatedQuery {
                q: self.linear(),
                k: self.linear(),
                v: self.linear(),
            }),
            (None, QkvLayout::Separate, false) => Stage::Qkv(Qkv::Separate {
                q: self.linear(),
                k: self.linear(),
                v: self.linear(),
            }),
            (None, QkvLayout::Fused, false) => Stage::Qkv(Qkv::Fused(self.linear())),
            (None, QkvLayout::OptionalValue, false) => Stage::Qkv(Qkv::OptionalValue {
                q: self.linear(),
                k: self.linear(),
                v: Some(Linear {
                    weight: Presence::Optional,
                    bias: Some(self.layout.biases),
                }),
            }),
        };
        stages.push(qkv);
        match (self.qk_norm, source) {
            (false, _) => {}
            (true, None) => stages.push(Stage::QkNorm {
                eps: self.norm_eps,
                q: self.layout.qk_norm,
                k: self.layout.qk_norm,
            }),
            (true, Some(_)) => stages.push(Stage::QueryNorm {
                eps: self.norm_eps,
                q: Presence::Required,
            }),
        }
        if self.value_norm && source.is_none() {
            stages.push(Stage::ValueNorm { eps: self.norm_eps });
        }
        if let Positional::Rope(rope) = self.positional {
            let freq_base = if window.is_some() {
                rope.base_local
            } else {
                rope.base
            };
            let n_rot = match window {
                Some(_) => rope.dims_local,
                None => rope.dims,
            };
            stages.push(Stage::Rope(RopeParams {
                n_rot,
                freq_base,
                freq_scale: 1.0 / rope.linear_scale,
                style: match rope.style {
                    RopeStyle::Interleaved => ops::RopeStyle::Norm,
                    RopeStyle::Neox => ops::RopeStyle::Neox,
                },
                yarn: rope.yarn.map(|yarn| {
                    let orig = yarn.original_context;
                    ops::Yarn::new(n_rot, freq_base, orig, rope.linear_scale)
                }),
                // Per-frequency factors never apply on sliding-window layers (gemma4 keeps
                // them for its full-attention layers; no other model has both).
                factors: window.is_none(),
            }));
        }
        let params = AttentionParams {
            scale: self.attention_scale,
            softcap: self.attn_softcap,
            window,
            sinks: self.attention_sinks,
        };
        stages.push(match source {
            Some(source) => Stage::SharedAttention { params, source },
            None => Stage::Attention {
                params,
                sinks: self.attention_sinks.then_some(Presence::Required),
            },
        });
        if let Some(mla) = self.mla {
            stages.push(Stage::LatentOutput { mla, v_b: None });
        }
        if self.gated_attention {
            stages.push(Stage::AttentionGate);
        }
        stages.push(Stage::AttentionOutput(self.linear()));
        if self.post_norms {
            stages.push(Stage::PostAttentionNorm(norm(Role::PostAttentionNorm)));
        }
    }

    /// The stages after the mixer: the residual, the FFN (dense or experts) and its residual.
    fn ffn_stages(&self, layer: usize, stages: &mut Vec<Stage<Presence>>) {
        let norm = |role| self.norm(role);
        let dense = || Stage::Ffn {
            ffn: self.ffn,
            up: match (self.ffn.is_gated(), self.layout.fused_gate_up) {
                (false, _) => FfnUp::Plain(self.linear()),
                (true, false) => FfnUp::Gated {
                    gate: self.linear(),
                    up: self.linear(),
                },
                (true, true) => FfnUp::FusedGated(self.linear()),
            },
            down: self.linear(),
        };
        if self.parallel_block {
            stages.extend([dense(), Stage::ParallelResidual]);
            return;
        }
        if self.post_norm {
            stages.extend([
                Stage::AttentionResidual,
                Stage::ResidualNorm(norm(Role::AttnOutputNorm)),
                dense(),
                Stage::FfnResidual,
                Stage::ResidualNorm(norm(Role::LayerOutputNorm)),
            ]);
            return;
        }
        stages.extend([
            Stage::AttentionResidual,
            Stage::FfnNorm(norm(self.layout.ffn_norm)),
        ]);
        match self.experts.filter(|moe| moe.applies_to(layer)) {
            None => stages.push(dense()),
            Some(moe) if moe.dense_beside => self.experts_beside_dense(moe, dense(), stages),
            Some(moe) => {
                if let Some(shared) = moe.shared {
                    stages.push(Stage::SharedExperts {
                        experts: Experts {
                            ffn: moe.ffn,
                            ffn_dim: shared.ffn_dim,
                        },
                        weights: GateUpDown {
                            gate: self.linear(),
                            up: self.linear(),
                            down: self.linear(),
                        },
                        gate_inp: shared.gated.then_some(Presence::Required),
                    });
                }
                stages.extend([self.router(moe), self.experts(moe)]);
            }
        }
        if self.post_norms {
            stages.push(Stage::PostFfnNorm(norm(Role::PostFfwNorm)));
        }
        stages.push(Stage::FfnResidual);
    }

    /// The router of a mixture-of-experts layer.
    fn router(&self, moe: MoeConfig) -> Stage<Presence> {
        Stage::Router {
            router: Router {
                experts: moe.count,
                used: moe.used,
                gating: moe.gating,
                scale: moe.weights_scale,
            },
            scores: self.linear(),
            selection_bias: moe.selection_bias.then_some(Presence::Required),
        }
    }

    /// The routed experts of a mixture-of-experts layer.
    fn experts(&self, moe: MoeConfig) -> Stage<Presence> {
        Stage::Experts {
            experts: Experts {
                ffn: moe.ffn,
                ffn_dim: moe.ffn_dim,
            },
            weights: GateUpDown {
                gate: Some(self.layout.biases),
                up: Some(self.layout.biases),
                down: Some(self.layout.biases),
            },
        }
    }

    /// Latent attention's projections: the query directly or through its compressed form,
    /// the latent and its norm, the per-head key absorption.
    fn latent_qkv(&self, mla: Mla) -> Stage<Presence> {
        let rms = |role| NormWeights {
            role,
            params: Norm {
                kind: NormKind::Rms,
                eps: self.norm_eps,
            },
            weight: Presence::Required,
            bias: None,
        };
        let q = match mla.q_lora {
            None => LatentQ::Direct(self.linear()),
            Some(_) => LatentQ::Lora {
                a: self.linear(),
                norm: rms(Role::AttnQANorm),
                b: self.linear(),
            },
        };
        Stage::LatentQkv {
            mla,
            q,
            kv_a: self.linear(),
            kv_norm: rms(Role::AttnKvANorm),
            k_b: None,
        }
    }
}
