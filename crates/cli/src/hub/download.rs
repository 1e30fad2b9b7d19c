//! One file from the hub into the cache: resumed where an earlier try stopped, hashed as it
//! arrives, and moved into place only when its digest matches.
//!
//! The download holds an exclusive lock on its lock file throughout; a second process pulling
//! the same file waits for it, then finds the blob in place (or the partial file to resume).
//! The bytes go to `blobs/<digest>.incomplete`. A try asks for the range from the partial
//! file's length on; the partial bytes already there are hashed first, so every byte is hashed
//! once per run. A server that answers a range with the whole file (200) restarts the file. A
//! connection that breaks or stalls is retried at once when the broken try brought bytes, and
//! after a growing pause when it brought none, up to [`MAX_STALLS`] tries in a row without
//! progress; the partial file then stays for the next `rinfer pull` to resume. When the size
//! listed is reached the digest is compared: a mismatch deletes the partial file (the bytes
//! cannot be trusted, so resuming them would only repeat the failure) and fails; a match
//! renames it to `blobs/<digest>`.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use sha1::Sha1;
use sha2::{Digest as _, Sha256};

use crate::hub::HubError;
use crate::hub::client::{Digest, HubClient, RemoteFile};
use crate::model_cache::hex;
use crate::progress::Progress;

/// Tries in a row that bring no byte before the download gives up.
const MAX_STALLS: u32 = 3;
/// The pause after the first try without progress; it doubles after each further one.
const FIRST_PAUSE: Duration = Duration::from_millis(500);
/// Bytes read from the network per write.
const BUFFER_BYTES: usize = 1 << 20;

/// Where the file goes and where it comes from.
pub struct Target<'a> {
    /// The hub.
    pub client: &'a HubClient,
    /// `org/repo`.
    pub repo: &'a str,
    /// The commit the file is taken from.
    pub commit: &'a str,
    /// The file.
    pub file: &'a RemoteFile,
    /// The lock file of the download.
    pub lock: PathBuf,
    /// `blobs/<digest>.incomplete`.
    pub partial: PathBuf,
    /// `blobs/<digest>`.
    pub blob: PathBuf,
}

/// Downloads `target.file` into `target.blob`, counting its bytes on `progress`.
pub fn download(target: &Target<'_>, progress: &Progress) -> Result<(), HubError> {
    let file = target.file;
    let io_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| HubError::Io { path, source }
    };
    for dir in [target.partial.parent(), target.lock.parent()]
        .into_iter()
        .flatten()
    {
        fs::create_dir_all(dir).map_err(io_error(dir))?;
    }
    let lock = File::create(&target.lock).map_err(io_error(&target.lock))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            progress.stage(format!(
                "{}: waiting for another process downloading it",
                file.path
            ));
            lock.lock().map_err(io_error(&target.lock))?;
        }
        // A file system without locks: the download goes on unlocked.
        Err(TryLockError::Error(_)) => {}
    }
    if target.blob.is_file() {
        progress.advance(file.size);
        return Ok(());
    }
    let mut out = OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(&target.partial)
        .map_err(io_error(&target.partial))?;
    let mut have = out.metadata().map_err(io_error(&target.partial))?.len();
    if have > file.size {
        out.set_len(0).map_err(io_error(&target.partial))?;
        have = 0;
    }
    let mut hasher = FileHasher::new(&file.digest, file.size);
    hasher
        .consume_prefix(&mut out, have)
        .map_err(io_error(&target.partial))?;
    progress.advance(have);

    let mut buffer = vec![0u8; BUFFER_BYTES];
    let mut stalls = 0;
    while have < file.size {
        let before = have;
        let result = transfer(
            target,
            &mut out,
            &mut hasher,
            &mut have,
            &mut buffer,
            progress,
        );
        match result {
            Ok(()) if have == file.size => break,
            Ok(()) => {}
            Err(error) if !error.is_retryable() => return Err(error),
            Err(_) if have > before => stalls = 0,
            Err(error) => {
                stalls += 1;
                if stalls >= MAX_STALLS {
                    return Err(HubError::GaveUp {
                        path: file.path.clone(),
                        tries: stalls,
                        have,
                        size: file.size,
                        last: Box::new(error),
                    });
                }
                thread::sleep(FIRST_PAUSE * (1 << (stalls - 1)));
            }
        }
        progress.stage(format!("{}: resuming at byte {have}", file.path));
    }
    let actual = hasher.finish();
    if actual != file.digest.hex() {
        drop(out);
        let _ = fs::remove_file(&target.partial);
        return Err(HubError::Checksum {
            path: file.path.clone(),
            expected: file.digest.clone(),
            actual,
        });
    }
    out.sync_all().map_err(io_error(&target.partial))?;
    drop(out);
    fs::rename(&target.partial, &target.blob).map_err(io_error(&target.blob))
}

/// One request: appends what arrives to `out` until the body ends or breaks. An early end
/// (the body shorter than the rest of the file) is a retryable error like a broken one.
fn transfer(
    target: &Target<'_>,
    out: &mut File,
    hasher: &mut FileHasher,
    have: &mut u64,
    buffer: &mut [u8],
    progress: &Progress,
) -> Result<(), HubError> {
    let size = target.file.size;
    let mut transfer = target
        .client
        .download(target.repo, target.commit, target.file, *have)?;
    if transfer.start != *have {
        // The server sent the whole file: start it again.
        let write_error = |source| HubError::Io {
            path: target.partial.clone(),
            source,
        };
        out.set_len(0).map_err(write_error)?;
        progress.retreat(*have);
        *have = 0;
        *hasher = FileHasher::new(&target.file.digest, size);
    }
    loop {
        let n = match transfer.body.read(buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(HubError::Broken {
                    path: target.file.path.clone(),
                    at: *have,
                    source,
                });
            }
        };
        if *have + n as u64 > size {
            drop(transfer);
            let _ = fs::remove_file(&target.partial);
            return Err(HubError::TooLong {
                path: target.file.path.clone(),
                size,
            });
        }
        out.write_all(&buffer[..n]).map_err(|source| HubError::Io {
            path: target.partial.clone(),
            source,
        })?;
        hasher.update(&buffer[..n]);
        *have += n as u64;
        progress.advance(n as u64);
    }
    if *have < size {
        return Err(HubError::Broken {
            path: target.file.path.clone(),
            at: *have,
            source: io::Error::new(io::ErrorKind::UnexpectedEof, "the body ended early"),
        });
    }
    Ok(())
}

/// The running digest of a file of the kind the hub lists.
enum FileHasher {
    Sha256(Sha256),
    GitSha1(Sha1),
}

impl FileHasher {
    fn new(digest: &Digest, size: u64) -> Self {
        match digest {
            Digest::Sha256(_) => Self::Sha256(Sha256::new()),
            Digest::GitSha1(_) => {
                let mut sha1 = Sha1::new();
                sha1.update(format!("blob {size}\0").as_bytes());
                Self::GitSha1(sha1)
            }
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Sha256(h) => h.update(bytes),
            Self::GitSha1(h) => h.update(bytes),
        }
    }

    /// Hashes the first `len` bytes of `file`, leaving its cursor anywhere (it appends).
    fn consume_prefix(&mut self, file: &mut File, len: u64) -> io::Result<()> {
        file.rewind()?;
        let mut reader = file.take(len);
        let mut buffer = vec![0u8; BUFFER_BYTES];
        loop {
            let n = reader.read(&mut buffer)?;
            if n == 0 {
                return Ok(());
            }
            self.update(&buffer[..n]);
        }
    }

    fn finish(self) -> String {
        match self {
            Self::Sha256(h) => hex(&h.finalize()),
            Self::GitSha1(h) => hex(&h.finalize()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_git_file_hashes_as_git_names_it() {
        // `git hash-object` of a file holding "abc".
        let digest = Digest::GitSha1("f2ba8f84ab5c1bce84a7b441cb1959cfc7093b7f".into());
        let mut hasher = FileHasher::new(&digest, 3);
        hasher.update(b"abc");
        assert_eq!(hasher.finish(), digest.hex());
    }
}
