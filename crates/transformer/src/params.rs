//! The parameters of the stages: what a stage computes, apart from its weights.

/// How hidden states are normalised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormKind {
    /// `x / rms(x) * w`.
    Rms,
    /// `(x - mean) / std * w + b`.
    Layer,
}

/// A normalisation of rows of the hidden width: its kind and epsilon.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Norm {
    /// RMSNorm or LayerNorm.
    pub kind: NormKind,
    /// Added to the variance.
    pub eps: f32,
}

/// The feed-forward block's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ffn {
    /// `down(silu(gate(h)) * up(h))`.
    SiluGated,
    /// `down(gelu_tanh(gate(h)) * up(h))`.
    GeluGated,
    /// `down(gelu_tanh(up(h)))`, no gate.
    Gelu,
    /// `down(swiglu_clamped(gate(h) + b, up(h) + b)) + b`: gpt-oss's clamped SwiGLU.
    ClampedSwiGlu,
}

impl Ffn {
    /// Whether the block multiplies a gate projection with the up projection.
    pub fn is_gated(self) -> bool {
        !matches!(self, Ffn::Gelu)
    }
}

/// How a router turns its scores into the weights of the experts it picks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gating {
    /// `p = softmax(scores)` over every expert; the `k` most probable picked, their `p`
    /// renormalised to sum to one (Qwen3-MoE, Mixtral).
    SoftmaxTopK,
    /// The `k` highest raw scores picked; the weights are the softmax of those `k` (gpt-oss).
    TopKSoftmax,
    /// `p = softmax(scores)` over every expert; the `k` most probable picked with their `p` as
    /// they are (DeepSeek-V2: no renormalisation).
    SoftmaxTopKUnnormalized,
    /// `s = sigmoid(scores)`; the `k` highest `s + selection bias` picked (the bias, where the
    /// layer has one, only chooses); the weights are the picked `s`, divided by their sum
    /// when `normalize` (DeepSeek-V3, GLM-4.5).
    Sigmoid {
        /// Divide the picked weights by their sum (at least ggml's 6.1e-5).
        normalize: bool,
    },
}

/// A mixture-of-experts router: how many experts a layer has, how many each row runs, and how
/// their weights are formed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Router {
    /// Experts of the layer.
    pub experts: usize,
    /// Experts each row runs (top-k).
    pub used: usize,
    /// From scores to weights.
    pub gating: Gating,
    /// The weights are multiplied by this last (`expert_weights_scale`; 1 for none).
    pub scale: f32,
}

/// The experts of a mixture-of-experts layer: each is a gated feed-forward block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Experts {
    /// The shape of each expert.
    pub ffn: Ffn,
    /// Inner width of one expert.
    pub ffn_dim: usize,
}

/// The attention heads of a layer: query head `h` reads kv head `h / (heads / kv_heads)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heads {
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (`heads` is a multiple of them).
    pub kv_heads: usize,
    /// Width of one head (queries, keys and values alike).
    pub head_dim: usize,
}

impl Heads {
    /// Width of all query heads together.
    pub fn q_dim(&self) -> usize {
        self.heads * self.head_dim
    }

    /// Width of all key (or value) heads together.
    pub fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim
    }
}

/// Multi-head latent attention's widths (DeepSeek-V2/V3). Each position's keys and values are
/// one latent row `[k_pe (rope) | c (kv_lora)]` shared by every head; a query head is
/// absorbed into that space, `[q_pe (rope) | W_kb · q_nope (kv_lora)]`, so attention runs as
/// one kv head of `rope + kv_lora` values whose values are the keys, and each head's output
/// is its latent part times `W_vb`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mla {
    /// Width of the compressed query (`None`: queries are projected from the hidden state
    /// directly, as in DeepSeek-V2-Lite).
    pub q_lora: Option<usize>,
    /// Width of the compressed key/value latent `c`.
    pub kv_lora: usize,
    /// The part of a query head without position (`q_nope`).
    pub nope: usize,
    /// The rotated part of a query head and of the shared key (`q_pe`, `k_pe`).
    pub rope: usize,
    /// Width of one head's value.
    pub v_head: usize,
}

impl Mla {
    /// Width of one query head as projected: `nope + rope`.
    pub fn q_head(&self) -> usize {
        self.nope + self.rope
    }

    /// Width of the latent row a position keeps and of an absorbed query head:
    /// `rope + kv_lora`.
    pub fn latent(&self) -> usize {
        self.rope + self.kv_lora
    }
}

/// How scores are formed and which keys a query sees.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionParams {
    /// Scores are `q · k * scale` (usually `1 / sqrt(head_dim)`).
    pub scale: f32,
    /// Scores become `cap * tanh(score / cap)`.
    pub softcap: Option<f32>,
    /// A query at `pos` sees the keys `pos + 1 - window ..= pos`; without a window every key
    /// from position 0.
    pub window: Option<usize>,
    /// Each head has a learned sink logit that joins the softmax's denominator only (gpt-oss):
    /// the weights of the keys then sum to less than one.
    pub sinks: bool,
}

impl AttentionParams {
    /// The first key position a query at `pos` sees.
    pub fn first_key(&self, pos: usize) -> usize {
        self.window.map_or(0, |w| (pos + 1).saturating_sub(w))
    }
}

/// Which dimensions a rotation pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs `(2i, 2i + 1)` (llama; ggml's mode 0).
    Norm,
    /// Halves `(i, i + n_rot / 2)` (GPT-NeoX, Qwen, Gemma, Phi; ggml's mode 2).
    Neox,
}

/// Rotation parameters of one model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeParams {
    /// Rotated dimensions per head (even, at most the head size); the rest pass through.
    pub n_rot: usize,
    /// Frequency base (`theta_i = pos * base^(-2i / n_rot)`).
    pub freq_base: f32,
    /// Linear position scale (1.0 for none).
    pub freq_scale: f32,
    /// Pairing of dimensions.
    pub style: RopeStyle,
    /// YaRN's blend of interpolated and extrapolated angles, where the model scales that way.
    pub yarn: Option<Yarn>,
    /// Whether the model's per-frequency divisors (`rope_freqs`, where it has them) divide
    /// this layer's angles (gemma4 applies them on its full-attention layers only).
    pub factors: bool,
}

/// YaRN context extension as ggml applies it (`ext_factor` 1): pairs below `corr_dims[0]` keep
/// their extrapolated angle `theta`, pairs above `corr_dims[1]` take the interpolated
/// `freq_scale * theta`, the ones between a linear ramp of the two; sine and cosine are both
/// scaled by `mscale`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Yarn {
    /// The first and last pair of the ramp.
    pub corr_dims: [f32; 2],
    /// The magnitude scale of sine and cosine.
    pub mscale: f32,
}

impl Yarn {
    /// ggml's parameters for `n_rot` rotated dimensions at frequency base `base`, trained at
    /// `n_ctx_orig` positions and stretched by `factor`, with its default betas (32 and 1).
    pub fn new(n_rot: usize, base: f32, n_ctx_orig: usize, factor: f32) -> Self {
        let corr_dim = |beta: f32| {
            n_rot as f32 * (n_ctx_orig as f32 / (beta * 2.0 * std::f32::consts::PI)).ln()
                / (2.0 * base.ln())
        };
        let low = corr_dim(32.0).floor().max(0.0);
        let high = corr_dim(1.0).ceil().min(n_rot as f32 - 1.0);
        Yarn {
            corr_dims: [low, high],
            mscale: 1.0 + 0.1 * factor.ln(),
        }
    }
}

/// A short causal convolution mixer (LFM2): `[b | c | u] = in_proj·h`, per channel
/// `y_t = Σ_j kernel[j]·(b⊙u)_{t-taps+1+j}` (zeros before the first position),
/// `out = out_proj·(c ⊙ y)`. A sequence carries the last `taps - 1` inputs `b⊙u` between passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShortConv {
    /// Channels (the hidden width).
    pub channels: usize,
    /// Kernel length, the current position included.
    pub taps: usize,
}

/// A gated delta net (Qwen3.5's linear attention): a causal depthwise convolution and SiLU over
/// `[q | k | v] = qkv·h`, L2-normed q and k, then per value head `j` (reading q/k head
/// `j mod k_heads`) a `state × state` matrix `S` updated per position:
/// `S = exp(g)·S; S += k ⊗ β(v − Sᵀk); o = Sᵀq / √state`, and
/// `out = output·(rms(o)⊙norm ⊙ silu(gate·h))`. A sequence carries the convolution's last
/// `taps - 1` inputs and every head's `S` between passes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeltaNet {
    /// Query/key heads.
    pub k_heads: usize,
    /// Value heads (a multiple of `k_heads`).
    pub v_heads: usize,
    /// Width of a head, of q, k and v alike, and the side of each state matrix.
    pub state: usize,
    /// Convolution kernel length, the current position included.
    pub taps: usize,
    /// Added to the variance of the output norm and to the sum of squares of the L2 norms.
    pub eps: f32,
}

impl DeltaNet {
    /// Width of all query (or key) heads together.
    pub fn qk_dim(&self) -> usize {
        self.k_heads * self.state
    }

    /// Width of all value heads together.
    pub fn v_dim(&self) -> usize {
        self.v_heads * self.state
    }

    /// Channels of the convolution: `q | k | v`.
    pub fn conv_dim(&self) -> usize {
        2 * self.qk_dim() + self.v_dim()
    }
}

/// What mixes positions in a recurrent layer, in place of attention.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Recurrence {
    /// A short convolution.
    ShortConv(ShortConv),
    /// A gated delta net.
    DeltaNet(DeltaNet),
}

impl Recurrence {
    /// The state one sequence carries for a layer of this kind: `(window, matrices)`, the
    /// f32 values of the convolution's last inputs and of the state matrices.
    pub fn state_floats(&self) -> (usize, usize) {
        match *self {
            Recurrence::ShortConv(c) => (c.taps.saturating_sub(1) * c.channels, 0),
            Recurrence::DeltaNet(d) => (
                d.taps.saturating_sub(1) * d.conv_dim(),
                d.v_heads * d.state * d.state,
            ),
        }
    }
}
