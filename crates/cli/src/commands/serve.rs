//! `rinfer serve`: the OpenAI-compatible HTTP server of `rinfer-serve`, with logs on stderr.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use rinfer_serve::{ApiKeys, ModelEntry, ServeConfig, model_name, models_in_dir};

use crate::commands::session::{model_path, run_options};
use crate::limits;
use crate::options::{ExposureOptions, ServeOptions};
use crate::render_process;

/// Serves until SIGTERM or Ctrl-C, then drains the requests in flight.
pub fn run(options: &ServeOptions) -> Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
    let models = served_models(options)?;
    let first = models[0].clone();
    let engine = rinfer_model::EngineOptions {
        sequences: options.parallel,
        ..run_options(
            first.path.clone(),
            &options.engine,
            Some(&options.speculation),
        )?
    };
    let models_memory_bytes = match options.models_memory_mib {
        Some(mib) => Some(
            mib.checked_mul(1 << 20)
                .ok_or_else(|| anyhow!("--models-memory-mib {mib} is too large"))?,
        ),
        None => rinfer_model::available_memory_bytes(),
    };
    let exposure = &options.exposure;
    let api_keys = api_keys(exposure)?;
    let mut config = ServeConfig {
        address: SocketAddr::new(options.host, options.port),
        queue: options.queue,
        max_body_bytes: exposure.max_body_bytes,
        max_connections: exposure.max_connections,
        header_timeout: Duration::from_secs(exposure.header_timeout),
        body_timeout: Duration::from_secs(exposure.body_timeout),
        write_timeout: Duration::from_secs(exposure.write_timeout),
        cors_origins: exposure.cors_origins.clone(),
        allowed_hosts: exposure.allowed_hosts.clone(),
        half_close: exposure.half_close,
        chat_template: options.template.chat_template.clone(),
        template_process: Some(render_process::command()?),
        api_keys,
        open_metrics: exposure.open_metrics,
        share_prefix_cache: exposure.share_prefix_cache,
        models_memory_bytes,
        ..ServeConfig::new(first.path, first.id)
    };
    config.engine = engine;
    config.models = models;
    rinfer_serve::serve(config)?;
    Ok(())
}

/// The models of `--model` (loaded at start) and then of `--models-dir` (loaded on first use,
/// those `--model` names already left out); the default model when neither is given.
fn served_models(options: &ServeOptions) -> Result<Vec<ModelEntry>> {
    let mut models = options
        .model
        .iter()
        .map(|spec| model_entry(spec))
        .collect::<Result<Vec<_>>>()?;
    if let Some(dir) = &options.models_dir {
        let same_file = |a: &Path, b: &Path| {
            a == b || std::fs::canonicalize(a).ok() == std::fs::canonicalize(b).ok()
        };
        for found in models_in_dir(dir)? {
            let named = models
                .iter()
                .any(|m| m.id == found.id && same_file(&m.path, &found.path));
            if !named {
                models.push(found);
            }
        }
    }
    if models.is_empty() {
        let path = model_path(&None)?;
        models.push(ModelEntry {
            id: model_name(&path),
            path,
            load_at_start: true,
        });
    }
    Ok(models)
}

/// The model of one `--model [NAME=]MODEL`: an existing path is a path even with a `=` in it.
fn model_entry(spec: &str) -> Result<ModelEntry> {
    let (name, model) = match spec.split_once('=') {
        Some((name, model)) if !Path::new(spec).exists() => (Some(name), model),
        _ => (None, spec),
    };
    if name.is_some_and(|n| n.trim().is_empty()) {
        anyhow::bail!("--model {spec}: the name before `=` is empty");
    }
    let model = limits::parse_model_path(model).map_err(|e| anyhow!("--model {spec}: {e}"))?;
    let path: PathBuf = model_path(&Some(model))?;
    Ok(ModelEntry {
        id: name.map_or_else(|| model_name(&path), str::to_string),
        path,
        load_at_start: true,
    })
}

/// The keys of `--api-key` and `--api-key-file` together.
fn api_keys(exposure: &ExposureOptions) -> Result<ApiKeys> {
    let mut keys = ApiKeys::new(&exposure.api_keys).map_err(|e| anyhow!("--api-key: {e}"))?;
    if let Some(path) = &exposure.api_key_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the API key file {}", path.display()))?;
        let from_file = ApiKeys::from_file_text(&text)
            .map_err(|e| anyhow!("API key file {}: {e}", path.display()))?;
        if from_file.is_empty() {
            anyhow::bail!("the API key file {} has no key", path.display());
        }
        keys = keys.merged(from_file);
    }
    Ok(keys)
}
