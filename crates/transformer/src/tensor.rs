//! Tensor roles and their GGUF names: the one place tensor names are spelled.
//!
//! A [`Role`] is what a tensor is for (`attn_q`, `ffn_down`, …); a [`TensorName`] is one
//! tensor of a file: a role, the layer it belongs to (none for the model-level ones), the
//! expert for the per-expert matrices of older Mixtral files, and whether it is the weight or
//! the bias. Its [`Display`](std::fmt::Display) is the GGUF name (`blk.3.attn_q.weight`) and
//! [`TensorName::parse`] reads one back.
//!
//! ```
//! use rinfer_transformer::{Role, TensorName};
//!
//! let name = TensorName::layer(Role::AttnQ, 3).bias();
//! assert_eq!(name.to_string(), "blk.3.attn_q.bias");
//! assert_eq!(TensorName::parse("blk.3.attn_q.bias"), Some(name));
//! assert_eq!(TensorName::model(Role::Output).to_string(), "output.weight");
//! ```

use std::fmt;

/// What a tensor is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Token embeddings `[vocab, hidden]`.
    TokenEmbd,
    /// Learned positions `[positions, hidden]`.
    PositionEmbd,
    /// Per-frequency RoPE divisors `[rope_dims / 2]`.
    RopeFreqs,
    /// The norm before the LM head.
    OutputNorm,
    /// The LM head `[vocab, hidden]`.
    Output,
    /// The norm before attention.
    AttnNorm,
    /// The query projection.
    AttnQ,
    /// The key projection.
    AttnK,
    /// The value projection.
    AttnV,
    /// The fused query, key and value projection.
    AttnQkv,
    /// The per-head RMSNorm scale of the queries.
    AttnQNorm,
    /// The per-head RMSNorm scale of the keys.
    AttnKNorm,
    /// The attention output projection.
    AttnOutput,
    /// The per-head attention sink logits.
    AttnSinks,
    /// The norm after attention (gemma's post-attention norm; gpt-oss's FFN norm).
    PostAttentionNorm,
    /// The norm before the FFN.
    FfnNorm,
    /// The FFN's gate projection.
    FfnGate,
    /// The FFN's up projection (gate | up when fused).
    FfnUp,
    /// The FFN's down projection.
    FfnDown,
    /// The mixture-of-experts router.
    FfnGateInp,
    /// Every expert's gate projection, stacked.
    FfnGateExps,
    /// Every expert's up projection, stacked.
    FfnUpExps,
    /// Every expert's down projection, stacked.
    FfnDownExps,
    /// Every expert's gate and up projections as one stacked tensor: each expert's gate rows,
    /// then its up rows (`[hidden, 2 · expert_ffn, experts]` in GGUF order).
    FfnGateUpExps,
    /// The norm after the FFN.
    PostFfwNorm,
    /// Per-layer token embeddings `[vocab, width · layers]` (gemma4's per-layer inputs).
    PerLayerTokenEmbd,
    /// The projection of the embedded input to every layer's input `[width · layers, hidden]`.
    PerLayerModelProj,
    /// The RMSNorm scale of each layer's projected input `[width]`.
    PerLayerProjNorm,
    /// A layer's gate of its per-layer input `[width, hidden]`.
    PerLayerInpGate,
    /// A layer's projection of its gated per-layer input back to the residual `[hidden, width]`.
    PerLayerProj,
    /// The norm after that projection.
    PerLayerPostNorm,
    /// A layer's one-value scale of its output.
    LayerOutputScale,
    /// The compressing query projection (multi-head latent attention).
    AttnQA,
    /// The RMSNorm scale of the compressed query.
    AttnQANorm,
    /// The query projection from the compressed query.
    AttnQB,
    /// The projection to the key/value latent and the shared rotated key.
    AttnKvAMqa,
    /// The RMSNorm scale of the key/value latent.
    AttnKvANorm,
    /// Every head's key up-projection from the latent, stacked.
    AttnKB,
    /// Every head's value up-projection from the latent, stacked.
    AttnVB,
    /// The router's expert selection bias (a `.bias` tensor).
    ExpProbsB,
    /// The shared experts' per-token gate `[hidden]`.
    FfnGateInpShexp,
    /// The shared experts' gate projection.
    FfnGateShexp,
    /// The shared experts' up projection.
    FfnUpShexp,
    /// The shared experts' down projection.
    FfnDownShexp,
    /// The norm of the summed embeddings (BERT), or the norm before the LM head where LFM2
    /// keeps it (`token_embd_norm`).
    TokenEmbdNorm,
    /// The output gate of a gated delta net.
    AttnGate,
    /// A gated delta net's convolution kernel `[taps, channels]`.
    SsmConv1d,
    /// A gated delta net's time-step bias (stored as `ssm_dt.bias` alone).
    SsmDt,
    /// A gated delta net's decay rates `-exp(A_log)` (stored as `ssm_a`, without a suffix).
    SsmA,
    /// A gated delta net's β projection.
    SsmBeta,
    /// A gated delta net's decay projection.
    SsmAlpha,
    /// A gated delta net's output norm.
    SsmNorm,
    /// A gated delta net's output projection.
    SsmOut,
    /// A short convolution's kernel `[taps, channels]`.
    ShortConvConv,
    /// A short convolution's input projection (`b | c | u`).
    ShortConvInProj,
    /// A short convolution's output projection.
    ShortConvOutProj,
    /// Token-type embeddings `[types, hidden]` (BERT; row 0 is added to every token).
    TokenTypes,
    /// The norm of the residual stream after attention (BERT's post-norm).
    AttnOutputNorm,
    /// The norm of the residual stream after the FFN (BERT's post-norm).
    LayerOutputNorm,
    /// A ranker's dense classifier layer `[hidden, hidden]`, before `tanh`.
    Cls,
    /// A ranker's classifier output `[labels, hidden]`.
    ClsOutput,
    /// The scale of a router's own input norm `[hidden]` (Gemma 4's `ffn_gate_inp.scale`).
    FfnGateInpScale,
    /// A scale on each expert's output `[experts]` (Gemma 4's `ffn_down_exps.scale`).
    FfnDownExpsScale,
    /// The norm before the experts of a layer that also runs a dense FFN (Gemma 4).
    PreFfwNorm2,
    /// The norm after the dense FFN of a layer that also runs experts (Gemma 4).
    PostFfwNorm1,
    /// The norm after the experts of a layer that also runs a dense FFN (Gemma 4).
    PostFfwNorm2,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 66] = [
        Role::TokenEmbd,
        Role::PositionEmbd,
        Role::RopeFreqs,
        Role::OutputNorm,
        Role::Output,
        Role::AttnNorm,
        Role::AttnQ,
        Role::AttnK,
        Role::AttnV,
        Role::AttnQkv,
        Role::AttnQNorm,
        Role::AttnKNorm,
        Role::AttnOutput,
        Role::AttnSinks,
        Role::PostAttentionNorm,
        Role::FfnNorm,
        Role::FfnGate,
        Role::FfnUp,
        Role::FfnDown,
        Role::FfnGateInp,
        Role::FfnGateExps,
        Role::FfnUpExps,
        Role::FfnDownExps,
        Role::FfnGateUpExps,
        Role::PostFfwNorm,
        Role::PerLayerTokenEmbd,
        Role::PerLayerModelProj,
        Role::PerLayerProjNorm,
        Role::PerLayerInpGate,
        Role::PerLayerProj,
        Role::PerLayerPostNorm,
        Role::LayerOutputScale,
        Role::AttnQA,
        Role::AttnQANorm,
        Role::AttnQB,
        Role::AttnKvAMqa,
        Role::AttnKvANorm,
        Role::AttnKB,
        Role::AttnVB,
        Role::ExpProbsB,
        Role::FfnGateInpShexp,
        Role::FfnGateShexp,
        Role::FfnUpShexp,
        Role::FfnDownShexp,
        Role::TokenEmbdNorm,
        Role::AttnGate,
        Role::SsmConv1d,
        Role::SsmDt,
        Role::SsmA,
        Role::SsmBeta,
        Role::SsmAlpha,
        Role::SsmNorm,
        Role::SsmOut,
        Role::ShortConvConv,
        Role::ShortConvInProj,
        Role::ShortConvOutProj,
        Role::TokenTypes,
        Role::AttnOutputNorm,
        Role::LayerOutputNorm,
        Role::Cls,
        Role::ClsOutput,
        Role::FfnGateInpScale,
        Role::FfnDownExpsScale,
        Role::PreFfwNorm2,
        Role::PostFfwNorm1,
        Role::PostFfwNorm2,
    ];

    /// The role's part of a GGUF tensor name.
    pub fn gguf(self) -> &'static str {
        match self {
            Role::TokenEmbd => "token_embd",
            Role::PositionEmbd => "position_embd",
            Role::RopeFreqs => "rope_freqs",
            Role::OutputNorm => "output_norm",
            Role::Output => "output",
            Role::AttnNorm => "attn_norm",
            Role::AttnQ => "attn_q",
            Role::AttnK => "attn_k",
            Role::AttnV => "attn_v",
            Role::AttnQkv => "attn_qkv",
            Role::AttnQNorm => "attn_q_norm",
            Role::AttnKNorm => "attn_k_norm",
            Role::AttnOutput => "attn_output",
            Role::AttnSinks => "attn_sinks",
            Role::PostAttentionNorm => "post_attention_norm",
            Role::FfnNorm => "ffn_norm",
            Role::FfnGate => "ffn_gate",
            Role::FfnUp => "ffn_up",
            Role::FfnDown => "ffn_down",
            Role::FfnGateInp => "ffn_gate_inp",
            Role::FfnGateExps => "ffn_gate_exps",
            Role::FfnUpExps => "ffn_up_exps",
            Role::FfnDownExps => "ffn_down_exps",
            Role::FfnGateUpExps => "ffn_gate_up_exps",
            Role::PostFfwNorm => "post_ffw_norm",
            Role::PerLayerTokenEmbd => "per_layer_token_embd",
            Role::PerLayerModelProj => "per_layer_model_proj",
            Role::PerLayerProjNorm => "per_layer_proj_norm",
            Role::PerLayerInpGate => "inp_gate",
            Role::PerLayerProj => "proj",
            Role::PerLayerPostNorm => "post_norm",
            Role::LayerOutputScale => "layer_output_scale",
            Role::AttnQA => "attn_q_a",
            Role::AttnQANorm => "attn_q_a_norm",
            Role::AttnQB => "attn_q_b",
            Role::AttnKvAMqa => "attn_kv_a_mqa",
            Role::AttnKvANorm => "attn_kv_a_norm",
            Role::AttnKB => "attn_k_b",
            Role::AttnVB => "attn_v_b",
            Role::ExpProbsB => "exp_probs_b",
            Role::FfnGateInpShexp => "ffn_gate_inp_shexp",
            Role::FfnGateShexp => "ffn_gate_shexp",
            Role::FfnUpShexp => "ffn_up_shexp",
            Role::FfnDownShexp => "ffn_down_shexp",
            Role::TokenEmbdNorm => "token_embd_norm",
            Role::AttnGate => "attn_gate",
            Role::SsmConv1d => "ssm_conv1d",
            Role::SsmDt => "ssm_dt",
            Role::SsmA => "ssm_a",
            Role::SsmBeta => "ssm_beta",
            Role::SsmAlpha => "ssm_alpha",
            Role::SsmNorm => "ssm_norm",
            Role::SsmOut => "ssm_out",
            Role::ShortConvConv => "shortconv.conv",
            Role::ShortConvInProj => "shortconv.in_proj",
            Role::ShortConvOutProj => "shortconv.out_proj",
            Role::TokenTypes => "token_types",
            Role::AttnOutputNorm => "attn_output_norm",
            Role::LayerOutputNorm => "layer_output_norm",
            Role::Cls => "cls",
            Role::ClsOutput => "cls.output",
            Role::FfnGateInpScale => "ffn_gate_inp.scale",
            Role::FfnDownExpsScale => "ffn_down_exps.scale",
            Role::PreFfwNorm2 => "pre_ffw_norm_2",
            Role::PostFfwNorm1 => "post_ffw_norm_1",
            Role::PostFfwNorm2 => "post_ffw_norm_2",
        }
    }

    /// Whether the tensor belongs to a layer (`blk.N.…`) rather than to the model.
    pub fn per_layer(self) -> bool {
        !matches!(
            self,
            Role::TokenEmbd
                | Role::PositionEmbd
                | Role::RopeFreqs
                | Role::OutputNorm
                | Role::Output
                | Role::PerLayerTokenEmbd
                | Role::PerLayerModelProj
                | Role::PerLayerProjNorm
                | Role::TokenTypes
                | Role::TokenEmbdNorm
                | Role::Cls
                | Role::ClsOutput
        )
    }

    /// Whether the tensor is a table a token (or position, or segment) looks up one row of,
    /// rather than a matrix every token multiplies: such a table stays as the file stores it.
    pub fn looked_up(self) -> bool {
        matches!(
            self,
            Role::TokenEmbd | Role::PositionEmbd | Role::PerLayerTokenEmbd | Role::TokenTypes
        )
    }

    /// Whether the tensor's weight is named without the `.weight` suffix (`blk.N.ssm_a`,
    /// `blk.N.ffn_gate_inp.scale`).
    pub fn bare(self) -> bool {
        matches!(
            self,
            Role::SsmA | Role::FfnGateInpScale | Role::FfnDownExpsScale
        )
    }

    /// The role of one expert's matrix of a stacked expert role (`ffn_gate_exps` → `ffn_gate`,
    /// as older Mixtral files name each expert's matrix).
    pub fn single_expert(self) -> Option<Role> {
        match self {
            Role::FfnGateExps => Some(Role::FfnGate),
            Role::FfnUpExps => Some(Role::FfnUp),
            Role::FfnDownExps => Some(Role::FfnDown),
            _ => None,
        }
    }

    /// Which half of each expert's rows of [`Role::FfnGateUpExps`] this stacked role is in
    /// files that store the experts' gate and up projections as one tensor: 0 for the gate
    /// (the first half), 1 for the up (llama.cpp's `build_moe_ffn` views the fused product's
    /// first `expert_ffn` values as the gate, the rest as the up).
    pub fn gate_up_half(self) -> Option<usize> {
        match self {
            Role::FfnGateExps => Some(0),
            Role::FfnUpExps => Some(1),
            _ => None,
        }
    }

    fn from_gguf(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|role| role.gguf() == name)
    }
}

/// Whether a name is a tensor's weight or its bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    /// `….weight`.
    Weight,
    /// `….bias`.
    Bias,
}

/// One tensor of a model file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorName {
    /// What it is for.
    pub role: Role,
    /// Its layer, for per-layer roles.
    pub layer: Option<usize>,
    /// The expert, for one expert's matrix in older Mixtral files (`blk.N.ffn_up.E.weight`).
    pub expert: Option<usize>,
    /// Weight or bias.
    pub part: Part,
}

impl TensorName {
    /// The weight of a model-level tensor.
    pub fn model(role: Role) -> Self {
        Self {
            role,
            layer: None,
            expert: None,
            part: Part::Weight,
        }
    }

    /// The weight of `role` in layer `layer`.
    pub fn layer(role: Role, layer: usize) -> Self {
        Self {
            layer: Some(layer),
            ..Self::model(role)
        }
    }

    /// The bias beside this weight.
    pub fn bias(self) -> Self {
        Self {
            part: Part::Bias,
            ..self
        }
    }

    /// Expert `expert`'s own matrix of this stacked expert tensor, as older files store it
    /// (`blk.N.ffn_up_exps` → `blk.N.ffn_up.E`); `None` for a role that is not stacked.
    pub fn single_expert(self, expert: usize) -> Option<Self> {
        Some(Self {
            role: self.role.single_expert()?,
            expert: Some(expert),
            ..self
        })
    }

    /// The fused gate-and-up tensor of the layer that holds this stacked gate or up tensor's
    /// rows in files that fuse them (`blk.N.ffn_up_exps` → `blk.N.ffn_gate_up_exps`), with the
    /// half of each expert's rows they are ([`Role::gate_up_half`]).
    pub fn fused_gate_up(self) -> Option<(Self, usize)> {
        let half = self.role.gate_up_half()?;
        let fused = Self {
            role: Role::FfnGateUpExps,
            ..self
        };
        Some((fused, half))
    }

    /// The name read back from its GGUF spelling; `None` for a tensor rinfer has no role for.
    pub fn parse(name: &str) -> Option<Self> {
        if let Some(bare) = Self::parse_bare(name) {
            return Some(bare);
        }
        let (stem, part) = name.rsplit_once('.')?;
        let part = match part {
            "weight" => Part::Weight,
            "bias" => Part::Bias,
            _ => return None,
        };
        let Some(rest) = stem.strip_prefix("blk.") else {
            let role = Role::from_gguf(stem).filter(|r| !r.per_layer() && !r.bare())?;
            return Some(Self {
                part,
                ..Self::model(role)
            });
        };
        let (layer, rest) = rest.split_once('.')?;
        let layer = layer.parse().ok()?;
        let (role, expert) = match Role::from_gguf(rest) {
            Some(role) => (role, None),
            None => {
                let (role, expert) = rest.rsplit_once('.')?;
                (Role::from_gguf(role)?, Some(expert.parse().ok()?))
            }
        };
        if !role.per_layer()
            || role.bare() && part == Part::Weight
            || expert.is_some() && !matches!(role, Role::FfnGate | Role::FfnUp | Role::FfnDown)
        {
            return None;
        }
        Some(Self {
            role,
            layer: Some(layer),
            expert,
            part,
        })
    }

    /// A per-layer weight stored without a suffix (`blk.N.ssm_a`).
    fn parse_bare(name: &str) -> Option<Self> {
        let (layer, role) = name.strip_prefix("blk.")?.split_once('.')?;
        let role = Role::from_gguf(role).filter(|r| r.bare())?;
        Some(Self::layer(role, layer.parse().ok()?))
    }
}

impl fmt::Display for TensorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(layer) = self.layer {
            write!(f, "blk.{layer}.")?;
        }
        f.write_str(self.role.gguf())?;
        if let Some(expert) = self.expert {
            write!(f, ".{expert}")?;
        }
        f.write_str(match self.part {
            Part::Weight if self.role.bare() => "",
            Part::Weight => ".weight",
            Part::Bias => ".bias",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_as_itself() {
        for role in Role::ALL {
            let name = match role.per_layer() {
                true => TensorName::layer(role, 7),
                false => TensorName::model(role),
            };
            for n in [name, name.bias()] {
                assert_eq!(TensorName::parse(&n.to_string()), Some(n), "{n}");
            }
            if let Some(one) = name.single_expert(3) {
                assert_eq!(TensorName::parse(&one.to_string()), Some(one), "{one}");
            }
        }
    }

    #[test]
    fn gate_and_up_experts_are_the_halves_of_the_fused_tensor() {
        let up = TensorName::layer(Role::FfnUpExps, 4);
        let (fused, half) = up.fused_gate_up().unwrap();
        assert_eq!(fused.to_string(), "blk.4.ffn_gate_up_exps.weight");
        assert_eq!(half, 1);
        let gate = TensorName::layer(Role::FfnGateExps, 4).fused_gate_up();
        assert_eq!(gate, Some((fused, 0)));
        assert_eq!(
            TensorName::layer(Role::FfnDownExps, 4).fused_gate_up(),
            None
        );
        assert_eq!(
            TensorName::parse("blk.4.ffn_gate_up_exps.weight"),
            Some(fused)
        );
    }

    #[test]
    fn dotted_and_bare_roles_read_back() {
        let conv = TensorName::layer(Role::ShortConvConv, 2);
        assert_eq!(conv.to_string(), "blk.2.shortconv.conv.weight");
        assert_eq!(TensorName::parse("blk.2.shortconv.conv.weight"), Some(conv));
        let a = TensorName::layer(Role::SsmA, 1);
        assert_eq!(a.to_string(), "blk.1.ssm_a");
        assert_eq!(TensorName::parse("blk.1.ssm_a"), Some(a));
        let dt = TensorName::layer(Role::SsmDt, 0).bias();
        assert_eq!(TensorName::parse("blk.0.ssm_dt.bias"), Some(dt));
    }

    #[test]
    fn names_without_a_role_are_not_parsed() {
        for name in [
            "blk.0.attn_kv_b.weight",
            "blk.x.attn_q.weight",
            "attn_q.weight",
            "blk.0.output.weight",
            "token_embd.scale",
            "blk.0.attn_q.1.weight",
            "blk.0.ssm_a.weight",
            "blk.0.shortconv.weight",
            "ssm_a",
        ] {
            assert_eq!(TensorName::parse(name), None, "{name}");
        }
    }
}
