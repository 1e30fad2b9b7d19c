//! API keys: with any configured, the API answers only requests that carry one of them as
//! `Authorization: Bearer KEY` (or `x-api-key: KEY`, as Anthropic's clients send it), and others get a 401 with an OpenAI error body.
//!
//! Only SHA-256 digests of the keys are kept, and a presented key's digest is compared with
//! every configured digest in constant time (`subtle`), so neither the comparison's time nor
//! the server's memory or logs tell anything about a key.
//!
//! Each key is a tenant: the handlers of a request run with its key's number as the current
//! tenant ([`current_tenant`]), which the engine keeps cached prompts apart by (unless the
//! server shares its prefix cache between keys).

use std::fmt;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};

use crate::error::ApiError;

/// The keys a server accepts (none: no key is asked for). Its `Debug` shows only how many.
#[derive(Clone, Default)]
pub struct ApiKeys {
    digests: Vec<[u8; 32]>,
}

impl fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKeys({} keys)", self.digests.len())
    }
}

impl ApiKeys {
    /// The keys `keys` (each trimmed of surrounding white space).
    ///
    /// # Errors
    ///
    /// A key that is empty, or has a character other than visible ASCII (a `Bearer` token
    /// cannot carry it); the message says which key by position, never the key.
    ///
    /// ```
    /// let keys = rinfer_serve::ApiKeys::new(["sk-local-1", "sk-local-2"]).unwrap();
    /// assert_eq!(keys.len(), 2);
    /// assert!(rinfer_serve::ApiKeys::new(["has space"]).is_err());
    /// ```
    pub fn new<S: AsRef<str>>(keys: impl IntoIterator<Item = S>) -> Result<Self, String> {
        let mut digests = Vec::new();
        for (i, key) in keys.into_iter().enumerate() {
            let key = key.as_ref().trim();
            if key.is_empty() || !key.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(format!(
                    "API key {} is empty or has a character other than visible ASCII",
                    i + 1
                ));
            }
            digests.push(digest(key.as_bytes()));
        }
        Ok(Self { digests })
    }

    /// The keys of a key file's text: one a line; blank lines and lines starting with `#`
    /// are skipped.
    ///
    /// # Errors
    ///
    /// As [`ApiKeys::new`], naming the line.
    pub fn from_file_text(text: &str) -> Result<Self, String> {
        let mut keys = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            Self::new([line]).map_err(|_| {
                format!(
                    "line {} is not a usable API key (empty or not visible ASCII)",
                    number + 1
                )
            })?;
            keys.push(line);
        }
        Self::new(keys)
    }

    /// These keys and `other`'s.
    pub fn merged(mut self, other: Self) -> Self {
        self.digests.extend(other.digests);
        self
    }

    /// How many keys there are.
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// Whether no key is configured (the API is then open).
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// Whether `presented` is one of the keys, in time independent of the keys and of
    /// which one matched.
    pub fn accepts(&self, presented: &str) -> bool {
        self.which(presented).is_some()
    }

    /// Which key `presented` is (numbered from 1), in time independent of the keys and of
    /// which one matched; `None` when it is none of them.
    pub fn which(&self, presented: &str) -> Option<u64> {
        let presented = digest(presented.as_bytes());
        let found = self
            .digests
            .iter()
            .zip(1u64..)
            .fold(0u64, |found, (key, number)| {
                u64::conditional_select(&found, &number, key.ct_eq(&presented))
            });
        (found != 0).then_some(found)
    }
}

/// The keys of the protected routes, and whether each key is a tenant of its own.
#[derive(Debug)]
pub struct KeyCheck {
    /// The keys.
    pub keys: ApiKeys,
    /// Each key's requests are a tenant of their own (false: the server shares its prefix
    /// cache between keys).
    pub tenants: bool,
}

impl KeyCheck {
    /// The key check `config` asks for.
    pub fn of(config: &crate::ServeConfig) -> Self {
        Self {
            keys: config.api_keys.clone(),
            tenants: !config.share_prefix_cache,
        }
    }
}

tokio::task_local! {
    /// The tenant of the request being handled (its key's number).
    static TENANT: u64;
}

/// The tenant of the request being handled: its key's number when keys are configured and
/// not shared, else `None` (every request is tenant 0 of the engine).
pub fn current_tenant() -> Option<u64> {
    TENANT.try_with(|t| *t).ok()
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The token of an `Authorization: Bearer TOKEN` header value.
fn bearer_token(value: &HeaderValue) -> Option<&str> {
    let value = value.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// The key of an `x-api-key: KEY` header value (Anthropic's clients send it so).
fn api_key_token(value: &HeaderValue) -> Option<&str> {
    Some(value.to_str().ok()?.trim()).filter(|t| !t.is_empty())
}

/// Middleware of the protected routes: passes requests carrying an accepted key, answers
/// others 401 (`WWW-Authenticate: Bearer`).
pub async fn require_key(
    State(check): State<Arc<KeyCheck>>,
    request: Request,
    next: Next,
) -> Response {
    if check.keys.is_empty() {
        return next.run(request).await;
    }
    let headers = request.headers();
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(bearer_token)
        .or_else(|| headers.get("x-api-key").and_then(api_key_token));
    let key = token.map(|token| check.keys.which(token));
    let message = match key {
        Some(Some(_)) if !check.tenants => return next.run(request).await,
        Some(Some(number)) => return TENANT.scope(number, next.run(request)).await,
        Some(None) => "the API key is not valid for this server",
        None => {
            "this server requires an API key: send it as `Authorization: Bearer KEY` or \
             `x-api-key: KEY` (the key the operator gave with --api-key or --api-key-file)"
        }
    };
    let mut response = ApiError {
        status: StatusCode::UNAUTHORIZED,
        ..ApiError::bad_request(message).with_code("invalid_api_key")
    }
    .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_configured_keys_are_accepted() {
        let keys = ApiKeys::new(["alpha-key", " beta-key "]).unwrap();
        assert!(keys.accepts("alpha-key"));
        assert!(keys.accepts("beta-key"));
        for wrong in ["", "alpha", "alpha-key ", "ALPHA-KEY", "beta-key2"] {
            assert!(!keys.accepts(wrong), "{wrong:?}");
        }
        assert!(!ApiKeys::default().accepts("alpha-key"));
    }

    #[test]
    fn each_key_has_its_own_number() {
        let keys = ApiKeys::new(["alpha-key", "beta-key", "gamma-key"]).unwrap();
        assert_eq!(keys.which("alpha-key"), Some(1));
        assert_eq!(keys.which("beta-key"), Some(2));
        assert_eq!(keys.which("gamma-key"), Some(3));
        assert_eq!(keys.which("delta-key"), None);
    }

    #[test]
    fn debug_output_never_shows_a_key() {
        let keys = ApiKeys::new(["secret-value-123"]).unwrap();
        let shown = format!("{keys:?}");
        assert_eq!(shown, "ApiKeys(1 keys)");
        assert!(!shown.contains("secret"));
    }

    #[test]
    fn key_files_have_one_key_a_line_with_comments_and_blanks_skipped() {
        let keys = ApiKeys::from_file_text("# team keys\nk1\n\n  k2  \n").unwrap();
        assert_eq!(keys.len(), 2);
        assert!(keys.accepts("k1") && keys.accepts("k2"));
        let err = ApiKeys::from_file_text("k1\nbad key\n").unwrap_err();
        assert!(err.contains("line 2") && !err.contains("bad key"), "{err}");
    }

    #[test]
    fn only_bearer_headers_carry_a_token() {
        let token =
            |v: &'static str| bearer_token(&HeaderValue::from_static(v)).map(str::to_string);
        assert_eq!(token("Bearer abc").as_deref(), Some("abc"));
        assert_eq!(token("bearer  abc ").as_deref(), Some("abc"));
        assert_eq!(token("Basic abc"), None);
        assert_eq!(token("Bearer "), None);
        assert_eq!(token("abc"), None);
    }
}
