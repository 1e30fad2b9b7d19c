//! `rinfer imatrix -m MODEL -f TEXT -o OUT [-c CHUNK] [--chunks N] [--no-ppl]`: an importance
//! matrix computed over a calibration text as `llama-imatrix` computes it
//! ([`rinfer_model::imatrix`]), with a line per chunk on stderr (the perplexity so far, as
//! llama-imatrix prints it), written whole or not at all.

use anyhow::{Context, Result, bail};
use rinfer_model::LoadedModel;
use rinfer_model::imatrix::{CalibrationOptions, calibrate};

use crate::commands::output_file::write_whole;
use crate::commands::session::model_path;
use crate::options::ImatrixOptions;
use crate::stderr::report;

/// Runs the command.
pub fn run(options: &ImatrixOptions) -> Result<()> {
    let path = model_path(&options.model)?;
    let text = std::fs::read_to_string(&options.file)
        .with_context(|| format!("reading the calibration text {}", options.file.display()))?;
    if text.trim().is_empty() {
        bail!(
            "the calibration text {} is empty; give a text of at least two chunks ({} tokens)",
            options.file.display(),
            2 * options.chunk_size
        );
    }
    let loaded =
        LoadedModel::open(&path).with_context(|| format!("cannot load {}", path.display()))?;
    let tokenizer = &loaded.tokenizer;
    let tokens = tokenizer
        .encode(&text, true, false)
        .context("tokenizing the calibration text")?;
    let bos = tokenizer.bos().filter(|_| tokenizer.add_bos());
    let calibration = CalibrationOptions {
        chunk_size: options.chunk_size,
        max_chunks: options.chunks,
        perplexity: !options.no_ppl,
        dataset: options.file.to_string_lossy().into_owned(),
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(options.threads.unwrap_or(0))
        .use_current_thread()
        .build()
        .context("starting the compute threads")?;
    report!(
        "computing over {} tokens in chunks of {} ({} whole chunks)",
        tokens.len(),
        options.chunk_size,
        tokens.len() / options.chunk_size
    );
    let mut summary = None;
    // The temporary file exists before the long run: an unwritable destination fails at once.
    write_whole(&options.output, &[&path, &options.file], |out| {
        let sums = pool.install(|| {
            calibrate(
                &loaded.model,
                &tokens,
                bos,
                &calibration,
                |chunk| match chunk.perplexity {
                    Some(ppl) => report!("[{}/{}] PPL = {ppl:.4}", chunk.done, chunk.chunks),
                    None => report!("[{}/{}]", chunk.done, chunk.chunks),
                },
            )
        })?;
        for name in sums.partial() {
            report!("warning: {name} has experts that saw no token (their importance will be 1)");
        }
        summary = Some((sums.entries().len(), sums.chunk_count(), sums.perplexity()));
        Ok(sums.to_gguf()?.write_to(out)?)
    })
    .with_context(|| {
        format!(
            "computing the importance matrix {}",
            options.output.display()
        )
    })?;
    if let Some((entries, chunks, ppl)) = summary {
        if let Some(ppl) = ppl {
            report!(
                "Final estimate: PPL = {:.4} +/- {:.5}",
                ppl.value,
                ppl.error
            );
        }
        report!(
            "wrote {} ({entries} entries, {chunks} chunks of {} tokens)",
            options.output.display(),
            options.chunk_size
        );
    }
    Ok(())
}
