//! Output files written whole or not at all: into a temporary file beside the destination,
//! renamed over it only once everything is written, so an error or an interrupt never leaves a
//! truncated model behind.
//!
//! The temporary file goes on every exit: an error or a panic drops it, and Ctrl-C or SIGTERM
//! (caught while one is being written) removes it before the process ends. The destination
//! must be a regular file or absent: a symlink, FIFO or device is not replaced, and neither is
//! a file the command reads (`convert DIR DIR/model.safetensors`).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use anyhow::{Context, Result, bail};
use tempfile::NamedTempFile;

/// Runs `write` on a buffered temporary file in `output`'s directory and moves the result to
/// `output` when it succeeds. `inputs` are the files (or directories, for each file in them)
/// the command reads; `output` must be none of them.
pub fn write_whole(
    output: &Path,
    inputs: &[&Path],
    write: impl FnOnce(BufWriter<File>) -> Result<BufWriter<File>>,
) -> Result<()> {
    check_destination(output, inputs)?;
    let dir = match output.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    remove_on_interrupt();
    let (file, temp_path, _pending) = {
        // Created and listed under the lock: an interrupt meanwhile waits for the list.
        let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
        let temp = NamedTempFile::new_in(dir)
            .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
        let (file, temp_path) = temp.into_parts();
        pending.push(temp_path.to_path_buf());
        let listed = Pending(temp_path.to_path_buf());
        (file, temp_path, listed)
    };
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

/// Refuses a destination that is not a regular file, or that is one of the inputs.
fn check_destination(output: &Path, inputs: &[&Path]) -> Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(output) else {
        return Ok(());
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        bail!(
            "{} is a symbolic link; refusing to replace it (remove it or write elsewhere)",
            output.display()
        );
    }
    if !kind.is_file() {
        bail!(
            "{} exists and is not a regular file (a directory, FIFO or device); refusing to \
             replace it",
            output.display()
        );
    }
    for input in inputs {
        let read: Vec<PathBuf> = if input.is_dir() {
            std::fs::read_dir(input)
                .with_context(|| format!("reading {}", input.display()))?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .collect()
        } else {
            vec![input.to_path_buf()]
        };
        if read.iter().any(|file| same_file(file, output)) {
            bail!(
                "{} is one of the files this command reads; write the result elsewhere",
                output.display()
            );
        }
    }
    Ok(())
}

/// Whether `a` and `b` are the same file (by device and inode on Unix).
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(a), Ok(b)) if a == b
        )
    }
}

/// Temporary files being written, removed if the process is interrupted.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// One temporary file on the interrupt list while it is written.
struct Pending(PathBuf);

impl Drop for Pending {
    fn drop(&mut self) {
        PENDING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| p != &self.0);
    }
}

/// Catches Ctrl-C and SIGTERM once for the rest of the process: the pending temporary files
/// are removed and the process exits with 130. The signals are registered before this returns,
/// so no interrupt after it is missed.
fn remove_on_interrupt() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
        else {
            return;
        };
        let signals = {
            let _entered = runtime.enter();
            interrupt_signals()
        };
        let Ok(mut signals) = signals else {
            return;
        };
        let spawned = std::thread::Builder::new()
            .name("rinfer-interrupt".into())
            .spawn(move || {
                runtime.block_on(signals.recv());
                for path in PENDING.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
                    let _ = std::fs::remove_file(path);
                }
                std::process::exit(130);
            });
        drop(spawned);
    });
}

/// Ctrl-C and, on Unix, SIGTERM.
struct Interrupts {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Interrupts {
    async fn recv(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn interrupt_signals() -> std::io::Result<Interrupts> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Interrupts {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }
    #[cfg(not(unix))]
    Ok(Interrupts {})
}
