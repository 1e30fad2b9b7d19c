//! `rinfer quantize IN OUT TYPE [--pure]`: a GGUF model rewritten with its weights in `TYPE`,
//! as `llama-quantize` does, with a progress bar on stderr.

use std::path::Path;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rinfer_formats::gguf::GgufFile;
use rinfer_model::quantize::{FileType, quantize_model};

use crate::commands::output_file::write_whole;
use crate::stderr::report;

/// Quantizes `input` into `output` as `file_type` (`pure`: no per-tensor mix rules).
pub fn run(input: &Path, output: &Path, file_type: FileType, pure: bool) -> Result<()> {
    let file = GgufFile::open(input).with_context(|| format!("reading {}", input.display()))?;
    let bar = ProgressBar::with_draw_target(
        Some(file.tensors().len() as u64),
        ProgressDrawTarget::stderr(),
    );
    bar.set_style(
        ProgressStyle::with_template("{msg:40} [{bar:30}] {pos}/{len} tensors ({elapsed})")
            .expect("the progress template is valid")
            .progress_chars("=> "),
    );
    let written = write_whole(output, &[input], |out| {
        quantize_model(&file, file_type, pure, out, |p| {
            bar.set_message(format!("{} -> {}", p.tensor, p.ty));
            bar.set_position(p.done as u64);
        })
        .with_context(|| format!("quantizing {} to {file_type}", input.display()))
    });
    bar.finish_and_clear();
    written?;
    report!(
        "wrote {} ({file_type}{})",
        output.display(),
        if pure { ", pure" } else { "" }
    );
    Ok(())
}
