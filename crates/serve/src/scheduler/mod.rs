//! Admission, queueing and I/O around the library's [`Engine`]: one thread owns the engine,
//! admits queued requests between steps while it has room, relays each step's events to the
//! requests' channels, and cancels the sequences whose clients went away.
//!
//! A request for `n` choices starts its first choice at once and holds room for the others,
//! which start once the first's prompt is in the cache, so that they reuse its blocks. A
//! request that needs more sequences than are free waits without holding up the queue: jobs
//! behind it that fit start meanwhile, for [`WIDE_PATIENCE`] at most; after that nothing passes
//! it, so the slots that free up go to it and it cannot be starved.
//!
//! Batching, prefill chunking, sampling, stop strings and detokenizing are the engine's.

pub mod job;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use rinfer_model::{DeviceReport, Engine, EngineSetup, Event as EngineEvent, Request, SeqId};
use tokio::sync::mpsc::error::TrySendError;

use crate::metrics::Metrics;
use job::{Event, EventSender, Job, TokenCounts};

/// How long an idle engine waits for a request before it looks at the stop flag again.
const IDLE_POLL: Duration = Duration::from_millis(50);
/// How long jobs that fit may start ahead of an older one waiting for room for its choices.
const WIDE_PATIENCE: Duration = Duration::from_secs(3);

/// A running request: where its events go and its latency bookkeeping.
struct Running {
    /// Where the request's events go; closed when its client went away.
    events: EventSender,
    /// When the request arrived.
    arrived: Instant,
    /// When the previous token was sent (for the inter-token latency).
    last_token_at: Option<Instant>,
    /// Which of the request's choices it is.
    index: usize,
    /// Whose request it is.
    tenant: u64,
    /// Its client fell [`job::MAX_BACKLOG`] events behind.
    lagging: bool,
}

/// The choices of a request after its first, waiting for the first's prompt to be cached.
struct Siblings {
    request: Request,
    choices: usize,
    events: EventSender,
    arrived: Instant,
}

/// Requests in flight: running sequences by id, and the choices still to start by the id of
/// their request's first choice.
#[derive(Default)]
struct InFlight {
    running: HashMap<SeqId, Running>,
    siblings: HashMap<SeqId, Siblings>,
    /// First choices whose prompt completed this step: their siblings start after it.
    ready: Vec<SeqId>,
}

impl InFlight {
    /// Slots promised to choices not started yet.
    fn reserved(&self) -> usize {
        self.siblings.values().map(|s| s.choices - 1).sum()
    }
}

/// Runs the scheduler on the calling thread until `stop` is set (or every sender is gone) and
/// no sequence is left running.
pub fn run(engine: &mut Engine<'_>, jobs: &Receiver<Job>, metrics: &Metrics, stop: &AtomicBool) {
    let settings = engine.settings();
    let mut flight = InFlight {
        running: HashMap::with_capacity(settings.max_sequences),
        ..InFlight::default()
    };
    // Jobs taken from the queue that wait for room for all of their choices, oldest first.
    let mut waiting: VecDeque<(Job, Instant)> = VecDeque::new();
    metrics.kv_capacity.store(
        (settings.max_sequences * settings.context) as i64,
        Ordering::Relaxed,
    );
    tracing::info!(
        parallel = settings.max_sequences,
        context = settings.context,
        max_batch = settings.max_batch,
        prefix_cache_mib = settings.prefix_cache_bytes >> 20,
        kv_type = %engine.kv_type(),
        kv_cache_mib = engine.kv_bytes() >> 20,
        device = %engine.device(),
        "engine ready"
    );
    loop {
        if !admit_jobs(engine, jobs, &mut waiting, &mut flight, metrics, stop) {
            return;
        }
        cancel_abandoned(engine, &mut flight, metrics);
        if engine.is_busy() {
            let started = Instant::now();
            let rows = engine.step(|event| relay(event, &mut flight, metrics));
            tracing::debug!(
                rows,
                step_ms = started.elapsed().as_secs_f64() * 1e3,
                "step"
            );
            start_siblings(engine, &mut flight);
        }
        publish_occupancy(engine, metrics);
    }
}

/// Admits queued jobs while there is room, oldest first, letting jobs that fit pass one that
/// waits for room for its choices while it is within [`WIDE_PATIENCE`]; waits for a job only
/// when nothing runs. Returns false when the scheduler is to stop.
fn admit_jobs(
    engine: &mut Engine<'_>,
    jobs: &Receiver<Job>,
    waiting: &mut VecDeque<(Job, Instant)>,
    flight: &mut InFlight,
    metrics: &Metrics,
    stop: &AtomicBool,
) -> bool {
    let most = engine.settings().max_sequences;
    loop {
        waiting.retain(|(job, _)| {
            let gone = job.events.is_closed();
            if gone {
                metrics.cancelled.fetch_add(1, Ordering::Relaxed);
            }
            !gone
        });
        let room = engine.free_slots().saturating_sub(flight.reserved());
        if room == 0 {
            return true;
        }
        let patient = waiting
            .front()
            .is_none_or(|(_, since)| since.elapsed() < WIDE_PATIENCE);
        let fits = waiting
            .iter()
            .position(|(job, _)| job.choices <= room)
            .filter(|&at| at == 0 || patient);
        if let Some((job, _)) = fits.and_then(|at| waiting.remove(at)) {
            admit(engine, job, flight, metrics);
            continue;
        }
        if !patient || waiting.len() >= most {
            return true;
        }
        let job = if engine.is_busy() || !waiting.is_empty() {
            match jobs.try_recv() {
                Ok(job) => job,
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return true,
            }
        } else {
            match jobs.recv_timeout(IDLE_POLL) {
                Ok(job) => job,
                Err(RecvTimeoutError::Timeout) if !stop.load(Ordering::Relaxed) => continue,
                Err(_) => return false,
            }
        };
        metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
        if job.choices > most {
            let _ = job.events.try_send(Event::Failed(format!(
                "{} choices are more than the {most} sequences this server runs at once",
                job.choices
            )));
            continue;
        }
        waiting.push_back((job, Instant::now()));
    }
}

/// Starts the other choices of the requests whose first choice's prompt is now cached.
fn start_siblings(engine: &mut Engine<'_>, flight: &mut InFlight) {
    for leader in std::mem::take(&mut flight.ready) {
        let Some(siblings) = flight.siblings.remove(&leader) else {
            continue;
        };
        for index in 1..siblings.choices {
            let mut request = siblings.request.clone();
            request.sampling.seed = request.sampling.seed.wrapping_add(index as u64);
            match engine.add(request) {
                Ok(id) => {
                    let running = Running {
                        events: siblings.events.clone(),
                        arrived: siblings.arrived,
                        last_token_at: None,
                        index,
                        tenant: siblings.request.tenant,
                        lagging: false,
                    };
                    flight.running.insert(id, running);
                }
                Err(error) => {
                    let _ = siblings.events.try_send(Event::Failed(error.to_string()));
                }
            }
        }
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
    metrics.speculation.publish(&engine.speculation_stats());
}

/// Starts `job` in the engine, or answers it with the engine's refusal.
fn admit(engine: &mut Engine<'_>, job: Job, flight: &mut InFlight, metrics: &Metrics) {
    if job.events.is_closed() {
        metrics.cancelled.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let Job {
        request,
        events,
        arrived,
        choices,
        index,
    } = job;
    metrics
        .prompt_tokens
        .fetch_add(request.prompt.len() as u64, Ordering::Relaxed);
    let tenant = request.tenant;
    let siblings = (choices > 1).then(|| Siblings {
        request: request.clone(),
        choices,
        events: events.clone(),
        arrived,
    });
    match engine.add(request) {
        Ok(id) => {
            if let Some(siblings) = siblings {
                flight.siblings.insert(id, siblings);
            }
            flight.running.insert(
                id,
                Running {
                    events,
                    arrived,
                    last_token_at: None,
                    index,
                    tenant,
                    lagging: false,
                },
            );
        }
        Err(error) => {
            let _ = events.try_send(Event::Failed(error.to_string()));
        }
    }
    publish_occupancy(engine, metrics);
}

/// Ends the sequences whose clients closed their channel or stopped reading it.
fn cancel_abandoned(engine: &mut Engine<'_>, flight: &mut InFlight, metrics: &Metrics) {
    let gone: Vec<SeqId> = flight
        .running
        .iter()
        .filter(|(_, r)| r.events.is_closed() || r.lagging)
        .map(|(&id, _)| id)
        .collect();
    for id in gone {
        flight.running.remove(&id);
        flight.siblings.remove(&id);
        engine.cancel(id, |_| {});
        metrics.cancelled.fetch_add(1, Ordering::Relaxed);
        tracing::debug!("client went away; generation cancelled");
    }
}

/// Sends one engine event to its request's channel and counts it.
fn relay(event: EngineEvent, flight: &mut InFlight, metrics: &Metrics) {
    match event {
        EngineEvent::Token {
            id, text, logprob, ..
        } => {
            if flight.siblings.contains_key(&id) && !flight.ready.contains(&id) {
                flight.ready.push(id);
            }
            let Some(r) = flight.running.get_mut(&id) else {
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
                // A closed channel means the client left, a full one that it stopped reading:
                // the next step cancels the sequence either way.
                let sent = r.events.try_send(Event::Delta {
                    index: r.index,
                    text,
                    logprobs,
                });
                r.lagging |= matches!(sent, Err(TrySendError::Full(_)));
            }
        }
        EngineEvent::Finished {
            id,
            reason,
            tokens,
            timings,
        } => {
            if let Some(r) = flight.running.remove(&id) {
                metrics
                    .prefix
                    .record(r.tenant, timings.prompt_tokens, timings.cached_tokens);
                let _ = r.events.try_send(Event::Done {
                    index: r.index,
                    finish: reason,
                    counts: TokenCounts {
                        prompt: timings.prompt_tokens,
                        cached: timings.cached_tokens,
                        completion: tokens.len(),
                    },
                });
            }
        }
        EngineEvent::Embedding { id, embedding } => {
            if let Some(r) = flight.running.get(&id) {
                let _ = r.events.try_send(Event::Embedding {
                    index: r.index,
                    embedding,
                });
            }
        }
        EngineEvent::Failed { id, error } => {
            flight.siblings.remove(&id);
            if let Some(r) = flight.running.remove(&id) {
                let _ = r.events.try_send(Event::Failed(error.to_string()));
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

/// Starts an engine thread: it builds its compute pool (joining it as a worker), loads the
/// model `options` name, asks `admit` whether it may stay (the memory budget), sets up the
/// engine on the configured device, reports through `started_tx`, then schedules until
/// stopped or until every sender of `jobs` is gone.
pub fn spawn(
    options: rinfer_model::EngineOptions,
    jobs: Receiver<Job>,
    metrics: Arc<Metrics>,
    stop: Arc<AtomicBool>,
    admit: impl FnOnce(&Ready) -> Result<(), crate::ServeError> + Send + 'static,
    started_tx: tokio::sync::oneshot::Sender<Result<Started, crate::ServeError>>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("rinfer-engine".into())
        .spawn(move || {
            // The engine thread is worker 0 of its own pool: the forward passes it starts run
            // their parallel loops there, beside the other workers, with no hand-off.
            let setup = options
                .compute_pool()
                .and_then(|pool| EngineSetup::load(&options).map(|ready| (pool, Arc::new(ready))))
                .map_err(crate::ServeError::Setup)
                .and_then(|(pool, ready)| admit(&ready).map(|()| (pool, ready)));
            let (_pool, ready) = match setup {
                Ok(setup) => setup,
                Err(e) => {
                    let _ = started_tx.send(Err(e));
                    return;
                }
            };
            let mut engine = match ready.engine() {
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

/// The loaded model (and draft model) and the engine's sizes.
pub type Ready = EngineSetup;

#[cfg(test)]
mod tests {
    use std::sync::mpsc::sync_channel;

    use rinfer_model::{DeviceRequest, EngineSettings, LoadedModel, SamplingParams};

    use super::*;
    use crate::scheduler::job::{EventReceiver, event_channel};

    fn model() -> LoadedModel {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/models/gemma3-tiny-q4_k_m.gguf");
        LoadedModel::open(&path).unwrap()
    }

    fn job(choices: usize, max_tokens: usize) -> (Job, EventReceiver) {
        let (events, receiver) = event_channel();
        let request = Request::new(vec![2, 100, 200, 300], max_tokens)
            .with_sampling(SamplingParams::greedy());
        let job = Job {
            request,
            events,
            arrived: Instant::now(),
            choices,
            index: 0,
        };
        (job, receiver)
    }

    #[test]
    fn a_job_that_fits_starts_beside_one_waiting_for_room_for_its_choices() {
        let loaded = model();
        let settings = EngineSettings::parallel(4, 256);
        let mut engine = Engine::new(&loaded, settings, DeviceRequest::Cpu).unwrap();
        let (jobs_tx, jobs) = sync_channel(8);
        let metrics = Metrics::default();
        let stop = AtomicBool::new(false);
        let mut flight = InFlight::default();
        let mut waiting = VecDeque::new();
        let admit = |engine: &mut Engine<'_>,
                     waiting: &mut VecDeque<(Job, Instant)>,
                     flight: &mut InFlight| {
            admit_jobs(engine, &jobs, waiting, flight, &metrics, &stop)
        };
        let (long, _long_events) = job(1, 200);
        let (wide, _wide_events) = job(4, 4);
        let (small, _small_events) = job(1, 4);
        for job in [long, wide, small] {
            jobs_tx.send(job).unwrap();
        }
        assert!(admit(&mut engine, &mut waiting, &mut flight));
        // The long job and the small one run; the wide one waits for all four sequences.
        assert_eq!(engine.running(), 2);
        assert_eq!(waiting.len(), 1);
        assert_eq!(waiting[0].0.choices, 4);
        // Once it has waited past its patience, nothing passes it any more.
        waiting[0].1 = Instant::now() - WIDE_PATIENCE;
        let (late, _late_events) = job(1, 4);
        jobs_tx.send(late).unwrap();
        admit(&mut engine, &mut waiting, &mut flight);
        assert_eq!(engine.running(), 2);
        // The running sequences end: the wide job starts first.
        let running: Vec<SeqId> = flight.running.keys().copied().collect();
        for id in running {
            engine.cancel(id, |_| {});
            flight.running.remove(&id);
        }
        admit(&mut engine, &mut waiting, &mut flight);
        assert_eq!(engine.running(), 1, "the wide job's first choice");
        assert_eq!(flight.reserved(), 3);
    }
}
