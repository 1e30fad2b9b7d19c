//! `rinfer run`: continue a prompt, streaming text to stdout and timings to stderr.

use std::io::Write;

use anyhow::Result;
use rinfer_model::GenerateRequest;
use serde_json::json;

use crate::engine::{Engine, sampling_params};
use crate::options::RunOptions;

/// Runs the command.
pub fn run(options: &RunOptions) -> Result<()> {
    let prompt = match (&options.prompt, &options.file) {
        (Some(prompt), _) => prompt.clone(),
        (None, Some(file)) => crate::limits::read_prompt_file(file)?,
        (None, None) => unreachable!("clap requires a prompt or a file"),
    };
    let engine = Engine::start(&options.engine)?;
    let loaded = &engine.loaded;
    let mut sampling = sampling_params(&options.sampling);
    if options.ignore_eos {
        let eog = loaded.tokenizer.eog_ids().iter();
        sampling
            .logit_bias
            .extend(eog.map(|&id| (id, f32::NEG_INFINITY)));
    }
    let request = GenerateRequest {
        prompt: loaded.tokenizer.encode(&prompt, true, false)?,
        max_tokens: options.max_tokens,
        sampling,
        stop: Vec::new(),
    };
    let (mut backend, device) = engine.backend()?;
    if options.warmup
        && let Some(&first) = request.prompt.first()
    {
        let warmup = GenerateRequest {
            prompt: vec![first],
            max_tokens: 1,
            ..request.clone()
        };
        backend.generate(loaded, &warmup, |_| {})?;
    }
    let mut stdout = std::io::stdout().lock();
    let stream = !options.json;
    let out = backend.generate(loaded, &request, |text| {
        if stream {
            // A closed stdout (e.g. `| head`) ends output, not the program with a panic.
            let _ = stdout.write_all(text.as_bytes());
            let _ = stdout.flush();
        }
    })?;
    let t = out.timings;
    if options.json {
        let report = json!({
            "prompt_tokens": t.prompt_tokens,
            "tokens": out.tokens,
            "text": out.text,
            "finish_reason": match out.finish {
                rinfer_model::FinishReason::Stop => "stop",
                rinfer_model::FinishReason::Length => "length",
            },
            "timings": {
                "device": device.kind(),
                "device_detail": device.to_string(),
                "load_s": engine.load_s,
                "prefill_tok_s": t.prefill_tok_s(),
                "decode_tok_s": t.decode_tok_s(),
            },
        });
        writeln!(stdout, "{report}")?;
    } else {
        writeln!(stdout)?;
    }
    eprintln!(
        "{} | load {:.2} s | prefill {} tokens at {:.1} tok/s | decode {} tokens at {:.1} tok/s",
        device.kind(),
        engine.load_s,
        t.prompt_tokens,
        t.prefill_tok_s(),
        t.generated_tokens,
        t.decode_tok_s()
    );
    Ok(())
}
