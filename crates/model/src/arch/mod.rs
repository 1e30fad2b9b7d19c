//! The architecture registry: each architecture maps GGUF metadata to a [`ModelConfig`].
//!
//! An `arch/<name>.rs` file only reads that architecture's hyperparameters and sets features;
//! the decoder block is shared. An architecture not listed here is an error, never a fallback.

mod bert;
mod deepseek;
mod gemma;
mod gemma4;
mod glm;
mod gpt2;
mod gpt_oss;
mod hybrid;
mod llama;
mod moe;
mod phi;
mod qwen;

use rinfer_formats::gguf::Metadata;

use crate::config::{
    ModelConfig, NormKind, Pooling, Positional, Rank, RankHead, Rope, RopeStyle, TensorLayout,
};
use crate::error::ModelError;

/// An architecture's mapping from metadata to configuration.
type ConfigFn = fn(&Hparams<'_>) -> Result<ModelConfig, ModelError>;

/// Every architecture rinfer runs, by its GGUF name.
const ARCHITECTURES: &[(&str, ConfigFn)] = &[
    ("llama", llama::config),
    ("qwen2", qwen::qwen2),
    ("qwen3", qwen::qwen3),
    ("qwen3moe", qwen::qwen3moe),
    ("gpt-oss", gpt_oss::config),
    ("gemma2", gemma::gemma2),
    ("gemma3", gemma::gemma3),
    ("gemma4", gemma4::config),
    ("phi2", phi::phi2),
    ("phi3", phi::phi3),
    ("gpt2", gpt2::config),
    ("glm4moe", glm::glm4moe),
    ("deepseek2", deepseek::deepseek2),
    ("lfm2", hybrid::lfm2),
    ("qwen35", hybrid::qwen35),
    ("qwen35moe", hybrid::qwen35moe),
    ("bert", bert::config),
    ("nomic-bert", bert::nomic_bert),
];

/// Architectures llama.cpp runs that rinfer recognises and refuses, with the reason.
const REFUSED: &[(&str, &str)] = &[(
    "nomic-bert-moe",
    "a mixture-of-experts encoder (nomic-embed-text v2: GELU experts every other layer); \
     nomic-bert (nomic-embed-text v1 and v1.5) runs",
)];

/// The names of the supported architectures.
pub fn supported() -> impl Iterator<Item = &'static str> {
    ARCHITECTURES.iter().map(|(name, _)| *name)
}

/// Reads the configuration of the model described by `metadata`, whose embedding table has
/// `vocab_size` rows.
pub fn config_from_metadata(
    metadata: &Metadata,
    vocab_size: usize,
) -> Result<ModelConfig, ModelError> {
    let arch = metadata.get_str("general.architecture")?;
    if let Some((name, reason)) = REFUSED.iter().find(|(name, _)| *name == arch) {
        return Err(ModelError::UnsupportedArchitecture {
            name: (*name).into(),
            reason,
        });
    }
    let Some((_, config)) = ARCHITECTURES.iter().find(|(name, _)| *name == arch) else {
        return Err(ModelError::UnknownArchitecture {
            name: arch.into(),
            supported: supported().collect::<Vec<_>>().join(", "),
        });
    };
    let hp = Hparams {
        metadata,
        arch,
        vocab_size,
    };
    let config = config(&hp)?;
    validate(&config)?;
    Ok(config)
}

/// Metadata reads shared by the architectures, with `{arch}.` prefixed to keys.
pub(crate) struct Hparams<'a> {
    metadata: &'a Metadata,
    arch: &'a str,
    vocab_size: usize,
}

impl Hparams<'_> {
    fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.arch)
    }

    fn usize(&self, suffix: &str) -> Result<usize, ModelError> {
        Ok(self.metadata.get_u32(&self.key(suffix))? as usize)
    }

    fn has(&self, suffix: &str) -> bool {
        self.metadata.get(&self.key(suffix)).is_some()
    }

    /// An array of integers (or one integer, standing for every layer), checked to hold one
    /// value per layer.
    fn per_layer_usize(&self, suffix: &str, layers: usize) -> Result<Vec<usize>, ModelError> {
        let key = self.key(suffix);
        let value = self.metadata.get(&key);
        let bad = || ModelError::InvalidConfig(format!("{key} is not {layers} counts"));
        let Some(items) = value.and_then(|v| v.as_array()) else {
            return Ok(vec![self.usize(suffix)?; layers]);
        };
        if items.len() != layers {
            return Err(bad());
        }
        items
            .iter()
            .map(|v| {
                v.as_i128()
                    .and_then(|n| u32::try_from(n).ok())
                    .map(|n| n as usize)
                    .ok_or_else(bad)
            })
            .collect()
    }

    /// An array of one boolean per layer, `None` when the key is absent.
    fn per_layer_bool(&self, suffix: &str, layers: usize) -> Result<Option<Vec<bool>>, ModelError> {
        let key = self.key(suffix);
        let Some(value) = self.metadata.get(&key) else {
            return Ok(None);
        };
        let bad = || ModelError::InvalidConfig(format!("{key} is not {layers} booleans"));
        let items = value.as_array().ok_or_else(bad)?;
        if items.len() != layers {
            return Err(bad());
        }
        items
            .iter()
            .map(|v| match v {
                rinfer_formats::gguf::MetadataValue::Bool(b) => Ok(*b),
                _ => Err(bad()),
            })
            .collect::<Result<_, _>>()
            .map(Some)
    }

    fn usize_or(&self, suffix: &str, default: usize) -> Result<usize, ModelError> {
        match self.metadata.get(&self.key(suffix)) {
            None => Ok(default),
            Some(_) => self.usize(suffix),
        }
    }

    fn bool_or(&self, suffix: &str, default: bool) -> Result<bool, ModelError> {
        match self.metadata.get(&self.key(suffix)) {
            None => Ok(default),
            Some(_) => Ok(self.metadata.get_bool(&self.key(suffix))?),
        }
    }

    fn f32_or(&self, suffix: &str, default: f32) -> Result<f32, ModelError> {
        match self.metadata.get(&self.key(suffix)) {
            None => Ok(default),
            Some(_) => Ok(self.metadata.get_f32(&self.key(suffix))?),
        }
    }

    fn f32_opt(&self, suffix: &str) -> Result<Option<f32>, ModelError> {
        match self.metadata.get(&self.key(suffix)) {
            None => Ok(None),
            Some(_) => Ok(Some(self.metadata.get_f32(&self.key(suffix))?)),
        }
    }

    /// The configuration fields every architecture shares, with llama-like defaults: RMSNorm,
    /// SwiGLU, interleaved RoPE over the whole head, no extras.
    fn base(&self, norm: NormKind) -> Result<ModelConfig, ModelError> {
        let hidden = self.usize("embedding_length")?;
        let heads = self.usize("attention.head_count")?;
        if heads == 0
            || hidden % heads != 0
                && self
                    .metadata
                    .get(&self.key("attention.key_length"))
                    .is_none()
        {
            return Err(ModelError::InvalidConfig(format!(
                "{} heads do not divide the hidden size {hidden}",
                heads
            )));
        }
        let head_dim = self.usize_or("attention.key_length", hidden / heads)?;
        let value_dim = self.usize_or("attention.value_length", head_dim)?;
        // Latent attention's value rows are part of its key rows (see `deepseek`).
        if value_dim != head_dim && !self.has("attention.kv_lora_rank") {
            return Err(ModelError::InvalidConfig(format!(
                "key length {head_dim} differs from value length {value_dim}"
            )));
        }
        let eps_key = match norm {
            NormKind::Rms => "attention.layer_norm_rms_epsilon",
            NormKind::Layer => "attention.layer_norm_epsilon",
        };
        let base = self.f32_or("rope.freq_base", 10_000.0)?;
        let layers = self.usize("block_count")?;
        let rope_dims = self.usize_or("rope.dimension_count", head_dim)?;
        Ok(ModelConfig {
            arch: self.arch.into(),
            vocab_size: self.vocab_size,
            hidden,
            layers,
            heads,
            kv_heads: self.kv_heads(heads)?,
            head_dim,
            ffn_dim: self.dense_ffn_dim()?,
            context_length: self.usize("context_length")?,
            norm,
            norm_eps: self.metadata.get_f32(&self.key(eps_key))?,
            ffn: crate::config::Ffn::SiluGated,
            positional: Positional::Rope(Rope {
                style: RopeStyle::Interleaved,
                dims: rope_dims,
                dims_local: rope_dims,
                base,
                base_local: base,
                linear_scale: 1.0,
                yarn: None,
            }),
            qk_norm: false,
            parallel_block: false,
            post_norms: false,
            embedding_scale: None,
            attention_scale: 1.0 / (head_dim as f32).sqrt(),
            attn_softcap: None,
            final_softcap: None,
            sliding_window: None,
            experts: None,
            attention_sinks: false,
            layer_attention: None,
            value_norm: false,
            per_layer_input: None,
            layer_output_scale: false,
            mla: None,
            recurrent: None,
            gated_attention: false,
            layout: TensorLayout::LLAMA,
            causal: true,
            post_norm: false,
            pooling: self.pooling()?,
        })
    }

    /// The dense FFN's width, `feed_forward_length`. A mixture-of-experts file may leave it
    /// out when every layer runs experts (llama.cpp reads it as optional): 0 then, which
    /// `validate` refuses where some layer runs the dense FFN.
    fn dense_ffn_dim(&self) -> Result<usize, ModelError> {
        if self.has("expert_count") {
            self.usize_or("feed_forward_length", 0)
        } else {
            self.usize("feed_forward_length")
        }
    }

    /// The pooling of an embedding model (`{arch}.pooling_type`; absent or 0: none).
    fn pooling(&self) -> Result<Option<Pooling>, ModelError> {
        Ok(match self.usize_or("pooling_type", 0)? {
            0 => None,
            1 => Some(Pooling::Mean),
            2 => Some(Pooling::Cls),
            3 => Some(Pooling::Last),
            4 => Some(Pooling::Rank(self.rank()?)),
            other => {
                return Err(ModelError::InvalidConfig(format!(
                    "unknown pooling type {other} (llama.cpp knows 0 none, 1 mean, 2 cls, 3 last, \
                     4 rank)"
                )));
            }
        })
    }

    /// A ranker's head settings: `classifier.output_labels` (its length; 1 without it) and
    /// `classifier.pooling_type` (1: the head reads the mean). The architecture sets the head.
    fn rank(&self) -> Result<Rank, ModelError> {
        let labels = match self.metadata.get(&self.key("classifier.output_labels")) {
            None => 1,
            Some(v) => v.as_array().map(<[_]>::len).ok_or_else(|| {
                ModelError::InvalidConfig(format!(
                    "{} is not an array of labels",
                    self.key("classifier.output_labels")
                ))
            })?,
        };
        Ok(Rank {
            labels,
            mean: self.usize_or("classifier.pooling_type", 0)? == 1,
            head: None,
        })
    }

    /// Key/value heads: `attention.head_count_kv` (the most of any layer where it is an array
    /// per layer), `heads` without it.
    fn kv_heads(&self, heads: usize) -> Result<usize, ModelError> {
        let key = "attention.head_count_kv";
        match self.metadata.get(&self.key(key)) {
            None => Ok(heads),
            Some(v) if v.as_array().is_some() => {
                let layers = self.usize("block_count")?;
                Ok(self
                    .per_layer_usize(key, layers)?
                    .into_iter()
                    .max()
                    .unwrap_or(0))
            }
            Some(_) => self.usize(key),
        }
    }

    /// YaRN scaling, when `rope.scaling.type` is `yarn`: its factor and the original context
    /// length.
    fn yarn_scaling(&self) -> Result<Option<(f32, usize)>, ModelError> {
        let kind = self.metadata.get(&self.key("rope.scaling.type"));
        if kind.and_then(|v| v.as_str()) != Some("yarn") {
            return Ok(None);
        }
        let factor = self.metadata.get_f32(&self.key("rope.scaling.factor"))?;
        if !(factor.is_finite() && factor >= 1.0) {
            return Err(ModelError::InvalidConfig(format!(
                "YaRN factor {factor} is not a finite number of at least 1"
            )));
        }
        let original = self.usize("rope.scaling.original_context_length")?;
        Ok(Some((factor, original)))
    }

    /// Linear RoPE scaling from `rope.scaling.type` = `linear` and `rope.scaling.factor`.
    fn linear_rope_scale(&self) -> Result<f32, ModelError> {
        let kind = self.metadata.get(&self.key("rope.scaling.type"));
        match kind.and_then(|v| v.as_str()) {
            None | Some("none") => Ok(1.0),
            Some("linear") => self.f32_or("rope.scaling.factor", 1.0),
            Some("yarn") | Some("longrope") => Err(ModelError::InvalidConfig(format!(
                "RoPE scaling {:?} is not supported yet",
                kind.and_then(|v| v.as_str()).unwrap_or_default()
            ))),
            Some(_) => Ok(1.0),
        }
    }
}

/// Sets the RoPE style of `config`.
/// `config` with `head` as its ranker's classifier, when it is a ranker.
fn with_rank_head(mut config: ModelConfig, head: Option<RankHead>) -> ModelConfig {
    if let Some(Pooling::Rank(rank)) = &mut config.pooling {
        rank.head = head;
    }
    config
}

fn with_rope_style(mut config: ModelConfig, style: RopeStyle) -> ModelConfig {
    if let Positional::Rope(rope) = &mut config.positional {
        rope.style = style;
    }
    config
}

fn validate(c: &ModelConfig) -> Result<(), ModelError> {
    let bad = |msg: String| Err(ModelError::InvalidConfig(msg));
    if c.hidden == 0 || c.layers == 0 || c.head_dim == 0 || c.vocab_size == 0 {
        return bad(format!(
            "zero-sized dimension (hidden {}, layers {}, head_dim {}, vocab {})",
            c.hidden, c.layers, c.head_dim, c.vocab_size
        ));
    }
    let dense = (0..c.layers).find(|&layer| !c.experts.is_some_and(|m| m.applies_to(layer)));
    if let Some(layer) = dense
        && c.ffn_dim == 0
    {
        return bad(format!(
            "{}.feed_forward_length is missing or zero, and layer {layer} runs the dense FFN",
            c.arch
        ));
    }
    if c.kv_heads == 0 || !c.heads.is_multiple_of(c.kv_heads) {
        return bad(format!(
            "{} query heads are not a multiple of {} kv heads",
            c.heads, c.kv_heads
        ));
    }
    if let Positional::Rope(rope) = c.positional
        && (rope.dims > c.head_dim || rope.dims % 2 != 0)
    {
        return bad(format!(
            "rope dimension {} does not fit head size {}",
            rope.dims, c.head_dim
        ));
    }
    if c.context_length == 0 {
        return bad("context length is zero".into());
    }
    if c.sliding_window.is_some_and(|sw| sw.window == 0) {
        return bad("sliding window of zero positions".into());
    }
    if let Some(Pooling::Rank(rank)) = c.pooling {
        if rank.head.is_none() {
            return bad(format!(
                "{} rankers (pooling type 4, rank) are not supported: rinfer scores with the \
                 classifier heads of bert and qwen3 rankers",
                c.arch
            ));
        }
        if rank.labels == 0 || rank.labels > c.hidden {
            return bad(format!(
                "a ranker of {} labels (classifier.output_labels) with hidden size {}: it needs \
                 1 to {} labels",
                rank.labels, c.hidden, c.hidden
            ));
        }
    }
    validate_layers(c)
}

/// Checks every layer's heads and rotation, and that the full-attention layers, which share
/// the KV cache's blocks, keep rows of one width.
fn validate_layers(c: &ModelConfig) -> Result<(), ModelError> {
    let bad = |msg: String| Err(ModelError::InvalidConfig(msg));
    if let Some(layers) = &c.layer_attention
        && layers.len() != c.layers
    {
        return bad(format!(
            "{} layers described for a model of {}",
            layers.len(),
            c.layers
        ));
    }
    let paged = c.paged_kv_dim();
    for layer in 0..c.layers {
        let h = c.heads_of(layer);
        if h.heads == 0 || h.head_dim == 0 || h.kv_heads == 0 || !h.heads.is_multiple_of(h.kv_heads)
        {
            return bad(format!(
                "layer {layer}: {} query heads of {} values are not a multiple of {} kv heads",
                h.heads, h.head_dim, h.kv_heads
            ));
        }
        let window = c.window_of(layer);
        if let Positional::Rope(rope) = c.positional {
            let dims = if window.is_some() {
                rope.dims_local
            } else {
                rope.dims
            };
            if dims > h.head_dim || dims % 2 != 0 {
                return bad(format!(
                    "layer {layer}: rope dimension {dims} does not fit head size {}",
                    h.head_dim
                ));
            }
        }
        if let Some(source) = c.kv_source_of(layer) {
            let theirs = c.heads_of(source);
            let fits = source < layer
                && c.keeps_kv(source)
                && c.window_of(source) == window
                && (theirs.kv_heads, theirs.head_dim) == (h.kv_heads, h.head_dim);
            if !fits {
                return bad(format!(
                    "layer {layer} reads the KV cache of layer {source}, which does not keep \
                     one of the same heads and window"
                ));
            }
        }
        if window.is_none() && h.kv_dim() != paged {
            return bad(format!(
                "the full-attention layers keep keys of different widths ({} and {paged})",
                h.kv_dim()
            ));
        }
    }
    Ok(())
}
