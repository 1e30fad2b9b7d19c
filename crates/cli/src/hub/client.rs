//! The three requests `rinfer pull` makes of a Hugging Face hub, over blocking HTTP (ureq).
//!
//! - `GET {endpoint}/api/models/{repo}/revision/{revision}`: the commit the revision points at
//!   (`sha`), so that every file comes from one commit even if the branch moves meanwhile.
//! - `GET {endpoint}/api/models/{repo}/tree/{commit}?recursive=true`: every file with its size
//!   and digest. A file stored in LFS (every model file) carries `lfs.oid`, the SHA-256 of its
//!   contents, and `lfs.size`; a plain git file carries only `oid`, the git blob SHA-1. Pages
//!   are followed through the `Link: <…>; rel="next"` header, only to the same endpoint.
//! - `GET {endpoint}/{repo}/resolve/{commit}/{path}`, with `Range: bytes=N-` to resume at byte
//!   N: the hub redirects to its CDN, which answers 206 with `Content-Range: bytes N-…/SIZE`
//!   (or 200 with the whole file when it ignores the range).
//!
//! The token goes in `Authorization: Bearer`, also across a redirect to the same host, never to
//! another one (the CDN's URLs are signed). A read that waits longer than [`READ_TIMEOUT`]
//! fails, so a stalled connection is retried instead of hanging.

use std::fmt::Write as _;
use std::io::Read;
use std::time::Duration;

use serde::Deserialize;
use ureq::Agent;
use ureq::config::RedirectAuthHeaders;
use ureq::http::{Response, StatusCode};

use crate::hub::HubError;

/// The longest wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest wait for any one read, headers or body.
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest API answer read (one page of a file listing).
const MAX_JSON_BYTES: u64 = 32 << 20;
/// The most listing pages followed.
const MAX_PAGES: usize = 1000;

/// Where the hub is and who asks, read once by the CLI from `HF_ENDPOINT` and `HF_TOKEN`.
#[derive(Clone)]
pub struct HubSettings {
    /// `https://huggingface.co` or a mirror, without a trailing `/`.
    pub endpoint: String,
    /// The access token for gated and private repositories.
    pub token: Option<String>,
}

/// How a file's contents are checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Digest {
    /// The SHA-256 of the contents, lower-case hex (LFS files).
    Sha256(String),
    /// The git blob SHA-1, `sha1("blob {size}\0" + contents)`, lower-case hex (plain files).
    GitSha1(String),
}

impl Digest {
    /// The hex digest, which is also the blob's name in the cache.
    pub fn hex(&self) -> &str {
        match self {
            Digest::Sha256(hex) | Digest::GitSha1(hex) => hex,
        }
    }
}

/// A file of a repository at one commit.
#[derive(Clone, Debug)]
pub struct RemoteFile {
    /// Its path in the repository, `/`-separated.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// What its contents must hash to.
    pub digest: Digest,
}

/// A file's body as it arrives, from byte `start` on.
pub struct Transfer {
    /// The offset of the body's first byte in the file: the range asked for, or 0 when the
    /// server sent the whole file instead.
    pub start: u64,
    /// The body.
    pub body: Box<dyn Read>,
}

/// A client of one hub.
pub struct HubClient {
    agent: Agent,
    settings: HubSettings,
}

#[derive(Deserialize)]
struct RevisionInfo {
    sha: String,
}

#[derive(Deserialize)]
struct TreeEntry {
    #[serde(rename = "type")]
    kind: String,
    path: String,
    #[serde(default)]
    size: u64,
    #[serde(default)]
    oid: Option<String>,
    #[serde(default)]
    lfs: Option<LfsInfo>,
}

#[derive(Deserialize)]
struct LfsInfo {
    oid: String,
    size: u64,
}

impl HubClient {
    /// A client of the hub `settings` name.
    pub fn new(settings: HubSettings) -> Self {
        let config = Agent::config_builder()
            .http_status_as_error(false)
            .redirect_auth_headers(RedirectAuthHeaders::SameHost)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_per_read(Some(READ_TIMEOUT))
            .user_agent(concat!("rinfer/", env!("CARGO_PKG_VERSION")))
            .build();
        Self {
            agent: Agent::new_with_config(config),
            settings,
        }
    }

    /// The hub's address.
    pub fn endpoint(&self) -> &str {
        &self.settings.endpoint
    }

    /// The commit `revision` (a branch, tag or commit) of `repo` points at.
    pub fn commit(&self, repo: &str, revision: &str) -> Result<String, HubError> {
        let url = format!(
            "{}/api/models/{repo}/revision/{}",
            self.settings.endpoint,
            encode(revision)
        );
        let response = self.get(&url, None)?;
        let info: RevisionInfo = self.json(response, &url)?;
        if info.sha.len() == 40 && is_hex(&info.sha) {
            Ok(info.sha.to_ascii_lowercase())
        } else {
            Err(HubError::Malformed {
                url,
                what: format!("`{}` is not a commit id", info.sha),
            })
        }
    }

    /// Every file of `repo` at `commit` whose path `keep` accepts.
    pub fn list_files(
        &self,
        repo: &str,
        commit: &str,
        keep: impl Fn(&str) -> bool,
    ) -> Result<Vec<RemoteFile>, HubError> {
        let mut url = format!(
            "{}/api/models/{repo}/tree/{commit}?recursive=true",
            self.settings.endpoint
        );
        let mut files = Vec::new();
        for _ in 0..MAX_PAGES {
            let response = self.get(&url, None)?;
            let next = next_page(&response);
            let entries: Vec<TreeEntry> = self.json(response, &url)?;
            for entry in entries {
                if entry.kind == "file" && keep(&entry.path) {
                    files.push(remote_file(entry, &url)?);
                }
            }
            match next {
                None => return Ok(files),
                Some(next) if next.starts_with(&format!("{}/", self.settings.endpoint)) => {
                    url = next;
                }
                Some(next) => {
                    return Err(HubError::Malformed {
                        url,
                        what: format!("its next page {next} is on another server"),
                    });
                }
            }
        }
        Err(HubError::Malformed {
            url,
            what: format!("the listing goes on past {MAX_PAGES} pages"),
        })
    }

    /// Starts the download of `file` from byte `from`.
    pub fn download(
        &self,
        repo: &str,
        commit: &str,
        file: &RemoteFile,
        from: u64,
    ) -> Result<Transfer, HubError> {
        let path: Vec<String> = file.path.split('/').map(encode).collect();
        let url = format!(
            "{}/{repo}/resolve/{commit}/{}",
            self.settings.endpoint,
            path.join("/")
        );
        let range = (from > 0).then(|| format!("bytes={from}-"));
        let response = self.get(&url, range.as_deref())?;
        let start = if response.status() == StatusCode::PARTIAL_CONTENT {
            content_range_start(&response, file.size)
                .filter(|&start| start == from)
                .ok_or_else(|| HubError::Malformed {
                    url: url.clone(),
                    what: format!("its Content-Range does not start at byte {from}"),
                })?
        } else {
            0
        };
        Ok(Transfer {
            start,
            body: Box::new(response.into_body().into_reader()),
        })
    }

    /// A GET of `url` that succeeded (2xx), or the error the status means.
    fn get(&self, url: &str, range: Option<&str>) -> Result<Response<ureq::Body>, HubError> {
        let mut request = self.agent.get(url);
        if let Some(token) = &self.settings.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        if let Some(range) = range {
            request = request.header("Range", range);
        }
        let mut response = request.call().map_err(|source| HubError::Http {
            url: url.to_owned(),
            source: Box::new(source),
        })?;
        let status = response.status();
        if matches!(status, StatusCode::OK | StatusCode::PARTIAL_CONTENT) {
            return Ok(response);
        }
        let message = error_message(&mut response);
        Err(HubError::Status {
            url: url.to_owned(),
            status: status.as_u16(),
            message,
        })
    }

    fn json<T: serde::de::DeserializeOwned>(
        &self,
        mut response: Response<ureq::Body>,
        url: &str,
    ) -> Result<T, HubError> {
        let bytes = response
            .body_mut()
            .with_config()
            .limit(MAX_JSON_BYTES)
            .read_to_vec()
            .map_err(|source| HubError::Http {
                url: url.to_owned(),
                source: Box::new(source),
            })?;
        serde_json::from_slice(&bytes).map_err(|e| HubError::Malformed {
            url: url.to_owned(),
            what: format!("its answer is not the JSON expected: {e}"),
        })
    }
}

fn remote_file(entry: TreeEntry, url: &str) -> Result<RemoteFile, HubError> {
    let malformed = |what: String| HubError::Malformed {
        url: url.to_owned(),
        what,
    };
    if !entry
        .path
        .split('/')
        .all(|part| !part.is_empty() && part != "." && part != ".." && !part.contains('\\'))
    {
        return Err(malformed(format!(
            "`{}` is not a relative path",
            entry.path
        )));
    }
    let (size, digest) = match entry.lfs {
        Some(lfs) if lfs.oid.len() == 64 && is_hex(&lfs.oid) => {
            (lfs.size, Digest::Sha256(lfs.oid.to_ascii_lowercase()))
        }
        Some(lfs) => return Err(malformed(format!("`{}` is not a SHA-256", lfs.oid))),
        None => match entry.oid {
            Some(oid) if oid.len() == 40 && is_hex(&oid) => {
                (entry.size, Digest::GitSha1(oid.to_ascii_lowercase()))
            }
            _ => return Err(malformed(format!("{} has no digest", entry.path))),
        },
    };
    Ok(RemoteFile {
        path: entry.path,
        size,
        digest,
    })
}

/// The hub's own explanation of an error: its `X-Error-Message` header, else the `error` field
/// of a JSON body, else nothing.
fn error_message(response: &mut Response<ureq::Body>) -> Option<String> {
    if let Some(message) = response
        .headers()
        .get("x-error-message")
        .and_then(|v| v.to_str().ok())
    {
        return Some(message.to_owned());
    }
    let body = response
        .body_mut()
        .with_config()
        .limit(64 << 10)
        .read_to_vec()
        .ok()?;
    let value: serde_json::Value = serde_json::from_slice(&body).ok()?;
    value.get("error")?.as_str().map(str::to_owned)
}

/// The `next` URL of a `Link` header.
fn next_page(response: &Response<ureq::Body>) -> Option<String> {
    let link = response.headers().get("link")?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        let is_next = params
            .split(';')
            .any(|p| p.trim().trim_start_matches("rel=").trim_matches('"') == "next");
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        is_next.then(|| target.to_owned())
    })
}

/// The first byte of `Content-Range: bytes START-END/SIZE`, when SIZE is `size` (or `*`).
fn content_range_start(response: &Response<ureq::Body>, size: u64) -> Option<u64> {
    let value = response.headers().get("content-range")?.to_str().ok()?;
    let (range, total) = value.strip_prefix("bytes ")?.split_once('/')?;
    if total != "*" && total.parse::<u64>().ok()? != size {
        return None;
    }
    range.split_once('-')?.0.parse().ok()
}

fn is_hex(text: &str) -> bool {
    text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Percent-encodes one path segment (everything but RFC 3986's unreserved characters).
fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_are_percent_encoded() {
        assert_eq!(encode("Model-Q4_K_M.gguf"), "Model-Q4_K_M.gguf");
        assert_eq!(encode("a b?#%"), "a%20b%3F%23%25");
    }

    #[test]
    fn listed_paths_that_leave_the_snapshot_are_refused() {
        for path in [
            "../x.gguf",
            "a/../../x.gguf",
            "/etc/x.gguf",
            "a//x.gguf",
            "a\\..\\x",
        ] {
            let entry = TreeEntry {
                kind: "file".into(),
                path: path.into(),
                size: 1,
                oid: Some("0".repeat(40)),
                lfs: None,
            };
            assert!(remote_file(entry, "u").is_err(), "{path}");
        }
    }
}
