//! A real `rinfer serve` process on loopback and a minimal HTTP/1.1 client for it, shared by
//! the serve tests. The client is written out (no HTTP crate) so that tests can also send
//! bytes no well-behaved client would.

#![allow(dead_code)]

#[path = "../../../serve/tests/support/endpoint.rs"]
mod endpoint;
#[path = "../../../serve/tests/support/http.rs"]
mod http;
#[path = "../../../serve/tests/support/inputs.rs"]
mod inputs;

// Each test file uses its own part of the support.
#[allow(unused_imports)]
pub use self::{endpoint::*, http::*, inputs::*};

use std::io::{BufRead, BufReader};
use std::ops::Deref;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running `rinfer serve`, killed when dropped; its [`Endpoint`] by dereference.
pub struct Server {
    pub child: Child,
    endpoint: Endpoint,
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Deref for Server {
    type Target = Endpoint;

    fn deref(&self) -> &Endpoint {
        &self.endpoint
    }
}

impl Server {
    /// Starts `rinfer serve --port 0 ARGS` and waits until `/health` says it is ready.
    pub fn start(args: &[&str]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rinfer"));
        command.arg("serve").args(["--port", "0"]).args(args);
        Self::start_command(command)
    }

    /// As [`Server::start`], with the environment variables `vars` set.
    pub fn start_with_env(vars: &[(&str, &str)], args: &[&str]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rinfer"));
        command
            .arg("serve")
            .args(["--port", "0"])
            .args(args)
            .envs(vars.iter().copied());
        Self::start_command(command)
    }

    /// As [`Server::start`], with the process's open-file limit (`ulimit -n`) set to `limit`.
    pub fn start_with_open_file_limit(limit: u32, args: &[&str]) -> Self {
        let mut command = Command::new("sh");
        command
            .args(["-c", "ulimit -n \"$0\" && exec \"$@\""])
            .arg(limit.to_string())
            .arg(env!("CARGO_BIN_EXE_rinfer"))
            .args(["serve", "--port", "0"])
            .args(args);
        Self::start_command(command)
    }

    fn start_command(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("rinfer serve starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let log_writer = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let addr = line.split("listening on http://").nth(1).map(|rest| {
                    rest.chars()
                        .take_while(|c| !c.is_whitespace())
                        .collect::<String>()
                });
                // Logged before it is announced: a test that reads the log after the start
                // finds the line there.
                log_writer.lock().unwrap().push(line);
                if let Some(addr) = addr {
                    let _ = addr_tx.send(addr);
                }
            }
        });
        let addr = match addr_rx.recv_timeout(Duration::from_secs(60)) {
            Ok(addr) => addr.parse().expect("a socket address"),
            Err(_) => {
                let _ = child.kill();
                panic!("rinfer serve did not start: {:?}", log.lock().unwrap());
            }
        };
        let server = Self {
            child,
            endpoint: Endpoint { addr },
            log,
        };
        server.wait_healthy(Duration::from_secs(120));
        server
    }

    /// Waits for `/health` to answer 200.
    pub fn wait_healthy(&self, timeout: Duration) {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if self.is_healthy() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "rinfer serve never became healthy: {:?}",
            self.log.lock().unwrap()
        );
    }

    /// The log once a line containing `needle` is in it: the server logs on its own schedule
    /// and the log is read by another thread, so a test waits for what it reads (30 s at most).
    pub fn wait_for_log(&self, needle: &str) -> Vec<String> {
        let start = Instant::now();
        loop {
            let log = self.log.lock().unwrap().clone();
            if log.iter().any(|l| l.contains(needle)) {
                return log;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "no line with {needle:?} in the log: {log:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Resident memory of the server process in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server process is alive");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/PID/status")
    }

    /// Sends SIGTERM to the server.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    }

    /// Waits for the process to exit, returning whether it exited with success.
    pub fn wait_exit(&mut self, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(status) = self.child.try_wait().expect("wait works") {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("rinfer serve did not exit within {timeout:?}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
