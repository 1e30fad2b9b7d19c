//! Rendering in child processes: a template that runs away is killed, not waited for.
//!
//! Fuel, the output cap and the bounded `range` stop the runaway templates minijinja can
//! measure, but not all of them: walking a list nested into itself many times (comparing it,
//! printing it, `tojson`) costs time and memory that minijinja does not charge. A thread cannot
//! be stopped from outside; a process can. So a front end that renders templates from files it
//! does not trust starts render processes ([`RenderProcess`]: the `rinfer` binary runs
//! [`serve_renders`] under a hidden command). Each one caps its own address space, the caller
//! waits for it at most [`RenderLimits::deadline`](super::RenderLimits::deadline) and kills it
//! past that, and a process that dies (out of memory) is reported and replaced. Idle processes
//! are kept for the next render; at most [`MAX_RENDER_PROCESSES`] exist at once. A render
//! process starts with an empty environment.

mod child;
mod wire;

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Condvar, Mutex, mpsc};
use std::time::{Duration, Instant};

pub use child::serve_renders;

use super::literal_spans::PromptText;
use super::{ChatMessage, ChatTemplateError, RenderLimits};
use wire::{Job, Reply, Setup};

/// The most render processes of one template alive at once.
pub const MAX_RENDER_PROCESSES: usize = 8;

/// How to start a render process: a program and the arguments that make it run
/// [`serve_renders`] (for the `rinfer` binary: itself and a hidden command).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderProcess {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// The address space a render process allows itself.
    pub memory_limit_bytes: u64,
}

impl RenderProcess {
    /// `program args…`, with a 1 GiB address space: room for the largest output the default
    /// [`RenderLimits`] allow, rendered twice.
    pub fn new(
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        RenderProcess {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            memory_limit_bytes: 1 << 30,
        }
    }
}

/// One running render process.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    replies: mpsc::Receiver<io::Result<String>>,
}

impl Worker {
    fn spawn(command: &RenderProcess, setup: &str) -> io::Result<Self> {
        // The environment is not passed on: a render process needs none, and the server's may
        // hold secrets (API keys) that code from a model file must not see.
        let mut child = Command::new(&command.program)
            .args(&command.args)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other("the render process has no pipes"));
        };
        let (send, replies) = mpsc::channel();
        std::thread::Builder::new()
            .name("chat-template-reader".into())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    if send.send(line).is_err() {
                        break;
                    }
                }
            })?;
        writeln!(stdin, "{setup}")?;
        stdin.flush()?;
        Ok(Worker {
            child,
            stdin,
            replies,
        })
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct PoolState {
    idle: Vec<Worker>,
    live: usize,
}

/// The render processes of one template.
pub(crate) struct ProcessPool {
    command: RenderProcess,
    setup: String,
    state: Mutex<PoolState>,
    freed: Condvar,
}

impl std::fmt::Debug for ProcessPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessPool")
            .field("command", &self.command)
            .finish_non_exhaustive()
    }
}

impl ProcessPool {
    pub(crate) fn new(
        command: RenderProcess,
        source: &str,
        bos: &str,
        eos: &str,
        limits: RenderLimits,
    ) -> Self {
        let setup = Setup {
            source: source.to_owned(),
            bos: bos.to_owned(),
            eos: eos.to_owned(),
            fuel: limits.fuel,
            max_output_bytes: limits.max_output_bytes,
            max_range: limits.max_range,
            recursion: limits.recursion,
            memory_limit_bytes: command.memory_limit_bytes,
        };
        ProcessPool {
            setup: serde_json::to_string(&setup).expect("the setup serializes"),
            command,
            state: Mutex::new(PoolState {
                idle: Vec::new(),
                live: 0,
            }),
            freed: Condvar::new(),
        }
    }

    /// How its processes are started.
    pub(crate) fn command(&self) -> &RenderProcess {
        &self.command
    }

    /// Renders `messages` (with `tools`, when given) in a render process, waiting at most
    /// `deadline` in all.
    pub(crate) fn render(
        &self,
        messages: &[ChatMessage],
        tools: Option<serde_json::Value>,
        vars: serde_json::Map<String, serde_json::Value>,
        add_generation_prompt: bool,
        deadline: Duration,
    ) -> Result<PromptText, ChatTemplateError> {
        let start = Instant::now();
        let mut lease = self.lease(deadline)?;
        let job = serde_json::to_string(&Job {
            messages: messages.to_vec(),
            tools,
            vars,
            add_generation_prompt,
        })
        .map_err(|e| ChatTemplateError::Renderer(e.to_string()))?;
        let worker = lease.worker.as_mut().expect("a lease holds its worker");
        if writeln!(worker.stdin, "{job}")
            .and_then(|()| worker.stdin.flush())
            .is_err()
        {
            return Err(self.died(lease));
        }
        match worker
            .replies
            .recv_timeout(deadline.saturating_sub(start.elapsed()))
        {
            Ok(Ok(line)) => {
                let reply = serde_json::from_str::<Reply>(&line)
                    .map_err(|e| ChatTemplateError::Renderer(format!("malformed answer: {e}")));
                lease.keep = reply.is_ok();
                reply?.into_result()
            }
            Ok(Err(_)) | Err(mpsc::RecvTimeoutError::Disconnected) => Err(self.died(lease)),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                Err(ChatTemplateError::TimedOut { after: deadline })
            }
        }
    }

    /// The error for a render process that ended without answering.
    fn died(&self, mut lease: Lease<'_>) -> ChatTemplateError {
        // Killing a process that already ended changes nothing: its status says how it ended.
        let status = lease.worker.take().and_then(|mut w| {
            let _ = w.child.kill();
            w.child.wait().ok().map(|s| s.to_string())
        });
        ChatTemplateError::Renderer(format!(
            "the render process ended without an answer ({}); the template probably needed more \
             than its {} MiB of memory",
            status.as_deref().unwrap_or("status unknown"),
            self.command.memory_limit_bytes >> 20
        ))
    }

    /// An idle process, a new one, or the first to come free within `deadline`.
    fn lease(&self, deadline: Duration) -> Result<Lease<'_>, ChatTemplateError> {
        let start = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(worker) = state.idle.pop() {
                return Ok(Lease::new(self, worker));
            }
            if state.live < MAX_RENDER_PROCESSES {
                state.live += 1;
                drop(state);
                return match Worker::spawn(&self.command, &self.setup) {
                    Ok(worker) => Ok(Lease::new(self, worker)),
                    Err(e) => {
                        self.release_slot();
                        Err(ChatTemplateError::Renderer(format!(
                            "cannot start {}: {e}",
                            self.command.program.display()
                        )))
                    }
                };
            }
            let left = deadline.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(ChatTemplateError::Busy {
                    workers: MAX_RENDER_PROCESSES,
                });
            }
            state = self
                .freed
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn release_slot(&self) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.live -= 1;
        self.freed.notify_one();
    }
}

/// A process taken from the pool: given back when its render succeeded, killed otherwise.
struct Lease<'p> {
    pool: &'p ProcessPool,
    worker: Option<Worker>,
    keep: bool,
}

impl<'p> Lease<'p> {
    fn new(pool: &'p ProcessPool, worker: Worker) -> Self {
        Lease {
            pool,
            worker: Some(worker),
            keep: false,
        }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        match self.worker.take() {
            Some(worker) if self.keep => {
                let mut state = self.pool.state.lock().unwrap_or_else(|e| e.into_inner());
                state.idle.push(worker);
                self.pool.freed.notify_one();
            }
            worker => {
                drop(worker);
                self.pool.release_slot();
            }
        }
    }
}
