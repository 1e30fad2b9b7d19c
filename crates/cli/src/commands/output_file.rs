//! Output files written whole or not at all: into a temporary file beside the destination,
//! renamed over it only once everything is written, so an error or an interrupt never leaves a
//! truncated model behind.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use anyhow::{Context, Result};
use tempfile::NamedTempFile;

/// Runs `write` on a buffered temporary file in `output`'s directory and moves the result to
/// `output` when it succeeds.
pub fn write_whole(
    output: &Path,
    write: impl FnOnce(BufWriter<File>) -> Result<BufWriter<File>>,
) -> Result<()> {
    let dir = match output.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let temp = NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    let (file, temp_path) = temp.into_parts();
    let written = write(BufWriter::new(file))?;
    let file = written
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("writing {}", output.display()))?;
    file.sync_all()
        .with_context(|| format!("writing {}", output.display()))?;
    temp_path
        .persist(output)
        .with_context(|| format!("cannot move the result to {}", output.display()))?;
    Ok(())
}
