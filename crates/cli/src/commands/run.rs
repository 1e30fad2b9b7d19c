//! `rinfer run`: continue a prompt, streaming text to stdout and timings to stderr.

use std::io::Write;

use anyhow::Result;
use rinfer_model::Request;
use rinfer_model::chat_template::{ChatMessage, resolve};
use serde_json::json;

use crate::commands::session::{Session, engine_options};
use crate::options::RunOptions;
use crate::render_process;
use crate::stderr::report;

/// Runs the command.
pub fn run(options: &RunOptions) -> Result<()> {
    let prompt = match (&options.prompt, &options.file) {
        (Some(prompt), _) => prompt.clone(),
        (None, Some(file)) => crate::limits::read_prompt_file(file)?,
        (None, None) => unreachable!("clap requires a prompt or a file"),
    };
    let mut wanted = engine_options(
        &options.generation.session.engine,
        Some(&options.generation.speculation),
    )?;
    // One request: nothing to keep blocks for (unless --kv-cache-mib asks).
    wanted.kv_cache_mib.get_or_insert(0);
    let session = Session::start(&options.generation.session, &wanted)?;
    let loaded = &session.setup.loaded;
    let mut sampling = options.generation.sampling.params();
    if options.ignore_eos {
        let eog = loaded.tokenizer.eog_ids().iter();
        sampling
            .logit_bias
            .extend(eog.map(|&id| (id, f32::NEG_INFINITY)));
    }
    let prompt = match &options.generation.template.chat_template {
        // With a template named, the prompt is one user turn of a conversation.
        Some(choice) => {
            let chat = render_process::isolate(resolve(Some(choice), loaded)?)?;
            chat.template
                .render_tokens(&[ChatMessage::user(prompt)], true, &loaded.tokenizer)?
        }
        None => loaded.tokenizer.encode(&prompt, true, false)?,
    };
    let request = Request::new(prompt, options.max_tokens).with_sampling(sampling);
    let mut engine = session.engine()?;
    if options.warmup
        && let Some(&first) = request.prompt.first()
    {
        engine.generate(Request::new(vec![first], 1), |_| {})?;
        // The measured prompt is computed whole, not from the warm-up's first token.
        engine.clear_prefix_cache();
    }
    let mut stdout = std::io::stdout().lock();
    let stream = !options.json;
    let out = engine.generate(request, |text| {
        if stream {
            // A closed stdout (e.g. `| head`) ends output, not the program with a panic.
            let _ = stdout.write_all(text.as_bytes());
            let _ = stdout.flush();
        }
    })?;
    let t = out.timings;
    let device = engine.device();
    if options.json {
        let report = json!({
            "prompt_tokens": t.prompt_tokens,
            "tokens": out.tokens,
            "text": out.text,
            "finish_reason": out.finish.api_name(),
            "timings": {
                "device": device.kind(),
                "device_detail": device.to_string(),
                "load_s": session.setup.load_s,
                "prefill_tok_s": t.prefill_tok_s(),
                "decode_tok_s": t.decode_tok_s().unwrap_or(0.0),
                "drafted_tokens": t.drafted_tokens,
                "accepted_tokens": t.accepted_tokens,
            },
        });
        let _ = writeln!(stdout, "{report}");
    } else {
        let _ = writeln!(stdout);
    }
    let mut summary = format!(
        "{} | load {:.2} s | prefill {} tokens at {:.1} tok/s",
        device.kind(),
        session.setup.load_s,
        t.prompt_tokens,
        t.prefill_tok_s(),
    );
    if let Some(rate) = t.decode_tok_s() {
        summary += &format!(" | decode {} tokens at {rate:.1} tok/s", t.decoded_tokens());
    }
    if t.drafted_tokens > 0 {
        summary += &format!(
            " | {} of {} guessed tokens accepted",
            t.accepted_tokens, t.drafted_tokens
        );
    }
    report!("{summary}");
    Ok(())
}
