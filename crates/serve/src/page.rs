//! The chat page at `/`: one HTML file with its script, embedded in the binary. It streams
//! answers from `/v1/chat/completions`, has a stop button, shows the model's name and the
//! sampling settings, and asks for an API key when the server answers 401. It loads nothing
//! from elsewhere, which its content security policy also enforces.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

/// The page.
const PAGE: &str = include_str!("page.html");

/// What the page may do: its own inline script and style, requests to this server only, and
/// no framing by other sites.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; \
     style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
     form-action 'none'";

/// `GET /`.
pub async fn chat_page() -> Response {
    let mut response = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
