//! The blocking work of a request (parsing a body, rendering a chat template, tokenizing a
//! prompt) on the blocking pool, bounded and cancellable: at most one job per core runs at
//! once, and a job whose request was dropped (its client left) is told to stop through its
//! [`CancelFlag`]. A job that only waits for work done elsewhere (a grammar compiling on its
//! own thread, a template rendering in a child process) gives its slot back first
//! ([`CancelFlag::release_slot`]), so that waiting never holds up other requests.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;

/// Set once the request that started a job is gone; the job checks it between its steps. It
/// also holds the job's slot of the pool until the job ends or gives it back.
#[derive(Clone, Debug, Default)]
pub struct CancelFlag {
    cancelled: Arc<AtomicBool>,
    slot: Arc<Mutex<Option<OwnedSemaphorePermit>>>,
    /// The pool's slots, to take one again (`None` outside a pool).
    slots: Option<Arc<Semaphore>>,
}

impl CancelFlag {
    /// Whether the job should stop.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// Gives the job's slot back before the job ends: what is left of the job is waiting, not
    /// computing, and should not keep another request from starting.
    pub fn release_slot(&self) {
        self.slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// Takes a slot again after [`Self::release_slot`], waiting for one, before the job
    /// computes again.
    pub fn reacquire_slot(&self) {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        let (None, Some(slots)) = (slot.as_ref(), &self.slots) else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            *slot = runtime.block_on(Arc::clone(slots).acquire_owned()).ok();
        }
    }

    /// The flag itself, for work that checks it as it goes (a tokenizer).
    pub fn flag(&self) -> &AtomicBool {
        &self.cancelled
    }

    /// `Err` once cancelled, so that a job can stop with `?` between steps.
    pub fn check(&self) -> Result<(), ApiError> {
        if self.is_cancelled() {
            return Err(ApiError::unavailable("the client left", 0));
        }
        Ok(())
    }

    /// Tells the job to stop (its request is gone).
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }
}

/// Cancels its flag when dropped: held by the request's future, so that dropping the future
/// (hyper does when the client disconnects) stops its job.
struct CancelOnDrop(CancelFlag);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Runs request jobs on the blocking pool, at most `jobs` at once.
#[derive(Debug)]
pub struct BlockingJobs {
    slots: Arc<Semaphore>,
}

impl BlockingJobs {
    /// A pool running at most `jobs` (at least 1) jobs at once.
    pub fn new(jobs: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(jobs.max(1))),
        }
    }

    /// One per core.
    pub fn per_core() -> Self {
        Self::new(std::thread::available_parallelism().map_or(1, usize::from))
    }

    /// Runs `job` once a slot is free; dropping the returned future cancels the job's flag
    /// (and gives up the wait for a slot).
    pub async fn run<T, F>(&self, job: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&CancelFlag) -> Result<T, ApiError> + Send + 'static,
    {
        let flag = CancelFlag {
            slots: Some(Arc::clone(&self.slots)),
            ..CancelFlag::default()
        };
        let _cancel_on_drop = CancelOnDrop(flag.clone());
        let slot = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .map_err(|_| ApiError::internal("the request workers are shut down"))?;
        *flag.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(slot);
        tokio::task::spawn_blocking(move || {
            // The slot is held until the job really ends (or gives it back), even if its
            // request is gone.
            let result = flag.check().and_then(|()| job(&flag));
            flag.release_slot();
            result
        })
        .await
        .map_err(|_| ApiError::internal("request validation failed unexpectedly"))?
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::{Duration, Instant};

    use super::*;

    /// A job that spins until cancelled, recording that it stopped.
    fn spinning(stopped: Arc<AtomicBool>) -> impl FnOnce(&CancelFlag) -> Result<(), ApiError> {
        move |flag| {
            let start = Instant::now();
            while !flag.is_cancelled() && start.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(1));
            }
            stopped.store(flag.is_cancelled(), Ordering::SeqCst);
            flag.check()
        }
    }

    /// Runs `job` on `jobs` from a task of its own.
    fn spawn_job(
        jobs: &Arc<BlockingJobs>,
        job: impl FnOnce(&CancelFlag) -> Result<(), ApiError> + Send + 'static,
    ) -> tokio::task::JoinHandle<Result<(), ApiError>> {
        let jobs = Arc::clone(jobs);
        tokio::spawn(async move { jobs.run(job).await })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_the_request_cancels_its_blocking_work() {
        let jobs = BlockingJobs::new(1);
        let stopped = Arc::new(AtomicBool::new(false));
        let request = jobs.run(spinning(Arc::clone(&stopped)));
        // The client leaves after 50 ms: hyper drops the request's future.
        let _ = tokio::time::timeout(Duration::from_millis(50), request).await;
        let start = Instant::now();
        while !stopped.load(Ordering::SeqCst) {
            assert!(
                start.elapsed() < Duration::from_secs(2),
                "the job never stopped"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Its slot is free again: the next job runs.
        let ran = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&ran);
        jobs.run(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .await
        .unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn jobs_past_the_bound_wait_and_a_dropped_waiter_never_runs() {
        let jobs = Arc::new(BlockingJobs::new(1));
        let stopped = Arc::new(AtomicBool::new(false));
        let first = spawn_job(&jobs, spinning(Arc::clone(&stopped)));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let ran = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ran);
        let waiting = jobs.run(move |_| {
            flag.store(true, Ordering::SeqCst);
            Ok(())
        });
        assert!(
            tokio::time::timeout(Duration::from_millis(50), waiting)
                .await
                .is_err(),
            "a second job ran beside the first"
        );
        first.abort();
        let _ = first.await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !ran.load(Ordering::SeqCst),
            "a job of a dropped request ran"
        );
        assert!(stopped.load(Ordering::SeqCst));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_that_gives_its_slot_back_lets_the_next_job_run_while_it_waits() {
        let jobs = Arc::new(BlockingJobs::new(1));
        let gives_back = |flag: &CancelFlag| flag.release_slot();
        assert!(
            next_runs_beside(&jobs, gives_back, [50, 300]).await,
            "the next job waited for one that gave its slot back"
        );
        // A job that takes its slot again holds it: the next one waits.
        let takes_again = |flag: &CancelFlag| {
            flag.release_slot();
            flag.reacquire_slot();
        };
        assert!(
            !next_runs_beside(&jobs, takes_again, [100, 200]).await,
            "a second job ran beside a computing one"
        );
    }

    /// Whether a job started `start_ms` after one that runs `first` then computes for half a
    /// second gets to run within `wait_ms`; returns once both have ended.
    async fn next_runs_beside(
        jobs: &Arc<BlockingJobs>,
        first: impl FnOnce(&CancelFlag) + Send + 'static,
        [start_ms, wait_ms]: [u64; 2],
    ) -> bool {
        let running = spawn_job(jobs, |flag| {
            first(flag);
            std::thread::sleep(Duration::from_millis(500));
            Ok(())
        });
        tokio::time::sleep(Duration::from_millis(start_ms)).await;
        let next = tokio::time::timeout(Duration::from_millis(wait_ms), jobs.run(|_| Ok(())));
        let ran = next.await.is_ok();
        running.await.unwrap().unwrap();
        ran
    }
}
