//! rinfer's cache directory, as the CLI reports it: the default model lives in
//! `<cache>/models/`, and `rinfer fetch` prints its path.

use std::path::PathBuf;

use anyhow::{Context, Result};

/// Where models are kept (fetching the default model first if needed).
pub fn models_dir() -> Result<PathBuf> {
    let model = crate::fetch_model::run()?;
    model
        .parent()
        .map(PathBuf::from)
        .with_context(|| format!("{} has no parent directory", model.display()))
}

/// The cache root.
pub fn root() -> Result<PathBuf> {
    let models = models_dir()?;
    models
        .parent()
        .map(PathBuf::from)
        .with_context(|| format!("{} has no parent directory", models.display()))
}
