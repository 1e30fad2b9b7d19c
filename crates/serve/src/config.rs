//! What the server needs to know, parsed once by the CLI.

use std::net::SocketAddr;
use std::path::PathBuf;

/// How to serve a model.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// The GGUF file (or Hugging Face directory) to load.
    pub model_path: PathBuf,
    /// The name clients give as `model` and `/v1/models` lists.
    pub model_id: String,
    /// Where to listen.
    pub address: SocketAddr,
    /// Context size of each sequence, in tokens (`None`: the model's, at most 4096).
    pub context: Option<usize>,
    /// Sequences decoded together; each holds one KV cache of `context` positions.
    pub parallel: usize,
    /// Requests that may wait for a free sequence before new ones get 503.
    pub queue: usize,
    /// Threads of the engine's compute pool (`None`: one per core).
    pub threads: Option<usize>,
    /// Largest request body accepted, in bytes; larger ones get 413.
    pub max_body_bytes: usize,
    /// `--chat-template`: a built-in format's name or a Jinja file, used instead of the model's
    /// own template (`None`: the model's, else its family's built-in format).
    pub chat_template: Option<String>,
}

impl ServeConfig {
    /// Defaults for everything but the model: `127.0.0.1:8080`, 4 parallel sequences, a queue of
    /// 64, 2 MiB bodies.
    pub fn new(model_path: PathBuf, model_id: String) -> Self {
        Self {
            model_path,
            model_id,
            address: SocketAddr::from(([127, 0, 0, 1], 8080)),
            context: None,
            parallel: 4,
            queue: 64,
            threads: None,
            max_body_bytes: 2 << 20,
            chat_template: None,
        }
    }
}
