//! Errors: [`ServeError`] ends the server, [`ApiError`] answers one request.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Why the server could not start or had to stop. A message never repeats its cause: the
/// cause is the error's `source()`, which `anyhow`'s `{:#}` (and any chain printer) adds.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {address}")]
    Bind {
        /// The address.
        address: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The compute pool could not be started, or the model or draft model loaded.
    #[error(transparent)]
    Setup(rinfer_model::SetupError),
    /// The engine could not be set up (for instance `--device cuda` without a usable GPU).
    #[error("cannot start the engine: {0}")]
    Engine(rinfer_model::ModelError),
    /// The configuration is unusable.
    #[error("invalid server configuration: {0}")]
    Config(String),
    /// The async runtime or a thread could not be started, or the server failed.
    #[error("server failure")]
    Io(#[from] std::io::Error),
    /// The engine thread ended unexpectedly.
    #[error("the engine thread stopped unexpectedly")]
    EngineStopped,
    /// A model does not fit the memory budget beside the models in use.
    #[error("{0}")]
    NoRoom(String),
}

/// An error answered to one request as an OpenAI error object:
/// `{"error": {"message", "type", "param", "code"}}`.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// What went wrong and, where possible, what to do.
    pub message: String,
    /// The request field at fault.
    pub param: Option<String>,
    /// A machine-readable code (`context_length_exceeded`, `model_not_found`, ...).
    pub code: Option<&'static str>,
    /// Seconds a client should wait before retrying (503).
    pub retry_after: Option<u64>,
    /// Close the connection after this answer (`Connection: close`): the request body may be
    /// unread, or the server is shutting down.
    pub close: bool,
}

impl ApiError {
    /// A 400 about `param`.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            param: Some(param.into()),
            code: None,
            retry_after: None,
            close: false,
        }
    }

    /// A 400 about the request as a whole.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            param: None,
            code: None,
            retry_after: None,
            close: false,
        }
    }

    /// A 503 asking the client to come back after `retry_after` seconds.
    pub fn unavailable(message: impl Into<String>, retry_after: u64) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: message.into(),
            param: None,
            code: None,
            retry_after: Some(retry_after),
            close: false,
        }
    }

    /// A 500: a fault of the server, not of the request.
    pub fn internal(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
            param: None,
            code: None,
            retry_after: None,
            close: false,
        }
    }

    /// Adds a machine-readable code.
    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    /// Asks for the connection to be closed after the answer.
    pub fn closing(mut self) -> Self {
        self.close = true;
        self
    }

    /// The OpenAI `type` of this error.
    fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            400 | 401 | 404 | 405 | 408 | 413 | 415 => "invalid_request_error",
            403 => "permission_error",
            503 => "server_overloaded",
            _ => "server_error",
        }
    }

    /// The error object, as a JSON value (also sent as an SSE event mid-stream).
    pub fn body(&self) -> serde_json::Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.kind(),
                "param": self.param,
                "code": self.code,
            }
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.close {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}
