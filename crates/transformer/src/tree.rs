//! The whole model: the dimensions, the embeddings, the blocks and the head
//! ([`Transformer`]), and the walk of [`Transformer::map`] over it that hands each stage's
//! weights, with their roles and the shapes the dimensions imply, to the [`Mapper`].

use crate::block::{
    Block, FfnUp, Handles, LatentQ, Linear, Mapper, NormWeights, Qkv, Shape, Stage, Tensor,
};
use crate::params::Heads;
use crate::tensor::{Role, TensorName};

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

/// A transformer: token embedding (times `embedding_scale`, plus learned positions and token
/// type 0 when the model has them, then the embedding norm, if any, as `x` and `h`), the
/// blocks, then `logits = softcap(lm_head(output_norm(x)) + b)`. An encoder (BERT) has no
/// output norm; its final `x` is what an embedding pools.
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
    /// `[types, hidden]`: token-type embeddings, of which row 0 is added to every token (BERT).
    pub token_types: Option<H::Matrix>,
    /// The norm of the summed embeddings, whose output is both `x` and `h` (BERT).
    pub embedding_norm: Option<NormWeights<H>>,
    /// Whether a query sees only the keys up to its own position; otherwise (an encoder) it
    /// sees every key of its sequence, which must then run in one pass.
    pub causal: bool,
    /// Per-frequency RoPE divisors, `[rope_dims / 2]` (Llama 3.1 scaling, gemma4's
    /// proportional RoPE), on the layers whose RoPE takes [`RopeParams::factors`].
    ///
    /// [`RopeParams::factors`]: crate::RopeParams::factors
    pub rope_freqs: Option<H::Vector>,
    /// Every layer's extra input per token (gemma4).
    pub per_layer_inputs: Option<PerLayerInputs<H>>,
    /// One block per layer.
    pub blocks: Vec<Block<H>>,
    /// The norm before the LM head (and before pooling); `None` for a post-norm encoder.
    pub output_norm: Option<NormWeights<H>>,
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
        let token_types = match &self.token_types {
            Some(table) => {
                let t = Tensor {
                    name: model(Role::TokenTypes),
                    shape: Shape::Table { cols: self.hidden },
                };
                Some(m.matrix(&t, table)?)
            }
            None => None,
        };
        let mut head = Place {
            c: self,
            layer: None,
            heads: self.model_heads(),
        };
        let embedding_norm = match &self.embedding_norm {
            Some(norm) => Some(head.norm(norm, self.hidden, m)?),
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
                    proj_norm: head.norm(&p.proj_norm, p.width, m)?,
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
            let mut stages = Vec::with_capacity(block.stages.len());
            for stage in &block.stages {
                stages.extend(at.stage(stage, m)?);
            }
            blocks.push(Block {
                heads: block.heads,
                stages,
            });
        }
        let output_norm = match &self.output_norm {
            Some(norm) => Some(head.norm(norm, self.hidden, m)?),
            None => None,
        };
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
            token_types,
            embedding_norm,
            causal: self.causal,
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

    /// A convolution kernel of `channels` rows of `taps` values.
    fn filter<B: Handles, M: Mapper<'t, H, B>>(
        &self,
        role: Role,
        (channels, taps): (usize, usize),
        v: &'t H::Vector,
        m: &mut M,
    ) -> Result<B::Vector, M::Error> {
        let t = Tensor {
            name: self.name(role),
            shape: Shape::Filter { channels, taps },
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

    /// The stage with its weights mapped; `None` drops it: q/k norms whose weights the mapper
    /// finds absent (an optional pair, as GLM-4.5 files may leave out).
    fn stage<B: Handles, M: Mapper<'t, H, B>>(
        &mut self,
        stage: &'t Stage<H>,
        m: &mut M,
    ) -> Result<Option<Stage<B>>, M::Error> {
        let c = self.c;
        let (hidden, ffn) = (c.hidden, c.ffn_dim);
        let (q_dim, kv_dim, head_dim) =
            (self.heads.q_dim(), self.heads.kv_dim(), self.heads.head_dim);
        let block = &c.blocks[self.layer.unwrap_or(0)];
        Ok(Some(match stage {
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
            Stage::Qkv(Qkv::GatedQuery { q, k, v }) => Stage::Qkv(Qkv::GatedQuery {
                q: self.linear(Role::AttnQ, (2 * q_dim, hidden), q, m)?,
                k: self.linear(Role::AttnK, (kv_dim, hidden), k, m)?,
                v: self.linear(Role::AttnV, (kv_dim, hidden), v, m)?,
            }),
            Stage::Qkv(Qkv::OptionalValue { q, k, v }) => Stage::Qkv(Qkv::OptionalValue {
                q: self.linear(Role::AttnQ, (q_dim, hidden), q, m)?,
                k: self.linear(Role::AttnK, (kv_dim, hidden), k, m)?,
                v: match v {
                    Some(v) => self.optional_linear(Role::AttnV, (kv_dim, hidden), v, m)?,
                    None => None,
                },
            }),
            Stage::AttentionGate => Stage::AttentionGate,
            Stage::ShortConv {
                conv,
                in_proj,
                kernel,
                out_proj,
            } => Stage::ShortConv {
                conv: *conv,
                in_proj: self.linear(Role::ShortConvInProj, (3 * hidden, hidden), in_proj, m)?,
                kernel: self.filter(Role::ShortConvConv, (conv.channels, conv.taps), kernel, m)?,
                out_proj: self.linear(Role::ShortConvOutProj, (hidden, hidden), out_proj, m)?,
            },
            Stage::DeltaNet {
                net,
                qkv,
                gate,
                kernel,
                dt_bias,
                a,
                beta,
                alpha,
                norm,
                output,
            } => {
                let (conv_dim, v_dim, heads) = (net.conv_dim(), net.v_dim(), net.v_heads);
                let dt = Tensor {
                    name: self.name(Role::SsmDt).bias(),
                    shape: Shape::Vector(heads),
                };
                Stage::DeltaNet {
                    net: *net,
                    qkv: self.linear(Role::AttnQkv, (conv_dim, hidden), qkv, m)?,
                    gate: self.linear(Role::AttnGate, (v_dim, hidden), gate, m)?,
                    kernel: self.filter(Role::SsmConv1d, (conv_dim, net.taps), kernel, m)?,
                    dt_bias: m.vector(&dt, dt_bias)?,
                    a: self.vector(Role::SsmA, heads, a, m)?,
                    beta: self.linear(Role::SsmBeta, (heads, hidden), beta, m)?,
                    alpha: self.linear(Role::SsmAlpha, (heads, hidden), alpha, m)?,
                    norm: self.vector(Role::SsmNorm, net.state, norm, m)?,
                    output: self.linear(Role::SsmOut, (hidden, v_dim), output, m)?,
                }
            }
            Stage::QkNorm { eps, q, k } => {
                let t = Tensor {
                    name: self.name(Role::AttnQNorm),
                    shape: Shape::Vector(head_dim),
                };
                let Some(q) = m.optional_vector(&t, q)? else {
                    return Ok(None);
                };
                Stage::QkNorm {
                    eps: *eps,
                    q,
                    k: self.vector(Role::AttnKNorm, head_dim, k, m)?,
                }
            }
            Stage::ValueNorm { eps } => Stage::ValueNorm { eps: *eps },
            Stage::LatentQkv {
                mla,
                q,
                kv_a,
                kv_norm,
                k_b,
            } => {
                let q_width = c.heads * mla.q_head();
                Stage::LatentQkv {
                    mla: *mla,
                    q: match q {
                        LatentQ::Direct(l) => {
                            LatentQ::Direct(self.linear(Role::AttnQ, (q_width, hidden), l, m)?)
                        }
                        LatentQ::Lora { a, norm, b } => {
                            let lora = mla.q_lora.unwrap_or(0);
                            LatentQ::Lora {
                                a: self.linear(Role::AttnQA, (lora, hidden), a, m)?,
                                norm: self.norm(norm, lora, m)?,
                                b: self.linear(Role::AttnQB, (q_width, lora), b, m)?,
                            }
                        }
                    },
                    kv_a: self.linear(Role::AttnKvAMqa, (mla.latent(), hidden), kv_a, m)?,
                    kv_norm: self.norm(kv_norm, mla.kv_lora, m)?,
                    k_b: self.experts(Role::AttnKB, (c.heads, mla.kv_lora, mla.nope), k_b, m)?,
                }
            }
            Stage::LatentOutput { mla, v_b } => Stage::LatentOutput {
                mla: *mla,
                v_b: self.experts(Role::AttnVB, (c.heads, mla.v_head, mla.kv_lora), v_b, m)?,
            },
            Stage::Rope(params) => Stage::Rope(*params),
            Stage::Attention { params, sinks } => Stage::Attention {
                params: *params,
                sinks: match sinks {
                    Some(s) => Some(self.vector(Role::AttnSinks, self.heads.heads, s, m)?),
                    None => None,
                },
            },
            Stage::AttentionOutput(l) => {
                let width = block.mla().map_or(q_dim, |mla| c.heads * mla.v_head);
                Stage::AttentionOutput(self.linear(Role::AttnOutput, (hidden, width), l, m)?)
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
            Stage::Router {
                router,
                scores,
                selection_bias,
            } => Stage::Router {
                router: *router,
                scores: self.linear(Role::FfnGateInp, (router.experts, hidden), scores, m)?,
                selection_bias: match selection_bias {
                    Some(b) => {
                        let t = Tensor {
                            name: self.name(Role::ExpProbsB).bias(),
                            shape: Shape::Vector(router.experts),
                        };
                        Some(m.vector(&t, b)?)
                    }
                    None => None,
                },
            },
            Stage::SharedExperts {
                experts,
                gate,
                up,
                down,
                gate_inp,
            } => {
                let f = experts.ffn_dim;
                Stage::SharedExperts {
                    experts: *experts,
                    gate: self.linear(Role::FfnGateShexp, (f, hidden), gate, m)?,
                    up: self.linear(Role::FfnUpShexp, (f, hidden), up, m)?,
                    down: self.linear(Role::FfnDownShexp, (hidden, f), down, m)?,
                    gate_inp: match gate_inp {
                        Some(g) => Some(self.vector(Role::FfnGateInpShexp, hidden, g, m)?),
                        None => None,
                    },
                }
            }
            Stage::Experts {
                experts,
                gate,
                up,
                down,
            } => {
                let count = block.router().map_or(0, |r| r.experts);
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
            Stage::ResidualNorm(n) => Stage::ResidualNorm(self.norm(n, hidden, m)?),
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
        }))
    }
}
