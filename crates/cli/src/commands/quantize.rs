//! `rinfer quantize IN OUT TYPE [--pure] [--imatrix FILE]`: a GGUF model rewritten with its
//! weights in `TYPE`, as `llama-quantize` does, with a progress bar on stderr.

use std::path::Path;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rinfer_formats::gguf::GgufFile;
use rinfer_model::quantize::{FileType, Imatrix, ImportanceMatrix, quantize_model_with};

use crate::commands::output_file::write_whole;
use crate::stderr::report;

/// Quantizes `input` into `output` as `file_type` (`pure`: no per-tensor mix rules), with the
/// importance matrix at `imatrix` where given.
pub fn run(
    input: &Path,
    output: &Path,
    file_type: FileType,
    pure: bool,
    imatrix: Option<&Path>,
) -> Result<()> {
    let file = GgufFile::open(input).with_context(|| format!("reading {}", input.display()))?;
    let matrix = imatrix
        .map(|path| {
            ImportanceMatrix::open(path)
                .with_context(|| format!("reading the importance matrix {}", path.display()))
        })
        .transpose()?;
    let imatrix_name = imatrix.map(|p| p.to_string_lossy().into_owned());
    let imatrix = matrix
        .as_ref()
        .zip(imatrix_name.as_deref())
        .map(|(matrix, file)| Imatrix { matrix, file });
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
        quantize_model_with(&file, file_type, pure, imatrix, out, |p| {
            bar.set_message(format!("{} -> {}", p.tensor, p.ty));
            bar.set_position(p.done as u64);
        })
        .with_context(|| format!("quantizing {} to {file_type}", input.display()))
    });
    bar.finish_and_clear();
    written?;
    report!(
        "wrote {} ({file_type}{}{})",
        output.display(),
        if pure { ", pure" } else { "" },
        if imatrix.is_some() {
            ", with importance matrix"
        } else {
            ""
        }
    );
    Ok(())
}
