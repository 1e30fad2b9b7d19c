//! `rinfer logits`: the logits of every position of a prompt, from one batched pass, as JSON.
//! This is how rinfer is checked against other engines.

use anyhow::{Result, bail};
use serde_json::json;

use rinfer_model::EngineSettings;

use crate::commands::session::{Session, engine_options};
use crate::options::LogitsOptions;

/// Runs the command.
pub fn run(options: &LogitsOptions) -> Result<()> {
    let wanted = engine_options(&options.session.engine, None)?;
    let session = Session::start(&options.session, &wanted)?;
    let loaded = &session.setup.loaded;
    let tokens = match (&options.prompt, &options.tokens) {
        (Some(prompt), _) => loaded.tokenizer.encode(prompt, true, false)?,
        (None, Some(tokens)) => tokens.clone(),
        (None, None) => unreachable!("clap requires a prompt or tokens"),
    };
    if tokens.is_empty() {
        bail!("no tokens to evaluate");
    }
    let config = &loaded.model.config;
    let n = tokens.len();
    if n > session.context() {
        bail!(
            "{n} tokens exceed the context of {} tokens",
            session.context()
        );
    }
    let mut engine = session.engine_with(EngineSettings {
        context: n,
        max_batch: n,
        prefill_chunk: n,
        score: true,
        ..session.setup.settings
    })?;
    let logits = engine.score(&tokens)?;
    let device = engine.device();
    let positions: Vec<_> = logits
        .chunks_exact(config.vocab_size)
        .map(|row| position_json(row, options.top_k))
        .collect();
    let report = json!({
        "device": device.kind(),
        "device_detail": device.to_string(),
        "tokens": tokens,
        "positions": positions,
    });
    crate::stdout::print(&format!("{report}\n"))
}

fn position_json(row: &[f32], top_k: usize) -> serde_json::Value {
    let mut order: Vec<u32> = (0..row.len() as u32).collect();
    let by_logit = |a: &u32, b: &u32| row[*b as usize].total_cmp(&row[*a as usize]).then(a.cmp(b));
    let k = top_k.clamp(1, row.len());
    order.select_nth_unstable_by(k - 1, by_logit);
    order.truncate(k);
    order.sort_unstable_by(by_logit);
    let max = row[order[0] as usize] as f64;
    let lse = max
        + row
            .iter()
            .map(|&l| (l as f64 - max).exp())
            .sum::<f64>()
            .ln();
    let top: Vec<_> = order
        .iter()
        .map(|&id| json!([id, row[id as usize]]))
        .collect();
    json!({ "argmax": order[0], "lse": lse, "top": top })
}
