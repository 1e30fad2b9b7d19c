//! `rinfer pull org/repo[:QUANT]`, and `--model org/repo[:QUANT]` wherever a model path is
//! accepted.
//!
//! `pull` always asks the hub for `main`'s current commit and fetches what the cache lacks.
//! A model argument is taken for a hub model only when no file or directory of that name
//! exists and it parses as `org/repo[:QUANT]`; it is then looked up in the cache without the
//! network, and pulled first (with a notice on stderr) when it is not there, as the default
//! model is fetched on first use. A cached model is used as it is: without a tag, the choice
//! among the files already cached follows the same order (so after pulling only `:Q8_0`,
//! `org/repo` means that file). The hub is `HF_ENDPOINT` (default `https://huggingface.co`)
//! and `HF_TOKEN` its token, both read here and nowhere else.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::hub::cache::HubCache;
use crate::hub::client::{HubClient, HubSettings};
use crate::hub::reference::HubModel;
use crate::model_cache::rinfer_home;
use crate::stderr::report;

/// The hub used when `HF_ENDPOINT` is unset.
const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Pulls `model` and prints the path of its file (its first shard when split) on stdout.
pub fn run(model: &HubModel) -> Result<()> {
    let cache = locate()?;
    let files = pull(&cache, model)?;
    report!("{model} is cached and verified");
    crate::stdout::print(&format!("{}\n", files[0].display()))
}

/// The model file `arg` means: itself when it exists or is no hub name, else the hub model's
/// cached file (its first shard when split), pulled first when not cached.
pub fn resolve_model(arg: &Path) -> Result<PathBuf> {
    if arg.symlink_metadata().is_ok() {
        return Ok(arg.to_path_buf());
    }
    let Some(model) = arg.to_str().and_then(|text| HubModel::parse(text).ok()) else {
        return Ok(arg.to_path_buf());
    };
    let cache = locate()?;
    let cached = cache
        .cached(&model)
        .with_context(|| format!("cannot read the cache {}", cache.root().display()))?;
    let files = match cached {
        Some(files) => files,
        None => {
            report!(
                "{model} is not cached: pulling it into {}",
                cache.root().display()
            );
            pull(&cache, &model)?
        }
    };
    // A split model loads from its first shard, which leads the loader to the others.
    Ok(files[0].clone())
}

fn locate() -> Result<HubCache> {
    Ok(HubCache::new(rinfer_home()?.join("hub")))
}

fn pull(cache: &HubCache, model: &HubModel) -> Result<Vec<PathBuf>> {
    let client = HubClient::new(settings()?);
    crate::hub::pull(&client, cache, model).with_context(|| format!("cannot pull {model}"))
}

/// `HF_ENDPOINT` and `HF_TOKEN`.
fn settings() -> Result<HubSettings> {
    let endpoint = std::env::var("HF_ENDPOINT")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
    let endpoint = endpoint.trim_end_matches('/').to_owned();
    if !(endpoint.starts_with("https://") || endpoint.starts_with("http://")) {
        bail!("HF_ENDPOINT must be an http:// or https:// address, not `{endpoint}`");
    }
    let token = std::env::var("HF_TOKEN")
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty());
    Ok(HubSettings { endpoint, token })
}
