//! Work that may run away, on threads of its own: compiling a request's grammar.
//!
//! A grammar compiler cannot be stopped from outside and recurses as deep as the grammar
//! nests, so a compile runs on a dedicated thread with a large stack ([`COMPILE_STACK`]), and
//! the request waits for it at most a deadline, giving its slot of the request workers back
//! while it waits ([`CancelFlag::release_slot`]), and stops waiting when its client leaves. A
//! compile that outlives its request still runs to its end, so at most [`MAX_COMPILES`]
//! compiles exist at once, abandoned ones included; past that a request waits for a place,
//! within the same deadline, and is told to retry when none frees up. The
//! caps of `schema_limits` keep what reaches a compiler small enough that its cost is bounded.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::blocking::CancelFlag;

/// The stack of a compile thread: the compiler recurses per property, `$ref` and alternative.
pub const COMPILE_STACK: usize = 64 << 20;
/// Compiles that may exist at once, abandoned ones included.
pub const MAX_COMPILES: usize = 2;
/// How long a request waits for its grammar.
pub const COMPILE_DEADLINE: Duration = Duration::from_secs(3);
/// How often a waiting request looks whether its client left.
const POLL: Duration = Duration::from_millis(20);

/// Why a compile gave no result.
#[derive(Debug, PartialEq, Eq)]
pub enum Stopped {
    /// It did not end within the deadline (it still runs, to its end).
    Late(Duration),
    /// [`MAX_COMPILES`] compiles ran for the whole deadline.
    Busy,
    /// The request's client left.
    Cancelled,
    /// The compiler panicked, or its thread could not start.
    Failed(String),
}

/// The compile threads.
#[derive(Debug)]
pub struct Compiles {
    running: Arc<AtomicUsize>,
    max: usize,
    deadline: Duration,
}

impl Default for Compiles {
    fn default() -> Self {
        Self::new(MAX_COMPILES, COMPILE_DEADLINE)
    }
}

/// Counts a compile thread out when it ends, however it ends.
struct Running(Arc<AtomicUsize>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Compiles {
    /// At most `max` compiles at once, each waited for at most `deadline`.
    pub fn new(max: usize, deadline: Duration) -> Self {
        Self {
            running: Arc::new(AtomicUsize::new(0)),
            max,
            deadline,
        }
    }

    /// Runs `job` on a compile thread and waits for it (off the request's worker slot) until it
    /// ends, the deadline passes or `cancel` is set.
    pub fn run<T, F>(&self, job: F, cancel: &CancelFlag) -> Result<T, Stopped>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        cancel.release_slot();
        let started = Instant::now();
        loop {
            let now = self.running.load(Ordering::SeqCst);
            let taken = now < self.max
                && self
                    .running
                    .compare_exchange(now, now + 1, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok();
            if taken {
                break;
            }
            if cancel.is_cancelled() {
                return Err(Stopped::Cancelled);
            }
            if started.elapsed() >= self.deadline {
                return Err(Stopped::Busy);
            }
            std::thread::sleep(POLL);
        }
        let running = Running(Arc::clone(&self.running));
        let (send, receive) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("rinfer-grammar".into())
            .stack_size(COMPILE_STACK)
            .spawn(move || {
                let _running = running;
                let _ = send.send(job());
            })
            .map_err(|e| Stopped::Failed(format!("cannot start a compile thread: {e}")))?;
        loop {
            let left = self.deadline.saturating_sub(started.elapsed());
            match receive.recv_timeout(left.min(POLL)) {
                Ok(result) => return Ok(result),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Stopped::Failed("the grammar compiler panicked".into()));
                }
                Err(RecvTimeoutError::Timeout) if cancel.is_cancelled() => {
                    return Err(Stopped::Cancelled);
                }
                Err(RecvTimeoutError::Timeout) if left.is_zero() => {
                    return Err(Stopped::Late(self.deadline));
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// Compiles running now, abandoned ones included.
    #[cfg(test)]
    fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;

    fn sleeper(ms: u64) -> impl FnOnce() -> u32 + Send + 'static {
        move || {
            std::thread::sleep(Duration::from_millis(ms));
            7
        }
    }

    #[test]
    fn a_compile_within_the_deadline_gives_its_result() {
        let compiles = Compiles::new(1, Duration::from_secs(5));
        assert_eq!(compiles.run(sleeper(10), &CancelFlag::default()), Ok(7));
    }

    #[test]
    fn a_compile_past_the_deadline_is_given_up_and_still_counted_until_it_ends() {
        let compiles = Compiles::new(1, Duration::from_millis(100));
        let started = Instant::now();
        let late = compiles.run(sleeper(600), &CancelFlag::default());
        assert_eq!(late, Err(Stopped::Late(Duration::from_millis(100))));
        assert!(started.elapsed() < Duration::from_millis(500));
        // The abandoned compile still holds the only place: the next waits, then gives up.
        assert_eq!(
            compiles.run(sleeper(1), &CancelFlag::default()),
            Err(Stopped::Busy)
        );
        let start = Instant::now();
        while compiles.running() > 0 {
            assert!(start.elapsed() < Duration::from_secs(5), "never ended");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(compiles.run(sleeper(1), &CancelFlag::default()), Ok(7));
    }

    #[test]
    fn a_compile_waits_for_a_place_while_others_run() {
        let compiles = Arc::new(Compiles::new(1, Duration::from_secs(5)));
        let first = std::thread::spawn({
            let compiles = Arc::clone(&compiles);
            move || compiles.run(sleeper(300), &CancelFlag::default())
        });
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(compiles.run(sleeper(1), &CancelFlag::default()), Ok(7));
        assert_eq!(first.join().unwrap(), Ok(7));
    }

    #[test]
    fn a_deep_recursion_fits_the_compile_stack() {
        fn depth(n: u64) -> u64 {
            // Half a KiB of frame the optimizer cannot drop.
            let pad = std::hint::black_box([n; 64]);
            if n == 0 {
                0
            } else {
                1 + depth(n - 1) + pad[63] - n
            }
        }
        // About 12 MiB of frames: far past a default 2 MiB thread stack.
        let compiles = Compiles::new(1, Duration::from_secs(30));
        let got = compiles.run(|| depth(20_000), &CancelFlag::default());
        assert_eq!(got, Ok(20_000));
    }

    #[test]
    fn a_client_leaving_stops_the_wait() {
        let compiles = Compiles::new(1, Duration::from_secs(30));
        let cancel = CancelFlag::default();
        let leaving = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            leaving.cancel();
        });
        let started = Instant::now();
        assert_eq!(
            compiles.run(sleeper(3_000), &cancel),
            Err(Stopped::Cancelled)
        );
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_panicking_compile_is_an_error_not_a_crash() {
        let compiles = Compiles::new(1, Duration::from_secs(5));
        let got = compiles.run(|| -> u32 { panic!("bad grammar") }, &CancelFlag::default());
        assert!(matches!(got, Err(Stopped::Failed(_))));
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        let got = compiles.run(
            move || flag.store(true, Ordering::SeqCst),
            &CancelFlag::default(),
        );
        assert_eq!(got, Ok(()));
        assert!(done.load(Ordering::SeqCst));
    }
}
