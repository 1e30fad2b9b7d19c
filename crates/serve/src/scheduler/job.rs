//! What the HTTP side hands the engine, and what comes back.
//!
//! Events go back through a channel of at most [`MAX_BACKLOG`] events: the engine never waits
//! for a client, so a client that falls that far behind (it stopped reading its stream) has
//! its generation cancelled instead of growing the channel.
//!
//! A request's sender also holds the model it runs on ([`EventSender::holding`]): the engine
//! keeps the sender until the request ends, so a model is in use exactly while a handler or
//! its engine holds a request for it, and is never unloaded then.

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

pub use rinfer_model::TokenLogprob;
use rinfer_model::{FinishReason, Request};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

/// The most events a request's channel holds unread.
pub const MAX_BACKLOG: usize = 1024;

/// Where the engine sends a request's events; it holds the request's model in use.
#[derive(Clone)]
pub struct EventSender {
    channel: mpsc::Sender<Event>,
    /// The model the request runs on (the server's `Served`), counted in use while any clone
    /// of this sender lives.
    _model: Option<Arc<dyn Any + Send + Sync>>,
}

impl EventSender {
    /// Sends `event` unless the channel is closed (the client left) or full (it stopped
    /// reading).
    pub fn try_send(&self, event: Event) -> Result<(), TrySendError<Event>> {
        self.channel.try_send(event)
    }

    /// Whether the handler dropped its receiver.
    pub fn is_closed(&self) -> bool {
        self.channel.is_closed()
    }

    /// This sender, holding `model` in use until it and its clones are dropped.
    pub fn holding(self, model: Arc<dyn Any + Send + Sync>) -> Self {
        Self {
            _model: Some(model),
            ..self
        }
    }
}

/// Where a request's handler reads its events.
pub type EventReceiver = mpsc::Receiver<Event>;

/// A request's event channel.
pub fn event_channel() -> (EventSender, EventReceiver) {
    let (channel, receiver) = mpsc::channel(MAX_BACKLOG);
    let sender = EventSender {
        channel,
        _model: None,
    };
    (sender, receiver)
}

/// A validated generation request on its way to the engine.
pub struct Job {
    /// What to generate (the prompt within the vocabulary and, with `max_tokens`, the context).
    pub request: Request,
    /// Where events go; when the receiver is dropped the generation is cancelled.
    pub events: EventSender,
    /// When the request arrived (for the time to first token).
    pub arrived: Instant,
    /// Choices to generate; the first prefills the prompt, the others start once it has and
    /// reuse its blocks (each samples with the seed plus its index).
    pub choices: usize,
    /// The index of its first choice in its events (an embeddings request sends one job per
    /// input down one channel; 0 otherwise).
    pub index: usize,
}

/// The tokens of one finished choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TokenCounts {
    /// Prompt tokens.
    pub prompt: usize,
    /// Of those, tokens the prefix cache reused instead of computing them.
    pub cached: usize,
    /// Generated tokens.
    pub completion: usize,
}

/// What the engine reports about one request.
#[derive(Debug)]
pub enum Event {
    /// New text (possibly empty when only log-probabilities are new).
    Delta {
        /// The choice.
        index: usize,
        /// Text, never half a character, never part of a stop string.
        text: String,
        /// One entry per token generated since the last event, when asked for.
        logprobs: Vec<TokenLogprob>,
    },
    /// The embedding of an embedding request's input (not normalised); `Done` follows.
    Embedding {
        /// The input.
        index: usize,
        /// `[hidden]` values.
        embedding: Vec<f32>,
    },
    /// One choice's generation ended.
    Done {
        /// The choice.
        index: usize,
        /// Why.
        finish: FinishReason,
        /// Its prompt and generated tokens.
        counts: TokenCounts,
    },
    /// The engine failed on this request (never the request's fault: that is refused earlier).
    Failed(String),
}
