//! Models pulled by name from a Hugging Face hub: `org/repo[:QUANT]` ([`reference`]) is looked
//! up on the hub ([`client`]), its GGUF file or shards chosen as llama.cpp's `-hf` does
//! ([`pick`]), each downloaded with resume and checked against the SHA-256 the hub publishes
//! ([`download`]), into a cache with the hub's own layout ([`cache`]).
//!
//! A pull reads `main`'s commit, lists that commit's files, and fetches every chosen file the
//! cache lacks; `refs/main` moves to the commit only when all of them are in place, so a model
//! found through `refs/main` is always whole.

pub mod cache;
pub mod client;
pub mod download;
pub mod pick;
pub mod reference;

use std::io;
use std::path::PathBuf;

use crate::hub::cache::HubCache;
use crate::hub::client::{Digest, HubClient};
use crate::hub::download::Target;
use crate::hub::reference::HubModel;
use crate::progress::Progress;

/// Why a pull failed, with what to do about it. A message leaves out its `source`, which the
/// error chain prints after it.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// No answer: the hub is unreachable, or the connection broke before an answer.
    #[error("cannot reach {url} (is the network up, and HF_ENDPOINT right?)")]
    Http {
        /// What was asked.
        url: String,
        /// Why.
        source: Box<ureq::Error>,
    },
    /// The hub answered with an error status.
    #[error("{url} answered {status}{}", explain(message.as_deref(), *status))]
    Status {
        /// What was asked.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The hub's explanation, if it gave one.
        message: Option<String>,
    },
    /// The hub answered something this client does not understand.
    #[error("{url} answered unexpectedly: {what}")]
    Malformed {
        /// What was asked.
        url: String,
        /// What is wrong with the answer.
        what: String,
    },
    /// The repository holds no file that fits the request.
    #[error("{model} on {endpoint}: {reason}")]
    NoModel {
        /// The model asked for.
        model: String,
        /// The hub.
        endpoint: String,
        /// What the repository lacks.
        reason: String,
    },
    /// A connection broke in the middle of a file.
    #[error("the download of {path} broke at byte {at}")]
    Broken {
        /// The file's path in the repository.
        path: String,
        /// Bytes of it on disk.
        at: u64,
        /// Why.
        source: io::Error,
    },
    /// Tries in a row brought no byte.
    #[error(
        "gave up on {path} after {tries} tries in a row without progress ({have} of {size} bytes \
         kept; run `rinfer pull` again to resume)"
    )]
    GaveUp {
        /// The file's path in the repository.
        path: String,
        /// Tries without progress.
        tries: u32,
        /// Bytes of it kept on disk.
        have: u64,
        /// Its size.
        size: u64,
        /// The last try's error.
        #[source]
        last: Box<HubError>,
    },
    /// The server sent more bytes than the listing gave as the file's size.
    #[error(
        "the hub sent more than the {size} bytes it lists for {path}; the download was deleted"
    )]
    TooLong {
        /// The file's path in the repository.
        path: String,
        /// The size listed.
        size: u64,
    },
    /// The file's contents do not hash to the digest the hub publishes.
    #[error(
        "{path} failed its checksum: the hub publishes {} {}, the download hashes to {actual}; \
         the download was deleted and nothing of it is cached",
        digest_kind(expected),
        expected.hex()
    )]
    Checksum {
        /// The file's path in the repository.
        path: String,
        /// The digest published.
        expected: Digest,
        /// The digest of what arrived.
        actual: String,
    },
    /// The cache could not be written.
    #[error("cannot write {}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

impl HubError {
    /// Whether trying again may succeed: broken connections, timeouts, and the statuses of a
    /// busy or failing server (429, 5xx).
    pub fn is_retryable(&self) -> bool {
        match self {
            HubError::Http { .. } | HubError::Broken { .. } => true,
            HubError::Status { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

/// The hub's message of an error status, and what to do about the status.
fn explain(message: Option<&str>, status: u16) -> String {
    let hint = match status {
        401 => " (set HF_TOKEN to a token that may read this repository)",
        403 => " (a gated model: accept its terms on the hub, and set HF_TOKEN)",
        404 => " (no such repository or file; a private repository needs HF_TOKEN)",
        _ => "",
    };
    match message {
        Some(message) => format!(": {message}{hint}"),
        None => hint.to_owned(),
    }
}

fn digest_kind(digest: &Digest) -> &'static str {
    match digest {
        Digest::Sha256(_) => "sha256",
        Digest::GitSha1(_) => "git sha1",
    }
}

/// Pulls `model` from the hub into `cache`: the paths of its files in the snapshot, shards in
/// order.
pub fn pull(
    client: &HubClient,
    cache: &HubCache,
    model: &HubModel,
) -> Result<Vec<PathBuf>, HubError> {
    let repo = model.repo.as_str();
    let commit = client.commit(repo, "main")?;
    let listed = client.list_files(repo, &commit, |path| {
        path.to_ascii_lowercase().ends_with(".gguf")
    })?;
    let paths: Vec<&str> = listed.iter().map(|f| f.path.as_str()).collect();
    let chosen =
        pick::choose(&paths, model.quant.as_deref()).map_err(|reason| HubError::NoModel {
            model: model.to_string(),
            endpoint: client.endpoint().to_owned(),
            reason,
        })?;
    let files: Vec<_> = chosen
        .iter()
        .filter_map(|path| listed.iter().find(|f| f.path == *path))
        .collect();
    let missing: Vec<_> = files
        .iter()
        .filter(|f| !cache.blob(model, &f.digest).is_file())
        .collect();
    let progress = Progress::new(missing.iter().map(|f| f.size).sum());
    for (i, file) in missing.iter().enumerate() {
        progress.stage(format!("{}/{}: {}", i + 1, missing.len(), file.path));
        let target = Target {
            client,
            repo,
            commit: &commit,
            file,
            lock: cache.lock_file(model, &file.digest),
            partial: cache.partial(model, &file.digest),
            blob: cache.blob(model, &file.digest),
        };
        download::download(&target, &progress)?;
    }
    progress.finish();
    let mut snapshot = Vec::with_capacity(files.len());
    for file in &files {
        let entry = cache
            .link(model, &commit, file)
            .map_err(|source| HubError::Io {
                path: cache.snapshot_file(model, &commit, &file.path),
                source,
            })?;
        snapshot.push(entry);
    }
    cache
        .set_main(model, &commit)
        .map_err(|source| HubError::Io {
            path: cache.root().join(model.folder_name()).join("refs"),
            source,
        })?;
    Ok(snapshot)
}
