//! What the server needs to know, parsed once by the CLI.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::auth::ApiKeys;

/// The most sequences decoded together.
pub const MAX_PARALLEL: usize = 1024;
/// The most requests that may wait for a free sequence.
pub const MAX_QUEUE: usize = 1 << 16;
/// The most compute threads: more than this only adds contention.
pub const MAX_THREADS: usize = 1024;

/// One model the server serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelEntry {
    /// The name clients give as `model` and `/v1/models` lists.
    pub id: String,
    /// A GGUF file (the first shard of a split model) or a Hugging Face model directory.
    pub path: PathBuf,
    /// Load it when the server starts (`/health` answers 503 until it has) instead of on the
    /// first request that names it.
    pub load_at_start: bool,
}

/// How to serve one model or several.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// How every model runs, each in an engine of its own: `engine.sequences` sequences decoded
    /// together, each holding one KV cache of `engine.context` positions, on `engine.device`.
    /// Its `model` is the first model's path; each model runs from its own entry's path, and
    /// only the first speculates with `engine.draft_model`.
    pub engine: rinfer_model::EngineOptions,
    /// The models served, by name. A request without `model` goes to the first when it loads
    /// at start, or to the only one.
    pub models: Vec<ModelEntry>,
    /// The memory the loaded models may hold together, in bytes, as their memory plans
    /// estimate it (weights, KV caches, scratch buffers, prefix cache budget): loading one
    /// past it first unloads the least recently used idle models. `None`: no limit.
    pub models_memory_bytes: Option<u64>,
    /// Where to listen.
    pub address: SocketAddr,
    /// Requests that may wait for a free sequence before new ones get 503.
    pub queue: usize,
    /// Largest request body accepted, in bytes; larger ones get 413.
    pub max_body_bytes: usize,
    /// Connections served at once; past it a new connection gets a 503 and is closed. Lowered
    /// at start to fit the process's open-file limit.
    pub max_connections: usize,
    /// Time a client has to send a request's headers (also how long an idle keep-alive
    /// connection is kept); slower connections are closed.
    pub header_timeout: Duration,
    /// Time a client has to send a request's body once its headers arrived; slower ones get 408.
    pub body_timeout: Duration,
    /// Time a write to a client may wait for the client to read; past it the connection is
    /// closed (and its generation cancelled), so that a client that never reads holds nothing.
    pub write_timeout: Duration,
    /// Browser origins (`https://app.example.com`, or `*` for all) allowed to call the API
    /// cross-origin; a cross-origin request from any other gets 403.
    pub cors_origins: Vec<String>,
    /// Host names (besides IP addresses, and `localhost` on a loopback address) that requests
    /// may name in `Host`; when empty, a server on a loopback address accepts only `localhost`
    /// and one on any other address accepts every name.
    pub allowed_hosts: Vec<String>,
    /// Answer clients that half-close their connection after the request. Such a client cannot
    /// be told from one that left, so with this on, a non-streamed request whose client closed
    /// runs to its end instead of being cancelled.
    pub half_close: bool,
    /// `--chat-template`: a built-in format's name or a Jinja file, used instead of the model's
    /// own template (`None`: the model's, else its family's built-in format).
    pub chat_template: Option<String>,
    /// How to start the child processes that render chat templates (`None`: a thread of the
    /// server renders them, and a template that runs away costs that thread until its fuel is
    /// spent; see [`rinfer_model::chat_template::process`]).
    pub template_process: Option<rinfer_model::chat_template::RenderProcess>,
    /// Keys a request must carry as `Authorization: Bearer KEY` on `/v1/*`, `/tokenize` and
    /// `/detokenize` (and `/metrics` unless `open_metrics`); none: the API is open.
    pub api_keys: ApiKeys,
    /// Serve `/metrics` without a key even when keys are configured.
    pub open_metrics: bool,
    /// Let requests of different API keys reuse each other's cached prompt prefixes. By
    /// default (with keys configured) each key is a tenant of its own: its requests reuse only
    /// what its own requests computed, and `/metrics` shows it only its own prefix-cache
    /// counters.
    pub share_prefix_cache: bool,
}

impl ServeConfig {
    /// Defaults for everything but the model (loaded at start, served as `model_id`):
    /// `127.0.0.1:8080`, 4 parallel sequences (the engine's other options their defaults), a
    /// queue of 64, 2 MiB bodies, 512 connections, 10 s for headers and 30 s for a body, no
    /// cross-origin callers, no host names beyond the address's own, no memory limit.
    pub fn new(model_path: PathBuf, model_id: String) -> Self {
        Self {
            engine: rinfer_model::EngineOptions {
                sequences: 4,
                ..rinfer_model::EngineOptions::new(model_path.clone())
            },
            models: vec![ModelEntry {
                id: model_id,
                path: model_path,
                load_at_start: true,
            }],
            models_memory_bytes: None,
            address: SocketAddr::from(([127, 0, 0, 1], 8080)),
            queue: 64,
            max_body_bytes: 2 << 20,
            chat_template: None,
            template_process: None,
            api_keys: ApiKeys::default(),
            open_metrics: false,
            share_prefix_cache: false,
            max_connections: 512,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            cors_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            half_close: false,
        }
    }

    /// Refuses sizes no server can hold, naming the option and its bound: `parallel` and
    /// `queue` from 1, `context` from 1 to [`rinfer_model::MAX_CONTEXT`], `threads` from 1.
    /// The memory the sizes need is checked against the machine once the model is loaded.
    pub fn validate(&self) -> Result<(), String> {
        let check = |name: &str, value: usize, max: usize| match (1..=max).contains(&value) {
            true => Ok(()),
            false => Err(format!("{name} {value} is outside 1..={max}")),
        };
        check("--parallel", self.engine.sequences, MAX_PARALLEL)?;
        check("--queue", self.queue, MAX_QUEUE)?;
        if let Some(context) = self.engine.context {
            check("--ctx", context, rinfer_model::MAX_CONTEXT)?;
        }
        if let Some(threads) = self.engine.threads {
            check("--threads", threads, MAX_THREADS)?;
        }
        if self.models.is_empty() {
            return Err("no model to serve".into());
        }
        let mut ids = std::collections::HashSet::new();
        for model in &self.models {
            if model.id.is_empty() {
                return Err(format!(
                    "the model {} has an empty name",
                    model.path.display()
                ));
            }
            if !ids.insert(model.id.as_str()) {
                return Err(format!(
                    "two models are named `{}`: name them apart with --model NAME=PATH",
                    model.id
                ));
            }
        }
        Ok(())
    }

    /// The model a request that names none goes to: the first when it loads at start, or
    /// the only one.
    pub fn default_model(&self) -> Option<&ModelEntry> {
        match self.models.as_slice() {
            [only] => Some(only),
            [first, ..] if first.load_at_start => Some(first),
            _ => None,
        }
    }

    /// The engine options of `model`: these options with its path, and the draft model only
    /// for the first model (a draft must share its model's vocabulary).
    pub fn engine_for(&self, model: &ModelEntry) -> rinfer_model::EngineOptions {
        let first = self.models.first().is_some_and(|m| m.id == model.id);
        let mut engine = rinfer_model::EngineOptions {
            model: model.path.clone(),
            ..self.engine.clone()
        };
        if !first && engine.draft_model.is_some() {
            engine.draft_model = None;
            engine.speculation = rinfer_model::Speculation::Off;
        }
        engine
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_engine(
        base: &ServeConfig,
        change: impl FnOnce(&mut rinfer_model::EngineOptions),
    ) -> ServeConfig {
        let mut config = base.clone();
        change(&mut config.engine);
        config
    }

    #[test]
    fn sizes_no_server_can_hold_are_refused_naming_the_option() {
        let base = ServeConfig::new("m.gguf".into(), "m".into());
        assert_eq!(base.validate(), Ok(()));
        let cases = [
            ("--parallel", with_engine(&base, |e| e.sequences = 100_000)),
            ("--parallel", with_engine(&base, |e| e.sequences = 0)),
            (
                "--queue",
                ServeConfig {
                    queue: usize::MAX,
                    ..base.clone()
                },
            ),
            ("--ctx", with_engine(&base, |e| e.context = Some(1 << 62))),
            (
                "--threads",
                with_engine(&base, |e| e.threads = Some(1_000_000)),
            ),
        ];
        for (option, config) in cases {
            let err = config.validate().unwrap_err();
            assert!(err.starts_with(option), "{err}");
        }
    }

    #[test]
    fn two_models_of_one_name_are_refused() {
        let mut config = ServeConfig::new("a/m.gguf".into(), "m".into());
        config.models.push(ModelEntry {
            id: "m".into(),
            path: "b/m.gguf".into(),
            load_at_start: false,
        });
        assert!(config.validate().unwrap_err().contains("`m`"));
    }

    #[test]
    fn a_request_without_a_model_goes_to_the_first_loaded_at_start_or_the_only_one() {
        let entry = |id: &str, load_at_start| ModelEntry {
            id: id.into(),
            path: format!("{id}.gguf").into(),
            load_at_start,
        };
        let mut config = ServeConfig::new("a.gguf".into(), "a".into());
        assert_eq!(config.default_model().map(|m| m.id.as_str()), Some("a"));
        config.models.push(entry("b", false));
        assert_eq!(config.default_model().map(|m| m.id.as_str()), Some("a"));
        config.models = vec![entry("b", false), entry("c", false)];
        assert_eq!(config.default_model(), None);
        config.models.truncate(1);
        assert_eq!(config.default_model().map(|m| m.id.as_str()), Some("b"));
    }
}
