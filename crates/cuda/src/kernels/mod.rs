//! The CUDA C sources of every kernel, compiled by NVRTC when a model is loaded, and the table
//! from tensor types to the kernels that read them.
//!
//! NVRTC at load time rather than PTX built ahead: building needs no CUDA toolkit (the workspace
//! must build on machines without one), and the code is compiled to SASS for exactly the GPU
//! in use (`sm_XY`), which also avoids the driver JIT refusing PTX newer than itself.
//!
//! `dequant.cuh` and `dequant_iq.cuh` are plain C++ apart from three macros, so the tests
//! compile them with the host C++ compiler and check every block format against
//! `rinfer-kernels`' scalar reference. The i-quants' code tables are not in these files: they
//! are generated from `rinfer-kernels`' when the program is assembled ([`codebooks`]).
//!
//! A model load does not compile the whole program: [`modules`] splits it into a common
//! module and one module per weight format, and only the formats the model's weights use are
//! compiled (the runtime also caches the compiled modules on disk).

use rinfer_formats::GgmlType;

pub mod codebooks;
pub mod modules;

pub use modules::KernelModule;

/// Helpers every file uses: fixed-width types, half and bfloat16 conversion.
pub const COMMON: &str = include_str!("common.cuh");
/// Per-format dequantization of 32 consecutive elements of a row.
pub const DEQUANT: &str = include_str!("dequant.cuh");
/// The same for the i-quants and the ternary types, through their int8 codes (read by the
/// integer matvec too); after the generated [`codebooks::codebooks_source`].
pub const DEQUANT_IQ: &str = include_str!("dequant_iq.cuh");
/// Warp and block reductions (device only).
pub const REDUCE: &str = include_str!("reduce.cuh");
/// Quantized matrix × vector (decode) and matrix × matrix (prefill), embedding row lookup.
pub const MATMUL: &str = include_str!("matmul.cu");
/// Activation rows quantized to q8_1 and the integer (dp4a) decode matvec over them.
pub const MATVEC_Q8_1: &str = include_str!("matvec_q8_1.cu");
/// RMSNorm, LayerNorm, per-head RMSNorm.
pub const NORM: &str = include_str!("norm.cu");
/// Rotary embeddings, both pair layouts.
pub const ROPE: &str = include_str!("rope.cu");
/// KV-cache writes, split-K decode attention (one sequence, or a batch of sequences each over
/// its own cache) and causal prefill attention, all through block tables (paged caches), and
/// the copy of a shared block.
pub const ATTENTION: &str = include_str!("attention.cu");
/// Prefill attention over an f16 cache on tensor cores (flash attention, f16 tiles).
pub const ATTENTION_MMA: &str = include_str!("attention_mma.cu");
/// Gated activations, residual adds, soft-capping, argmax.
pub const ELEMENTWISE: &str = include_str!("elementwise.cu");
/// Mixture-of-experts routing and the weighted sum of the experts' outputs.
pub const MOE: &str = include_str!("moe.cu");
/// The subset of CUDA's warp matrix API (`nvcuda::wmma`) the tensor-core kernels use, in PTX
/// (device only: the host emulation defines the same names).
pub const WMMA: &str = include_str!("wmma.cuh");
/// Prefill matmul of the quantized formats on tensor cores (bf16 tiles, f32 accumulators).
pub const MMA: &str = include_str!("mma.cu");

/// The NVRTC options of every compile but the target architecture. `--fmad=false` keeps
/// each multiply and add rounded as written (explicit `fmaf` calls stay fused): the host
/// emulation, which the kernels' exactness checks run under, contracts nothing, so the GPU then
/// computes the same bits, and kernels written alike (a decode row alone and in a batch, a
/// cached prefix and a cold one) agree bit for bit whatever the compiler would have fused.
pub const NVRTC_OPTIONS: [&str; 3] = [
    "--std=c++17",
    "--device-as-default-execution-space",
    "--fmad=false",
];

/// The kernel files, in the order they follow the headers.
const KERNEL_FILES: [&str; 10] = [
    MATMUL,
    MATVEC_Q8_1,
    NORM,
    ROPE,
    ATTENTION,
    ELEMENTWISE,
    MOE,
    WMMA,
    MMA,
    ATTENTION_MMA,
];

/// The headers every program and module starts with, the generated code tables among them.
fn headers() -> Vec<String> {
    let codebooks = codebooks::codebooks_source();
    [COMMON, DEQUANT, &codebooks, DEQUANT_IQ, REDUCE]
        .map(String::from)
        .to_vec()
}

/// The whole program as one source: the headers first, then every kernel file. Model loads
/// compile [`KernelModule`]s instead.
pub fn program_source() -> String {
    let mut parts = headers();
    parts.extend(KERNEL_FILES.map(String::from));
    parts.join("\n")
}

/// The weight kernels' instantiations at the end of `matmul.cu`, one per [`GpuType`]
/// (`DEFINE_WEIGHT_KERNELS(q4_k, fmt_q4_k)`, which expects a `fmt_q4_k` reader in
/// `dequant.cuh`): generated from [`GpuType::ALL`] and kept in the file so that the host
/// emulation, which compiles the sources as they are, sees them too.
pub fn weight_kernel_instantiations() -> String {
    GpuType::ALL
        .iter()
        .map(|ty| format!("DEFINE_WEIGHT_KERNELS({0}, fmt_{0})\n", ty.suffix()))
        .collect()
}

/// The tensor-core kernels' instantiations at the end of `mma.cu`, one per format of
/// [`GpuType::ALL`] that [`GpuType::has_mma`] (`DEFINE_MMA_KERNELS(q4_k, fmt_q4_k)`).
pub fn mma_kernel_instantiations() -> String {
    GpuType::ALL
        .iter()
        .filter(|ty| ty.has_mma())
        .map(|ty| format!("DEFINE_MMA_KERNELS({0}, fmt_{0})\n", ty.suffix()))
        .collect()
}

/// A weight format the GPU kernels read: one of [`GpuType::ALL`], the one list of the types
/// this backend supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GpuType(GgmlType);

impl GpuType {
    /// Every format, in the order the kernels are instantiated. Adding one needs its reader
    /// `fmt_<name>` in `dequant.cuh` (or `dequant_iq.cuh`); this crate's tests then regenerate the instantiations in
    /// `matmul.cu` (and the host test drivers list the kernels they call by name).
    pub const ALL: [GpuType; 25] = [
        GpuType(GgmlType::F32),
        GpuType(GgmlType::F16),
        GpuType(GgmlType::BF16),
        GpuType(GgmlType::Q4_0),
        GpuType(GgmlType::Q4_1),
        GpuType(GgmlType::Q5_0),
        GpuType(GgmlType::Q5_1),
        GpuType(GgmlType::Q8_0),
        GpuType(GgmlType::MXFP4),
        GpuType(GgmlType::Q2K),
        GpuType(GgmlType::Q3K),
        GpuType(GgmlType::Q4K),
        GpuType(GgmlType::Q5K),
        GpuType(GgmlType::Q6K),
        GpuType(GgmlType::Iq1S),
        GpuType(GgmlType::Iq1M),
        GpuType(GgmlType::Iq2Xxs),
        GpuType(GgmlType::Iq2Xs),
        GpuType(GgmlType::Iq2S),
        GpuType(GgmlType::Iq3Xxs),
        GpuType(GgmlType::Iq3S),
        GpuType(GgmlType::Iq4Nl),
        GpuType(GgmlType::Iq4Xs),
        GpuType(GgmlType::TQ1_0),
        GpuType(GgmlType::TQ2_0),
    ];

    /// The float formats, the first of [`Self::ALL`]: they keep the f32 kernels.
    const FLOATS: usize = 3;

    /// The formats with an integer matvec over q8_1 activations (`matvec_q8_1.cu`): every
    /// block-quantized one, [`Self::ALL`] after its float formats.
    pub const Q8_1: [GpuType; GpuType::ALL.len() - GpuType::FLOATS] = {
        let mut quantized = [Self::ALL[Self::FLOATS]; GpuType::ALL.len() - GpuType::FLOATS];
        let mut i = 0;
        while i < quantized.len() {
            quantized[i] = Self::ALL[Self::FLOATS + i];
            i += 1;
        }
        quantized
    };

    /// The GPU format of a tensor type, if there are kernels for it.
    pub fn of(ty: GgmlType) -> Option<Self> {
        Self::ALL.into_iter().find(|gpu| gpu.0 == ty)
    }

    /// The tensor type.
    pub fn ggml(self) -> GgmlType {
        self.0
    }

    /// The suffix of this format's kernels (`matvec_q4_k`) and of its reader (`fmt_q4_k`): the
    /// type's name in lower case.
    pub fn suffix(self) -> &'static str {
        self.0.lowercase_name()
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

    /// Whether the format has the integer matvec over q8_1 activations.
    pub fn has_q8_1_matvec(self) -> bool {
        Self::Q8_1.contains(&self)
    }

    /// The byte alignment the format's code reader (`codes` in `dequant.cuh`, used by the
    /// q8_1 matvec and the tensor-core matmul) needs of a matrix's address: its 128-bit
    /// loads of Q4_K and Q5_K blocks, 16-bit loads elsewhere.
    pub fn codes_alignment(self) -> u64 {
        match self.0 {
            GgmlType::Q4K | GgmlType::Q5K => 16,
            _ => 2,
        }
    }

    /// The integer decode kernel over one q8_1 activation row.
    pub fn matvec_q8_1_kernel(self) -> String {
        format!("matvec_q8_1_{}", self.suffix())
    }

    /// The integer kernel over 2 to [`crate::launch::MMVQ_TOKENS`] q8_1 activation rows.
    pub fn matvec_batch_q8_1_kernel(self) -> String {
        format!("matvec_batch_q8_1_{}", self.suffix())
    }

    /// Whether the format has tensor-core kernels ([`Self::mma_kernel`]): every quantized
    /// one. F32, F16 and BF16 weights keep the f32 kernels, whose products match the CPU's
    /// f32 arithmetic; bf16 tiles would not.
    pub fn has_mma(self) -> bool {
        !matches!(self.0, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
    }

    /// The batched kernel on tensor cores: weights and activations rounded to bf16, tiles of
    /// [`crate::launch::MMA_ROWS`] rows × [`crate::launch::MMA_TOKENS`] tokens.
    pub fn mma_kernel(self) -> String {
        format!("mma_{}", self.suffix())
    }

    /// The batched mixture-of-experts kernel on tensor cores: up to
    /// [`crate::launch::MMA_TOKENS`] slots of one expert per block.
    pub fn mma_id_kernel(self) -> String {
        format!("mma_id_{}", self.suffix())
    }
}

/// The element type of a KV cache on the GPU: f32, f16 rounded to nearest even when stored
/// (the CPU's default and llama.cpp's), or q8_0 blocks (as the CPU's and llama.cpp's
/// `--cache-type-k q8_0`). The kernels that write or read the cache exist for each
/// (`DEFINE_KV_KERNELS` in `attention.cu`) and compute in f32, but for prefill attention over
/// an f16 cache, which multiplies f16 tiles on tensor cores (`attention_mma.cu`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KvElement {
    /// 4 bytes a value.
    F32,
    /// 2 bytes a value.
    #[default]
    F16,
    /// Blocks of 32 values, an f16 scale and 32 int8 codes: 34 bytes. Rows of a multiple of
    /// 32 values only.
    Q8_0,
}

/// A kernel over the KV cache, instantiated per [`KvElement`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KvKernel {
    /// Tokens' keys and values into one sequence's cache.
    Store,
    /// Each row's keys and values into its own sequence's cache.
    StoreRows,
    /// Split-K decode attention of one query.
    Decode,
    /// Split-K decode attention of a batch of rows, each over its own cache.
    DecodeRows,
}

impl KvKernel {
    /// Every kernel over the cache but prefill attention ([`KvElement::prefill_kernel`]).
    pub const ALL: [KvKernel; 4] = [
        KvKernel::Store,
        KvKernel::StoreRows,
        KvKernel::Decode,
        KvKernel::DecodeRows,
    ];
}

/// The head widths the tensor-core prefill over an f16 cache is instantiated for
/// (`attention_prefill_mma_f16_<width>` in `attention_mma.cu`); a head takes the narrowest
/// that holds it.
pub const FLASH_HEAD_WIDTHS: [usize; 3] = [64, 128, 256];

impl KvElement {
    /// Every element type.
    pub const ALL: [KvElement; 3] = [KvElement::F32, KvElement::F16, KvElement::Q8_0];

    /// Values of one q8_0 block.
    pub const Q8_0_BLOCK_VALUES: usize = 32;

    /// Bytes of a row of `values` values (for q8_0, a multiple of
    /// [`Q8_0_BLOCK_VALUES`](Self::Q8_0_BLOCK_VALUES)).
    pub fn row_bytes(self, values: usize) -> usize {
        match self {
            KvElement::F32 => 4 * values,
            KvElement::F16 => 2 * values,
            KvElement::Q8_0 => values / Self::Q8_0_BLOCK_VALUES * 34,
        }
    }

    /// The number of values each row's length must be a multiple of.
    pub fn block_values(self) -> usize {
        match self {
            KvElement::F32 | KvElement::F16 => 1,
            KvElement::Q8_0 => Self::Q8_0_BLOCK_VALUES,
        }
    }

    /// Its name (`f32`, `f16`, `q8_0`), the suffix of its kernels.
    pub fn name(self) -> &'static str {
        match self {
            KvElement::F32 => "f32",
            KvElement::F16 => "f16",
            KvElement::Q8_0 => "q8_0",
        }
    }

    /// The name of `kernel` over a cache of this element type.
    pub fn kernel(self, kernel: KvKernel) -> &'static str {
        use KvElement::{F16, F32, Q8_0};
        match (kernel, self) {
            (KvKernel::Store, F32) => "kv_store_f32",
            (KvKernel::Store, F16) => "kv_store_f16",
            (KvKernel::Store, Q8_0) => "kv_store_q8_0",
            (KvKernel::StoreRows, F32) => "kv_store_rows_f32",
            (KvKernel::StoreRows, F16) => "kv_store_rows_f16",
            (KvKernel::StoreRows, Q8_0) => "kv_store_rows_q8_0",
            (KvKernel::Decode, F32) => "attention_decode_f32",
            (KvKernel::Decode, F16) => "attention_decode_f16",
            (KvKernel::Decode, Q8_0) => "attention_decode_q8_0",
            (KvKernel::DecodeRows, F32) => "attention_decode_rows_f32",
            (KvKernel::DecodeRows, F16) => "attention_decode_rows_f16",
            (KvKernel::DecodeRows, Q8_0) => "attention_decode_rows_q8_0",
        }
    }

    /// The causal attention of a prefill chunk over a cache of this element type with heads
    /// `head_dim` wide (at most `MAX_HEAD_DIM`): f32 tiles for an f32 or a q8_0 cache, the
    /// tensor-core flash attention for an f16 one ([`crate::launch::attention_prefill`] gives
    /// each its launch shape).
    pub fn prefill_kernel(self, head_dim: usize) -> &'static str {
        match self {
            KvElement::F32 => "attention_prefill_f32",
            KvElement::Q8_0 => "attention_prefill_q8_0",
            KvElement::F16 if head_dim <= FLASH_HEAD_WIDTHS[0] => "attention_prefill_mma_f16_64",
            KvElement::F16 if head_dim <= FLASH_HEAD_WIDTHS[1] => "attention_prefill_mma_f16_128",
            KvElement::F16 => "attention_prefill_mma_f16_256",
        }
    }
}

/// The names of every kernel over the KV cache, for every element type and head width.
pub fn kv_kernel_names() -> impl Iterator<Item = &'static str> {
    let tiles = [KvElement::F32, KvElement::Q8_0].map(|e| e.prefill_kernel(0));
    let prefill = tiles.into_iter().chain(
        FLASH_HEAD_WIDTHS
            .into_iter()
            .map(|w| KvElement::F16.prefill_kernel(w)),
    );
    KvElement::ALL
        .into_iter()
        .flat_map(|e| KvKernel::ALL.into_iter().map(move |k| e.kernel(k)))
        .chain(prefill)
}

/// The kernels that do not depend on a weight format nor on the KV cache's element type.
pub const FIXED_KERNELS: &[&str] = &[
    "rms_norm",
    "add_rms_norm",
    "layer_norm",
    "head_rms_norm",
    "rope",
    "attention_decode_combine",
    "kv_copy_block",
    "gated_activation",
    "gated_activation_q8_1",
    "add_inplace",
    "add2_inplace",
    "softcap",
    "argmax",
    "moe_route",
    "moe_group",
    "moe_weighted_sum",
    "quantize_q8_1",
];

/// Every kernel name the runtime loads from the compiled module.
pub fn all_kernel_names() -> Vec<String> {
    let mut names: Vec<String> = FIXED_KERNELS.iter().map(|s| s.to_string()).collect();
    names.extend(kv_kernel_names().map(String::from));
    for ty in GpuType::ALL {
        names.push(ty.matvec_kernel());
        names.push(ty.matmul_kernel());
        names.push(ty.matvec_id_kernel());
        names.push(ty.matmul_id_kernel());
        names.push(ty.get_rows_kernel());
        if ty.has_mma() {
            names.push(ty.mma_kernel());
            names.push(ty.mma_id_kernel());
        }
    }
    for ty in GpuType::Q8_1 {
        names.push(ty.matvec_q8_1_kernel());
        names.push(ty.matvec_batch_q8_1_kernel());
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines between the `BEGIN GENERATED` and `END GENERATED` markers of `matmul.cu`.
    fn generated_block(source: &str) -> Option<(usize, usize)> {
        let begin = source.find("// BEGIN GENERATED")?;
        let start = begin + source[begin..].find("Do not edit.\n")? + "Do not edit.\n".len();
        let end = source.find("// END GENERATED")?;
        Some((start, end))
    }

    /// Rewrites the generated block of `file` (whose text is `source`) to `want` if it differs,
    /// and fails once.
    fn regenerate(file: &str, source: &str, want: &str) {
        let (start, end) =
            generated_block(source).unwrap_or_else(|| panic!("generated block markers in {file}"));
        if source[start..end] != *want {
            let path = format!("{}/src/kernels/{file}", env!("CARGO_MANIFEST_DIR"));
            let updated = format!("{}{want}{}", &source[..start], &source[end..]);
            std::fs::write(&path, updated).unwrap_or_else(|e| panic!("rewrite {path}: {e}"));
            panic!("{file}'s kernel instantiations were stale and have been regenerated");
        }
    }

    /// The integer matvec's list is the quantized formats: the float ones are not in it.
    #[test]
    fn the_q8_1_formats_are_the_quantized_ones() {
        for ty in GpuType::ALL {
            assert_eq!(GpuType::Q8_1.contains(&ty), ty.has_mma(), "{ty:?}");
        }
    }

    /// `matmul.cu` instantiates the weight kernels of exactly the types of [`GpuType::ALL`];
    /// when the list changed, the test rewrites the file's generated block and fails once.
    #[test]
    fn weight_kernel_instantiations_follow_the_type_list() {
        regenerate("matmul.cu", MATMUL, &weight_kernel_instantiations());
    }

    /// `mma.cu` instantiates the tensor-core kernels of exactly the types that have them.
    #[test]
    fn mma_kernel_instantiations_follow_the_type_list() {
        regenerate("mma.cu", MMA, &mma_kernel_instantiations());
    }
}
