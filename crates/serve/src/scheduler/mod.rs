//! Admission, queueing and I/O around the library's [`Engine`]: one thread owns the engine,
//! admits queued requests between steps while it has room, relays each step's events to the
//! requests' channels, and cancels the sequences whose clients went away.
//!
//! Batching, prefill chunking, sampling, stop strings and detokenizing are the engine's.

pub mod job;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use rinfer_model::{
    DeviceReport, Engine, EngineSettings, Event as EngineEvent, LoadedModel, SeqId,
};
use tokio::sync::mpsc::UnboundedSender;

use crate::metrics::Metrics;
use job::{Event, Job};

/// How long an idle engine waits for a request before it looks at the stop flag again.
const IDLE_POLL: Duration = Duration::from_millis(50);

/// A running request: where its events go and its latency bookkeeping.
struct Running {
    /// Where the request's events go; closed when its client went away.
    events: UnboundedSender<Event>,
    /// When the request arrived.
    arrived: Instant,
    /// When the previous token was sent (for the inter-token latency).
    last_token_at: Option<Instant>,
}

/// Runs the scheduler on the calling thread until `stop` is set (or every sender is gone) and
/// no sequence is left running.
pub fn run(engine: &mut Engine<'_>, jobs: &Receiver<Job>, metrics: &Metrics, stop: &AtomicBool) {
    let settings = engine.settings();
    let mut running: HashMap<SeqId, Running> = HashMap::with_capacity(settings.max_sequences);
    metrics.kv_capacity.store(
        (settings.max_sequences * settings.context) as i64,
        Ordering::Relaxed,
    );
    tracing::info!(
        parallel = settings.max_sequences,
        context = settings.context,
        max_batch = settings.max_batch,
        prefix_cache_mib = settings.prefix_cache_bytes >> 20,
        device = %engine.device(),
        "engine ready"
    );
    loop {
        // Admit new requests while there is room; wait only when nothing runs.
        while engine.has_room() {
            let job = if engine.is_busy() {
                match jobs.try_recv() {
                    Ok(job) => job,
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            } else {
                match jobs.recv_timeout(IDLE_POLL) {
                    Ok(job) => job,
                    Err(RecvTimeoutError::Timeout) if !stop.load(Ordering::Relaxed) => continue,
                    Err(_) => return,
                }
            };
            metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
            admit(engine, job, &mut running, metrics);
        }
        cancel_abandoned(engine, &mut running, metrics);
        if engine.is_busy() {
            let started = Instant::now();
            let rows = engine.step(|event| relay(event, &mut running, metrics));
            tracing::debug!(
                rows,
                step_ms = started.elapsed().as_secs_f64() * 1e3,
                "step"
            );
        }
        publish_occupancy(engine, metrics);
    }
}

/// Sets the gauges of running sequences and used KV positions.
fn publish_occupancy(engine: &Engine<'_>, metrics: &Metrics) {
    metrics
        .running
        .store(engine.running() as i64, Ordering::Relaxed);
    metrics
        .kv_used
        .store(engine.cached_positions() as i64, Ordering::Relaxed);
    metrics.prefix.publish(&engine.prefix_stats());
}

/// Starts `job` in the engine, or answers it with the engine's refusal.
fn admit(
    engine: &mut Engine<'_>,
    job: Job,
    running: &mut HashMap<SeqId, Running>,
    metrics: &Metrics,
) {
    if job.events.is_closed() {
        metrics.cancelled.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let Job {
        request,
        events,
        arrived,
    } = job;
    metrics
        .prompt_tokens
        .fetch_add(request.prompt.len() as u64, Ordering::Relaxed);
    match engine.add(request) {
        Ok(id) => {
            running.insert(
                id,
                Running {
                    events,
                    arrived,
                    last_token_at: None,
                },
            );
        }
        Err(error) => {
            let _ = events.send(Event::Failed(error.to_string()));
        }
    }
    publish_occupancy(engine, metrics);
}

/// Ends the sequences whose clients closed their channel.
fn cancel_abandoned(
    engine: &mut Engine<'_>,
    running: &mut HashMap<SeqId, Running>,
    metrics: &Metrics,
) {
    let gone: Vec<SeqId> = running
        .iter()
        .filter(|(_, r)| r.events.is_closed())
        .map(|(&id, _)| id)
        .collect();
    for id in gone {
        running.remove(&id);
        engine.cancel(id, |_| {});
        metrics.cancelled.fetch_add(1, Ordering::Relaxed);
        tracing::debug!("client went away; generation cancelled");
    }
}

/// Sends one engine event to its request's channel and counts it.
fn relay(event: EngineEvent, running: &mut HashMap<SeqId, Running>, metrics: &Metrics) {
    match event {
        EngineEvent::Token {
            id, text, logprob, ..
        } => {
            let Some(r) = running.get_mut(&id) else {
                return;
            };
            metrics.generated_tokens.fetch_add(1, Ordering::Relaxed);
            let now = Instant::now();
            match r.last_token_at.replace(now) {
                None => metrics
                    .time_to_first_token
                    .observe((now - r.arrived).as_secs_f64()),
                Some(previous) => metrics
                    .inter_token_latency
                    .observe((now - previous).as_secs_f64()),
            }
            let logprobs: Vec<_> = logprob.into_iter().collect();
            if !text.is_empty() || !logprobs.is_empty() {
                // A closed channel means the client left; the next step cancels the sequence.
                let _ = r.events.send(Event::Delta { text, logprobs });
            }
        }
        EngineEvent::Finished {
            id,
            reason,
            tokens,
            timings,
        } => {
            if let Some(r) = running.remove(&id) {
                let _ = r.events.send(Event::Done {
                    finish: reason,
                    prompt_tokens: timings.prompt_tokens,
                    cached_tokens: timings.cached_tokens,
                    completion_tokens: tokens.len(),
                });
            }
        }
        EngineEvent::Failed { id, error } => {
            if let Some(r) = running.remove(&id) {
                let _ = r.events.send(Event::Failed(error.to_string()));
            }
        }
    }
}

/// What the engine thread reports once it is ready.
pub struct Started {
    /// The model and the engine's sizes.
    pub ready: Arc<Ready>,
    /// Where the engine computes, and why.
    pub device: DeviceReport,
}

/// Starts the engine thread: it builds its compute pool (joining it as a worker), loads the
/// model, sets up the engine on the configured device, reports through `started_tx`, then
/// schedules until stopped.
pub fn spawn(
    config: &crate::ServeConfig,
    jobs: Receiver<Job>,
    metrics: Arc<Metrics>,
    stop: Arc<AtomicBool>,
    started_tx: tokio::sync::oneshot::Sender<Result<Started, crate::ServeError>>,
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
                    let _ = started_tx.send(Err(crate::ServeError::Config(format!(
                        "cannot start the compute pool: {e}"
                    ))));
                    return;
                }
            };
            let ready = match Ready::load(&config) {
                Ok(ready) => Arc::new(ready),
                Err(e) => {
                    let _ = started_tx.send(Err(e));
                    return;
                }
            };
            let mut engine = match Engine::new(&ready.loaded, ready.settings, config.device) {
                Ok(engine) => engine,
                Err(e) => {
                    let _ = started_tx.send(Err(crate::ServeError::Engine(e)));
                    return;
                }
            };
            let started = Started {
                ready: Arc::clone(&ready),
                device: engine.device().clone(),
            };
            if started_tx.send(Ok(started)).is_err() {
                return;
            }
            run(&mut engine, &jobs, &metrics, &stop);
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

impl Ready {
    fn load(config: &crate::ServeConfig) -> Result<Self, crate::ServeError> {
        let loaded =
            LoadedModel::open(&config.model_path).map_err(|source| crate::ServeError::Load {
                path: config.model_path.display().to_string(),
                source,
            })?;
        let trained = loaded.model.config.context_length;
        let context = config.context.unwrap_or(trained.min(DEFAULT_CONTEXT));
        let settings = EngineSettings::parallel(config.parallel, context);
        let prefix_cache_bytes = config
            .kv_cache_mib
            .map_or(settings.prefix_cache_bytes, |mib| mib << 20);
        Ok(Self {
            loaded,
            settings: EngineSettings {
                prefix_cache_bytes,
                ..settings
            },
        })
    }
}
