//! Pulled models on disk, laid out as `huggingface_hub` lays out its cache, so that either tool
//! can read what the other wrote (point `HF_HUB_CACHE` at `$RINFER_HOME/hub`):
//!
//! ```text
//! $RINFER_HOME/hub/models--org--repo/
//!     blobs/<digest>                 a file's contents, named by its SHA-256 (git SHA-1 for
//!                                    plain git files); present only once verified
//!     blobs/<digest>.incomplete      a download in progress, resumed from its length
//!     snapshots/<commit>/<path>      a relative symlink to ../../blobs/<digest>
//!     refs/main                      the commit `main` pointed at when last pulled
//! $RINFER_HOME/hub/.locks/models--org--repo/<digest>.lock
//!                                    held while a process downloads that blob
//! ```
//!
//! A blob is renamed into place only after its digest matched, so a blob that exists is
//! trusted without hashing it again; `refs/main` is written only after every file of the pull
//! is in place. Looking a model up reads only the disk.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::hub::client::{Digest, RemoteFile};
use crate::hub::pick;
use crate::hub::reference::HubModel;

/// The deepest directory of a snapshot searched for model files.
const MAX_DEPTH: usize = 8;
/// The most entries of a snapshot looked at.
const MAX_ENTRIES: usize = 100_000;

/// The cache of pulled models.
pub struct HubCache {
    root: PathBuf,
}

impl HubCache {
    /// The cache at `root` (`$RINFER_HOME/hub`).
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// The cache's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn repo_dir(&self, model: &HubModel) -> PathBuf {
        self.root.join(model.folder_name())
    }

    /// Where a verified file with `digest` lives.
    pub fn blob(&self, model: &HubModel, digest: &Digest) -> PathBuf {
        self.repo_dir(model).join("blobs").join(digest.hex())
    }

    /// Where a download of the file with `digest` grows until it is verified.
    pub fn partial(&self, model: &HubModel, digest: &Digest) -> PathBuf {
        self.repo_dir(model)
            .join("blobs")
            .join(format!("{}.incomplete", digest.hex()))
    }

    /// The file locked while the blob with `digest` is downloaded, so that two processes
    /// pulling the same model take turns instead of writing one partial file together.
    pub fn lock_file(&self, model: &HubModel, digest: &Digest) -> PathBuf {
        self.root
            .join(".locks")
            .join(model.folder_name())
            .join(format!("{}.lock", digest.hex()))
    }

    /// Where `path` of `commit` appears.
    pub fn snapshot_file(&self, model: &HubModel, commit: &str, path: &str) -> PathBuf {
        let mut out = self.repo_dir(model).join("snapshots").join(commit);
        out.extend(path.split('/'));
        out
    }

    /// Makes `file`'s snapshot entry of `commit` point at its blob, which must exist.
    pub fn link(&self, model: &HubModel, commit: &str, file: &RemoteFile) -> io::Result<PathBuf> {
        let entry = self.snapshot_file(model, commit, &file.path);
        let Some(parent) = entry.parent() else {
            return Err(io::Error::other("a snapshot entry has no directory"));
        };
        fs::create_dir_all(parent)?;
        let staged = parent.join(format!(
            ".{}.link",
            entry.file_name().unwrap_or_default().to_string_lossy()
        ));
        let _ = fs::remove_file(&staged);
        #[cfg(unix)]
        {
            // snapshots/<commit>/<dirs…>/<name> → ../../<one `..` per dir>/blobs/<digest>
            let depth = file.path.split('/').count() + 1;
            let mut target = PathBuf::new();
            for _ in 0..depth {
                target.push("..");
            }
            target.push("blobs");
            target.push(file.digest.hex());
            std::os::unix::fs::symlink(target, &staged)?;
        }
        #[cfg(not(unix))]
        fs::hard_link(self.blob(model, &file.digest), &staged)?;
        fs::rename(&staged, &entry)?;
        Ok(entry)
    }

    /// Records that `main` points at `commit`.
    pub fn set_main(&self, model: &HubModel, commit: &str) -> io::Result<()> {
        let refs = self.repo_dir(model).join("refs");
        fs::create_dir_all(&refs)?;
        let staged = refs.join(".main.tmp");
        fs::write(&staged, commit)?;
        fs::rename(staged, refs.join("main"))
    }

    /// The files of `model` in the snapshot `refs/main` names, shards in order, when every one
    /// of them is there; `None` when the model was never pulled or is incomplete.
    pub fn cached(&self, model: &HubModel) -> io::Result<Option<Vec<PathBuf>>> {
        let main = match fs::read_to_string(self.repo_dir(model).join("refs").join("main")) {
            Ok(text) => text.trim().to_owned(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if main.len() != 40 || !main.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let snapshot = self.repo_dir(model).join("snapshots").join(&main);
        let mut found = Vec::new();
        collect_files(&snapshot, "", 0, &mut found)?;
        let paths: Vec<&str> = found.iter().map(String::as_str).collect();
        Ok(pick::choose(&paths, model.quant.as_deref())
            .ok()
            .map(|chosen| {
                chosen
                    .iter()
                    .map(|path| self.snapshot_file(model, &main, path))
                    .collect()
            }))
    }
}

/// The `/`-separated paths under `dir` (prefixed with `prefix`) of entries that are, or link
/// to, regular files; a missing directory holds none.
fn collect_files(dir: &Path, prefix: &str, depth: usize, out: &mut Vec<String>) -> io::Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        if out.len() >= MAX_ENTRIES {
            break;
        }
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let path = format!("{prefix}{name}");
        // `metadata` follows the link: a dangling link is no file.
        match fs::metadata(entry.path()) {
            Ok(meta) if meta.is_file() => out.push(path),
            Ok(meta) if meta.is_dir() && depth < MAX_DEPTH => {
                collect_files(&entry.path(), &format!("{path}/"), depth + 1, out)?;
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, hex: &str) -> RemoteFile {
        RemoteFile {
            path: path.into(),
            size: 3,
            digest: Digest::Sha256(hex.into()),
        }
    }

    #[test]
    fn a_model_is_cached_once_main_names_a_snapshot_holding_all_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let cache = HubCache::new(dir.path().to_path_buf());
        let model = HubModel::parse("org/repo:F16").unwrap();
        let commit = "a".repeat(40);
        assert!(cache.cached(&model).unwrap().is_none());

        let first = file("sub/M-F16-00001-of-00002.gguf", "1");
        let second = file("sub/M-F16-00002-of-00002.gguf", "2");
        fs::create_dir_all(cache.blob(&model, &first.digest).parent().unwrap()).unwrap();
        fs::write(cache.blob(&model, &first.digest), b"one").unwrap();
        let linked = cache.link(&model, &commit, &first).unwrap();
        assert_eq!(fs::read(&linked).unwrap(), b"one");
        cache.set_main(&model, &commit).unwrap();
        // One shard of two is not the model.
        assert!(cache.cached(&model).unwrap().is_none());

        fs::write(cache.blob(&model, &second.digest), b"two").unwrap();
        cache.link(&model, &commit, &second).unwrap();
        let files = cache.cached(&model).unwrap().unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(fs::read(&files[1]).unwrap(), b"two");
        assert!(files[0].ends_with(
            "snapshots/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/sub/M-F16-00001-of-00002.gguf"
        ));
    }
}
