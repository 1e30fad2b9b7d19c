//! When the decode step runs as a replayed CUDA graph, when it is (re)captured and when it
//! runs as plain launches. Kept apart from the driver calls so the rules are tested without a
//! GPU.
//!
//! A graph bakes in the buffers it was captured with, so it belongs to one KV cache. Any
//! failure drops it: the next step captures a fresh one, so an error in one request never
//! leaves a broken graph for the next. Capture failing [`MAX_CAPTURE_FAILURES`] times in a row
//! (a driver that cannot capture) turns graphs off for the model's lifetime; steps then run as
//! plain launches, which compute the same thing.

/// Consecutive capture failures after which graphs are no longer tried.
pub const MAX_CAPTURE_FAILURES: u32 = 3;

/// What the next decode step should do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepPlan {
    /// Replay the captured graph.
    Replay,
    /// Capture the step into a graph (and then replay it).
    Capture,
    /// Launch the kernels one by one.
    Launch,
}

/// The decode graph of one model, generic over the graph handle.
#[derive(Debug)]
pub struct DecodeGraph<G> {
    graph: Option<(G, u64)>,
    capture_failures: u32,
    disabled: Option<String>,
}

impl<G> Default for DecodeGraph<G> {
    fn default() -> Self {
        Self {
            graph: None,
            capture_failures: 0,
            disabled: None,
        }
    }
}

impl<G> DecodeGraph<G> {
    /// The plan for a decode step on the cache with id `cache`.
    pub fn plan(&self, cache: u64) -> StepPlan {
        match (&self.graph, &self.disabled) {
            (_, Some(_)) => StepPlan::Launch,
            (Some((_, owner)), None) if *owner == cache => StepPlan::Replay,
            _ => StepPlan::Capture,
        }
    }

    /// The graph to replay, if [`plan`](Self::plan) said so.
    pub fn graph(&self) -> Option<&G> {
        self.graph.as_ref().map(|(g, _)| g)
    }

    /// A capture for cache `cache` succeeded.
    pub fn captured(&mut self, graph: G, cache: u64) {
        self.graph = Some((graph, cache));
        self.capture_failures = 0;
    }

    /// A capture failed with `reason`; the step must still run as plain launches.
    pub fn capture_failed(&mut self, reason: String) {
        self.graph = None;
        self.capture_failures += 1;
        if self.capture_failures >= MAX_CAPTURE_FAILURES {
            self.disabled = Some(reason);
        }
    }

    /// A replay (or anything else in the step) failed: forget the graph.
    pub fn invalidate(&mut self) {
        self.graph = None;
    }

    /// Why graphs are off, if they are.
    pub fn disabled_reason(&self) -> Option<&str> {
        self.disabled.as_deref()
    }
}
