//! The transformer as data: what a decoder-only model computes, described once with its
//! weights and run by each executor (the CPU forward pass of `rinfer-model`, the CUDA step
//! builder of `rinfer-cuda`).
//!
//! A [`Transformer`] holds the dimensions, the embeddings, one [`Block`] per layer and the
//! head. A block is the list of [`Stage`]s it runs in order, each with its parameters and the
//! weights it reads; an executor walks the list with one `match`. Architectures differ only in
//! these lists and their parameters, never in code.
//!
//! The tree is generic over the weight handle ([`Handles`]): an architecture declares it with
//! [`Presence`] handles (which tensors a file must or may hold), the loader maps that to host
//! matrices, and a GPU maps the host tree to device addresses, each with one
//! [`Transformer::map`]. A stage therefore always has the weights it reads; no executor checks.
//! `map` hands every weight's [`Tensor`] (its name and the shape the dimensions imply) to the
//! [`Mapper`], so no backend spells a tensor name or recomputes a shape.
//!
//! The stages read and write a few activation buffers, each `[rows, width]`: `x` the residual
//! stream, `h` the normed input (and then the FFN's output), `q`, `k`, `v` the projections,
//! `attn` the attention output and `out` its projection.
//!
//! Layers may differ in their heads ([`Block::heads`]: gemma4's full-attention layers have
//! wider heads and fewer of them than its sliding-window ones), so a layer's q, k and v widths
//! are its block's, and so are the rows its KV cache keeps.
//!
//! A mixture-of-experts layer replaces [`Stage::Ffn`] by [`Stage::Router`], which picks each
//! row's experts and their weights, and [`Stage::Experts`], which runs only those experts and
//! sums their outputs into `h`.
//!
//! ```
//! use rinfer_transformer::{Block, Heads, Linear, Norm, NormKind, NormWeights, Qkv, Role, Stage};
//!
//! // A block without positions or attention, with `()` for every weight, to show the list.
//! let norm = |role| NormWeights { role, params: Norm { kind: NormKind::Rms, eps: 1e-6 }, weight: (), bias: None };
//! let linear = || Linear { weight: (), bias: None };
//! let heads = Heads { heads: 4, kv_heads: 2, head_dim: 16 };
//! let block: Block<()> = Block {
//!     heads,
//!     stages: vec![
//!         Stage::AttentionNorm(norm(Role::AttnNorm)),
//!         Stage::Qkv(Qkv::Fused(linear())),
//!         Stage::AttentionOutput(linear()),
//!         Stage::AttentionResidual,
//!     ],
//! };
//! assert_eq!(block.attention(), None);
//! ```

use std::fmt::Debug;

use crate::params::{AttentionParams, Experts, Ffn, Heads, Norm, RopeParams, Router};
use crate::tensor::{Role, TensorName};

/// The weight handles of one use of the tree: what a matrix, a vector and a layer's stacked
/// experts are (a presence for a declaration, host data for the CPU, addresses for a GPU).
pub trait Handles {
    /// A 2-D weight matrix `[rows, cols]` in its stored block format.
    type Matrix: Clone + Debug;
    /// An f32 vector: a norm's scale or bias, a projection's bias, sink logits, RoPE factors.
    type Vector: Clone + Debug;
    /// One projection of every expert of a layer, with their biases if they have them.
    type Experts: Clone + Debug;
}

/// No weights: the tree's shape alone.
impl Handles for () {
    type Matrix = ();
    type Vector = ();
    type Experts = ();
}

/// Whether a tensor a declaration names must be in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    /// The file must have it.
    Required,
    /// The file may have it (llama.cpp's `TENSOR_NOT_REQUIRED`).
    Optional,
}

/// An architecture's declaration: which tensors a file holds. A field that is `None` names a
/// tensor the architecture does not have; the handle of a stacked-experts field says whether
/// the experts have biases.
impl Handles for Presence {
    type Matrix = Presence;
    type Vector = Presence;
    type Experts = Option<Presence>;
}

/// The shape of a weight as the dimensions imply it (`rows` output features of `cols` inputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `[len]`.
    Vector(usize),
    /// `[rows, cols]`.
    Matrix {
        /// Output features.
        rows: usize,
        /// Input features.
        cols: usize,
    },
    /// `[any, cols]`: a table whose rows the file decides (learned positions).
    Table {
        /// Width of a row.
        cols: usize,
    },
    /// `count` matrices `[rows, cols]`, one per expert, stacked.
    Experts {
        /// Experts.
        count: usize,
        /// Output features of one expert.
        rows: usize,
        /// Input features.
        cols: usize,
    },
}

/// One weight of the tree as a [`Mapper`] sees it: its name and shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tensor {
    /// The tensor's name (a bias is named by [`TensorName::bias`] of its weight's name).
    pub name: TensorName,
    /// Its shape.
    pub shape: Shape,
}

/// Turns each weight handle of a tree of `A` into one of `B` ([`Transformer::map`]); the
/// handles are borrowed from the tree for `'t`, so `B`'s may borrow from them.
pub trait Mapper<'t, A: Handles, B: Handles> {
    /// What a failed weight reports.
    type Error;

    /// A matrix the tree has.
    fn matrix(&mut self, t: &Tensor, m: &'t A::Matrix) -> Result<B::Matrix, Self::Error>;

    /// A vector the tree has.
    fn vector(&mut self, t: &Tensor, v: &'t A::Vector) -> Result<B::Vector, Self::Error>;

    /// A layer's stacked experts of one projection (`t.shape` is [`Shape::Experts`]; their
    /// biases are named by `t.name.bias()`).
    fn experts(&mut self, t: &Tensor, e: &'t A::Experts) -> Result<B::Experts, Self::Error>;

    /// A matrix in an optional field: mapped, or dropped when the mapper returns `None`.
    fn optional_matrix(
        &mut self,
        t: &Tensor,
        m: &'t A::Matrix,
    ) -> Result<Option<B::Matrix>, Self::Error> {
        self.matrix(t, m).map(Some)
    }

    /// A vector in an optional field: mapped, or dropped when the mapper returns `None`.
    fn optional_vector(
        &mut self,
        t: &Tensor,
        v: &'t A::Vector,
    ) -> Result<Option<B::Vector>, Self::Error> {
        self.vector(t, v).map(Some)
    }
}

/// A linear layer `y = W·x + b`.
#[derive(Clone, Debug)]
pub struct Linear<H: Handles> {
    /// `[out, in]`.
    pub weight: H::Matrix,
    /// `[out]`.
    pub bias: Option<H::Vector>,
}

/// A normalisation with its weights.
#[derive(Clone, Debug)]
pub struct NormWeights<H: Handles> {
    /// The tensor that holds it (gpt-oss keeps its FFN norm in `post_attention_norm`).
    pub role: Role,
    /// Kind and epsilon.
    pub params: Norm,
    /// Scale, `[width]`.
    pub weight: H::Vector,
    /// Bias, `[width]` (LayerNorm).
    pub bias: Option<H::Vector>,
}

/// How q, k and v are projected.
#[derive(Clone, Debug)]
pub enum Qkv<H: Handles> {
    /// Three matrices: `[q_dim, hidden]`, `[kv_dim, hidden]`, `[kv_dim, hidden]`.
    Separate {
        /// Queries.
        q: Linear<H>,
        /// Keys.
        k: Linear<H>,
        /// Values.
        v: Linear<H>,
    },
    /// One matrix `[q_dim + 2·kv_dim, hidden]`, output q | k | v.
    Fused(Linear<H>),
    /// Separate q and k, and v where the file has it; without it the values are the keys as
    /// projected, before any norm or rotation (gemma4's full-attention layers).
    OptionalValue {
        /// Queries.
        q: Linear<H>,
        /// Keys.
        k: Linear<H>,
        /// Values, if the layer has its own.
        v: Option<Linear<H>>,
    },
}

/// How the FFN's first projection is stored.
#[derive(Clone, Debug)]
pub enum FfnUp<H: Handles> {
    /// Separate gate and up matrices, `[ffn, hidden]` each.
    Gated {
        /// Gate projection.
        gate: Linear<H>,
        /// Up projection.
        up: Linear<H>,
    },
    /// One matrix `[2·ffn, hidden]`, output gate | up (phi3).
    FusedGated(Linear<H>),
    /// Up projection only, `[ffn, hidden]` (GELU MLP).
    Plain(Linear<H>),
}

/// One step of a decoder block, on the `n` rows of a batch, with the weights it reads.
#[derive(Clone, Debug)]
pub enum Stage<H: Handles> {
    /// `h = norm(x)` with the layer's attention norm.
    AttentionNorm(NormWeights<H>),
    /// `q`, `k`, `v` projected from `h`.
    Qkv(Qkv<H>),
    /// Every head of `q` and of `k` RMS-normed with the layer's q and k scales (`[head_dim]`).
    QkNorm {
        /// Added to the variance.
        eps: f32,
        /// Scale of every query head.
        q: H::Vector,
        /// Scale of every key head.
        k: H::Vector,
    },
    /// Every head of `v` RMS-normed without a scale (gemma4).
    ValueNorm {
        /// Added to the variance.
        eps: f32,
    },
    /// `q` and `k` rotated at each row's position (with the model's per-frequency factors, if
    /// it has them).
    Rope(RopeParams),
    /// Each row's `k` and `v` stored in its sequence's KV cache at its position, then
    /// `attn = attention(q, cache)`.
    Attention {
        /// Scale, softcap, window.
        params: AttentionParams,
        /// Per-head sink logits `[heads]`, present exactly when `params.sinks`.
        sinks: Option<H::Vector>,
    },
    /// `out = attn_output(attn)`, `[hidden, q_dim]`.
    AttentionOutput(Linear<H>),
    /// `out = norm(out)` with the layer's post-attention norm.
    PostAttentionNorm(NormWeights<H>),
    /// `x += out`.
    AttentionResidual,
    /// `h = norm(x)` with the layer's FFN norm.
    FfnNorm(NormWeights<H>),
    /// `h = ffn(h)`.
    Ffn {
        /// The activation and whether it is gated.
        ffn: Ffn,
        /// The first projection(s).
        up: FfnUp<H>,
        /// `[hidden, ffn]`.
        down: Linear<H>,
    },
    /// Each row's experts and their weights, from the router's scores of `h`.
    Router {
        /// Expert counts and gating.
        router: Router,
        /// `[experts, hidden]`: one score per expert.
        scores: Linear<H>,
    },
    /// `h = Σ weight_e · expert_e(h)` over each row's routed experts, in the router's order.
    Experts {
        /// Each expert's shape.
        experts: Experts,
        /// Every expert's gate, `[expert_ffn, hidden]` each.
        gate: H::Experts,
        /// Every expert's up, `[expert_ffn, hidden]` each.
        up: H::Experts,
        /// Every expert's down, `[hidden, expert_ffn]` each.
        down: H::Experts,
    },
    /// `h = norm(h)` with the layer's post-FFN norm.
    PostFfnNorm(NormWeights<H>),
    /// `x += h`.
    FfnResidual,
    /// `x += out + h`: attention and FFN both read the normed input (a parallel block).
    ParallelResidual,
    /// `x += norm(proj(gelu(gate(x)) ⊙ input))` with the row's input to this layer from
    /// [`Transformer::per_layer_inputs`] (gemma4's per-layer embeddings).
    PerLayerInput {
        /// `[width, hidden]`.
        gate: Linear<H>,
        /// `[hidden, width]`.
        proj: Linear<H>,
        /// The norm of the projection.
        norm: NormWeights<H>,
    },
    /// `x *= scale`, a one-value tensor (gemma4's `layer_output_scale`).
    OutputScale(H::Vector),
}

/// The stages of one decoder layer, in the order they run.
#[derive(Clone, Debug)]
pub struct Block<H: Handles> {
    /// The layer's attention heads: the widths of its q, k and v and of its KV cache rows.
    pub heads: Heads,
    /// The stages.
    pub stages: Vec<Stage<H>>,
}

impl<H: Handles> Block<H> {
    /// The parameters of the block's attention, if it has one.
    pub fn attention(&self) -> Option<&AttentionParams> {
        self.stages.iter().find_map(|s| match s {
            Stage::Attention { params, .. } => Some(params),
            _ => None,
        })
    }

    /// The block's router, if it is a mixture-of-experts layer.
    pub fn router(&self) -> Option<&Router> {
        self.stages.iter().find_map(|s| match s {
            Stage::Router { router, .. } => Some(router),
            _ => None,
        })
    }

    /// The block's experts, if it is a mixture-of-experts layer.
    pub fn experts(&self) -> Option<&Experts> {
        self.stages.iter().find_map(|s| match s {
            Stage::Experts { experts, .. } => Some(experts),
            _ => None,
        })
    }

    /// The block's rotary embedding, if it has one.
    pub fn rope(&self) -> Option<&RopeParams> {
        self.stages.iter().find_map(|s| match s {
            Stage::Rope(params) => Some(params),
            _ => None,
        })
    }

    /// Whether the block runs a dense FFN.
    pub fn has_dense_ffn(&self) -> bool {
        self.stages.iter().any(|s| matches!(s, Stage::Ffn { .. }))
    }
}

/// Gemma 4's per-layer inputs: each token gets a `width`-wide input for every layer, computed
/// once from its id and its scaled input embedding `x0`:
/// `input_l = (rms_norm(model_proj(x0) / sqrt(hidden))_l ⊙ proj_norm + token_embd[tok]_l ·
/// sqrt(width)) / sqrt(2)`, where `_l` is layer `l`'s slice of `width` values.
#[derive(Clone, Debug)]
pub struct PerLayerInputs<H: Handles> {
    /// Values per layer.
    pub width: usize,
    /// `[vocab, width · layers]`.
    pub token_embd: H::Matrix,
    /// `[width · layers, hidden]`.
    pub model_proj: H::Matrix,
    /// The RMSNorm of each layer's slice of the projection, `[width]`.
    pub proj_norm: NormWeights<H>,
}

/// A decoder-only transformer: token embedding (times `embedding_scale`, plus learned positions
/// when the model has them), the blocks, then `logits = softcap(lm_head(output_norm(x)) + b)`.
#[derive(Clone, Debug)]
pub struct Transformer<H: Handles> {
    /// Vocabulary size (rows of the embedding table and of the LM head).
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden: usize,
    /// Query heads, as the model states them; each layer's are its [`Block::heads`], which
    /// differ from these three where the layers differ (gemma4).
    pub heads: usize,
    /// Key/value heads (fewer than `heads` under grouped-query attention).
    pub kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Inner width of the feed-forward block.
    pub ffn_dim: usize,
    /// Token embeddings are multiplied by this.
    pub embedding_scale: Option<f32>,
    /// `[vocab, hidden]`.
    pub token_embd: H::Matrix,
    /// `[positions, hidden]` (learned positions only).
    pub position_embd: Option<H::Matrix>,
    /// Per-frequency RoPE divisors, `[rope_dims / 2]` (Llama 3.1 scaling, gemma4's
    /// proportional RoPE), on the layers whose RoPE takes [`RopeParams::factors`].
    pub rope_freqs: Option<H::Vector>,
    /// Every layer's extra input per token (gemma4).
    pub per_layer_inputs: Option<PerLayerInputs<H>>,
    /// One block per layer.
    pub blocks: Vec<Block<H>>,
    /// The norm before the LM head.
    pub output_norm: NormWeights<H>,
    /// The LM head `[vocab, hidden]`; `None` when tied to `token_embd`.
    pub output: Option<H::Matrix>,
    /// `[vocab]`.
    pub output_bias: Option<H::Vector>,
    /// `tanh` soft-capping of the logits.
    pub final_softcap: Option<f32>,
}

impl<H: Handles> Transformer<H> {
    /// Number of decoder layers.
    pub fn layers(&self) -> usize {
        self.blocks.len()
    }

    /// Width of all query heads together, of [`Transformer::heads`].
    pub fn q_dim(&self) -> usize {
        self.heads * self.head_dim
    }

    /// Width of all key (or value) heads together, of [`Transformer::kv_heads`].
    pub fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// The heads [`Transformer::heads`] and its neighbours state.
    pub fn model_heads(&self) -> Heads {
        Heads {
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
        }
    }

    /// The attention window of `layer`, if it slides.
    pub fn window_of(&self, layer: usize) -> Option<usize> {
        self.blocks
            .get(layer)
            .and_then(Block::attention)
            .and_then(|a| a.window)
    }

    /// The matrix that produces logits.
    pub fn lm_head(&self) -> &H::Matrix {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }

    /// The same tree with every weight handle mapped by `m`, in a fixed order: the
    /// embeddings, the RoPE factors, every layer's stages in turn (a weight before its bias),
    /// the output norm, the LM head and its bias.
    pub fn map<'t, B: Handles, M: Mapper<'t, H, B>>(
        &'t self,
        m: &mut M,
    ) -> Result<Transformer<B>, M::Error> {
        let model = |role| TensorName::model(role);
        let matrix = |role, rows, cols| Tensor {
            name: model(role),
            shape: Shape::Matrix { rows, cols },
        };
        let token_embd = m.matrix(
            &matrix(Role::TokenEmbd, self.vocab_size, self.hidden),
            &self.token_embd,
        )?;
        let position_embd = match &self.position_embd {
            Some(table) => {
                let shape = Shape::Table { cols: self.hidden };
                let t = Tensor {
                    name: model(Role::PositionEmbd),
                    shape,
                };
                m.optional_matrix(&t, table)?
            }
            None => None,
        };
        let rope_dims = self
            .blocks
            .iter()
            .filter_map(Block::rope)
            .filter(|r| r.factors)
            .map(|r| r.n_rot)
            .max()
            .unwrap_or(0);
        let rope_freqs = match &self.rope_freqs {
            Some(freqs) => {
                let t = Tensor {
                    name: model(Role::RopeFreqs),
                    shape: Shape::Vector(rope_dims / 2),
                };
                m.optional_vector(&t, freqs)?
            }
            None => None,
        };
        let mut at = Place {
            c: self,
            layer: None,
            heads: self.model_heads(),
        };
        let per_layer_inputs = match &self.per_layer_inputs {
            Some(p) => {
                let all = p.width * self.layers();
                Some(PerLayerInputs {
                    width: p.width,
                    token_embd: m.matrix(
                        &matrix(Role::PerLayerTokenEmbd, self.vocab_size, all),
                        &p.token_embd,
                    )?,
                    model_proj: m.matrix(
                        &matrix(Role::PerLayerModelProj, all, self.hidden),
                        &p.model_proj,
                    )?,
                    proj_norm: at.norm(&p.proj_norm, p.width, m)?,
                })
            }
            None => None,
        };
        let mut blocks = Vec::with_capacity(self.blocks.len());
        for (layer, block) in self.blocks.iter().enumerate() {
            let mut at = Place {
                c: self,
                layer: Some(layer),
                heads: block.heads,
            };
            let stages = block
                .stages
                .iter()
                .map(|stage| at.stage(stage, m))
                .collect::<Result<_, _>>()?;
            blocks.push(Block {
                heads: block.heads,
                stages,
            });
        }
        let output_norm = at.norm(&self.output_norm, self.hidden, m)?;
        let output = match &self.output {
            Some(head) => {
                m.optional_matrix(&matrix(Role::Output, self.vocab_size, self.hidden), head)?
            }
            None => None,
        };
        let output_bias = match &self.output_bias {
            Some(bias) => {
                let t = Tensor {
                    name: model(Role::Output).bias(),
                    shape: Shape::Vector(self.vocab_size),
                };
                m.optional_vector(&t, bias)?
            }
            None => None,
        };
        Ok(Transformer {
            vocab_size: self.vocab_size,
            hidden: self.hidden,
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            ffn_dim: self.ffn_dim,
            embedding_scale: self.embedding_scale,
            token_embd,
            position_embd,
            rope_freqs,
            per_layer_inputs,
            blocks,
            output_norm,
            output,
            output_bias,
            final_softcap: self.final_softcap,
        })
    }
}

/// Where [`Transformer::map`] is: the model, the layer (none for the head) and its heads.
struct Place<'t, H: Handles> {
    c: &'t Transformer<H>,
    layer: Option<usize>,
    heads: Heads,
}

impl<'t, H: Handles> Place<'t, H> {
    fn name(&self, role: Role) -> TensorName {
        match self.layer {
            Some(layer) => TensorName::layer(role, layer),
            None => TensorName::model(role),
        }
    }

    fn vector<B: Handles, M: Mapper<'t, H, B>>(
        &self,
        role: Role,
        len: usize,
        v: &'t H::Vector,
        m: &mut M,
    ) -> Result<B::Vector, M::Error> {
        let t = Tensor {
            name: self.name(role),
            shape: Shape::Vector(len),
        };
        m.vector(&t, v)
    }

    /// A bias of `len` values beside the weight `weight`.
    fn bias<B: Handles, M: Mapper<'t, H, B>>(
        weight: TensorName,
        len: usize,
        bias: &'t Option<H::Vector>,
        m: &mut M,
    ) -> Result<Option<B::Vector>, M::Error> {
        let Some(bias) = bias else {
            return Ok(None);
        };
        let t = Tensor {
            name: weight.bias(),
            shape: Shape::Vector(len),
        };
        m.optional_vector(&t, bias)
    }

    fn norm<B: Handles, M: Mapper<'t, H, B>>(
        &mut self,
        n: &'t NormWeights<H>,
        len: usize,
        m: &mut M,
    ) -> Result<NormWeights<B>, M::Error> {
        Ok(NormWeights {
            role: n.role,
            params: n.params,
            weight: self.vector(n.role, len, &n.weight, m)?,
            bias: Self::bias(self.name(n.role), len, &n.bias, m)?,
        })
    }

    fn linear<B: Handles, M: Mapper<'t, H, B>>(
        &mut self,
        role: Role,
        (rows, cols): (usize, usize),
        l: &'t Linear<H>,
        m: &mut M,
    ) -> Result<Linear<B>, M::Error> {
        let name = self.name(role);
        let t = Tensor {
            name,
            shape: Shape::Matrix { rows, cols },
        };
        Ok(Linear {
            weight: m.matrix(&t, &l.weight)?,
            bias: Self::bias(name, rows, &l.bias, m)?,
        })
    }

    /// A linear layer the file may lack: `None` when the mapper drops its weight.
    fn optional_linear<B: Handles, M: Mapper<'t, H, B>>(
        &mut self,
        role: Role,
        (rows, cols): (usize, usize),
        l: &'t Linear<H>,
        m: &mut M,
    ) -> Result<Option<Linear<B>>, M::Error> {
        let name = self.name(role);
        let t = Tensor {
            name,
            shape: Shape::Matrix { rows, cols },
        };
        let Some(weight) = m.optional_matrix(&t, &l.weight)? else {
            return Ok(None);
        };
        Ok(Some(Linear {
            weight,
            bias: Self::bias(name, rows, &l.bias, m)?,
        }))
    }

    fn experts<B: Handles, M: Mapper<'t, H, B>>(
        &mut self,
        role: Role,
        (count, rows, cols): (usize, usize, usize),
        e: &'t H::Experts,
        m: &mut M,
    ) -> Result<B::Experts, M::Error> {
        let t = Tensor {
            name: self.name(role),
            shape: Shape::Experts { count, rows, cols },
        };
        m.experts(&t, e)
    }

    fn stage<B: Handles, M: Mapper<'t, H, B>>(
        &mut self,
        stage: &'t Stage<H>,
        m: &mut M,
    ) -> Result<Stage<B>, M::Error> {
        let c = self.c;
        let (hidden, ffn) = (c.hidden, c.ffn_dim);
        let (q_dim, kv_dim, head_dim) =
            (self.heads.q_dim(), self.heads.kv_dim(), self.heads.head_dim);
        Ok(match stage {
            Stage::AttentionNorm(n) => Stage::AttentionNorm(self.norm(n, hidden, m)?),
            Stage::Qkv(Qkv::Separate { q, k, v }) => Stage::Qkv(Qkv::Separate {
                q: self.linear(Role::AttnQ, (q_dim, hidden), q, m)?,
                k: self.linear(Role::AttnK, (kv_dim, hidden), k, m)?,
                v: self.linear(Role::AttnV, (kv_dim, hidden), v, m)?,
            }),
            Stage::Qkv(Qkv::Fused(qkv)) => Stage::Qkv(Qkv::Fused(self.linear(
                Role::AttnQkv,
                (q_dim + 2 * kv_dim, hidden),
                qkv,
                m,
            )?)),
            Stage::Qkv(Qkv::OptionalValue { q, k, v }) => Stage::Qkv(Qkv::OptionalValue {
                q: self.linear(Role::AttnQ, (q_dim, hidden), q, m)?,
                k: self.linear(Role::AttnK, (kv_dim, hidden), k, m)?,
                v: match v {
                    Some(v) => self.optional_linear(Role::AttnV, (kv_dim, hidden), v, m)?,
                    None => None,
                },
            }),
            Stage::QkNorm { eps, q, k } => Stage::QkNorm {
                eps: *eps,
                q: self.vector(Role::AttnQNorm, head_dim, q, m)?,
                k: self.vector(Role::AttnKNorm, head_dim, k, m)?,
            },
            Stage::ValueNorm { eps } => Stage::ValueNorm { eps: *eps },
            Stage::Rope(params) => Stage::Rope(*params),
            Stage::Attention { params, sinks } => Stage::Attention {
                params: *params,
                sinks: match sinks {
                    Some(s) => Some(self.vector(Role::AttnSinks, self.heads.heads, s, m)?),
                    None => None,
                },
            },
            Stage::AttentionOutput(l) => {
                Stage::AttentionOutput(self.linear(Role::AttnOutput, (hidden, q_dim), l, m)?)
            }
            Stage::PostAttentionNorm(n) => Stage::PostAttentionNorm(self.norm(n, hidden, m)?),
            Stage::AttentionResidual => Stage::AttentionResidual,
            Stage::FfnNorm(n) => Stage::FfnNorm(self.norm(n, hidden, m)?),
            Stage::Ffn {
                ffn: kind,
                up,
                down,
            } => Stage::Ffn {
                ffn: *kind,
                up: match up {
                    FfnUp::Gated { gate, up } => FfnUp::Gated {
                        gate: self.linear(Role::FfnGate, (ffn, hidden), gate, m)?,
                        up: self.linear(Role::FfnUp, (ffn, hidden), up, m)?,
                    },
                    FfnUp::FusedGated(l) => {
                        FfnUp::FusedGated(self.linear(Role::FfnUp, (2 * ffn, hidden), l, m)?)
                    }
                    FfnUp::Plain(l) => {
                        FfnUp::Plain(self.linear(Role::FfnUp, (ffn, hidden), l, m)?)
                    }
                },
                down: self.linear(Role::FfnDown, (hidden, ffn), down, m)?,
            },
            Stage::Router { router, scores } => Stage::Router {
                router: *router,
                scores: self.linear(Role::FfnGateInp, (router.experts, hidden), scores, m)?,
            },
            Stage::Experts {
                experts,
                gate,
                up,
                down,
            } => {
                let count = self.c.blocks[self.layer.unwrap_or(0)]
                    .router()
                    .map_or(0, |r| r.experts);
                let f = experts.ffn_dim;
                Stage::Experts {
                    experts: *experts,
                    gate: self.experts(Role::FfnGateExps, (count, f, hidden), gate, m)?,
                    up: self.experts(Role::FfnUpExps, (count, f, hidden), up, m)?,
                    down: self.experts(Role::FfnDownExps, (count, hidden, f), down, m)?,
                }
            }
            Stage::PostFfnNorm(n) => Stage::PostFfnNorm(self.norm(n, hidden, m)?),
            Stage::FfnResidual => Stage::FfnResidual,
            Stage::ParallelResidual => Stage::ParallelResidual,
            Stage::PerLayerInput { gate, proj, norm } => {
                let width = c.per_layer_inputs.as_ref().map_or(0, |p| p.width);
                Stage::PerLayerInput {
                    gate: self.linear(Role::PerLayerInpGate, (width, hidden), gate, m)?,
                    proj: self.linear(Role::PerLayerProj, (hidden, width), proj, m)?,
                    norm: self.norm(norm, hidden, m)?,
                }
            }
            Stage::OutputScale(scale) => {
                Stage::OutputScale(self.vector(Role::LayerOutputScale, 1, scale, m)?)
            }
        })
    }
}
