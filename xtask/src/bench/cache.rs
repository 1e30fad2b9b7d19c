//! rinfer's cache directory, as the CLI finds it: `$RINFER_HOME`, by default `~/.cache/rinfer`.

use std::path::PathBuf;

use anyhow::{Result, bail};

/// The cache root.
pub fn root() -> Result<PathBuf> {
    if let Some(home) = std::env::var_os("RINFER_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".cache").join("rinfer")),
        None => bail!("neither RINFER_HOME nor HOME is set: cannot find rinfer's cache"),
    }
}

/// Where models are kept.
pub fn models_dir() -> Result<PathBuf> {
    Ok(root()?.join("models"))
}
