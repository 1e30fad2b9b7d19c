//! Who may call, checked before any handler runs:
//!
//! - the `Host` a request names, against DNS rebinding (a web page whose own name comes to
//!   resolve to 127.0.0.1 reaching a server on loopback): IP addresses and `localhost` are
//!   always served, other names only when listed (`allowed_hosts`) or, with none listed, when
//!   the server listens on a non-loopback address;
//! - the browser origin a request comes from: same-origin requests, and cross-origin ones only
//!   from the listed `cors_origins` (which alone get CORS preflights answered);
//! - the media type of a POST body: `application/json`, which a browser cannot send
//!   cross-origin without a preflight, so a cross-site form or `text/plain` POST is refused.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::config::ServeConfig;
use crate::error::ApiError;

/// How long a browser may cache a preflight answer, in seconds.
const PREFLIGHT_MAX_AGE: &str = "600";

/// The hosts and origins a server accepts.
#[derive(Debug)]
pub struct RequestPolicy {
    /// Lower-cased names, without a trailing dot.
    allowed_hosts: Vec<String>,
    /// Every name is accepted (a non-loopback address and no names listed).
    any_host: bool,
    /// Lower-cased origins (`scheme://host[:port]`), or `*`.
    cors_origins: Vec<String>,
}

impl RequestPolicy {
    /// The policy of `config` for a server listening on `address`.
    pub fn new(config: &ServeConfig, address: SocketAddr) -> Self {
        let normalize = |s: &String| s.trim().trim_end_matches('.').to_ascii_lowercase();
        let allowed_hosts: Vec<String> = config.allowed_hosts.iter().map(normalize).collect();
        Self {
            any_host: allowed_hosts.is_empty() && !address.ip().is_loopback(),
            allowed_hosts,
            cors_origins: config
                .cors_origins
                .iter()
                .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
                .collect(),
        }
    }

    /// Whether a request naming `host` (a `Host` header value: a name or an address, with or
    /// without a port) is served.
    pub fn host_allowed(&self, host: &str) -> bool {
        let name = host_name(host);
        if name.parse::<IpAddr>().is_ok() || name == "localhost" || self.any_host {
            return true;
        }
        self.allowed_hosts.contains(&name)
    }

    /// Whether a browser at `origin` may call cross-origin.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
        self.cors_origins.iter().any(|o| o == "*" || *o == origin)
    }
}

/// The name or address of a `Host` value, lower-cased, without port, brackets or final dot.
fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        }
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether `origin` (`scheme://host[:port]`) names the host the request was sent to.
fn same_origin(origin: &str, host: Option<&str>) -> bool {
    let authority = origin.split_once("://").map_or(origin, |(_, a)| a);
    host.is_some_and(|h| h.eq_ignore_ascii_case(authority))
}

/// The host a request names: the authority of an absolute URI, else the `Host` header.
fn request_host(request: &Request) -> Option<String> {
    if let Some(authority) = request.uri().authority() {
        return Some(authority.as_str().to_string());
    }
    let value = request.headers().get(header::HOST)?;
    Some(String::from_utf8_lossy(value.as_bytes()).into_owned())
}

fn forbidden(message: String) -> Response {
    ApiError {
        status: StatusCode::FORBIDDEN,
        ..ApiError::bad_request(message)
    }
    .into_response()
}

/// Middleware: refuses hosts and origins the policy does not accept, answers the preflights of
/// the origins it does, and marks their answers readable cross-origin.
pub async fn check_host_and_origin(
    State(policy): State<Arc<RequestPolicy>>,
    request: Request,
    next: Next,
) -> Response {
    let host = request_host(&request);
    if let Some(host) = &host
        && !policy.host_allowed(host)
    {
        return forbidden(format!(
            "requests for the host {:?} are not served here; the operator can allow it with \
             --allowed-host",
            host_name(host)
        ));
    }
    let Some(origin) = request
        .headers()
        .get(header::ORIGIN)
        .map(|o| String::from_utf8_lossy(o.as_bytes()).into_owned())
    else {
        return next.run(request).await;
    };
    let cross_origin = !same_origin(&origin, host.as_deref());
    if cross_origin && !policy.origin_allowed(&origin) {
        return forbidden(format!(
            "cross-origin requests from {origin:?} are not allowed; the operator can allow them \
             with --cors-origin"
        ));
    }
    let preflight = request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = if preflight {
        preflight_answer(request.headers())
    } else {
        next.run(request).await
    };
    if cross_origin && let Ok(value) = HeaderValue::from_str(&origin) {
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
        headers.append(header::VARY, HeaderValue::from_static("origin"));
    }
    response
}

/// The answer to a CORS preflight of an allowed origin.
fn preflight_answer(request: &HeaderMap) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST"),
    );
    let asked = request
        .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .cloned()
        .unwrap_or_else(|| HeaderValue::from_static("content-type, authorization"));
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked);
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static(PREFLIGHT_MAX_AGE),
    );
    response
}

/// Middleware of the POST endpoints: the body must be declared `application/json` (415).
pub async fn require_json(request: Request<Body>, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let media_type = content_type
        .as_deref()
        .and_then(|v| v.split(';').next())
        .map(str::trim);
    if media_type.is_some_and(|m| m.eq_ignore_ascii_case("application/json")) {
        return next.run(request).await;
    }
    let got = content_type.map_or_else(|| "none".to_string(), |c| format!("{c:?}"));
    ApiError {
        status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ..ApiError::bad_request(format!(
            "the body must be JSON sent with `Content-Type: application/json` (got {got})"
        ))
    }
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(address: [u8; 4], hosts: &[&str], origins: &[&str]) -> RequestPolicy {
        let config = ServeConfig {
            allowed_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            cors_origins: origins.iter().map(|s| s.to_string()).collect(),
            ..ServeConfig::new("m.gguf".into(), "m".into())
        };
        RequestPolicy::new(&config, SocketAddr::from((address, 8080)))
    }

    #[test]
    fn a_loopback_server_serves_addresses_localhost_and_listed_names_only() {
        let p = policy([127, 0, 0, 1], &["api.example.com"], &[]);
        for host in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
            "10.0.0.7",
            "api.example.com:443",
            "Api.Example.Com.",
        ] {
            assert!(p.host_allowed(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
        ] {
            assert!(!p.host_allowed(host), "{host}");
        }
        let p = policy([127, 0, 0, 1], &[], &[]);
        assert!(!p.host_allowed("api.example.com"));
    }

    #[test]
    fn a_public_server_serves_any_name_unless_names_are_listed() {
        assert!(policy([0, 0, 0, 0], &[], &[]).host_allowed("anything.example"));
        let p = policy([0, 0, 0, 0], &["api.example.com"], &[]);
        assert!(p.host_allowed("api.example.com"));
        assert!(!p.host_allowed("anything.example"));
    }

    #[test]
    fn only_listed_origins_are_allowed_cross_origin() {
        let p = policy([127, 0, 0, 1], &[], &["https://app.example.com/"]);
        assert!(p.origin_allowed("https://APP.example.com"));
        assert!(!p.origin_allowed("https://evil.example"));
        assert!(!p.origin_allowed("null"));
        assert!(policy([127, 0, 0, 1], &[], &["*"]).origin_allowed("https://x.example"));
        assert!(same_origin("http://localhost:8080", Some("localhost:8080")));
        assert!(!same_origin("http://evil.example", Some("localhost:8080")));
    }
}
