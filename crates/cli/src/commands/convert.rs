//! `rinfer convert HF_DIR OUT.gguf`: a Hugging Face checkpoint as a GGUF file with llama.cpp's
//! names and metadata, ready for `rinfer quantize` (and llama.cpp).

use std::path::Path;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rinfer_formats::GgmlType;
use rinfer_model::convert::convert_hf_dir;

use crate::commands::output_file::write_whole;
use crate::stderr::report;

/// Converts the checkpoint in `dir` into `output` with 2-D weights in `weight_type`.
pub fn run(dir: &Path, output: &Path, weight_type: GgmlType) -> Result<()> {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{msg:40} [{bar:30}] {pos}/{len} tensors ({elapsed})")
            .expect("the progress template is valid")
            .progress_chars("=> "),
    );
    let written = write_whole(output, &[dir], |out| {
        convert_hf_dir(dir, weight_type, out, &mut |done, total, name| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
            bar.set_message(name.to_string());
        })
        .with_context(|| format!("converting {}", dir.display()))
    });
    bar.finish_and_clear();
    written?;
    report!("wrote {} ({weight_type} weights)", output.display());
    Ok(())
}
