//! Running one measured process: its output, its wall time from spawn to exit, its peak
//! resident memory, read from the kernel's accounting when the process is reaped (`wait4`), so
//! nothing samples `/proc` while it runs, and how busy the rest of the machine was meanwhile.

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
    /// The share of the machine's CPU time that other processes (and the hypervisor, as steal
    /// time) used while it ran, 0 to 1.
    pub busy_elsewhere: f64,
}

/// Runs `command` to completion with stdin closed, failing (with its stderr) unless it succeeds.
pub fn run(command: &mut Command) -> Result<Finished> {
    let shown = format!("{command:?}");
    let busy_before = machine_busy_s();
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
    let (status, usage) = reap(child.id()).with_context(|| format!("cannot wait for {shown}"))?;
    let wall_s = start.elapsed().as_secs_f64();
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    let own_cpu_s = seconds(usage.ru_utime) + seconds(usage.ru_stime);
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    let busy_elsewhere = match (busy_before, machine_busy_s()) {
        (Some(before), Some(after)) => ((after - before - own_cpu_s) / (wall_s * cores)).max(0.0),
        _ => 0.0,
    };
    let stderr = stderr_reader.join().unwrap_or_default();
    if !status.success() {
        bail!("{shown} failed ({status}):\n{}", tail(&stderr, 40));
    }
    Ok(Finished {
        stdout,
        wall_s,
        // Linux reports ru_maxrss in KiB.
        peak_rss_mib: usage.ru_maxrss as f64 / 1024.0,
        busy_elsewhere,
    })
}

/// CPU seconds the whole machine has spent busy since boot (all states but idle and iowait,
/// steal included), from `/proc/stat`; `None` where it cannot be read.
fn machine_busy_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: Vec<f64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let busy: f64 = [0, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|&i| ticks.get(i))
        .sum();
    // /proc/stat counts in USER_HZ, which Linux fixes at 100 for user space.
    Some(busy / 100.0)
}

/// Waits for the child `pid` and returns its exit status and resource usage.
fn reap(pid: u32) -> io::Result<(ExitStatus, libc::rusage)> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is a plain C struct of integers, for which all-zero bytes are valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own child, not yet reaped (std's `Child` was never waited on);
        // both pointers point to live locals of the right types.
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if reaped == pid {
            return Ok((ExitStatus::from_raw(status), usage));
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
        assert!(done.busy_elsewhere >= 0.0);
        assert!(machine_busy_s().unwrap() > 0.0);
    }

    #[test]
    fn a_failing_child_is_an_error_with_its_stderr() {
        let error = run(Command::new("sh").args(["-c", "echo oops >&2; exit 3"]))
            .err()
            .unwrap();
        assert!(format!("{error:#}").contains("oops"), "{error:#}");
    }
}
