//! `rinfer serve`: the OpenAI-compatible HTTP server of `rinfer-serve`, with logs on stderr.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use rinfer_serve::{ApiKeys, ServeConfig};

use crate::commands::session::engine_options;
use crate::options::{ExposureOptions, ServeOptions};
use crate::render_process;

/// Serves until SIGTERM or Ctrl-C, then drains the requests in flight.
pub fn run(options: &ServeOptions) -> Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
    let engine = rinfer_model::EngineOptions {
        sequences: options.parallel,
        ..engine_options(&options.engine, Some(&options.speculation))?
    };
    let model_id = engine
        .model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
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
        ..ServeConfig::new(engine.model.clone(), model_id)
    };
    config.engine = engine;
    rinfer_serve::serve(config)?;
    Ok(())
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
