//! The models a server serves, by name, each loaded on first use (or at start) into an engine
//! of its own, within a memory budget.
//!
//! Every request finds its model here ([`Models::for_request`]): the `model` field of its body
//! names it (none: the default model), a name not served is a 404, and a model not loaded is
//! loaded first, the request waiting (as do the others that name it meanwhile). A model is in
//! use while a handler holds it or its engine runs a request for it (see
//! [`crate::scheduler::job::EventSender::holding`]): the `Arc<Served>` of a loaded model is
//! held by the registry alone exactly when it is idle.
//!
//! Loading asks the budget for the model's estimated bytes ([`budget::estimate_bytes`]) once
//! the model is open and before its engine allocates its caches. When they do not fit, the
//! least recently used idle models are unloaded (their queue's last sender dropped, their
//! engine thread ends); when the models in use leave no room, the load fails with a 503.

mod budget;
mod discover;
mod load;

use std::error::Error;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use axum::http::StatusCode;
use serde::Deserialize;
use tokio::sync::{oneshot, watch};

use crate::config::{ModelEntry, ServeConfig};
use crate::error::{ApiError, ServeError};
use crate::scheduler::Ready;
use crate::served::Served;
pub use discover::{model_name, models_in_dir};
pub use load::Launch;

/// Where a model is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelState {
    /// Not in memory; the first request that names it loads it.
    Unloaded,
    /// Being loaded.
    Loading,
    /// Loaded, its engine running.
    Loaded,
}

impl ModelState {
    /// The name `/v1/models` and `/health` give the state.
    pub fn name(self) -> &'static str {
        match self {
            Self::Unloaded => "unloaded",
            Self::Loading => "loading",
            Self::Loaded => "loaded",
        }
    }
}

/// One model as `/v1/models` and `/health` describe it.
pub struct ModelView<'a> {
    /// Its name.
    pub id: &'a str,
    /// Where it is.
    pub state: ModelState,
    /// The model, when loaded.
    pub served: Option<&'a Served>,
    /// Its estimated memory once its load was admitted, until unloaded (else 0).
    pub memory_bytes: u64,
}

enum State {
    Unloaded,
    /// The load numbered `attempt` runs.
    Loading {
        attempt: u64,
    },
    Loaded(Arc<Served>),
}

struct Slot {
    model: ModelEntry,
    state: State,
    /// Bytes of the budget it holds: its estimate once its load was admitted, until unloaded.
    held: u64,
    last_used: Instant,
    /// Loads begun.
    attempts: u64,
    /// The last failed load's number and the answer for the requests that waited for it.
    failure: Option<(u64, ApiError)>,
    /// Loads at start and has not finished its first load yet.
    starting: bool,
}

/// The models served and their states.
pub struct Models {
    slots: Mutex<Vec<Slot>>,
    /// The slot of requests that name no model.
    default: Option<usize>,
    /// The bytes the loaded models may hold together.
    budget: Option<u64>,
    /// Bumped on every change of state, for the requests waiting for a load.
    changed: watch::Sender<()>,
    launch: Launch,
    /// Where the first failed load of a model loaded at start is reported (it ends the server).
    start_failure: Mutex<Option<oneshot::Sender<ServeError>>>,
}

/// The one field every API's body shares.
#[derive(Deserialize)]
struct ModelField {
    model: Option<String>,
}

impl Models {
    /// The models of `launch.config`, none loaded yet.
    pub fn new(launch: Launch) -> Self {
        let config: &ServeConfig = &launch.config;
        let default = config
            .default_model()
            .and_then(|d| config.models.iter().position(|m| m.id == d.id));
        let slots = config
            .models
            .iter()
            .map(|model| Slot {
                model: model.clone(),
                state: State::Unloaded,
                held: 0,
                last_used: Instant::now(),
                attempts: 0,
                failure: None,
                starting: model.load_at_start,
            })
            .collect();
        Self {
            slots: Mutex::new(slots),
            default,
            budget: config.models_memory_bytes,
            changed: watch::Sender::new(()),
            start_failure: Mutex::new(None),
            launch,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts loading the models that load at start; the first that fails is sent to `failed`.
    pub fn load_at_start(self: &Arc<Self>, failed: oneshot::Sender<ServeError>) {
        *self.start_failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(failed);
        let mut slots = self.lock();
        let at_start: Vec<usize> = (0..slots.len())
            .filter(|&i| slots[i].model.load_at_start)
            .collect();
        for index in at_start {
            self.begin_load(&mut slots, index);
        }
    }

    /// The model the request `body` names (the default model when it names none), loaded.
    pub async fn for_request(self: &Arc<Self>, body: &[u8]) -> Result<Arc<Served>, ApiError> {
        let named: ModelField = crate::request::parse(body)?;
        let index = self.index_of(named.model.as_deref())?;
        self.loaded(index).await
    }

    fn index_of(&self, name: Option<&str>) -> Result<usize, ApiError> {
        let slots = self.lock();
        let names = || {
            let names: Vec<String> = slots.iter().map(|s| format!("`{}`", s.model.id)).collect();
            names.join(", ")
        };
        match name {
            None => self.default.ok_or_else(|| {
                ApiError::invalid(
                    "model",
                    format!("name the model: this server serves {}", names()),
                )
            }),
            Some(name) => slots
                .iter()
                .position(|s| s.model.id == name)
                .ok_or_else(|| {
                    ApiError {
                        status: StatusCode::NOT_FOUND,
                        ..ApiError::invalid(
                            "model",
                            format!(
                                "the model `{name}` does not exist; this server serves {}",
                                names()
                            ),
                        )
                    }
                    .with_code("model_not_found")
                }),
        }
    }

    /// Slot `index`'s model once loaded: at once when it is, else after the load it starts or
    /// joins; the error that load failed with when it fails.
    async fn loaded(self: &Arc<Self>, index: usize) -> Result<Arc<Served>, ApiError> {
        let mut awaited = None;
        loop {
            let mut changed = self.changed.subscribe();
            {
                let mut slots = self.lock();
                let slot = &mut slots[index];
                match &slot.state {
                    State::Loaded(served) => {
                        slot.last_used = Instant::now();
                        return Ok(Arc::clone(served));
                    }
                    State::Loading { attempt } => awaited = Some(*attempt),
                    State::Unloaded => match (&slot.failure, awaited) {
                        (Some((failed, error)), Some(awaited)) if *failed == awaited => {
                            return Err(error.clone());
                        }
                        _ => awaited = Some(self.begin_load(&mut slots, index)),
                    },
                }
            }
            if changed.changed().await.is_err() {
                return Err(ApiError::unavailable("the server is shutting down", 5));
            }
        }
    }

    /// Marks slot `index` loading and starts its engine; returns the load's number.
    fn begin_load(self: &Arc<Self>, slots: &mut [Slot], index: usize) -> u64 {
        let slot = &mut slots[index];
        slot.attempts += 1;
        let attempt = slot.attempts;
        slot.state = State::Loading { attempt };
        slot.last_used = Instant::now();
        let model = slot.model.clone();
        tracing::info!(model = %model.id, path = %model.path.display(), "loading");
        let models = Arc::clone(self);
        tokio::spawn(async move {
            let admitting = Arc::clone(&models);
            let admit = move |ready: &Ready| admitting.admit(index, budget::estimate_bytes(ready));
            let result = models.launch.start(&model, admit).await;
            models.finish(index, attempt, result);
        });
        self.changed.send_replace(());
        attempt
    }

    /// Makes room in the budget for slot `index`'s `bytes`, unloading idle models least
    /// recently used first; refuses when the models in use leave no room.
    fn admit(&self, index: usize, bytes: u64) -> Result<(), ServeError> {
        let unloaded = {
            let mut slots = self.lock();
            let Some(limit) = self.budget else {
                slots[index].held = bytes;
                return Ok(());
            };
            let holders: Vec<usize> = (0..slots.len())
                .filter(|&i| i != index && slots[i].held > 0)
                .collect();
            let described: Vec<budget::Holder> = holders
                .iter()
                .map(|&i| budget::Holder {
                    bytes: slots[i].held,
                    last_used: slots[i].last_used,
                    idle: matches!(&slots[i].state, State::Loaded(s) if Arc::strong_count(s) == 1),
                })
                .collect();
            let mib = |bytes: u64| bytes.div_ceil(1 << 20);
            let Some(chosen) = budget::evictions(&described, bytes, limit) else {
                let busy: Vec<String> = holders
                    .iter()
                    .map(|&i| format!("`{}`", slots[i].model.id))
                    .collect();
                return Err(ServeError::NoRoom(format!(
                    "cannot load `{}` ({} MiB): the memory budget of {} MiB is held by {}, \
                     in use; retry once their requests end",
                    slots[index].model.id,
                    mib(bytes),
                    mib(limit),
                    busy.join(", ")
                )));
            };
            let to_load = slots[index].model.id.clone();
            let mut unloaded = Vec::new();
            for i in chosen.into_iter().map(|c| holders[c]) {
                let slot = &mut slots[i];
                if let State::Loaded(served) = std::mem::replace(&mut slot.state, State::Unloaded) {
                    tracing::info!(
                        model = %slot.model.id,
                        to_load = %to_load,
                        "unloading the least recently used idle model to make room"
                    );
                    unloaded.push(served);
                }
                slot.held = 0;
            }
            slots[index].held = bytes;
            unloaded
        };
        self.changed.send_replace(());
        // Dropping the last holder of each drops its queue's sender: its engine thread ends.
        drop(unloaded);
        Ok(())
    }

    /// Records how load `attempt` of slot `index` ended and wakes the requests waiting for it.
    fn finish(&self, index: usize, attempt: u64, result: Result<Served, ServeError>) {
        let mut failed_at_start = None;
        {
            let mut slots = self.lock();
            let slot = &mut slots[index];
            let starting = std::mem::take(&mut slot.starting);
            match result {
                Ok(served) => {
                    tracing::info!(
                        model = %served.model_id,
                        chat_template = %served.chat.source(),
                        memory_mib = slot.held >> 20,
                        "model loaded; ready"
                    );
                    slot.state = State::Loaded(Arc::new(served));
                    slot.last_used = Instant::now();
                }
                Err(error) => {
                    let message = chain(&error);
                    // A model of the start ends the server with this error, printed then.
                    if !starting {
                        tracing::warn!(model = %slot.model.id, "cannot load the model: {message}");
                    }
                    // The cause names files of the server's: clients get it only in the log.
                    let answer = match error {
                        ServeError::NoRoom(_) => ApiError::unavailable(message, 5),
                        _ => ApiError::internal(format!(
                            "the model `{}` cannot be loaded; the server's log says why",
                            slot.model.id
                        )),
                    };
                    slot.state = State::Unloaded;
                    slot.held = 0;
                    slot.failure = Some((attempt, answer));
                    if starting {
                        failed_at_start = Some(error);
                    }
                }
            }
        }
        self.changed.send_replace(());
        if let Some(error) = failed_at_start
            && let Some(failed) = self
                .start_failure
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
        {
            let _ = failed.send(error);
        }
    }

    /// `describe` of every model, in the order served.
    pub fn list<T>(&self, describe: impl Fn(ModelView<'_>) -> T) -> Vec<T> {
        self.lock()
            .iter()
            .map(|slot| {
                let (state, served) = match &slot.state {
                    State::Unloaded => (ModelState::Unloaded, None),
                    State::Loading { .. } => (ModelState::Loading, None),
                    State::Loaded(served) => (ModelState::Loaded, Some(&**served)),
                };
                describe(ModelView {
                    id: &slot.model.id,
                    state,
                    served,
                    memory_bytes: slot.held,
                })
            })
            .collect()
    }

    /// Whether a model that loads at start has not finished loading yet.
    pub fn starting(&self) -> bool {
        self.lock().iter().any(|slot| slot.starting)
    }

    /// Whether the engine of a loaded model has ended (it only does at shutdown, or if it
    /// failed).
    pub fn engine_stopped(&self) -> bool {
        self.lock()
            .iter()
            .any(|slot| matches!(&slot.state, State::Loaded(s) if s.engine_stopped()))
    }

    /// The engine threads of the loaded models, to join at shutdown.
    pub fn take_engines(&self) -> Vec<JoinHandle<()>> {
        self.lock()
            .iter()
            .filter_map(|slot| match &slot.state {
                State::Loaded(served) => served
                    .engine
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take(),
                _ => None,
            })
            .collect()
    }
}

/// An error and its causes, `: `-separated.
fn chain(error: &ServeError) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
