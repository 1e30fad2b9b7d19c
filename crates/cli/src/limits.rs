//! The limits every numeric option and input file is checked against: fixed bounds when the
//! options are parsed (so that no size can overflow or exhaust memory before anything runs),
//! then the model's positions and this machine's memory once the model is loaded.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rinfer_model::SamplingParams;

use rinfer_model::MAX_CONTEXT;
use rinfer_serve::{MAX_PARALLEL, MAX_QUEUE, MAX_THREADS};

/// The most tokens one run generates: no more than a context can hold.
const MAX_TOKENS: usize = MAX_CONTEXT;
/// The largest prompt file read.
pub const MAX_PROMPT_FILE_BYTES: u64 = 64 << 20;

/// A count between `min` and `max`, for a clap value parser.
fn bounded(s: &str, min: usize, max: usize) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number"))?;
    if !(min..=max).contains(&n) {
        return Err(format!("{n} is outside {min}..={max}"));
    }
    Ok(n)
}

/// `--ctx`: 1 to [`MAX_CONTEXT`] positions.
pub fn parse_context(s: &str) -> Result<usize, String> {
    bounded(s, 1, MAX_CONTEXT)
}

/// `-n`/`--max-tokens`: 0 to [`MAX_TOKENS`] tokens.
pub fn parse_max_tokens(s: &str) -> Result<usize, String> {
    bounded(s, 0, MAX_TOKENS)
}

/// `--parallel`: 1 to [`MAX_PARALLEL`] sequences.
pub fn parse_parallel(s: &str) -> Result<usize, String> {
    bounded(s, 1, MAX_PARALLEL)
}

/// The largest prefix cache, in MiB (1 TiB).
pub const MAX_KV_CACHE_MIB: usize = 1 << 20;

/// `--kv-cache-mib`: 0 to [`MAX_KV_CACHE_MIB`].
pub fn parse_kv_cache_mib(s: &str) -> Result<usize, String> {
    bounded(s, 0, MAX_KV_CACHE_MIB)
}

/// `--queue`: 1 to [`MAX_QUEUE`] waiting requests.
pub fn parse_queue(s: &str) -> Result<usize, String> {
    bounded(s, 1, MAX_QUEUE)
}

/// `--threads`: 1 to [`max_threads`].
pub fn parse_threads(s: &str) -> Result<usize, String> {
    bounded(s, 1, max_threads())
}

/// Four threads per core this process may use, at most [`MAX_THREADS`].
pub fn max_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.saturating_mul(4).min(MAX_THREADS)
}

/// `--model`: a regular file or a directory (a FIFO or device would block or never end). A
/// path that does not exist is left to the loader, which names it with the rest of its errors.
pub fn parse_model_path(s: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(s);
    if let Ok(meta) = std::fs::metadata(&path)
        && !meta.is_file()
        && !meta.is_dir()
    {
        return Err(format!(
            "{s} is not a regular file or a directory (FIFOs and devices cannot hold a model)"
        ));
    }
    Ok(path)
}

/// `--file`: a regular file of at most [`MAX_PROMPT_FILE_BYTES`].
pub fn parse_prompt_file(s: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(s);
    check_prompt_file(&path).map_err(|e| format!("{e:#}"))?;
    Ok(path)
}

fn check_prompt_file(path: &Path) -> Result<()> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot access the prompt file {}", path.display()))?;
    if !meta.is_file() {
        bail!(
            "the prompt file {} is not a regular file (FIFOs and devices are not read)",
            path.display()
        );
    }
    if meta.len() > MAX_PROMPT_FILE_BYTES {
        bail!(
            "the prompt file {} has {} bytes, more than the limit of {} MiB",
            path.display(),
            meta.len(),
            MAX_PROMPT_FILE_BYTES >> 20
        );
    }
    Ok(())
}

/// Reads a prompt file: a regular file of at most [`MAX_PROMPT_FILE_BYTES`] of UTF-8, read with
/// that bound even if the file grows while it is read.
pub fn read_prompt_file(path: &Path) -> Result<String> {
    check_prompt_file(path)?;
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot open the prompt file {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_PROMPT_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read the prompt file {}", path.display()))?;
    if bytes.len() as u64 > MAX_PROMPT_FILE_BYTES {
        bail!(
            "the prompt file {} grew past the limit of {} MiB while it was read",
            path.display(),
            MAX_PROMPT_FILE_BYTES >> 20
        );
    }
    String::from_utf8(bytes)
        .with_context(|| format!("the prompt file {} is not UTF-8", path.display()))
}

/// Checks sampling options with the rules the HTTP API applies, naming the flag.
pub fn check_sampling(params: &SamplingParams) -> Result<()> {
    params.validate().map_err(|e| {
        let flag = e.field.replace('_', "-");
        anyhow::anyhow!("--{flag}: {e}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_outside_their_bounds_are_refused_with_the_bound() {
        assert_eq!(parse_context("4096"), Ok(4096));
        assert!(parse_context("0").unwrap_err().contains("1..="));
        assert!(parse_context("4611686018427387904").is_err());
        assert!(parse_queue("18446744073709551615").is_err());
        assert!(parse_threads("1000000").is_err());
        assert!(parse_parallel("100000").is_err());
        assert!(parse_max_tokens("-1").is_err());
        assert_eq!(parse_kv_cache_mib("0"), Ok(0));
        assert!(parse_kv_cache_mib("1048577").is_err());
    }
}
