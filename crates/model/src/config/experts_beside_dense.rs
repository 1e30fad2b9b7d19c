//! The FFN of a Gemma 4 mixture-of-experts layer: the dense FFN and the routed experts side by
//! side, each with norms of its own, their sum post-normed as any Gemma FFN's output:
//!
//! ```text
//! dense   = post_ffw_norm_1(ffn(ffn_norm(x)))
//! scores  = ffn_gate_inp · (rms(x) ⊙ ffn_gate_inp.scale / √hidden)   (softmax, top-k, renormed)
//! experts = post_ffw_norm_2(Σ w_e · s_e · expert_e(pre_ffw_norm_2(x)))   (s: ffn_down_exps.scale)
//! x      += post_ffw_norm(dense + experts)
//! ```

use rinfer_transformer::{Norm, NormWeights, Presence, Role, Stage};

use super::{ModelConfig, MoeConfig, NormKind};

impl ModelConfig {
    /// The stages after [`Stage::FfnNorm`] of a layer whose `dense` FFN runs beside its
    /// experts, up to the post-FFN norm.
    pub(super) fn experts_beside_dense(
        &self,
        moe: MoeConfig,
        dense: Stage<Presence>,
        stages: &mut Vec<Stage<Presence>>,
    ) {
        let norm = |role| self.norm(role);
        let router_norm = NormWeights {
            role: Role::FfnGateInpScale,
            params: Norm {
                kind: NormKind::Rms,
                eps: self.norm_eps,
            },
            weight: Presence::Required,
            bias: None,
        };
        stages.extend([
            dense,
            Stage::PostFfnNorm(norm(Role::PostFfwNorm1)),
            Stage::StashFfn,
            Stage::RouterNorm {
                norm: router_norm,
                scale: 1.0 / (self.hidden as f32).sqrt(),
            },
            self.router(moe),
            Stage::ExpertScales(Presence::Optional),
            Stage::FfnNorm(norm(Role::PreFfwNorm2)),
            self.experts(moe),
            Stage::PostFfnNorm(norm(Role::PostFfwNorm2)),
            Stage::AddStash,
        ]);
    }
}
