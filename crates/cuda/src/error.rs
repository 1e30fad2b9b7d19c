//! Errors of the CUDA backend, each saying what to do about it.

/// Why the GPU path could not be set up or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CudaError {
    /// This build has no GPU runtime.
    #[error(
        "this rinfer was built without CUDA support; rebuild with `--features cuda` (rinfer-cli) \
         or use --device cpu"
    )]
    NotBuilt,
    /// `libcuda` could not be loaded: no NVIDIA driver on this machine.
    #[error(
        "no CUDA driver found: none of {searched} could be loaded; install the NVIDIA driver \
         (and check that the GPU is visible), or use --device cpu"
    )]
    NoDriver {
        /// The library names tried.
        searched: String,
    },
    /// The driver loaded but has no device with this ordinal.
    #[error("no CUDA GPU with ordinal {ordinal}: the driver reports {count} device(s)")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// Devices the driver sees.
        count: usize,
    },
    /// NVRTC, which compiles the kernels at load time, could not be loaded.
    #[error(
        "NVRTC not found: looked for {searched}; install the CUDA runtime compiler matching \
         the driver (a CUDA toolkit, or `pip install nvidia-cuda-nvrtc` for CUDA 13, \
         `nvidia-cuda-nvrtc-cu12` for CUDA 12), or add its lib folder to LD_LIBRARY_PATH"
    )]
    NoNvrtc {
        /// The files and folders tried.
        searched: String,
    },
    /// A CUDA driver call failed.
    #[error("CUDA {op} failed: {message}")]
    Driver {
        /// What was being done.
        op: &'static str,
        /// The driver's message.
        message: String,
    },
    /// NVRTC rejected the kernel sources (a bug in rinfer, or an unsupported GPU architecture).
    #[error("compiling the CUDA kernels for {arch} failed: {log}")]
    Compile {
        /// The target architecture.
        arch: String,
        /// NVRTC's log.
        log: String,
    },
    /// A launch asked for a kernel of a weight format whose module was not compiled for this
    /// model (a bug in rinfer: the formats compiled are those of the upload plan).
    #[error(
        "the CUDA kernel {kernel} is not loaded: only the kernels of the model's weight types \
         ({loaded}) were compiled"
    )]
    KernelNotLoaded {
        /// The kernel asked for.
        kernel: String,
        /// The modules loaded.
        loaded: String,
    },
    /// A weight uses a block format the GPU kernels do not implement.
    #[error(
        "tensor {tensor:?} has type {ty}, which the CUDA backend cannot compute with; \
         use --device cpu"
    )]
    UnsupportedType {
        /// The tensor.
        tensor: String,
        /// The type's name.
        ty: &'static str,
    },
    /// A weight or configuration the kernels cannot handle.
    #[error("the CUDA backend cannot run this model: {0}")]
    Unsupported(String),
    /// The model, KV cache and buffers do not fit in the GPU's free memory.
    #[error(
        "the model needs {needed_mib} MiB of GPU memory (weights {weights_mib} MiB, KV cache \
         {kv_mib} MiB, buffers {buffers_mib} MiB) but only {free_mib} MiB are free; use a smaller \
         --ctx or --device cpu"
    )]
    OutOfMemory {
        /// Everything together.
        needed_mib: u64,
        /// Weights.
        weights_mib: u64,
        /// KV cache.
        kv_mib: u64,
        /// Activation buffers.
        buffers_mib: u64,
        /// Free device memory.
        free_mib: u64,
    },
    /// A token id outside the vocabulary.
    #[error("token id {id} is outside the vocabulary of {vocab} tokens")]
    TokenOutOfRange {
        /// The id.
        id: u32,
        /// The vocabulary size.
        vocab: usize,
    },
    /// The tokens do not fit in the KV cache.
    #[error("{cached} cached plus {requested} new tokens exceed the context of {context} tokens")]
    ContextOverflow {
        /// Positions already in the cache.
        cached: usize,
        /// New tokens.
        requested: usize,
        /// The cache's size.
        context: usize,
    },
    /// Logits of every position were asked for a batch larger than the buffers.
    #[error(
        "logits for all {requested} positions need buffers of that many rows (these hold {max}; \
         load with all_logits and a max_batch that large)"
    )]
    BatchTooLarge {
        /// Tokens given.
        requested: usize,
        /// The largest batch.
        max: usize,
    },
    /// A batched decode step was given more rows than its buffers hold.
    #[error(
        "a decode step of {requested} rows exceeds the {max} the GPU buffers were planned for \
         (LoadOptions::sequences times 1 + LoadOptions::guesses, at most max_batch): split the \
         step"
    )]
    TooManyRows {
        /// Rows given.
        requested: usize,
        /// The most one step decodes.
        max: usize,
    },
    /// The same KV cache was given for two sequences of one batched decode step.
    #[error(
        "the same KV cache appears twice in one decode step; a sequence gives all its tokens at \
         once"
    )]
    CacheTwice,
    /// The pool of KV blocks has none free for a sequence that grows or copies a shared block.
    #[error(
        "all {capacity} KV-cache blocks of the GPU pool are in use: run fewer sequences at once \
         or a shorter context"
    )]
    KvBlocksExhausted {
        /// The blocks the pool holds.
        capacity: usize,
    },
    /// A KV cache made for another model or device was passed.
    #[error("the KV cache was made for a different model (its shape does not match)")]
    ForeignCache,
}
