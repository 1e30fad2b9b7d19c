//! Continuous batching: one thread owns the model, the scratch buffers and a pool of KV slots,
//! and runs one batched forward pass per step over every running sequence.
//!
//! Each step feeds every decoding sequence its last token and, within the rows left, a chunk of
//! the oldest unfinished prompts (small while others decode, so their streams keep flowing;
//! as large as the batch when nothing decodes). New requests are admitted between steps while
//! slots are free; a finished or abandoned sequence gives its slot back at the end of the step.

pub mod job;
mod logprobs;
mod sequence;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use rinfer_model::{KvCache, LoadedModel, Logits, Scratch, SeqBatch};

use crate::metrics::Metrics;
use job::Job;
use sequence::{Sequence, Slot, StepReport};

/// Sizes of the engine, fixed at start.
#[derive(Clone, Copy, Debug)]
pub struct EngineSettings {
    /// Sequences decoded together (KV slots).
    pub parallel: usize,
    /// Positions of each slot.
    pub context: usize,
    /// Most token rows in one forward pass.
    pub max_batch: usize,
    /// Most prompt tokens in one step while other sequences decode.
    pub prefill_chunk: usize,
}

/// How long an idle engine waits for a request before it looks at the stop flag again.
const IDLE_POLL: Duration = Duration::from_millis(50);

/// Runs the scheduler on the calling thread until `stop` is set (or every sender is gone) and
/// no sequence is left running.
pub fn run(
    loaded: &LoadedModel,
    settings: EngineSettings,
    jobs: &Receiver<Job>,
    metrics: &Metrics,
    stop: &AtomicBool,
) {
    let config = &loaded.model.config;
    let mut free: Vec<Slot> = (0..settings.parallel)
        .map(|_| Slot {
            cache: KvCache::new(config, settings.context, settings.max_batch),
            logits: vec![0.0; config.vocab_size],
        })
        .collect();
    let mut scratch = Scratch::with_logit_rows(config, settings.max_batch, settings.parallel);
    let mut running: Vec<Sequence<'_>> = Vec::with_capacity(settings.parallel);
    metrics.kv_capacity.store(
        (settings.parallel * settings.context) as i64,
        Ordering::Relaxed,
    );
    tracing::info!(
        parallel = settings.parallel,
        context = settings.context,
        max_batch = settings.max_batch,
        "engine ready"
    );
    loop {
        // Admit new requests while slots are free; wait only when nothing runs.
        while !free.is_empty() {
            let job = if running.is_empty() {
                match jobs.recv_timeout(IDLE_POLL) {
                    Ok(job) => job,
                    Err(RecvTimeoutError::Timeout) if !stop.load(Ordering::Relaxed) => continue,
                    Err(_) => return,
                }
            } else {
                match jobs.try_recv() {
                    Ok(job) => job,
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            };
            metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
            if job.events.is_closed() {
                metrics.cancelled.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            metrics
                .prompt_tokens
                .fetch_add(job.prompt.len() as u64, Ordering::Relaxed);
            let slot = free.pop().expect("the loop runs only while a slot is free");
            running.push(Sequence::new(
                job,
                slot,
                &loaded.tokenizer,
                config.vocab_size,
            ));
        }
        release(&mut running, &mut free, metrics);
        if running.is_empty() {
            continue;
        }
        step(loaded, settings, &mut running, &mut scratch, metrics);
        release(&mut running, &mut free, metrics);
        metrics
            .running
            .store(running.len() as i64, Ordering::Relaxed);
        let used: usize = running.iter().map(Sequence::cached).sum();
        metrics.kv_used.store(used as i64, Ordering::Relaxed);
    }
}

/// Takes back the slots of finished and abandoned sequences.
fn release(running: &mut Vec<Sequence<'_>>, free: &mut Vec<Slot>, metrics: &Metrics) {
    for seq in running.extract_if(.., |s| s.finished() || s.cancelled()) {
        if !seq.finished() {
            metrics.cancelled.fetch_add(1, Ordering::Relaxed);
            tracing::debug!("client went away; generation cancelled");
        }
        free.push(seq.into_slot());
    }
    metrics
        .running
        .store(running.len() as i64, Ordering::Relaxed);
}

/// One forward pass over every decoding sequence plus a chunk of waiting prompts, then one
/// sampled token for each sequence whose prompt is complete.
fn step(
    loaded: &LoadedModel,
    settings: EngineSettings,
    running: &mut [Sequence<'_>],
    scratch: &mut Scratch,
    metrics: &Metrics,
) {
    let decoding = running.iter().filter(|s| s.prompt_left() == 0).count();
    let chunk = if decoding > 0 {
        settings.prefill_chunk
    } else {
        settings.max_batch
    };
    let mut budget = chunk.min(settings.max_batch - decoding);
    // Rows fed per sequence, in `running` order (0: not in this pass).
    let mut fed = vec![0usize; running.len()];
    let mut batch = Vec::with_capacity(running.len());
    for (seq, fed) in running.iter_mut().zip(fed.iter_mut()) {
        let prefill = seq.prompt_left() > 0;
        if prefill && budget == 0 {
            continue;
        }
        let (tokens, cache) = seq.next_tokens(budget);
        if prefill {
            budget -= tokens.len();
        }
        *fed = tokens.len();
        batch.push(SeqBatch {
            tokens,
            cache,
            logits: Logits::Last,
        });
    }
    let model = &loaded.model;
    let started = Instant::now();
    // The batch borrows the running sequences; it is consumed here so they are free again.
    let result = std::panic::catch_unwind(AssertUnwindSafe(move || {
        let scratch = scratch;
        model.forward_batch(&mut batch, scratch)
    }));
    let logits = match result {
        Ok(Ok(logits)) => logits,
        Ok(Err(error)) => return fail_batch(running, &fed, &error.to_string()),
        Err(_) => return fail_batch(running, &fed, "the forward pass panicked"),
    };

    let vocab = model.config.vocab_size;
    let mut to_sample: Vec<(&mut Sequence<'_>, &[f32])> = Vec::with_capacity(running.len());
    let mut row = 0;
    for (seq, &n) in running.iter_mut().zip(&fed) {
        if n == 0 {
            continue;
        }
        let logits_row = &logits[row * vocab..(row + 1) * vocab];
        row += 1;
        if seq.advance(n) {
            to_sample.push((seq, logits_row));
        }
    }
    let forwarded = Instant::now();
    let reports: Vec<StepReport> = to_sample
        .par_iter_mut()
        .map(|(seq, row)| seq.sample(row))
        .collect();
    tracing::debug!(
        rows = fed.iter().sum::<usize>(),
        sampled = reports.len(),
        forward_ms = (forwarded - started).as_secs_f64() * 1e3,
        sample_ms = forwarded.elapsed().as_secs_f64() * 1e3,
        "step"
    );
    metrics
        .generated_tokens
        .fetch_add(reports.len() as u64, Ordering::Relaxed);
    for report in reports {
        if let Some(s) = report.first_token_s {
            metrics.time_to_first_token.observe(s);
        }
        if let Some(s) = report.inter_token_s {
            metrics.inter_token_latency.observe(s);
        }
    }
}

/// Ends every sequence of a failed pass with an error (their caches were left unchanged).
fn fail_batch(running: &mut [Sequence<'_>], fed: &[usize], message: &str) {
    tracing::error!(error = message, "forward pass failed");
    for (seq, &n) in running.iter_mut().zip(fed) {
        if n > 0 {
            seq.fail(message);
        }
    }
}

/// Starts the engine thread: it builds its compute pool (joining it as a worker), loads the
/// model, reports it through `loaded_tx`, then schedules until stopped.
pub fn spawn(
    config: &crate::ServeConfig,
    jobs: Receiver<Job>,
    metrics: Arc<Metrics>,
    stop: Arc<AtomicBool>,
    loaded_tx: tokio::sync::oneshot::Sender<Result<Arc<Ready>, crate::ServeError>>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let config = config.clone();
    std::thread::Builder::new()
        .name("rinfer-engine".into())
        .spawn(move || {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(config.threads.unwrap_or(0))
                .use_current_thread()
                .build();
            // The engine thread is worker 0 of its own pool: the forward passes it starts run
            // their parallel loops there, beside the other workers, with no hand-off.
            let _pool = match pool {
                Ok(pool) => pool,
                Err(e) => {
                    let _ = loaded_tx.send(Err(crate::ServeError::Config(format!(
                        "cannot start the compute pool: {e}"
                    ))));
                    return;
                }
            };
            let ready = match Ready::load(&config) {
                Ok(ready) => Arc::new(ready),
                Err(e) => {
                    let _ = loaded_tx.send(Err(e));
                    return;
                }
            };
            if loaded_tx.send(Ok(Arc::clone(&ready))).is_err() {
                return;
            }
            run(&ready.loaded, ready.settings, &jobs, &metrics, &stop);
        })
}

/// A loaded model and the engine's sizes.
pub struct Ready {
    /// The model, tokenizer and template.
    pub loaded: LoadedModel,
    /// The engine's sizes.
    pub settings: EngineSettings,
}

/// The largest context used when the user gives none.
const DEFAULT_CONTEXT: usize = 4096;
/// Most token rows in one forward pass.
const MAX_BATCH: usize = 512;
/// Most prompt tokens per step while other sequences decode.
const PREFILL_CHUNK: usize = 32;

impl Ready {
    fn load(config: &crate::ServeConfig) -> Result<Self, crate::ServeError> {
        let loaded =
            LoadedModel::open(&config.model_path).map_err(|source| crate::ServeError::Load {
                path: config.model_path.display().to_string(),
                source,
            })?;
        let trained = loaded.model.config.context_length;
        let context = config
            .context
            .unwrap_or(trained.min(DEFAULT_CONTEXT))
            .max(1);
        let max_batch = MAX_BATCH.min(context).max(config.parallel);
        Ok(Self {
            loaded,
            settings: EngineSettings {
                parallel: config.parallel,
                context,
                max_batch,
                prefill_chunk: PREFILL_CHUNK,
            },
        })
    }
}
