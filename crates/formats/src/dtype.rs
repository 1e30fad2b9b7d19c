//! Tensor element types as GGUF (and ggml) number them, with their block layout.

use std::fmt;

/// The number of elements in a K-quant super-block.
pub const QK_K: usize = 256;

macro_rules! ggml_types {
    ($( $(#[$doc:meta])* $variant:ident = $id:literal, $name:literal, $block:expr, $bytes:expr; )*) => {
        /// A tensor type id as stored in GGUF, one variant per type llama.cpp defines.
        ///
        /// Ids that llama.cpp retired (4, 5, 31–33, 36–38) are not types: reading them is an error.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u32)]
        pub enum GgmlType {
            $( $(#[$doc])* $variant = $id, )*
        }

        impl GgmlType {
            /// Every defined type, in id order.
            pub const ALL: &'static [GgmlType] = &[$(GgmlType::$variant),*];

            /// The type with this GGUF id, or `None` for an unknown or retired id.
            pub fn from_id(id: u32) -> Option<Self> {
                match id {
                    $( $id => Some(GgmlType::$variant), )*
                    _ => None,
                }
            }

            /// The name llama.cpp prints for this type (`"Q4_K"`, `"BF16"` …).
            pub fn name(self) -> &'static str {
                match self { $( GgmlType::$variant => $name, )* }
            }

            /// [`GgmlType::name`] in lower case (`"q4_k"`, `"bf16"`), as kernel names spell it.
            pub fn lowercase_name(self) -> &'static str {
                match self {
                    $( GgmlType::$variant => {
                        const LOWER: [u8; $name.len()] = ascii_lowercase($name);
                        const NAME: &str = match std::str::from_utf8(&LOWER) {
                            Ok(name) => name,
                            Err(_) => panic!("type names are ASCII"),
                        };
                        NAME
                    } )*
                }
            }

            /// Elements per block (1 for plain scalar types).
            pub fn block_size(self) -> usize {
                match self { $( GgmlType::$variant => $block, )* }
            }

            /// Bytes per block.
            pub fn type_size(self) -> usize {
                match self { $( GgmlType::$variant => $bytes, )* }
            }
        }
    };
}

ggml_types! {
    /// 32-bit IEEE float.
    F32 = 0, "F32", 1, 4;
    /// 16-bit IEEE float.
    F16 = 1, "F16", 1, 2;
    /// 4-bit, 32 per block, one f16 scale.
    Q4_0 = 2, "Q4_0", 32, 2 + 16;
    /// 4-bit, 32 per block, f16 scale and min.
    Q4_1 = 3, "Q4_1", 32, 2 + 2 + 16;
    /// 5-bit, 32 per block, one f16 scale.
    Q5_0 = 6, "Q5_0", 32, 2 + 4 + 16;
    /// 5-bit, 32 per block, f16 scale and min.
    Q5_1 = 7, "Q5_1", 32, 2 + 2 + 4 + 16;
    /// 8-bit, 32 per block, one f16 scale.
    Q8_0 = 8, "Q8_0", 32, 2 + 32;
    /// 8-bit, 32 per block, f16 scale and sum (activations).
    Q8_1 = 9, "Q8_1", 32, 4 + 32;
    /// 2-bit K-quant.
    Q2K = 10, "Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4;
    /// 3-bit K-quant.
    Q3K = 11, "Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12;
    /// 4-bit K-quant.
    Q4K = 12, "Q4_K", QK_K, 2 + 2 + QK_K / 2 + 12;
    /// 5-bit K-quant.
    Q5K = 13, "Q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12;
    /// 6-bit K-quant.
    Q6K = 14, "Q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16;
    /// 8-bit K-quant (activations).
    Q8K = 15, "Q8_K", QK_K, 4 + QK_K + QK_K / 8;
    /// 2.06 bpw i-quant.
    Iq2Xxs = 16, "IQ2_XXS", QK_K, 2 + QK_K / 4;
    /// 2.31 bpw i-quant.
    Iq2Xs = 17, "IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32;
    /// 3.06 bpw i-quant.
    Iq3Xxs = 18, "IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8;
    /// 1.56 bpw i-quant.
    Iq1S = 19, "IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16;
    /// 4-bit non-linear, 32 per block.
    Iq4Nl = 20, "IQ4_NL", 32, 2 + 16;
    /// 3.44 bpw i-quant.
    Iq3S = 21, "IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4;
    /// 2.5 bpw i-quant.
    Iq2S = 22, "IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16;
    /// 4.25 bpw non-linear K-quant.
    Iq4Xs = 23, "IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64;
    /// 8-bit integer.
    I8 = 24, "I8", 1, 1;
    /// 16-bit integer.
    I16 = 25, "I16", 1, 2;
    /// 32-bit integer.
    I32 = 26, "I32", 1, 4;
    /// 64-bit integer.
    I64 = 27, "I64", 1, 8;
    /// 64-bit IEEE float.
    F64 = 28, "F64", 1, 8;
    /// 1.75 bpw i-quant.
    Iq1M = 29, "IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32;
    /// bfloat16.
    BF16 = 30, "BF16", 1, 2;
    /// Ternary, 1.69 bpw.
    TQ1_0 = 34, "TQ1_0", QK_K, 2 + 4 * 13;
    /// Ternary, 2.06 bpw.
    TQ2_0 = 35, "TQ2_0", QK_K, 2 + 64;
    /// OCP microscaling FP4, 32 per block.
    MXFP4 = 39, "MXFP4", 32, 1 + 16;
    /// NVIDIA FP4, 64 per block.
    NVFP4 = 40, "NVFP4", 64, 4 + 32;
    /// 1-bit, 128 per block.
    Q1_0 = 41, "Q1_0", 128, 2 + 16;
}

/// The bytes of the ASCII string `s` in lower case (`N` its length).
const fn ascii_lowercase<const N: usize>(s: &str) -> [u8; N] {
    let bytes = s.as_bytes();
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = bytes[i].to_ascii_lowercase();
        i += 1;
    }
    out
}

impl GgmlType {
    /// The GGUF id of this type.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// Whether elements are grouped in quantized blocks (anything not a plain scalar).
    pub fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Bytes taken by a row of `elements` values, or `None` when `elements` is not a whole
    /// number of blocks or the size overflows.
    pub fn row_bytes(self, elements: u64) -> Option<u64> {
        let block = self.block_size() as u64;
        if !elements.is_multiple_of(block) {
            return None;
        }
        (elements / block).checked_mul(self.type_size() as u64)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_retired_ids_are_unknown() {
        for &t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
        }
        for retired in [4, 5, 31, 32, 33, 36, 37, 38, 42, 1000] {
            assert_eq!(GgmlType::from_id(retired), None);
        }
    }

    #[test]
    fn block_bytes_match_ggml() {
        let expect = [
            (GgmlType::Q4K, 256, 144),
            (GgmlType::Q6K, 256, 210),
            (GgmlType::Q8K, 256, 292),
            (GgmlType::Q3K, 256, 110),
            (GgmlType::Q2K, 256, 84),
            (GgmlType::Q5K, 256, 176),
            (GgmlType::Iq4Xs, 256, 136),
            (GgmlType::Q8_0, 32, 34),
        ];
        for (t, block, bytes) in expect {
            assert_eq!((t.block_size(), t.type_size()), (block, bytes), "{t}");
        }
    }

    #[test]
    fn lowercase_names_are_the_names_in_lower_case() {
        for &t in GgmlType::ALL {
            assert_eq!(t.lowercase_name(), t.name().to_ascii_lowercase());
        }
        assert_eq!(GgmlType::Q4K.lowercase_name(), "q4_k");
    }

    #[test]
    fn row_bytes_rejects_partial_blocks() {
        assert_eq!(GgmlType::Q4K.row_bytes(512), Some(288));
        assert_eq!(GgmlType::Q4K.row_bytes(100), None);
        assert_eq!(GgmlType::F32.row_bytes(u64::MAX), None);
    }
}
