//! Computing an importance matrix from calibration text, as `llama-imatrix` (llama.cpp 0.3.36)
//! does, in its GGUF format ([`crate::quantize::ImportanceMatrix`] reads it back).
//!
//! The tokens (BOS first where the vocabulary adds one) are cut into `chunk_size`-token
//! chunks; a text of fewer than two chunks is refused, and a last partial chunk is dropped.
//! Each chunk runs as a sequence of its own from position 0 with its first token replaced by
//! BOS (where the vocabulary adds one). The passes are llama.cpp's micro-batches: it runs
//! `2048 / chunk_size` chunks a batch, each in a KV stream of its own, and each micro-batch
//! takes `512 / chunks` tokens from every chunk of the batch (a chunk alone: 512 tokens).
//!
//! Every product of a layer weight (`blk.*`: the embedding and the LM head are left out) adds,
//! per input column, the square of each input row to the weight's sums, in f32 as llama.cpp
//! adds them, and the rows to its count. A product of fewer than 16 rows is skipped, as
//! llama.cpp skips them, except routed experts', which count per expert the rows routed to it.
//! The chunk count written is the largest count over the chunk size.
//!
//! The perplexity, as llama-imatrix reports it, scores the second half of every chunk (each
//! position from `chunk_size / 2` predicting the next token), in f64; it is reported cumulated
//! after each chunk.
//!
//! The sums match llama.cpp's to float rounding: its activations differ from rinfer's in the
//! last bits, and it adds a batch's rows in its own order. Latent attention's `attn_v_b`
//! product sees each stream's rows apart, so its rule of 16 rows counts the rows per chunk.

mod collector;
mod write;

use std::any::Any;
use std::collections::HashMap;

pub use collector::Entry;

use crate::error::ModelError;
use crate::forward::{Logits, Model, SeqBatch};
use crate::kv_cache::KvCache;
use crate::scratch::Scratch;
use collector::Collector;
use rinfer_kernels::ops::KvType;

/// Rows per pass: llama.cpp's default micro-batch.
const PASS_ROWS: usize = 512;
/// Tokens per batch: llama.cpp's default batch, which llama-imatrix fills with whole chunks.
const BATCH_TOKENS: usize = 2048;

/// Why an importance matrix could not be computed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CalibrationError {
    /// The chunk size is 0.
    #[error("the chunk size must be at least one token")]
    ZeroChunkSize,
    /// The text is shorter than two chunks.
    #[error(
        "the calibration text tokenizes to {tokens} tokens, but chunks of {chunk_size} tokens \
         need at least {needed} (two chunks, as llama-imatrix asks): give a longer text or a \
         smaller chunk size"
    )]
    TooFewTokens {
        /// Tokens of the text.
        tokens: usize,
        /// Tokens per chunk.
        chunk_size: usize,
        /// Tokens needed.
        needed: usize,
    },
    /// A sum overflowed.
    #[error(
        "the squared inputs of {tensor} are no longer finite (the model's activations \
         overflow); llama-imatrix stops on this too"
    )]
    NonFinite {
        /// The weight.
        tensor: String,
    },
    /// The forward pass failed.
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// What to compute.
#[derive(Clone, Debug)]
pub struct CalibrationOptions {
    /// Tokens per chunk (llama-imatrix's `-c`, 512 by default).
    pub chunk_size: usize,
    /// The most chunks to run (all whole chunks when `None`).
    pub max_chunks: Option<usize>,
    /// Whether to compute the perplexity of each chunk's second half.
    pub perplexity: bool,
    /// The name of the calibration text, recorded in `imatrix.datasets`.
    pub dataset: String,
}

/// One chunk done.
#[derive(Clone, Copy, Debug)]
pub struct ChunkDone {
    /// Chunks done so far.
    pub done: usize,
    /// Chunks to run.
    pub chunks: usize,
    /// The perplexity over the chunks done, where asked for.
    pub perplexity: Option<f64>,
}

/// An importance matrix's sums and counts, per layer weight.
#[derive(Clone, Debug)]
pub struct ImatrixSums {
    entries: HashMap<String, Entry>,
    datasets: Vec<String>,
    chunk_size: u32,
    perplexity: Option<Perplexity>,
}

/// The perplexity estimate: the value and its standard error.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Perplexity {
    /// `exp(mean negative log-likelihood)`.
    pub value: f64,
    /// Its standard error.
    pub error: f64,
}

impl ImatrixSums {
    /// The entry of each weight, by tensor name.
    pub fn entries(&self) -> &HashMap<String, Entry> {
        &self.entries
    }

    /// The chunks the matrix was computed with: the largest count over the chunk size.
    pub fn chunk_count(&self) -> u32 {
        let most = self.entries.values().flat_map(|e| e.counts.iter()).max();
        most.map_or(0, |&c| (c / u64::from(self.chunk_size.max(1))) as u32)
    }

    /// The weights some of whose experts saw no token (their importances will be 1).
    pub fn partial(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .entries
            .iter()
            .filter(|(_, e)| e.counts.contains(&0))
            .map(|(n, _)| n.as_str())
            .collect();
        names.sort_unstable();
        names
    }

    /// The final perplexity estimate, where asked for.
    pub fn perplexity(&self) -> Option<Perplexity> {
        self.perplexity
    }
}

/// The negative log-likelihoods of scored tokens.
#[derive(Clone, Copy, Default)]
struct Nll {
    sum: f64,
    squares: f64,
    count: usize,
}

impl Nll {
    fn add(&mut self, other: Nll) {
        self.sum += other.sum;
        self.squares += other.squares;
        self.count += other.count;
    }

    /// `-log p(token)` from a row of logits, as llama-imatrix's `log_softmax` computes it.
    fn score(&mut self, logits: &[f32], token: u32) {
        let max = logits.iter().copied().fold(logits[0], f32::max);
        let sum: f64 = logits.iter().map(|&l| f64::from((l - max).exp())).sum();
        let v = -(f64::from(logits[token as usize] - max) - sum.ln());
        self.sum += v;
        self.squares += v * v;
        self.count += 1;
    }

    fn perplexity(&self) -> f64 {
        (self.sum / self.count as f64).exp()
    }

    fn estimate(&self) -> Perplexity {
        let n = self.count as f64;
        let (mean, squares) = (self.sum / n, self.squares / n);
        let value = mean.exp();
        let variance = squares - mean * mean;
        let error = if variance > 0.0 && self.count > 1 {
            (variance / (n - 1.0)).sqrt() * value
        } else {
            0.0
        };
        Perplexity { value, error }
    }
}

/// The collector `calibrate` set on `scratch`.
fn collector(scratch: &mut Scratch) -> &mut Collector {
    let observer: &mut dyn Any = scratch
        .observer_mut()
        .expect("the collector observes until the end");
    observer
        .downcast_mut::<Collector>()
        .expect("the observer is the collector")
}

/// Computes the importance matrix of `model` over `tokens` (the text as the model tokenizes
/// it, BOS first where it adds one; `bos`: the BOS that starts every chunk, where the
/// vocabulary adds one), reporting each chunk to `progress`.
///
/// # Errors
/// [`CalibrationError`] for a zero chunk size, a text shorter than two chunks, a forward pass
/// that fails (a token outside the vocabulary, chunks beyond the model's positions) or sums
/// that overflow.
pub fn calibrate(
    model: &Model,
    tokens: &[u32],
    bos: Option<u32>,
    options: &CalibrationOptions,
    mut progress: impl FnMut(&ChunkDone),
) -> Result<ImatrixSums, CalibrationError> {
    let c = options.chunk_size;
    if c == 0 {
        return Err(CalibrationError::ZeroChunkSize);
    }
    let needed = c.saturating_mul(2);
    if tokens.len() < needed {
        return Err(CalibrationError::TooFewTokens {
            tokens: tokens.len(),
            chunk_size: c,
            needed,
        });
    }
    let whole = tokens.len() / c;
    let chunks = options.max_chunks.map_or(whole, |n| n.min(whole));
    // llama-imatrix runs `2048 / c` chunks per batch, each in a KV stream of its own; a
    // micro-batch then takes as many tokens from every chunk (512 over the chunks), or, for one
    // chunk a batch, 512 of its tokens.
    let group = (BATCH_TOKENS / c).clamp(1, PASS_ROWS);
    let max_rows = if group > 1 {
        PASS_ROWS
    } else {
        c.min(PASS_ROWS)
    };
    let config = &model.config;
    let logit_rows = if options.perplexity { max_rows } else { group };
    let mut scratch = Scratch::with_logit_rows(config, max_rows, logit_rows);
    scratch.set_observer(Box::new(Collector::new(model.transformer())));
    let mut caches = (0..group)
        .map(|_| KvCache::try_with_type(config, KvType::F16, c, max_rows))
        .collect::<Result<Vec<_>, _>>()?;
    let mut inputs: Vec<Vec<u32>> = vec![Vec::with_capacity(c); group];
    let wanted = match options.perplexity {
        true => Logits::All,
        false => Logits::Last,
    };
    let vocab = model.transformer().vocab_size;
    let mut nll = Nll::default();
    for first in (0..chunks).step_by(group) {
        let n_seq = group.min(chunks - first);
        let chunk = |j: usize| &tokens[(first + j) * c..(first + j + 1) * c];
        for (j, input) in inputs[..n_seq].iter_mut().enumerate() {
            input.clear();
            input.extend_from_slice(chunk(j));
            if let Some(bos) = bos {
                input[0] = bos;
            }
        }
        let mut scored = vec![Nll::default(); n_seq];
        for cache in &mut caches[..n_seq] {
            cache.clear();
        }
        let per_chunk = match group {
            1 => c.min(PASS_ROWS),
            _ => (PASS_ROWS / n_seq).max(1),
        };
        for start in (0..c).step_by(per_chunk) {
            let len = per_chunk.min(c - start);
            collector(&mut scratch).pass_rows_per_chunk(len);
            let mut seqs: Vec<SeqBatch<'_>> = caches[..n_seq]
                .iter_mut()
                .zip(&inputs)
                .map(|(cache, input)| SeqBatch {
                    tokens: &input[start..start + len],
                    cache,
                    logits: wanted,
                })
                .collect();
            let logits = model.forward_batch(&mut seqs, &mut scratch)?;
            if !options.perplexity {
                continue;
            }
            for (j, scored) in scored.iter_mut().enumerate() {
                for i in 0..len {
                    let pos = start + i;
                    if pos >= c / 2 && pos + 1 < c {
                        let row = &logits[(j * len + i) * vocab..][..vocab];
                        scored.score(row, chunk(j)[pos + 1]);
                    }
                }
            }
        }
        for (j, scored) in scored.into_iter().enumerate() {
            nll.add(scored);
            progress(&ChunkDone {
                done: first + j + 1,
                chunks,
                perplexity: options.perplexity.then(|| nll.perplexity()),
            });
        }
    }
    let observer: Box<dyn Any> = scratch
        .take_observer()
        .expect("the collector observes until the end");
    let collector = observer
        .downcast::<Collector>()
        .expect("the observer is the collector");
    let entries = collector.into_entries();
    if let Some((name, _)) = entries
        .iter()
        .find(|(_, e)| e.sums.iter().any(|v| !v.is_finite()))
    {
        return Err(CalibrationError::NonFinite {
            tensor: name.clone(),
        });
    }
    Ok(ImatrixSums {
        entries,
        datasets: vec![options.dataset.clone()],
        chunk_size: u32::try_from(c).unwrap_or(u32::MAX),
        perplexity: options.perplexity.then(|| nll.estimate()),
    })
}
