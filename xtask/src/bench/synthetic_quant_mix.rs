//! llama.cpp's Q4_K_M mix (`llama_tensor_get_type` in `llama-quant.cpp`), derived as llama.cpp
//! derives it: from a tensor's name and dims alone, in file order.
//!
//! A tensor stays F32 unless its name ends in `weight`, it has two or more dims and it is not
//! one of the tensors llama.cpp leaves alone (norms, routers, convolution taps, learned
//! positions, token types). The output projection (the token embeddings, gemma4's per-layer
//! one too, when there is no `output.weight`) gets Q6_K; `attn_qkv` Q5_K; `attn_v` and `ffn_down*` Q6_K in the layers
//! `use_more_bits` picks (`attn_v` counted over the attention-value tensors, as llama.cpp
//! counts them, so a hybrid's few attention layers are spread over all of its `attn_v` and
//! `attn_qkv` tensors); with exactly 8 experts `attn_v` and `attn_k` get Q8_0 and
//! `attn_output` Q5_K; everything else Q4_K. A type whose block does not divide a row falls
//! back as llama.cpp's does (Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0, then F16).

use rinfer_formats::GgmlType;

/// The counters llama.cpp keeps while it walks a model's tensors in file order.
#[derive(Debug)]
pub struct QuantMix {
    /// Layers of the model.
    layers: usize,
    /// Routed experts per layer (0 for a dense model).
    experts: usize,
    /// Whether `token_embd` doubles as the output projection.
    tied: bool,
    /// Attention-value tensors (`attn_v`, `attn_qkv`, `attn_kv_b`) in the model.
    attention_v_count: usize,
    /// `attn_v` tensors seen so far.
    attention_v_seen: usize,
    /// `ffn_down` tensors seen so far.
    ffn_down_seen: usize,
}

impl QuantMix {
    /// The mix for a model whose tensors are `names`, with `layers` layers and `experts` routed
    /// experts per layer.
    pub fn new<'a>(
        names: impl IntoIterator<Item = &'a str>,
        layers: usize,
        experts: usize,
    ) -> Self {
        let mut tied = true;
        let mut attention_v_count = 0;
        for name in names {
            tied &= name != "output.weight";
            attention_v_count += usize::from(
                ["attn_v.weight", "attn_qkv.weight", "attn_kv_b.weight"]
                    .iter()
                    .any(|role| name.contains(role)),
            );
        }
        Self {
            layers,
            experts,
            tied,
            attention_v_count,
            attention_v_seen: 0,
            ffn_down_seen: 0,
        }
    }

    /// The type of the next tensor, `name` of GGUF `dims`; call in file order.
    pub fn next_type(&mut self, name: &str, dims: &[u64]) -> GgmlType {
        if !quantized(name, dims) {
            return GgmlType::F32;
        }
        let eight_experts = self.experts == 8;
        let token_embedding = name == "token_embd.weight" || name == "per_layer_token_embd.weight";
        let target = if name == "output.weight" || (self.tied && token_embedding) {
            GgmlType::Q6K
        } else if name.contains("attn_qkv.weight") {
            GgmlType::Q5K
        } else if name.contains("attn_v.weight") {
            let more = use_more_bits(self.attention_v_seen, self.attention_v_count);
            self.attention_v_seen += 1;
            match (eight_experts, more) {
                (true, _) => GgmlType::Q8_0,
                (false, true) => GgmlType::Q6K,
                (false, false) => GgmlType::Q4K,
            }
        } else if name.contains("attn_k.weight") && eight_experts {
            GgmlType::Q8_0
        } else if name.contains("attn_output.weight") && eight_experts {
            GgmlType::Q5K
        } else if name.contains("ffn_down") {
            // llama.cpp counts a dense model's ffn_down tensors; with experts it reads the
            // layer from the name.
            let layer = if self.experts > 1 {
                layer_of(name).unwrap_or(self.ffn_down_seen)
            } else {
                self.ffn_down_seen
            };
            self.ffn_down_seen += 1;
            if use_more_bits(layer, self.layers) {
                GgmlType::Q6K
            } else {
                GgmlType::Q4K
            }
        } else {
            GgmlType::Q4K
        };
        fallback(target, dims[0])
    }
}

/// Whether llama.cpp quantizes a tensor of this name and dims at all.
fn quantized(name: &str, dims: &[u64]) -> bool {
    const KEPT: [&str; 6] = [
        "ffn_gate_inp.weight",
        "ssm_conv1d",
        "shortconv.conv.weight",
        "per_layer_model_proj",
        "position_embd.weight",
        "token_types.weight",
    ];
    name.ends_with("weight")
        && dims.len() >= 2
        && !name.contains("_norm.weight")
        && !KEPT.iter().any(|kept| name.contains(kept))
}

/// llama.cpp's Q4_K_M rule for the layer `i` of `n` (or the `i`-th of `n` value tensors):
/// more bits in the first and last eighth and in every third one between.
pub fn use_more_bits(i: usize, n: usize) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// `ty`, or the type llama.cpp falls back to when its block does not divide a row of `cols`.
fn fallback(ty: GgmlType, cols: u64) -> GgmlType {
    let fits = |t: GgmlType| cols.is_multiple_of(t.block_size() as u64);
    if fits(ty) {
        return ty;
    }
    let smaller = match ty {
        GgmlType::Q4K => GgmlType::Q5_0,
        GgmlType::Q5K => GgmlType::Q5_1,
        GgmlType::Q6K => GgmlType::Q8_0,
        other => other,
    };
    if fits(smaller) {
        smaller
    } else {
        GgmlType::F16
    }
}

/// The `N` of a `blk.N.` tensor name.
fn layer_of(name: &str) -> Option<usize> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attn_v_and_ffn_down_get_q6_k_where_llama_cpp_q4_k_m_puts_it() {
        let more: Vec<usize> = (0..22).filter(|&i| use_more_bits(i, 22)).collect();
        assert_eq!(more, [0, 1, 4, 7, 10, 13, 16, 19, 20, 21]);
    }

    #[test]
    fn small_tensors_stay_f32_and_tied_embeddings_get_the_output_type() {
        let names = [
            "token_embd.weight",
            "blk.0.attn_qkv.weight",
            "blk.0.attn_v.weight",
        ];
        let mut mix = QuantMix::new(names, 1, 0);
        assert_eq!(
            mix.next_type("token_embd.weight", &[256, 10]),
            GgmlType::Q6K
        );
        for (name, dims) in [
            ("blk.0.ssm_a", &[16][..]),
            ("blk.0.ssm_dt.bias", &[16]),
            ("blk.0.ssm_conv1d.weight", &[4, 256]),
            ("blk.0.shortconv.conv.weight", &[3, 256]),
            ("blk.0.ffn_gate_inp.weight", &[256, 8]),
            ("blk.0.attn_q_norm.weight", &[256]),
        ] {
            assert_eq!(mix.next_type(name, dims), GgmlType::F32, "{name}");
        }
        assert_eq!(
            mix.next_type("blk.0.attn_qkv.weight", &[256, 512]),
            GgmlType::Q5K
        );
        assert_eq!(
            mix.next_type("blk.0.ssm_alpha.weight", &[256, 16]),
            GgmlType::Q4K
        );
    }

    #[test]
    fn rows_that_a_k_block_does_not_divide_fall_back_as_in_llama_cpp() {
        let mut mix = QuantMix::new(["output.weight"], 8, 64);
        assert_eq!(
            mix.next_type("blk.0.attn_k_b.weight", &[128, 512, 16]),
            GgmlType::Q5_0
        );
        assert_eq!(
            mix.next_type("blk.0.ffn_down_exps.weight", &[1408, 256, 4]),
            GgmlType::Q8_0
        );
        assert_eq!(
            mix.next_type("blk.2.ffn_down_exps.weight", &[1408, 256, 4]),
            GgmlType::Q5_0
        );
        assert_eq!(
            mix.next_type("blk.2.attn_qkv.weight", &[1000, 256]),
            GgmlType::F16
        );
    }
}
