//! Which type each tensor gets: llama.cpp's `llama_tensor_get_type` for the file types rinfer
//! writes, driven by the tensor's name, shape and layer and by a few hyperparameters.

use rinfer_formats::GgmlType;

use super::file_type::FileType;

/// The hyperparameters llama.cpp's per-tensor rules read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MixParams {
    /// `general.architecture` is `falcon`.
    pub falcon: bool,
    /// Llama's 70B shape (80 layers, grouped-query attention).
    pub llama_70b: bool,
    /// Layers (`{arch}.block_count`).
    pub n_layer: usize,
    /// Query heads over key/value heads (0 without key/value heads).
    pub n_gqa: usize,
    /// Experts per MoE layer (0 for dense models).
    pub n_expert: usize,
}

/// What a tensor is, for the mixes (llama.cpp's `tensor_category`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Category {
    TokenEmbd,
    AttnQ,
    AttnV,
    AttnK,
    AttnOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Output,
    Other,
}

/// The name fragments of the layers' categories, in the order llama.cpp tests them: a name
/// gets the category of the first fragment it contains.
const FRAGMENTS: [(&str, Category); 9] = [
    ("attn_qkv.weight", Category::AttnV),
    ("attn_kv_b.weight", Category::AttnV),
    ("attn_v.weight", Category::AttnV),
    ("attn_k.weight", Category::AttnK),
    ("attn_q.weight", Category::AttnQ),
    ("attn_output.weight", Category::AttnOutput),
    ("ffn_up", Category::FfnUp),
    ("ffn_gate", Category::FfnGate),
    ("ffn_down", Category::FfnDown),
];

fn category(name: &str) -> Category {
    if name == "output.weight" {
        Category::Output
    } else if name == "token_embd.weight" || name == "per_layer_token_embd.weight" {
        Category::TokenEmbd
    } else {
        FRAGMENTS
            .iter()
            .find(|(fragment, _)| name.contains(fragment))
            .map_or(Category::Other, |&(_, category)| category)
    }
}

/// Name fragments of 2-D weights llama.cpp never quantizes.
const NEVER_QUANTIZED: &[&str] = &[
    "_norm.weight",
    "ffn_gate_inp.weight",
    "altup",
    "laurel",
    "per_layer_model_proj",
    "ssm_conv1d",
    "attn_rel_b.weight",
    ".position_embd",
];

/// Whether llama.cpp quantizes the tensor `name` of `dims` at all (its
/// `tensor_allows_quantization`): 2-D and 3-D weights other than norms, routers and position
/// tables.
pub fn allows_quantization(name: &str, dims: &[u64]) -> bool {
    let n_dims = dims.iter().rposition(|&d| d > 1).map_or(1, |i| i + 1);
    n_dims >= 2
        && name.ends_with("weight")
        && !NEVER_QUANTIZED.iter().any(|s| name.contains(s))
        && name != "position_embd.weight"
        && name != "token_types.weight"
}

/// Whether llama.cpp refuses to write tensor `name` as `ty` without an importance matrix entry
/// for it (its `tensor_requires_imatrix`): the IQ1 and IQ2 types and IQ3_XXS, except on the
/// token embeddings and the output matrix.
pub(crate) fn requires_imatrix(name: &str, ty: GgmlType) -> bool {
    use GgmlType as T;
    !matches!(
        name,
        "token_embd.weight" | "per_layer_token_embd.weight" | "output.weight"
    ) && matches!(
        ty,
        T::Iq1S | T::Iq1M | T::Iq2Xxs | T::Iq2Xs | T::Iq2S | T::Iq3Xxs
    )
}

/// The layer of a `blk.N.` tensor.
pub(crate) fn layer_of(name: &str) -> Option<usize> {
    let rest = name.strip_prefix("blk.")?;
    let digits = rest.split('.').next()?;
    digits.parse().ok()
}

/// llama.cpp's layer test for spending more bits: the first and last eighth and every third
/// layer between.
fn use_more_bits(i_layer: usize, n_layers: usize) -> bool {
    let (i, n) = (i_layer as i64, n_layers as i64);
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// Chooses the type of each tensor of one model in file order, carrying the counters llama.cpp
/// keeps across tensors (the running index of attention-V tensors and of FFN tensors).
pub struct TypePlanner {
    file_type: FileType,
    pure: bool,
    has_imatrix: bool,
    params: MixParams,
    tied_embeddings: bool,
    n_attention_wv: usize,
    i_attention_wv: usize,
    i_ffn_down: usize,
    i_ffn_gate: usize,
    i_ffn_up: usize,
}

impl TypePlanner {
    /// A planner for the tensors `names` (all of them, in file order) of a model with `params`.
    /// `pure` puts every quantizable weight in the default type, as `llama-quantize --pure`.
    pub fn new<'a>(
        file_type: FileType,
        pure: bool,
        params: MixParams,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let (mut n_attention_wv, mut tied_embeddings) = (0, true);
        for name in names {
            match category(name) {
                Category::AttnV => n_attention_wv += 1,
                Category::Output => tied_embeddings = false,
                _ => {}
            }
        }
        TypePlanner {
            file_type,
            pure,
            has_imatrix: false,
            params,
            tied_embeddings,
            n_attention_wv,
            i_attention_wv: 0,
            i_ffn_down: 0,
            i_ffn_gate: 0,
            i_ffn_up: 0,
        }
    }

    /// With the rules llama.cpp applies when an importance matrix is given (`has_imatrix`).
    pub fn with_imatrix(mut self, has_imatrix: bool) -> Self {
        self.has_imatrix = has_imatrix;
        self
    }

    /// The type tensor `name` of `dims` (`ne0` first), now `current`, is written in.
    pub fn tensor_type(&mut self, name: &str, dims: &[u64], current: GgmlType) -> GgmlType {
        if !allows_quantization(name, dims) {
            return current;
        }
        let default = self.file_type.default_type();
        if !default.is_quantized() {
            return default;
        }
        let chosen = if self.pure {
            default
        } else {
            self.mixed_type(name, dims, default)
        };
        fallback(chosen, dims.first().copied().unwrap_or(0))
    }

    fn mixed_type(&mut self, name: &str, dims: &[u64], default: GgmlType) -> GgmlType {
        use FileType as F;
        use GgmlType as T;
        let ft = self.file_type;
        let p = self.params;
        let cat = category(name);
        let ne0 = dims.first().copied().unwrap_or(0) as usize;
        let ne2 = dims.get(2).copied().unwrap_or(1);
        let layer = |i: usize| {
            if p.n_expert > 1 {
                layer_of(name).unwrap_or(i)
            } else {
                i
            }
        };
        let mut t = default;
        let iq_mix = matches!(
            ft,
            F::Iq1S | F::Iq1M | F::Iq2Xxs | F::Iq2Xs | F::Iq2S | F::Iq2M
        );
        if cat == Category::Output || (self.tied_embeddings && cat == Category::TokenEmbd) {
            if ft == F::Mxfp4Moe || p.falcon || !ne0.is_multiple_of(default.block_size()) {
                t = T::Q8_0;
            } else if iq_mix || ft == F::Iq3Xxs {
                t = T::Q5K;
            } else if t != T::Q8_0 {
                t = T::Q6K;
            }
        } else if ft == F::Mxfp4Moe {
            t = if ne2 > 1 { T::MXFP4 } else { T::Q8_0 };
        } else if cat == Category::TokenEmbd {
            match ft {
                F::Iq1S | F::Iq1M | F::Iq2Xxs | F::Iq2Xs => t = T::Q2K,
                F::Iq2S | F::Iq2M | F::Iq3Xxs => t = T::Iq3S,
                F::Tq2_0 => t = T::Q4K,
                _ => {}
            }
        } else if iq_mix {
            t = self.iq_mix_type(cat, t);
        } else if cat == Category::AttnV {
            let i = self.i_attention_wv;
            match ft {
                F::Q2K => t = if p.n_gqa >= 4 { T::Q4K } else { T::Q3K },
                F::Iq3Xxs if p.n_gqa >= 4 => t = T::Q4K,
                F::Iq3Xxs if !self.has_imatrix => t = T::Iq3S,
                F::Iq3Xxs => t = T::Iq3Xxs,
                F::Iq3Xs | F::Iq3S if p.n_gqa >= 4 => t = T::Q4K,
                F::Iq3M => t = T::Q4K,
                F::Q3KM => t = if i < 2 { T::Q5K } else { T::Q4K },
                F::Q3KL => t = T::Q5K,
                F::Iq4Nl | F::Iq4Xs if p.n_gqa >= 4 => t = T::Q5K,
                F::Q4KM | F::Q5KM if use_more_bits(i, self.n_attention_wv) => t = T::Q6K,
                F::Q4KS if i < 4 => t = T::Q5K,
                _ => {}
            }
            if p.llama_70b && matches!(t, T::Q3K | T::Q4K) {
                t = T::Q5K;
            }
            if p.n_expert == 8 {
                t = T::Q8_0;
            }
            self.i_attention_wv += 1;
        } else if cat == Category::AttnK {
            if p.n_expert == 8 {
                t = T::Q8_0;
            } else if ft == F::Iq3Xs {
                t = T::Iq3Xxs;
            } else if ft == F::Iq3Xxs {
                t = T::Iq2S;
            }
        } else if cat == Category::AttnQ {
            match ft {
                F::Iq3Xs => t = T::Iq3Xxs,
                F::Iq3Xxs => t = T::Iq2S,
                _ => {}
            }
        } else if cat == Category::FfnDown {
            let (i, n) = (layer(self.i_ffn_down), p.n_layer);
            match ft {
                F::Q2K => t = T::Q3K,
                F::Iq3Xxs if !self.has_imatrix => t = if i < n / 8 { T::Q4K } else { T::Q3K },
                F::Iq3M if i < n / 8 || (p.n_expert == 8 && use_more_bits(i, n)) => t = T::Q4K,
                F::Q3KM => {
                    t = if i < n / 16 {
                        T::Q5K
                    } else if !p.falcon || use_more_bits(i, n) {
                        T::Q4K
                    } else {
                        T::Q3K
                    }
                }
                F::Q3KL => t = if p.falcon { T::Q4K } else { T::Q5K },
                F::Q4KM if p.falcon => {
                    t = if i < n / 16 {
                        T::Q6K
                    } else if use_more_bits(i, n) {
                        T::Q5K
                    } else {
                        T::Q4K
                    }
                }
                F::Q4KM if use_more_bits(i, n) => t = T::Q6K,
                F::Iq4Nl | F::Iq4Xs if i < n / 8 && !self.has_imatrix => t = T::Q5K,
                F::Q5KM if use_more_bits(i, n) => t = T::Q6K,
                F::Q4KS if !p.falcon && i < n / 8 => t = T::Q5K,
                F::Q4_0 if self.has_imatrix && i < n / 8 => t = T::Q4_1,
                F::Q5_0 if self.has_imatrix && i < n / 8 => t = T::Q5_1,
                _ => {}
            }
            self.i_ffn_down += 1;
        } else if cat == Category::AttnOutput {
            if !p.falcon {
                if p.n_expert == 8 {
                    if matches!(
                        ft,
                        F::Q2K
                            | F::Iq3Xs
                            | F::Iq3Xxs
                            | F::Iq3M
                            | F::Q3KS
                            | F::Q3KM
                            | F::Iq4Nl
                            | F::Iq4Xs
                            | F::Q4KS
                            | F::Q4KM
                            | F::Iq3S
                    ) {
                        t = T::Q5K;
                    }
                } else {
                    match ft {
                        F::Q2K => t = T::Q3K,
                        F::Iq3Xxs => t = T::Iq3S,
                        F::Q3KM => t = T::Q4K,
                        F::Q3KL => t = T::Q5K,
                        F::Iq3M => t = T::Q4K,
                        _ => {}
                    }
                }
            } else if ft == F::Q3KL {
                t = T::Q4K;
            }
        } else if matches!(cat, Category::FfnGate | Category::FfnUp) {
            let counter = if cat == Category::FfnGate {
                &mut self.i_ffn_gate
            } else {
                &mut self.i_ffn_up
            };
            let (i, n) = (layer(*counter), p.n_layer);
            *counter += 1;
            if ft == F::Iq3Xs && i >= n / 8 && i < 7 * n / 8 {
                t = T::Iq3Xxs;
            }
        }
        t
    }

    /// llama.cpp's rules of the IQ1 and IQ2 mixes for the tensors of the layers.
    fn iq_mix_type(&mut self, cat: Category, default: GgmlType) -> GgmlType {
        use FileType as F;
        use GgmlType as T;
        let p = self.params;
        // The tensors the mixes spend more bits on: IQ3_S in IQ2_S and IQ2_M, else Q2_K.
        let more = if matches!(self.file_type, F::Iq2S | F::Iq2M) {
            T::Iq3S
        } else {
            T::Q2K
        };
        match cat {
            Category::AttnV => {
                self.i_attention_wv += 1;
                if p.n_gqa >= 4 || p.n_expert >= 4 {
                    T::Q4K
                } else {
                    more
                }
            }
            Category::AttnK if p.n_expert == 8 => T::Q4K,
            Category::FfnDown => {
                let i = self.i_ffn_down;
                self.i_ffn_down += 1;
                if i < p.n_layer / 8 { more } else { default }
            }
            Category::AttnOutput if p.n_expert == 8 => T::Q5K,
            Category::AttnOutput => match self.file_type {
                F::Iq1S | F::Iq1M => T::Iq2Xxs,
                F::Iq2S | F::Iq2M => T::Iq3S,
                _ => default,
            },
            _ => default,
        }
    }
}

/// llama.cpp's fallback when rows of `ne0` values are not whole blocks of `ty`.
fn fallback(ty: GgmlType, ne0: u64) -> GgmlType {
    use GgmlType as T;
    if ne0.is_multiple_of(ty.block_size() as u64) {
        return ty;
    }
    let next = match ty {
        T::Iq1S | T::Iq1M | T::Iq2Xxs | T::Iq2Xs | T::Iq2S | T::Iq3Xxs | T::Iq3S | T::Iq4Xs => {
            T::Iq4Nl
        }
        T::Q2K | T::Q3K | T::TQ1_0 | T::TQ2_0 => T::Q4_0,
        T::Q4K => T::Q5_0,
        T::Q5K => T::Q5_1,
        T::Q6K => T::Q8_0,
        other => other,
    };
    if ne0.is_multiple_of(next.block_size() as u64) {
        next
    } else {
        T::F16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DENSE: MixParams = MixParams {
        falcon: false,
        llama_70b: false,
        n_layer: 32,
        n_gqa: 4,
        n_expert: 0,
    };

    /// The types a planner of `file_type` (not pure) with `params` gives the 4096 × 1024
    /// matrices `names`, in their order.
    fn planned<S: AsRef<str>>(
        file_type: FileType,
        params: MixParams,
        names: &[S],
    ) -> Vec<GgmlType> {
        let mut planner =
            TypePlanner::new(file_type, false, params, names.iter().map(AsRef::as_ref));
        names
            .iter()
            .map(|n| planner.tensor_type(n.as_ref(), &[4096, 1024], GgmlType::F32))
            .collect()
    }

    #[test]
    fn norms_routers_and_vectors_are_never_quantized() {
        assert!(!allows_quantization("blk.0.attn_norm.weight", &[256]));
        assert!(!allows_quantization("blk.0.ffn_gate_inp.weight", &[256, 8]));
        assert!(!allows_quantization("position_embd.weight", &[256, 1024]));
        assert!(!allows_quantization("blk.0.attn_q.bias", &[256, 256]));
        assert!(!allows_quantization("blk.0.attn_q.weight", &[256, 1]));
        assert!(allows_quantization(
            "blk.0.ffn_up_exps.weight",
            &[256, 64, 8]
        ));
    }

    #[test]
    fn fused_gate_up_experts_are_quantized_as_ffn_gate_tensors() {
        // llama.cpp's `tensor_get_category` finds no `ffn_up` in `ffn_gate_up_exps` and so
        // counts the fused tensor among the gate tensors.
        let fused = "blk.0.ffn_gate_up_exps.weight";
        assert_eq!(category(fused), Category::FfnGate);
        assert!(allows_quantization(fused, &[256, 128, 8]));
        let names: Vec<String> = (0..32)
            .map(|i| format!("blk.{i}.ffn_gate_up_exps.weight"))
            .collect();
        let types = planned(FileType::Iq3Xs, DENSE, &names);
        assert_eq!(types[3], GgmlType::Iq3S);
        assert_eq!(types[4], GgmlType::Iq3Xxs);
    }

    #[test]
    fn q4_k_m_spends_more_bits_on_the_first_and_last_layers_attention_v_and_ffn_down() {
        let names: Vec<String> = (0..32).map(|i| format!("blk.{i}.attn_v.weight")).collect();
        let types = planned(FileType::Q4KM, DENSE, &names);
        assert_eq!(types[0], GgmlType::Q6K);
        assert_eq!(types[4], GgmlType::Q4K);
        assert_eq!(types[6], GgmlType::Q6K);
        assert_eq!(types[31], GgmlType::Q6K);
    }

    #[test]
    fn iq3_xs_puts_the_middle_layers_ffn_up_and_gate_in_iq3_xxs() {
        let names: Vec<String> = (0..32)
            .flat_map(|i| {
                [
                    format!("blk.{i}.ffn_gate.weight"),
                    format!("blk.{i}.ffn_up.weight"),
                ]
            })
            .collect();
        let types = planned(FileType::Iq3Xs, DENSE, &names);
        let layer = |i: usize| (types[2 * i], types[2 * i + 1]);
        assert_eq!(layer(3), (GgmlType::Iq3S, GgmlType::Iq3S));
        assert_eq!(layer(4), (GgmlType::Iq3Xxs, GgmlType::Iq3Xxs));
        assert_eq!(layer(27), (GgmlType::Iq3Xxs, GgmlType::Iq3Xxs));
        assert_eq!(layer(28), (GgmlType::Iq3S, GgmlType::Iq3S));
    }

    #[test]
    fn iq2_s_spends_iq3_s_where_the_iq2_mixes_spend_more_bits() {
        let no_gqa = MixParams { n_gqa: 1, ..DENSE };
        let names = [
            "output.weight",
            "token_embd.weight",
            "blk.0.attn_v.weight",
            "blk.0.attn_output.weight",
            "blk.0.ffn_down.weight",
            "blk.0.ffn_up.weight",
        ];
        let types = planned(FileType::Iq2S, no_gqa, &names);
        use GgmlType as T;
        assert_eq!(
            types,
            [T::Q5K, T::Iq3S, T::Iq3S, T::Iq3S, T::Iq3S, T::Iq2Xs]
        );
    }

    #[test]
    fn rows_that_are_not_whole_super_blocks_fall_back_like_llama_cpp() {
        assert_eq!(fallback(GgmlType::Q4K, 64), GgmlType::Q5_0);
        assert_eq!(fallback(GgmlType::Q6K, 96), GgmlType::Q8_0);
        assert_eq!(fallback(GgmlType::Q3K, 32), GgmlType::Q4_0);
        assert_eq!(fallback(GgmlType::Iq2Xs, 32), GgmlType::Iq4Nl);
        assert_eq!(fallback(GgmlType::Q4K, 40), GgmlType::F16);
        let mut pure = TypePlanner::new(FileType::Q4KM, true, DENSE, ["a.weight"]);
        assert_eq!(
            pure.tensor_type("a.weight", &[64, 8], GgmlType::F32),
            GgmlType::Q5_0
        );
    }
}
