//! The parts of the answer loop every front end shares: one choice's generation read to its
//! end for a whole (not streamed) answer, and a stream of events sent as server-sent events.
//! Each API shapes its own body from these.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use rinfer_model::FinishReason;

use crate::error::ApiError;
use crate::scheduler::job::{Event, EventReceiver, TokenCounts};

/// What a failure says when the engine dropped a generation before its end.
pub(crate) const STOPPED_EARLY: &str = "the engine stopped before the generation ended";

/// One choice's whole answer: its text and what its `Done` event reported.
pub(crate) struct Whole {
    /// The generated text.
    pub text: String,
    /// Why the generation ended.
    pub finish: FinishReason,
    /// Its prompt and generated tokens.
    pub counts: TokenCounts,
}

/// Reads a one-choice generation to its end.
pub(crate) async fn whole(receiver: &mut EventReceiver) -> Result<Whole, ApiError> {
    let mut text = String::new();
    while let Some(event) = receiver.recv().await {
        match event {
            Event::Delta { text: piece, .. } => text.push_str(&piece),
            Event::Done { finish, counts, .. } => {
                return Ok(Whole {
                    text,
                    finish,
                    counts,
                });
            }
            Event::Failed(message) => return Err(ApiError::internal(message)),
            Event::Embedding { .. } => {}
        }
    }
    Err(ApiError::internal(STOPPED_EARLY))
}

/// `body` as a `text/event-stream` response that proxies pass on as it comes.
pub(crate) fn event_stream<S>(body: S) -> Response
where
    S: Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        // Tells nginx not to buffer the stream.
        .header("x-accel-buffering", "no")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| ApiError::internal("cannot build the stream").into_response())
}
