//! NVIDIA GPU backend for rinfer through `cudarc`: the whole decode step on the GPU, weights
//! uploaded once in their GGUF block formats (no dequantized copies), a device-resident KV
//! cache, buffers allocated once, kernels compiled by NVRTC for the device at load (only the
//! modules of the model's weight formats, [`kernels::modules`], kept in an on-disk cache,
//! [`cubin_cache`]), and the
//! decode step replayed as a CUDA graph; a batched decode runs the last token (and any
//! guesses) of each of many sequences in one pass, each row over its own sequence's KV cache
//! and computed as that token decoded alone ([`GpuModel::forward_rows`]); prompt tokens are
//! computed the same in a chunk of any length ([`GpuModel::prefill`]).
//!
//! The GPU runtime is behind the `cuda` cargo feature. Without it this crate still provides
//! the model view the backend takes ([`HostModel`]), the upload
//! plan ([`UploadPlan`]: what goes to the GPU and how much memory it needs), launch shapes and
//! the graph policy, and a [`GpuModel`] whose `load` reports that CUDA was not built in. With
//! the feature, `libcuda` and `libnvrtc` are loaded at run time; a machine without them gets
//! [`CudaError::NoDriver`] / [`CudaError::NoNvrtc`], never a panic.
//!
//! This crate must never be needed to build or test the workspace on a machine without CUDA,
//! and sits below `rinfer-model` and beside the CPU kernels: it knows nothing of
//! architectures, only the [`Transformer`] tree of `rinfer-transformer` that the CPU forward
//! pass walks too. It takes that tree with host views of the weights ([`HostModel`]), maps it
//! once to device addresses ([`program::place_weights`]), and the step builder
//! ([`program::StepBuilder`]) walks its stages to emit its launches.
//!
//! In the tests the step's launch list ([`program`]) is executed on the host under a CUDA
//! emulation and matches the CPU forward pass, and the kernels compile with NVRTC; the runtime
//! has run on an H200 (`docs/BENCHMARKS.md`). `crates/cuda/README.md` lists what has not run
//! on hardware yet.
//!
//! ```
//! use rinfer_cuda::{GpuModel, LoadOptions};
//!
//! fn start(model: &rinfer_cuda::HostModel<'_>) {
//!     let options = LoadOptions {
//!         ordinal: 0,
//!         context: 4096,
//!         max_batch: 512,
//!         all_logits: false,
//!         sequences: 16,
//!         nvrtc: Default::default(),
//!         kv: Default::default(),
//!         guesses: 0,
//!         cached_blocks: 0,
//!     };
//!     match GpuModel::load(model, &options) {
//!         Ok(gpu) => println!("running on {}", gpu.info()),
//!         Err(why) => println!("no usable GPU: {why}"),
//!     }
//! }
//! ```

pub mod cubin_cache;
mod device;
mod error;
pub mod graph_policy;
mod host;
pub mod kernels;
pub mod kv_pool;
pub mod launch;
pub mod nvrtc_search;
mod plan;
pub mod program;

#[cfg(feature = "cuda")]
mod runtime;
#[cfg(not(feature = "cuda"))]
mod unavailable;

pub use device::GpuInfo;
pub use error::CudaError;
pub use host::{HostMatrix, HostModel, HostStacked, HostView};
pub use plan::{BufferSizes, LoadOptions, PlannedMatrix, UploadPlan, layer_slots};
pub use rinfer_transformer::Transformer;
#[cfg(feature = "cuda")]
pub use runtime::{GpuKvCache, GpuModel, Nvrtc, compile_kernels, probe};
#[cfg(not(feature = "cuda"))]
pub use unavailable::{GpuKvCache, GpuModel, compile_kernels, probe};

/// Which positions of a batch get logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Only the last token.
    Last,
    /// Every token (the batch must fit in the buffers).
    All,
}

/// Whether this build has the GPU runtime.
pub const BUILT_WITH_CUDA: bool = cfg!(feature = "cuda");
