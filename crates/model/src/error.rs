//! Errors of loading and running models.

use rinfer_formats::GgufError;

/// Why a model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The file itself is unreadable or malformed.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// `general.architecture` names an architecture rinfer does not implement.
    #[error("unknown architecture {name:?}; rinfer supports: {supported}")]
    UnknownArchitecture {
        /// The name in the file.
        name: String,
        /// The names rinfer knows.
        supported: String,
    },
    /// `general.architecture` names an architecture rinfer recognises but does not run yet.
    #[error("architecture {name:?} is not supported yet: {reason}")]
    UnsupportedArchitecture {
        /// The name in the file.
        name: String,
        /// What it needs that rinfer lacks, and what runs instead.
        reason: &'static str,
    },
    /// A hyperparameter is out of range or inconsistent with another.
    #[error("invalid model configuration: {0}")]
    InvalidConfig(String),
    /// A tensor the architecture requires is absent.
    #[error("required tensor {name:?} is missing")]
    MissingTensor {
        /// The tensor.
        name: String,
    },
    /// A tensor the architecture does not use is present: the file is not what its metadata says.
    #[error("unexpected tensor {name:?} for architecture {arch}")]
    UnexpectedTensor {
        /// The tensor.
        name: String,
        /// The architecture.
        arch: String,
    },
    /// A tensor has the wrong shape.
    #[error("tensor {name:?} has shape {found:?}, expected {expected:?}")]
    TensorShape {
        /// The tensor.
        name: String,
        /// The shape the configuration implies (ggml order).
        expected: Vec<u64>,
        /// The shape in the file.
        found: Vec<u64>,
    },
    /// A tensor type without a CPU kernel.
    #[error("tensor {name:?} has type {ty}, which rinfer cannot compute with yet")]
    UnsupportedTensorType {
        /// The tensor.
        name: String,
        /// The type's name.
        ty: &'static str,
    },
    /// The prompt plus the requested tokens do not fit in the context.
    #[error(
        "prompt of {prompt} tokens plus {requested} new tokens exceeds the context of {context} tokens"
    )]
    ContextOverflow {
        /// Prompt tokens.
        prompt: usize,
        /// Tokens asked for.
        requested: usize,
        /// The context size.
        context: usize,
    },
    /// More rows in one forward pass than the scratch buffers were sized for.
    #[error(
        "a pass of {rows} rows (tokens, or rows of logits) does not fit scratch buffers sized for {max_batch}; run smaller batches or size the scratch larger"
    )]
    BatchTooLarge {
        /// Rows asked for.
        rows: usize,
        /// Rows the scratch holds.
        max_batch: usize,
    },
    /// The tokenizer could not be built from the file.
    #[error(transparent)]
    Tokenizer(#[from] crate::tokenizer::TokenizerError),
    /// A kernel refused its operands (a weight whose layout the loader did not catch).
    #[error(transparent)]
    Kernel(#[from] rinfer_kernels::KernelError),
    /// The CUDA backend failed (see `rinfer-cuda`).
    #[error(transparent)]
    Cuda(#[from] rinfer_cuda::CudaError),
    /// More positions than a model with learned positions has rows in its position table.
    #[error(
        "{needed} positions exceed the {limit} this model learned (rows of position_embd.weight); use a context of at most {limit} tokens"
    )]
    PositionsExceeded {
        /// Positions asked for.
        needed: usize,
        /// Rows of the position table.
        limit: usize,
    },
    /// Buffers whose size overflows the address space.
    #[error("{what} is too large to address")]
    SizeOverflow {
        /// The buffers and the sizes asked for.
        what: String,
    },
    /// Buffers larger than the memory this machine has available.
    #[error("{what} needs {needed_mib} MiB, but only {available_mib} MiB of memory is available")]
    NotEnoughMemory {
        /// The buffers and the sizes asked for.
        what: String,
        /// MiB they need.
        needed_mib: u64,
        /// MiB available (`MemAvailable` of /proc/meminfo).
        available_mib: u64,
    },
    /// Every KV block the engine planned for is in use (a bug in the memory plan: each
    /// sequence's worst case is counted when the engine starts).
    #[error(
        "all {capacity} KV blocks are in use; start with a smaller --parallel or --context, \
         or a smaller --kv-cache-mib"
    )]
    KvBlocksExhausted {
        /// The blocks the pool may hold.
        capacity: usize,
    },
    /// A token id outside the vocabulary.
    #[error("token id {id} is outside the vocabulary of {vocab} tokens")]
    TokenOutOfRange {
        /// The id.
        id: u32,
        /// The vocabulary size.
        vocab: usize,
    },
    /// The forward pass panicked (a bug); only the sequence that caused it was ended.
    #[error("the forward pass panicked")]
    ForwardPanicked,
    /// Every sequence slot of the engine is taken.
    #[error("all {0} sequences of the engine are busy; wait for one to finish")]
    EngineFull(usize),
    /// A request the engine cannot run.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The draft model given for speculative decoding cannot guess for this model, or the
    /// settings and the draft model disagree.
    #[error("draft model: {0}")]
    DraftModel(String),
    /// The request's constraint (a JSON schema, a grammar) could not be followed: its engine
    /// hit a limit of its own while generating.
    #[error("{0}")]
    Constraint(String),
}
