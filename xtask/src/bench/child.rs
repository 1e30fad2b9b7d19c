//! Running one measured process: its output, its wall time from spawn to exit and its peak
//! resident memory, read from the kernel's accounting when the process is reaped (`wait4`), so
//! nothing samples `/proc` while it runs.

use std::io::{self, Read};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// What a finished process left behind.
pub struct Finished {
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Seconds from spawn until it had exited.
    pub wall_s: f64,
    /// Its peak resident set size in MiB (`ru_maxrss`).
    pub peak_rss_mib: f64,
}

/// Runs `command` to completion with stdin closed, failing (with its stderr) unless it succeeds.
pub fn run(command: &mut Command) -> Result<Finished> {
    let shown = format!("{command:?}");
    let start = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {shown}"))?;
    let mut stderr_pipe = child.stderr.take().context("stderr is piped")?;
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text);
        text
    });
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .context("stdout is piped")?
        .read_to_string(&mut stdout)
        .with_context(|| format!("cannot read the output of {shown}"))?;
    let (status, max_rss_kib) =
        reap(child.id()).with_context(|| format!("cannot wait for {shown}"))?;
    let wall_s = start.elapsed().as_secs_f64();
    let stderr = stderr_reader.join().unwrap_or_default();
    if !status.success() {
        bail!("{shown} failed ({status}):\n{}", tail(&stderr, 40));
    }
    Ok(Finished {
        stdout,
        wall_s,
        peak_rss_mib: max_rss_kib as f64 / 1024.0,
    })
}

/// Waits for the child `pid` and returns its exit status and peak RSS in KiB.
fn reap(pid: u32) -> io::Result<(ExitStatus, libc::c_long)> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is a plain C struct of integers, for which all-zero bytes are valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own child, not yet reaped (std's `Child` was never waited on);
        // both pointers point to live locals of the right types.
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if reaped == pid {
            // Linux reports ru_maxrss in KiB.
            return Ok((ExitStatus::from_raw(status), usage.ru_maxrss));
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_wall_time_and_peak_rss_of_a_child() {
        let done = run(Command::new("sh").args(["-c", "echo hello"])).unwrap();
        assert_eq!(done.stdout, "hello\n");
        assert!(done.wall_s > 0.0 && done.peak_rss_mib > 0.0);
    }

    #[test]
    fn a_failing_child_is_an_error_with_its_stderr() {
        let error = run(Command::new("sh").args(["-c", "echo oops >&2; exit 3"]))
            .err()
            .unwrap();
        assert!(format!("{error:#}").contains("oops"), "{error:#}");
    }
}
