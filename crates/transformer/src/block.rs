//! The transformer as data: what a decoder-only model computes, described once with its
//! weights and run by each executor (the CPU forward pass of `rinfer-model`, the CUDA step
//! builder of `rinfer-cuda`).
//!
//! A [`Transformer`](crate::Transformer) holds the dimensions, the embeddings, one [`Block`]
//! per layer and the head. A block is the list of [`Stage`]s it runs in order, each with its parameters and the
//! weights it reads; an executor walks the list with one `match`. Architectures differ only in
//! these lists and their parameters, never in code.
//!
//! The tree is generic over the weight handle (see the `handles` module): each stage carries
//! its weights, so a stage always has the weights it reads and no executor checks.
//!
//! Layers may differ in their heads ([`Block::heads`]: gemma4's full-attention layers have
//! wider heads and fewer of them than its sliding-window ones), so a layer's q, k and v widths
//! are its block's, and so are the rows its KV cache keeps.
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

use crate::handles::{Handles, Mapper};
use crate::params::{AttentionParams, Experts, Heads, Mla, Recurrence, RopeParams, Router};
use crate::place::{Place, Widths};
use crate::stage::Stage;

/// The stages of one decoder layer, in the order they run.
#[derive(Clone, Debug)]
pub struct Block<H: Handles> {
    /// The layer's attention heads: the widths of its q, k and v and of its KV cache rows.
    pub heads: Heads,
    /// The stages.
    pub stages: Vec<Stage<H>>,
}

/// Declares accessors of a block's stage parameters: each gives what its arms take from the
/// first stage they match, `None` when no stage does.
macro_rules! stage_parameters {
    ($($(#[$doc:meta])* $name:ident -> $ty:ty { $($stage:pat => $value:expr),+ $(,)? })*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self) -> Option<$ty> {
                self.stages.iter().find_map(|s| match s {
                    $($stage => Some($value),)+
                    _ => None,
                })
            }
        )*
    };
}

impl<H: Handles> Block<H> {
    stage_parameters! {
        /// The parameters of the block's attention, if it has one.
        attention -> &AttentionParams {
            Stage::Attention { params, .. } | Stage::SharedAttention { params, .. } => params,
        }
        /// The earlier layer whose KV cache the block reads, if it keeps none of its own.
        kv_source -> usize {
            Stage::SharedAttention { source, .. } => *source,
        }
        /// The block's router, if it is a mixture-of-experts layer.
        router -> &Router {
            Stage::Router { router, .. } => router,
        }
        /// The block's experts, if it is a mixture-of-experts layer.
        experts -> &Experts {
            Stage::Experts { experts, .. } => experts,
        }
        /// The block's shared experts, if it has them.
        shared_experts -> &Experts {
            Stage::SharedExperts { experts, .. } => experts,
        }
        /// The block's latent attention, if it has one.
        mla -> &Mla {
            Stage::LatentQkv { mla, .. } => mla,
        }
        /// The block's rotary embedding, if it has one.
        rope -> &RopeParams {
            Stage::Rope(params) => params,
        }
        /// What mixes positions in the block in place of attention, if it is a recurrent layer.
        recurrence -> Recurrence {
            Stage::ShortConv { conv, .. } => Recurrence::ShortConv(*conv),
            Stage::DeltaNet { net, .. } => Recurrence::DeltaNet(*net),
        }
    }

    /// Whether the block runs a dense FFN.
    pub fn has_dense_ffn(&self) -> bool {
        self.stages.iter().any(|s| matches!(s, Stage::Ffn { .. }))
    }

    /// The block with its weights mapped, as layer `layer` of a model of `widths`.
    pub(crate) fn map<'t, B: Handles, M: Mapper<'t, H, B>>(
        &'t self,
        widths: Widths,
        layer: usize,
        m: &mut M,
    ) -> Result<Block<B>, M::Error> {
        let at = Place {
            widths,
            layer: Some(layer),
            heads: self.heads,
            experts: self.router().map_or(0, |r| r.experts),
            mla: self.mla().copied(),
        };
        let mut stages = Vec::with_capacity(self.stages.len());
        for stage in &self.stages {
            stages.extend(stage.map(&at, m)?);
        }
        Ok(Block {
            heads: self.heads,
            stages,
        })
    }
}
