//! Every command-line flag, parsed once into plain structs that the commands receive.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use rinfer_formats::GgmlType;
use rinfer_model::quantize::FileType;
use rinfer_model::{DeviceRequest, KvType, SamplingParams, Speculation};

use crate::hub::reference::HubModel;
use crate::limits;

/// Everything given on the command line (`about` comes from the crate description).
#[derive(Parser)]
#[command(name = "rinfer", version, about)]
pub struct Options {
    /// What to do.
    #[command(subcommand)]
    pub command: CommandOptions,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum CommandOptions {
    /// Download the default model (Gemma 3 270M Q4_K_M) into the cache and print its path.
    Fetch,
    /// Download a GGUF model from the Hugging Face hub into the cache and print its path.
    ///
    /// An interrupted download is resumed, every file is checked against the SHA-256 the hub
    /// publishes, and the cache ($RINFER_HOME/hub) has the hub's layout. `--model
    /// org/repo[:QUANT]` anywhere reads the cached model, pulling it on first use.
    Pull(PullOptions),
    /// Show what a model file holds: header, metadata and tensors.
    Inspect(InspectOptions),
    /// Continue a prompt, streaming the text to stdout and timings to stderr.
    Run(RunOptions),
    /// Talk to the model interactively, with its chat template.
    Chat(ChatOptions),
    /// Print the token ids of a text (BOS as the model adds it).
    Tokenize(TokenizeOptions),
    /// Print the logits of every position of a prompt, evaluated in one batched pass, as JSON.
    Logits(LogitsOptions),
    /// Print the embeddings of texts (the arguments, else one per line of stdin) from an
    /// embedding model, L2-normalised, as JSON or TSV.
    Embed(EmbedOptions),
    /// Print a reranker's scores of documents (the arguments, else one per line of stdin) for
    /// a query, best first, as JSON or TSV.
    Rerank(RerankOptions),
    /// Serve the model over an OpenAI-compatible HTTP API, batching concurrent requests.
    Serve(ServeOptions),
    /// Render chat templates for a parent `rinfer` (started by it, not by users).
    #[command(name = crate::render_process::COMMAND, hide = true)]
    RenderChatTemplate,
    /// Write a GGUF model with its weights quantized, as `llama-quantize` does.
    Quantize(QuantizeOptions),
    /// Write a Hugging Face checkpoint (llama, mistral, qwen2, qwen3) as a GGUF file.
    Convert(ConvertOptions),
    /// Compute an importance matrix from a calibration text, as `llama-imatrix` does, for
    /// `quantize --imatrix` (llama.cpp's GGUF imatrix format).
    Imatrix(ImatrixOptions),
}

/// The flags of [`rinfer_model::EngineOptions`] (the model and how to run it), shared by the
/// commands that compute: run, chat and logits (`commands::session::engine_options` turns
/// them into the options).
#[derive(Args, Clone)]
pub struct EngineArgs {
    /// A GGUF model file, a Hugging Face model directory, or a hub model `org/repo[:QUANT]`
    /// (from the cache, pulled on first use); the default model (fetched on first use) when
    /// left out.
    #[arg(long, short = 'm', value_parser = limits::parse_model_path)]
    pub model: Option<PathBuf>,
    #[command(flatten)]
    pub run: RunArgs,
}

/// How to run a model: the engine's flags besides the model, shared by every command that
/// computes (serve applies them to each model it serves).
#[derive(Args, Clone)]
pub struct RunArgs {
    /// Worker threads (default: all cores; at most 4 per core).
    #[arg(long, short = 't', value_parser = limits::parse_threads)]
    pub threads: Option<usize>,
    /// Context size of each sequence in tokens (default: the model's, at most 4096).
    #[arg(long, value_parser = limits::parse_context)]
    pub ctx: Option<usize>,
    /// Where to compute: `cpu`, `cuda` (GPU 0; an error if unusable) or `auto`, the default
    /// (the GPU when one is usable, else the CPU; the reason is printed when `auto` is given
    /// explicitly or with `--verbose`, and logged by `serve`).
    #[arg(long)]
    pub device: Option<DeviceRequest>,
    /// Memory for the prefix cache, in MiB: keys and values of earlier prompts and replies kept
    /// for later requests that start with the same tokens (default: a quarter of the memory
    /// available, at most 4 GiB; 0 keeps only each slot's own last sequence).
    #[arg(long, value_parser = limits::parse_kv_cache_mib)]
    pub kv_cache_mib: Option<usize>,
    /// The type of the KV cache's rows: `f16` (the default, as in llama.cpp), `f32` (twice the
    /// memory, exactly what the projections computed) or `q8_0` (heads of a multiple of 32
    /// values); the CUDA backend keeps f32.
    #[arg(long, value_name = "TYPE")]
    pub kv_type: Option<KvType>,
}

/// The engine's flags and what to report on stderr, shared by run, chat and logits.
#[derive(Args, Clone)]
pub struct SessionArgs {
    /// Print the memory plan (weights per type, KV cache, scratch) to stderr.
    #[arg(long, short = 'v')]
    pub verbose: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Which chat template turns a conversation into a prompt.
#[derive(Args, Clone)]
pub struct ChatTemplateOptions {
    /// The chat template: a built-in format (gemma, llama3, chatml, phi3, llama2) or a Jinja
    /// file (default: the model's own template, else its family's built-in format). Given to
    /// `run`, it renders the prompt as one user turn.
    #[arg(long, value_name = "FILE|NAME")]
    pub chat_template: Option<String>,
}

/// Speculative decoding: guessing tokens ahead and verifying them in one pass.
#[derive(Args, Clone)]
pub struct SpeculationOptions {
    /// Guess tokens ahead and verify them in one pass: `ngram` guesses from earlier
    /// occurrences of the last tokens in the prompt and the text so far (fast on text that
    /// quotes or edits its input); `draft` has a smaller model of the same vocabulary guess
    /// (`--draft-model`); `off` decodes one token per pass. The text is the same either way,
    /// greedy or seeded.
    #[arg(long, value_enum, default_value_t = SpeculateMode::Off)]
    pub speculate: SpeculateMode,
    /// The most tokens guessed in one pass (fewer when recent guesses failed).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub draft_max: u16,
    /// The draft model of `--speculate draft`: a GGUF file of a smaller model that shares the
    /// model's tokenizer (the same family, or a quantized copy of the model), or a hub model
    /// `org/repo[:QUANT]` (pulled on first use).
    #[arg(long, value_name = "PATH")]
    pub draft_model: Option<PathBuf>,
}

/// Where speculative guesses come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SpeculateMode {
    /// No speculation.
    Off,
    /// Prompt lookup: n-gram matches in the prompt and the text so far.
    Ngram,
    /// A draft model's greedy continuation (`--draft-model`).
    Draft,
}

impl SpeculationOptions {
    /// The engine's speculation setting; an error when `--speculate draft` and `--draft-model`
    /// do not come together.
    pub fn speculation(&self) -> Result<Speculation> {
        let draft_max = usize::from(self.draft_max);
        Ok(match (self.speculate, &self.draft_model) {
            (SpeculateMode::Draft, None) => {
                anyhow::bail!("--speculate draft needs a draft model: add --draft-model PATH")
            }
            (SpeculateMode::Off | SpeculateMode::Ngram, Some(_)) => {
                anyhow::bail!("--draft-model is used only with --speculate draft")
            }
            (SpeculateMode::Off, None) => Speculation::Off,
            (SpeculateMode::Ngram, None) => Speculation::PromptLookup { draft_max },
            (SpeculateMode::Draft, Some(_)) => Speculation::DraftModel { draft_max },
        })
    }
}

/// How to choose tokens.
#[derive(Args, Clone)]
pub struct SamplingOptions {
    /// Softmax temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.8)]
    pub temperature: f32,
    /// Keep only the K most likely tokens (0: all).
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    /// Keep the most likely tokens up to this total probability.
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    /// Drop tokens less likely than this fraction of the most likely one.
    #[arg(long, default_value_t = 0.05)]
    pub min_p: f32,
    /// Penalise recently seen tokens (1: off).
    #[arg(long, default_value_t = 1.0)]
    pub repeat_penalty: f32,
    /// Seed of the random draw: the same seed gives the same text.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl SamplingOptions {
    /// The sampling parameters these options describe (not yet checked: see
    /// [`limits::check_sampling`]).
    pub fn params(&self) -> SamplingParams {
        SamplingParams {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            seed: self.seed,
            ..SamplingParams::default()
        }
    }
}

/// What `run` and `chat` generate with: speculation, the chat template, the engine and
/// sampling.
#[derive(Args)]
pub struct GenerationOptions {
    #[command(flatten)]
    pub speculation: SpeculationOptions,
    #[command(flatten)]
    pub template: ChatTemplateOptions,
    #[command(flatten)]
    pub session: SessionArgs,
    #[command(flatten)]
    pub sampling: SamplingOptions,
}

/// Options of `rinfer run`.
#[derive(Args)]
pub struct RunOptions {
    /// The prompt.
    #[arg(conflicts_with = "file", required_unless_present = "file")]
    pub prompt: Option<String>,
    /// Read the prompt from this file (a regular file of at most 64 MiB).
    #[arg(long, short = 'f', value_parser = limits::parse_prompt_file)]
    pub file: Option<PathBuf>,
    /// Tokens to generate.
    #[arg(short = 'n', long = "max-tokens", default_value_t = 128, value_parser = limits::parse_max_tokens)]
    pub max_tokens: usize,
    /// Print one JSON object (prompt tokens, generated tokens, text, timings) at the end.
    #[arg(long)]
    pub json: bool,
    /// Never stop at an end-of-generation token: always generate `-n` tokens (for benchmarks).
    #[arg(long)]
    pub ignore_eos: bool,
    /// Run one untimed token through the model first, so that the timings leave out
    /// first-touch costs such as page faults of the mapped weights (as llama.cpp's warmup does).
    #[arg(long)]
    pub warmup: bool,
    #[command(flatten)]
    pub generation: GenerationOptions,
}

/// Options of `rinfer chat`.
#[derive(Args)]
pub struct ChatOptions {
    /// Most tokens per answer.
    #[arg(short = 'n', long = "max-tokens", default_value_t = 512, value_parser = limits::parse_max_tokens)]
    pub max_tokens: usize,
    /// A system prompt.
    #[arg(long)]
    pub system: Option<String>,
    #[command(flatten)]
    pub generation: GenerationOptions,
}

/// Options of `rinfer tokenize`.
#[derive(Args)]
pub struct TokenizeOptions {
    /// The text.
    pub text: String,
    /// A GGUF model or vocabulary-only file, or a hub model `org/repo[:QUANT]`; the default
    /// model when left out.
    #[arg(long, short = 'm', value_parser = limits::parse_model_path)]
    pub model: Option<PathBuf>,
    /// Print `{"tokens": [...]}`.
    #[arg(long)]
    pub json: bool,
}

/// Options of `rinfer logits`.
#[derive(Args)]
pub struct LogitsOptions {
    /// The prompt, tokenized as the model does (with BOS if it adds one).
    #[arg(long, conflicts_with = "tokens", required_unless_present = "tokens")]
    pub prompt: Option<String>,
    /// Token ids, comma-separated, used as given.
    #[arg(long, value_delimiter = ',')]
    pub tokens: Option<Vec<u32>>,
    /// How many of the largest logits to list per position.
    #[arg(long, default_value_t = 10)]
    pub top_k: usize,
    #[command(flatten)]
    pub session: SessionArgs,
}

/// Options of `rinfer embed`.
#[derive(Args)]
pub struct EmbedOptions {
    /// The texts, each tokenized as the model does (BERT: `[CLS]` … `[SEP]`); without any,
    /// every non-empty line of stdin is one text.
    pub texts: Vec<String>,
    /// Print one line per text, its values separated by tabs, instead of JSON.
    #[arg(long)]
    pub tsv: bool,
    /// Keep the values unnormalised (as the model pools them).
    #[arg(long)]
    pub raw: bool,
    #[command(flatten)]
    pub session: SessionArgs,
}

/// Options of `rinfer rerank`.
#[derive(Args)]
pub struct RerankOptions {
    /// What the documents are ranked for.
    #[arg(long, short = 'q')]
    pub query: String,
    /// The documents; without any, every non-empty line of stdin is one document.
    pub documents: Vec<String>,
    /// Print only the best this many.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub top_n: Option<u64>,
    /// Print one line per document (score, index, text, tab-separated) instead of JSON.
    #[arg(long)]
    pub tsv: bool,
    #[command(flatten)]
    pub session: SessionArgs,
}

/// Options of `rinfer pull`.
#[derive(Args)]
pub struct PullOptions {
    /// The model: `org/repo` or `org/repo:QUANT` (a tag such as Q4_K_M, matched in the GGUF
    /// file names; without one Q4_K_M, else Q8_0, else the first GGUF file). Every shard of a
    /// split model is pulled. The hub is HF_ENDPOINT (default https://huggingface.co), with
    /// the token HF_TOKEN for gated and private repositories.
    #[arg(value_parser = HubModel::parse)]
    pub model: HubModel,
}

/// Options of `rinfer inspect`.
#[derive(Args)]
pub struct InspectOptions {
    /// The model file or a hub model `org/repo[:QUANT]`; the default model (fetched on first
    /// use) when left out.
    #[arg(value_parser = limits::parse_model_path)]
    pub path: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// List every tensor (always included in JSON).
    #[arg(long)]
    pub tensors: bool,
}

/// Options of `rinfer quantize`.
#[derive(Args)]
pub struct QuantizeOptions {
    /// The model to quantize: a GGUF file with F32, F16 or BF16 weights.
    #[arg(value_parser = limits::parse_model_path)]
    pub input: PathBuf,
    /// The GGUF file to write.
    pub output: PathBuf,
    /// The type, named as `llama-quantize` names it: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K_S,
    /// Q3_K_M (Q3_K), Q3_K_L, Q4_K_S, Q4_K_M (Q4_K), Q5_K_S, Q5_K_M (Q5_K), Q6_K, IQ4_NL,
    /// IQ4_XS, IQ3_M, IQ3_S, IQ3_XS, IQ3_XXS, IQ2_M, IQ2_S, IQ2_XS, IQ2_XXS, IQ1_M, IQ1_S, TQ2_0,
    /// MXFP4_MOE, F16, BF16 or F32.
    pub file_type: FileType,
    /// Every 2-D weight in the type itself, without the mix's per-tensor choices.
    #[arg(long)]
    pub pure: bool,
    /// An importance matrix (llama.cpp's GGUF imatrix format, from `llama-imatrix`) to weight
    /// each weight's rounding error by its input column's importance, as `llama-quantize
    /// --imatrix` does; the IQ1, IQ2, IQ3_XXS and IQ3_XS types need one.
    #[arg(long, value_name = "FILE")]
    pub imatrix: Option<PathBuf>,
}

/// Options of `rinfer imatrix`.
#[derive(Args)]
pub struct ImatrixOptions {
    /// The model (F32, F16 or BF16 weights give the matrix for quantizing them), or a hub
    /// model `org/repo[:QUANT]`; the default model when left out.
    #[arg(long, short = 'm', value_parser = limits::parse_model_path)]
    pub model: Option<PathBuf>,
    /// The calibration text (UTF-8), tokenized as the model does.
    #[arg(long, short = 'f', value_name = "TEXT")]
    pub file: PathBuf,
    /// The importance matrix to write.
    #[arg(long, short = 'o', default_value = "imatrix.gguf")]
    pub output: PathBuf,
    /// Tokens per chunk; each chunk runs as a sequence of its own, from BOS.
    #[arg(long = "chunk", short = 'c', default_value_t = 512, value_parser = limits::parse_context)]
    pub chunk_size: usize,
    /// The most chunks to run (default: every whole chunk of the text).
    #[arg(long, value_parser = limits::parse_context)]
    pub chunks: Option<usize>,
    /// Skip the perplexity of each chunk's second half.
    #[arg(long)]
    pub no_ppl: bool,
    /// Worker threads (default: all cores; at most 4 per core).
    #[arg(long, short = 't', value_parser = limits::parse_threads)]
    pub threads: Option<usize>,
}

/// The weight type of `rinfer convert`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutType {
    /// 32-bit floats.
    F32,
    /// 16-bit floats (llama.cpp's converter's default).
    F16,
    /// bfloat16.
    Bf16,
}

impl OutType {
    /// The tensor type of the 2-D weights.
    pub fn ggml_type(self) -> GgmlType {
        match self {
            OutType::F32 => GgmlType::F32,
            OutType::F16 => GgmlType::F16,
            OutType::Bf16 => GgmlType::BF16,
        }
    }
}

/// Options of `rinfer convert`.
#[derive(Args)]
pub struct ConvertOptions {
    /// The Hugging Face model directory (`config.json`, `tokenizer.json`, safetensors).
    pub dir: PathBuf,
    /// The GGUF file to write.
    pub output: PathBuf,
    /// The type of the 2-D weights; vectors (norms, biases) stay F32.
    #[arg(long, value_enum, default_value = "f16")]
    pub outtype: OutType,
}

/// Options of `rinfer serve`.
#[derive(Args)]
pub struct ServeOptions {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,
    /// Port to listen on (0: any free port, printed at start).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Sequences decoded together, each with its own KV cache.
    #[arg(long, default_value_t = 4, value_parser = limits::parse_parallel)]
    pub parallel: usize,
    /// Requests that may wait for a free sequence (of each model); more get 503 with
    /// Retry-After.
    #[arg(long, default_value_t = 64, value_parser = limits::parse_queue)]
    pub queue: usize,
    /// A model to serve, loaded at start: a GGUF file, a Hugging Face model directory or a hub
    /// model `org/repo[:QUANT]`, served as its file stem, or `NAME=MODEL` to name it
    /// (repeatable; the first is the model of requests that name none). Without --model and
    /// --models-dir: the default model.
    #[arg(long, short = 'm', value_name = "[NAME=]MODEL")]
    pub model: Vec<String>,
    /// A directory of models to serve besides --model, each loaded on first use: its GGUF
    /// files (a split model's shards as one), named by file stem, and its Hugging Face model
    /// directories, named by directory.
    #[arg(long, value_name = "DIR")]
    pub models_dir: Option<PathBuf>,
    /// The memory the loaded models may hold together, in MiB, as their memory plans estimate
    /// it (weights, KV caches, scratch buffers and prefix cache budget; lower --kv-cache-mib to
    /// fit more): loading one past it first unloads the least recently used models without
    /// requests in flight, or answers 503 if they all have some. Default: the memory available
    /// at start.
    #[arg(long, value_name = "MIB")]
    pub models_memory_mib: Option<u64>,
    #[command(flatten)]
    pub engine: RunArgs,
    #[command(flatten)]
    pub speculation: SpeculationOptions,
    #[command(flatten)]
    pub exposure: ExposureOptions,
    #[command(flatten)]
    pub template: ChatTemplateOptions,
}

/// How `rinfer serve` faces its clients: limits, timeouts, and who may call.
#[derive(Args)]
pub struct ExposureOptions {
    /// Connections served at once (lowered to fit the open-file limit); past it a new
    /// connection gets 503 and is closed.
    #[arg(long, default_value_t = 512)]
    pub max_connections: usize,
    /// Seconds a client has to send a request's headers (also how long an idle keep-alive
    /// connection is kept).
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub header_timeout: u64,
    /// Seconds a client has to send a request's body once its headers arrived; then 408.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub body_timeout: u64,
    /// Seconds a write to a client may wait for it to read; a client that reads nothing for
    /// that long is disconnected (and its generation cancelled).
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub write_timeout: u64,
    /// Largest request body in bytes; larger ones get 413.
    #[arg(long, default_value_t = 2 << 20, value_name = "BYTES")]
    pub max_body_bytes: usize,
    /// A browser origin allowed to call the API cross-origin, as `scheme://host[:port]`
    /// (repeatable; `*` allows every origin). Requests from other origins get 403.
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    pub cors_origins: Vec<String>,
    /// A host name clients may use in `Host` (repeatable). IP addresses and `localhost` are
    /// always served; other names only when listed, or, with none listed, on a non-loopback
    /// `--host`.
    #[arg(long = "allowed-host", value_name = "NAME")]
    pub allowed_hosts: Vec<String>,
    /// Answer clients that half-close their connection after sending a request. They cannot
    /// be told from clients that left, so a non-streamed request whose client closed then
    /// runs to its end instead of being cancelled.
    #[arg(long)]
    pub half_close: bool,
    /// An API key clients must send as `Authorization: Bearer KEY` on /v1/*, /tokenize,
    /// /detokenize and /metrics (repeatable; other processes can read a command line, so
    /// prefer --api-key-file on a shared machine).
    #[arg(long = "api-key", value_name = "KEY")]
    pub api_keys: Vec<String>,
    /// A file of API keys, one a line (blank lines and `#` comments skipped).
    #[arg(long, value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,
    /// Serve /metrics without a key even when API keys are required.
    #[arg(long)]
    pub open_metrics: bool,
    /// Let requests of different API keys reuse each other's cached prompt prefixes (by
    /// default a prefix one key's requests computed is reused only by requests with that key,
    /// so that no key learns anything about another's prompts).
    #[arg(long)]
    pub share_prefix_cache: bool,
}
