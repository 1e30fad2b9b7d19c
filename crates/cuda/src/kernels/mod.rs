//! The CUDA C sources of every kernel, compiled by NVRTC when a model is loaded, and the table
//! from tensor types to the kernels that read them.
//!
//! NVRTC at load time rather than PTX built ahead: building needs no CUDA toolkit (the workspace
//! must build on machines without one), and the code is compiled to SASS for exactly the GPU
//! in use (`sm_XY`), which also avoids the driver JIT refusing PTX newer than itself.
//!
//! `dequant.cuh` is plain C++ apart from three macros, so the tests compile it with the host
//! C++ compiler and check every block format against `rinfer-kernels`' scalar reference.

use rinfer_formats::GgmlType;

/// Helpers every file uses: fixed-width types, half and bfloat16 conversion.
pub const COMMON: &str = include_str!("common.cuh");
/// Per-format dequantization of 32 consecutive elements of a row.
pub const DEQUANT: &str = include_str!("dequant.cuh");
/// Warp and block reductions (device only).
pub const REDUCE: &str = include_str!("reduce.cuh");
/// Quantized matrix × vector (decode) and matrix × matrix (prefill), embedding row lookup.
pub const MATMUL: &str = include_str!("matmul.cu");
/// RMSNorm, LayerNorm, per-head RMSNorm.
pub const NORM: &str = include_str!("norm.cu");
/// Rotary embeddings, both pair layouts.
pub const ROPE: &str = include_str!("rope.cu");
/// KV-cache writes, split-K decode attention and causal prefill attention.
pub const ATTENTION: &str = include_str!("attention.cu");
/// Gated activations, residual adds, soft-capping, argmax.
pub const ELEMENTWISE: &str = include_str!("elementwise.cu");
/// Mixture-of-experts routing and the weighted sum of the experts' outputs.
pub const MOE: &str = include_str!("moe.cu");

/// The whole program handed to NVRTC: the headers first, then every kernel file.
pub fn program_source() -> String {
    [
        COMMON,
        DEQUANT,
        REDUCE,
        MATMUL,
        NORM,
        ROPE,
        ATTENTION,
        ELEMENTWISE,
        MOE,
    ]
    .join("\n")
}

/// A weight format the GPU kernels read, with the suffix of its kernels' names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GpuType {
    /// `f32`.
    F32,
    /// IEEE half.
    F16,
    /// bfloat16.
    Bf16,
    /// ggml Q4_0.
    Q4_0,
    /// ggml Q4_1.
    Q4_1,
    /// ggml Q5_0.
    Q5_0,
    /// ggml Q5_1.
    Q5_1,
    /// ggml Q8_0.
    Q8_0,
    /// OCP MXFP4 (gpt-oss experts).
    Mxfp4,
    /// ggml Q2_K.
    Q2K,
    /// ggml Q3_K.
    Q3K,
    /// ggml Q4_K.
    Q4K,
    /// ggml Q5_K.
    Q5K,
    /// ggml Q6_K.
    Q6K,
}

impl GpuType {
    /// Every format, in the order the kernels are instantiated.
    pub const ALL: [GpuType; 14] = [
        GpuType::F32,
        GpuType::F16,
        GpuType::Bf16,
        GpuType::Q4_0,
        GpuType::Q4_1,
        GpuType::Q5_0,
        GpuType::Q5_1,
        GpuType::Q8_0,
        GpuType::Mxfp4,
        GpuType::Q2K,
        GpuType::Q3K,
        GpuType::Q4K,
        GpuType::Q5K,
        GpuType::Q6K,
    ];

    /// The GPU format of a tensor type, if there are kernels for it.
    pub fn of(ty: GgmlType) -> Option<Self> {
        Some(match ty {
            GgmlType::F32 => Self::F32,
            GgmlType::F16 => Self::F16,
            GgmlType::BF16 => Self::Bf16,
            GgmlType::Q4_0 => Self::Q4_0,
            GgmlType::Q4_1 => Self::Q4_1,
            GgmlType::Q5_0 => Self::Q5_0,
            GgmlType::Q5_1 => Self::Q5_1,
            GgmlType::Q8_0 => Self::Q8_0,
            GgmlType::MXFP4 => Self::Mxfp4,
            GgmlType::Q2K => Self::Q2K,
            GgmlType::Q3K => Self::Q3K,
            GgmlType::Q4K => Self::Q4K,
            GgmlType::Q5K => Self::Q5K,
            GgmlType::Q6K => Self::Q6K,
            _ => return None,
        })
    }

    /// The tensor type.
    pub fn ggml(self) -> GgmlType {
        match self {
            Self::F32 => GgmlType::F32,
            Self::F16 => GgmlType::F16,
            Self::Bf16 => GgmlType::BF16,
            Self::Q4_0 => GgmlType::Q4_0,
            Self::Q4_1 => GgmlType::Q4_1,
            Self::Q5_0 => GgmlType::Q5_0,
            Self::Q5_1 => GgmlType::Q5_1,
            Self::Q8_0 => GgmlType::Q8_0,
            Self::Mxfp4 => GgmlType::MXFP4,
            Self::Q2K => GgmlType::Q2K,
            Self::Q3K => GgmlType::Q3K,
            Self::Q4K => GgmlType::Q4K,
            Self::Q5K => GgmlType::Q5K,
            Self::Q6K => GgmlType::Q6K,
        }
    }

    /// The suffix of this format's kernels (`matvec_q4_k`) and its `TYPE_*` code in the sources.
    pub fn suffix(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
            Self::Q4_0 => "q4_0",
            Self::Q4_1 => "q4_1",
            Self::Q5_0 => "q5_0",
            Self::Q5_1 => "q5_1",
            Self::Q8_0 => "q8_0",
            Self::Mxfp4 => "mxfp4",
            Self::Q2K => "q2_k",
            Self::Q3K => "q3_k",
            Self::Q4K => "q4_k",
            Self::Q5K => "q5_k",
            Self::Q6K => "q6_k",
        }
    }

    /// The decode kernel: one row per warp, one token.
    pub fn matvec_kernel(self) -> String {
        format!("matvec_{}", self.suffix())
    }

    /// The batched kernel: one row per warp, up to [`crate::launch::MATMUL_TOKENS`] tokens.
    pub fn matmul_kernel(self) -> String {
        format!("matmul_{}", self.suffix())
    }

    /// The mixture-of-experts kernel: one token row per routed slot, the expert read from
    /// device memory.
    pub fn matvec_id_kernel(self) -> String {
        format!("matvec_id_{}", self.suffix())
    }

    /// The batched mixture-of-experts kernel: up to [`crate::launch::MATMUL_TOKENS`] slots of
    /// one expert per warp.
    pub fn matmul_id_kernel(self) -> String {
        format!("matmul_id_{}", self.suffix())
    }

    /// The embedding lookup kernel.
    pub fn get_rows_kernel(self) -> String {
        format!("get_rows_{}", self.suffix())
    }
}

/// The kernels that do not depend on a weight format.
pub const FIXED_KERNELS: &[&str] = &[
    "rms_norm",
    "layer_norm",
    "head_rms_norm",
    "rope",
    "kv_store",
    "attention_decode",
    "attention_decode_combine",
    "attention_prefill",
    "gated_activation",
    "add_inplace",
    "add2_inplace",
    "softcap",
    "argmax",
    "moe_route",
    "moe_group",
    "moe_weighted_sum",
];

/// Every kernel name the runtime loads from the compiled module.
pub fn all_kernel_names() -> Vec<String> {
    let mut names: Vec<String> = FIXED_KERNELS.iter().map(|s| s.to_string()).collect();
    for ty in GpuType::ALL {
        names.push(ty.matvec_kernel());
        names.push(ty.matmul_kernel());
        names.push(ty.matvec_id_kernel());
        names.push(ty.matmul_id_kernel());
        names.push(ty.get_rows_kernel());
    }
    names
}
