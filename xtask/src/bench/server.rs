//! HTTP servers the serve benchmarks talk to: `rinfer serve` (release build) and llama.cpp's
//! `llama-server`, each a child process killed when dropped, and the plain HTTP/1.1 client
//! the benchmarks use (no client library: the timings are of bytes on the socket).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// How long a server may take to load its model.
const STARTUP: Duration = Duration::from_secs(120);

/// A server child process.
pub struct Server {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl Server {
    /// `target/release/rinfer serve --port 0 <args>`, once `/health` answers 200.
    pub fn rinfer(args: &[&str]) -> Result<Self> {
        let binary = crate::workspace_root().join("target/release/rinfer");
        let mut child = Command::new(&binary)
            .args(["serve", "--port", "0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let stderr = child.stderr.take().context("stderr is piped")?;
        let mut lines = BufReader::new(stderr).lines();
        let addr = loop {
            let Some(line) = lines.next() else {
                let _ = child.wait();
                bail!("rinfer serve exited before listening");
            };
            let line = line?;
            if let Some(rest) = line.split("listening on http://").nth(1) {
                let addr: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
                break addr.parse().context("the listening address")?;
            }
        };
        // Keep draining its log so that it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Self { child, addr }.healthy("rinfer serve")
    }

    /// `llama-server -m <model> --port P <args>` on a free port, once `/health` answers 200.
    pub fn llama(binary: &Path, model: &Path, args: &[&str]) -> Result<Self> {
        let addr = TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let child = Command::new(binary)
            .arg("-m")
            .arg(model)
            .args(["--host", "127.0.0.1", "--port", &addr.port().to_string()])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        Self { child, addr }.healthy("llama-server")
    }

    fn healthy(mut self, name: &str) -> Result<Self> {
        let start = Instant::now();
        while !get(self.addr, "/health").is_ok_and(|status| status == 200) {
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!("{name} exited ({status}) before it was healthy");
            }
            if start.elapsed() > STARTUP {
                bail!("{name} never became healthy");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(self)
    }

    /// Kills the server and waits for it.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The status of `GET path`.
pub fn get(addr: SocketAddr, path: &str) -> Result<u16> {
    let mut stream = TcpStream::connect(addr)?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )?;
    let mut status = String::new();
    BufReader::new(stream).read_line(&mut status)?;
    status
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no status line")
}

/// Sends `POST path` with the JSON `body` and returns the response, read line by line.
pub fn post(addr: SocketAddr, path: &str, body: &str) -> Result<BufReader<TcpStream>> {
    let mut stream = TcpStream::connect(addr)?;
    // One write: a server may answer as soon as it has the request.
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes())?;
    Ok(BufReader::new(stream))
}
