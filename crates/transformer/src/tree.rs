//! The whole model: the dimensions, the embeddings, the blocks and the head
//! ([`Transformer`]), and the walk of [`Transformer::map`] over it that hands each weight,
//! with its role and the shape the dimensions imply, to the [`Mapper`]: the embeddings and the
//! head here, each layer's stages through [`Block`]'s and [`Stage`](crate::Stage)'s own maps.

use crate::block::Block;
use crate::handles::{Handles, Linear, Mapper, NormWeights, Shape, Tensor};
use crate::params::Heads;
use crate::place::{Place, Widths};
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

/// A ranker's classification head (llama.cpp's `build_pooling` for pooling type 4, rank): the
/// pooled state through `tanh(dense · x + b)` when it has the dense layer, then
/// `output · x + b` when it has the output layer; its first value is the relevance score.
#[derive(Clone, Debug)]
pub struct Classifier<H: Handles> {
    /// `cls`: `[hidden, hidden]` and its bias.
    pub dense: Option<Linear<H>>,
    /// `cls.output`: `[labels, hidden]` and its bias.
    pub output: Option<Linear<H>>,
    /// Rows of the output layer (`{arch}.classifier.output_labels`, 1 without it).
    pub labels: usize,
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
    /// A ranker's head over the pooled state, in place of the LM head.
    pub classifier: Option<Classifier<H>>,
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
    /// the output norm, the LM head and its bias, the classifier.
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
        let widths = Widths {
            hidden: self.hidden,
            ffn_dim: self.ffn_dim,
            heads: self.heads,
            per_layer_input: self.per_layer_inputs.as_ref().map_or(0, |p| p.width),
        };
        let head = Place {
            widths,
            layer: None,
            heads: self.model_heads(),
            experts: 0,
            mla: None,
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
            blocks.push(block.map(widths, layer, m)?);
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
        let classifier = match &self.classifier {
            Some(cls) => {
                let dense = match &cls.dense {
                    Some(l) => head.optional_linear(Role::Cls, (self.hidden, self.hidden), l, m)?,
                    None => None,
                };
                let output = match &cls.output {
                    Some(l) => {
                        head.optional_linear(Role::ClsOutput, (cls.labels, self.hidden), l, m)?
                    }
                    None => None,
                };
                Some(Classifier {
                    dense,
                    output,
                    labels: cls.labels,
                })
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
            classifier,
        })
    }
}
