//! The file types `rinfer quantize` writes, named and numbered as llama.cpp names them
//! (`llama-quantize`'s type names, `general.file_type` ids).

use std::fmt;
use std::str::FromStr;

use rinfer_formats::GgmlType;

/// A target of `rinfer quantize`: one of llama.cpp's file types (`LLAMA_FTYPE_*`), the default
/// tensor type plus, for the mixes, per-tensor rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    /// Every weight F32.
    F32,
    /// Every weight F16.
    F16,
    /// Every weight BF16.
    Bf16,
    /// Q4_0.
    Q4_0,
    /// Q4_1.
    Q4_1,
    /// Q5_0.
    Q5_0,
    /// Q5_1.
    Q5_1,
    /// Q8_0.
    Q8_0,
    /// Q2_K with llama.cpp's Q2_K mix.
    Q2K,
    /// Q3_K, small mix.
    Q3KS,
    /// Q3_K, medium mix (`Q3_K`).
    Q3KM,
    /// Q3_K, large mix.
    Q3KL,
    /// Q4_K, small mix.
    Q4KS,
    /// Q4_K, medium mix (`Q4_K`).
    Q4KM,
    /// Q5_K, small mix.
    Q5KS,
    /// Q5_K, medium mix (`Q5_K`).
    Q5KM,
    /// Q6_K.
    Q6K,
    /// IQ4_NL.
    Iq4Nl,
    /// IQ4_XS.
    Iq4Xs,
    /// Expert tensors MXFP4, every other weight Q8_0.
    Mxfp4Moe,
    /// IQ1_S with llama.cpp's IQ1 mix (needs an importance matrix).
    Iq1S,
    /// IQ1_M with llama.cpp's IQ1 mix (needs an importance matrix).
    Iq1M,
    /// IQ2_XXS with llama.cpp's IQ2 mix (needs an importance matrix).
    Iq2Xxs,
    /// IQ2_XS with llama.cpp's IQ2 mix (needs an importance matrix).
    Iq2Xs,
    /// IQ2_XS weights with IQ3_S in the places the IQ2 mix spends more bits (needs an
    /// importance matrix).
    Iq2S,
    /// IQ2_S weights with IQ3_S in the places the IQ2 mix spends more bits (needs an
    /// importance matrix).
    Iq2M,
    /// IQ3_XXS (needs an importance matrix).
    Iq3Xxs,
    /// IQ3_S with IQ3_XXS for the middle layers' attention and FFN up and gate.
    Iq3Xs,
    /// IQ3_S.
    Iq3S,
    /// IQ3_S with Q4_K for attention V and output and the first FFN down layers.
    Iq3M,
    /// TQ2_0, for ternary models.
    Tq2_0,
}

impl FileType {
    /// Every file type with its `llama-quantize` name(s); the first name is the canonical one.
    const NAMES: &'static [(FileType, &'static [&'static str])] = &[
        (FileType::Q4_0, &["Q4_0"]),
        (FileType::Q4_1, &["Q4_1"]),
        (FileType::Q5_0, &["Q5_0"]),
        (FileType::Q5_1, &["Q5_1"]),
        (FileType::Q8_0, &["Q8_0"]),
        (FileType::Q2K, &["Q2_K"]),
        (FileType::Q3KS, &["Q3_K_S"]),
        (FileType::Q3KM, &["Q3_K_M", "Q3_K"]),
        (FileType::Q3KL, &["Q3_K_L"]),
        (FileType::Q4KS, &["Q4_K_S"]),
        (FileType::Q4KM, &["Q4_K_M", "Q4_K"]),
        (FileType::Q5KS, &["Q5_K_S"]),
        (FileType::Q5KM, &["Q5_K_M", "Q5_K"]),
        (FileType::Q6K, &["Q6_K"]),
        (FileType::Iq4Nl, &["IQ4_NL"]),
        (FileType::Iq4Xs, &["IQ4_XS"]),
        (FileType::Mxfp4Moe, &["MXFP4_MOE"]),
        (FileType::Iq1S, &["IQ1_S"]),
        (FileType::Iq1M, &["IQ1_M"]),
        (FileType::Iq2Xxs, &["IQ2_XXS"]),
        (FileType::Iq2Xs, &["IQ2_XS"]),
        (FileType::Iq2S, &["IQ2_S"]),
        (FileType::Iq2M, &["IQ2_M"]),
        (FileType::Iq3Xxs, &["IQ3_XXS"]),
        (FileType::Iq3Xs, &["IQ3_XS"]),
        (FileType::Iq3S, &["IQ3_S"]),
        (FileType::Iq3M, &["IQ3_M"]),
        (FileType::Tq2_0, &["TQ2_0"]),
        (FileType::F16, &["F16"]),
        (FileType::Bf16, &["BF16"]),
        (FileType::F32, &["F32"]),
    ];

    /// The canonical `llama-quantize` names of every file type, for help and error texts.
    pub fn names() -> impl Iterator<Item = &'static str> {
        Self::NAMES.iter().map(|(_, names)| names[0])
    }

    /// The canonical name (`"Q4_K_M"`).
    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(t, _)| *t == self)
            .map_or("?", |(_, names)| names[0])
    }

    /// llama.cpp's `LLAMA_FTYPE_*` number, written as `general.file_type`.
    pub fn id(self) -> u32 {
        match self {
            FileType::F32 => 0,
            FileType::F16 => 1,
            FileType::Q4_0 => 2,
            FileType::Q4_1 => 3,
            FileType::Q8_0 => 7,
            FileType::Q5_0 => 8,
            FileType::Q5_1 => 9,
            FileType::Q2K => 10,
            FileType::Q3KS => 11,
            FileType::Q3KM => 12,
            FileType::Q3KL => 13,
            FileType::Q4KS => 14,
            FileType::Q4KM => 15,
            FileType::Q5KS => 16,
            FileType::Q5KM => 17,
            FileType::Q6K => 18,
            FileType::Iq2Xxs => 19,
            FileType::Iq2Xs => 20,
            FileType::Iq3Xs => 22,
            FileType::Iq3Xxs => 23,
            FileType::Iq1S => 24,
            FileType::Iq4Nl => 25,
            FileType::Iq3S => 26,
            FileType::Iq3M => 27,
            FileType::Iq2S => 28,
            FileType::Iq2M => 29,
            FileType::Iq4Xs => 30,
            FileType::Iq1M => 31,
            FileType::Bf16 => 32,
            FileType::Tq2_0 => 37,
            FileType::Mxfp4Moe => 38,
        }
    }

    /// The tensor type of every weight the mix's rules leave alone.
    pub fn default_type(self) -> GgmlType {
        match self {
            FileType::F32 => GgmlType::F32,
            FileType::F16 => GgmlType::F16,
            FileType::Bf16 => GgmlType::BF16,
            FileType::Q4_0 => GgmlType::Q4_0,
            FileType::Q4_1 => GgmlType::Q4_1,
            FileType::Q5_0 => GgmlType::Q5_0,
            FileType::Q5_1 => GgmlType::Q5_1,
            FileType::Q8_0 => GgmlType::Q8_0,
            FileType::Q2K => GgmlType::Q2K,
            FileType::Q3KS | FileType::Q3KM | FileType::Q3KL => GgmlType::Q3K,
            FileType::Q4KS | FileType::Q4KM => GgmlType::Q4K,
            FileType::Q5KS | FileType::Q5KM => GgmlType::Q5K,
            FileType::Q6K => GgmlType::Q6K,
            FileType::Iq4Nl => GgmlType::Iq4Nl,
            FileType::Iq4Xs => GgmlType::Iq4Xs,
            FileType::Mxfp4Moe => GgmlType::MXFP4,
            FileType::Iq1S => GgmlType::Iq1S,
            FileType::Iq1M => GgmlType::Iq1M,
            FileType::Iq2Xxs => GgmlType::Iq2Xxs,
            FileType::Iq2Xs | FileType::Iq2S => GgmlType::Iq2Xs,
            FileType::Iq2M => GgmlType::Iq2S,
            FileType::Iq3Xxs => GgmlType::Iq3Xxs,
            FileType::Iq3Xs | FileType::Iq3S | FileType::Iq3M => GgmlType::Iq3S,
            FileType::Tq2_0 => GgmlType::TQ2_0,
        }
    }
}

impl fmt::Display for FileType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A type name `rinfer quantize` does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown quantization type {name:?}; rinfer can write: {}", FileType::names().collect::<Vec<_>>().join(", "))]
pub struct UnknownFileType {
    /// The name given.
    pub name: String,
}

impl FromStr for FileType {
    type Err = UnknownFileType;

    /// Parses a `llama-quantize` type name, in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let upper = s.to_ascii_uppercase();
        Self::NAMES
            .iter()
            .find(|(_, names)| names.contains(&upper.as_str()))
            .map(|(t, _)| *t)
            .ok_or_else(|| UnknownFileType { name: s.into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_quantize_names_parse_in_any_case_with_the_k_aliases() {
        assert_eq!("q4_k_m".parse::<FileType>(), Ok(FileType::Q4KM));
        assert_eq!("Q4_K".parse::<FileType>(), Ok(FileType::Q4KM));
        assert_eq!("Q3_K".parse::<FileType>(), Ok(FileType::Q3KM));
        assert_eq!("mxfp4_moe".parse::<FileType>(), Ok(FileType::Mxfp4Moe));
        assert_eq!("iq2_xxs".parse::<FileType>(), Ok(FileType::Iq2Xxs));
        assert_eq!("iq3_xxs".parse::<FileType>(), Ok(FileType::Iq3Xxs));
        let err = "IQ5_XXS".parse::<FileType>().unwrap_err();
        assert!(err.to_string().contains("Q4_K_M"), "{err}");
        for name in FileType::names() {
            assert_eq!(name.parse::<FileType>().map(FileType::name), Ok(name));
        }
    }
}
