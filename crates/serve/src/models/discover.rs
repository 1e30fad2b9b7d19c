//! The models a directory holds, and the name each is served as.
//!
//! A model is a GGUF file, named by its file stem, or a Hugging Face model directory (one with
//! a `config.json`), named by the directory. The shards of a split GGUF
//! (`NAME-00001-of-00003.gguf`, ...) are one model, `NAME`, loaded from its first shard.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rinfer_formats::gguf::ShardName;

use crate::config::ModelEntry;
use crate::error::ServeError;

/// The name a model file or directory is served as: its stem, without a split GGUF's shard
/// suffix.
pub fn model_name(path: &Path) -> String {
    let shard = ShardName::parse(path).filter(|_| !path.is_dir());
    let name = match &shard {
        Some(shard) => Path::new(&shard.prefix).file_name(),
        None if path.is_dir() => path.file_name(),
        None => path.file_stem(),
    };
    name.map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned())
}

/// Every model in `dir` (not its subdirectories' files), loaded on first use, sorted by name.
///
/// # Errors
///
/// [`ServeError::Config`] when the directory cannot be read, holds no model, or holds two of
/// one name.
pub fn models_in_dir(dir: &Path) -> Result<Vec<ModelEntry>, ServeError> {
    let unreadable =
        |e: std::io::Error| ServeError::Config(format!("cannot read {}: {e}", dir.display()));
    let mut found: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut shards_without_first: Vec<String> = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(unreadable)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(unreadable)?;
    paths.sort();
    for path in paths {
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        let gguf = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
        let is_model = if path.is_dir() {
            path.join("config.json").is_file()
        } else {
            gguf && path.is_file()
        };
        if hidden || !is_model {
            continue;
        }
        if !path.is_dir() && ShardName::parse(&path).is_some_and(|shard| shard.index != 1) {
            shards_without_first.push(model_name(&path));
            continue;
        }
        let name = model_name(&path);
        if let Some(other) = found.insert(name.clone(), path.clone()) {
            return Err(ServeError::Config(format!(
                "{} and {} are both named `{name}`: serve one of them with --model NAME=PATH",
                other.display(),
                path.display()
            )));
        }
    }
    for name in shards_without_first {
        if !found.contains_key(&name) {
            tracing::warn!(
                "{}: the split model `{name}` has no first shard ({name}-00001-of-*.gguf); skipped",
                dir.display()
            );
        }
    }
    if found.is_empty() {
        return Err(ServeError::Config(format!(
            "{} holds no model (GGUF files or Hugging Face model directories)",
            dir.display()
        )));
    }
    Ok(found
        .into_iter()
        .map(|(id, path)| ModelEntry {
            id,
            path,
            load_at_start: false,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_model_is_named_without_its_shard_suffix() {
        let name = |path: &str| model_name(Path::new(path));
        assert_eq!(name("d/qwen-7b-q4-00001-of-00003.gguf"), "qwen-7b-q4");
        assert_eq!(name("d/qwen-00002-of-00003.gguf"), "qwen");
        assert_eq!(name("d/qwen-1-of-3.gguf"), "qwen-1-of-3");
        assert_eq!(name("d/plain.gguf"), "plain");
        assert_eq!(model_name(Path::new("d/m-00001-of-00002.gguf")), "m");
        assert_eq!(
            model_name(Path::new("d/gemma-3-270m.Q4_K_M.gguf")),
            "gemma-3-270m.Q4_K_M"
        );
    }

    #[test]
    fn a_directory_serves_each_gguf_once_and_skips_everything_else() {
        let dir = std::env::temp_dir().join(format!("rinfer-models-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("hf-model")).unwrap();
        std::fs::create_dir_all(dir.join("not-a-model")).unwrap();
        std::fs::write(dir.join("hf-model/config.json"), "{}").unwrap();
        for file in [
            "a.gguf",
            "b-00001-of-00002.gguf",
            "b-00002-of-00002.gguf",
            "orphan-00002-of-00002.gguf",
            "notes.txt",
            ".hidden.gguf",
        ] {
            std::fs::write(dir.join(file), b"").unwrap();
        }
        let models = models_in_dir(&dir).unwrap();
        let names: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(names, ["a", "b", "hf-model"]);
        assert!(models[1].path.ends_with("b-00001-of-00002.gguf"));
        assert!(models.iter().all(|m| !m.load_at_start));
        std::fs::write(dir.join("a-00001-of-00001.gguf"), b"").unwrap();
        let err = models_in_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("both named `a`"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
        let err = models_in_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("cannot read"), "{err}");
    }
}
