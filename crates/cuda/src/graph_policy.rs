//! When the decode step runs as a replayed CUDA graph, when it is (re)captured and when it
//! runs as plain launches. Kept apart from the driver calls so the rules are tested without a
//! GPU.
//!
//! A graph bakes in the buffers it was captured with, so it belongs to one KV cache; graphs of
//! the [`MAX_GRAPHS`] most recently used caches are kept, so sequences that take turns do not
//! recapture. The batched decode keeps its own graphs by the same rules, keyed by its number of
//! rows instead of a cache: its rows' caches are read through a table rewritten before each
//! replay. Any failure drops the failing cache's graph: its next step captures a fresh one,
//! so an error in one request never leaves a broken graph for the next. Capture failing
//! [`MAX_CAPTURE_FAILURES`] times in a row (a driver that cannot capture) turns graphs off for
//! the model's lifetime; steps then run as plain launches, which compute the same thing.

/// Consecutive capture failures after which graphs are no longer tried.
pub const MAX_CAPTURE_FAILURES: u32 = 3;

/// Graphs kept, one per KV cache, least recently used dropped first.
pub const MAX_GRAPHS: usize = 8;

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

/// The decode graphs of one model, generic over the graph handle.
#[derive(Debug)]
pub struct DecodeGraph<G> {
    /// `(graph, cache id)`, most recently used last.
    graphs: Vec<(G, u64)>,
    capture_failures: u32,
    disabled: Option<String>,
}

impl<G> Default for DecodeGraph<G> {
    fn default() -> Self {
        Self {
            graphs: Vec::new(),
            capture_failures: 0,
            disabled: None,
        }
    }
}

impl<G> DecodeGraph<G> {
    /// The plan for a decode step on the cache with id `cache`.
    pub fn plan(&self, cache: u64) -> StepPlan {
        if self.disabled.is_some() {
            StepPlan::Launch
        } else if self.graphs.iter().any(|(_, owner)| *owner == cache) {
            StepPlan::Replay
        } else {
            StepPlan::Capture
        }
    }

    /// The graph of cache `cache`, marked most recently used.
    pub fn graph(&mut self, cache: u64) -> Option<&G> {
        let at = self.graphs.iter().position(|(_, owner)| *owner == cache)?;
        let entry = self.graphs.remove(at);
        self.graphs.push(entry);
        self.graphs.last().map(|(g, _)| g)
    }

    /// A capture for cache `cache` succeeded.
    pub fn captured(&mut self, graph: G, cache: u64) {
        self.invalidate(cache);
        if self.graphs.len() == MAX_GRAPHS {
            self.graphs.remove(0);
        }
        self.graphs.push((graph, cache));
        self.capture_failures = 0;
    }

    /// A capture for cache `cache` failed with `reason`; the step must still run as plain
    /// launches.
    pub fn capture_failed(&mut self, cache: u64, reason: String) {
        self.invalidate(cache);
        self.capture_failures += 1;
        if self.capture_failures >= MAX_CAPTURE_FAILURES {
            self.graphs.clear();
            self.disabled = Some(reason);
        }
    }

    /// A step on cache `cache` failed: forget its graph.
    pub fn invalidate(&mut self, cache: u64) {
        self.graphs.retain(|(_, owner)| *owner != cache);
    }

    /// How many graphs are kept.
    pub fn len(&self) -> usize {
        self.graphs.len()
    }

    /// Whether no graph is kept.
    pub fn is_empty(&self) -> bool {
        self.graphs.is_empty()
    }

    /// Why graphs are off, if they are.
    pub fn disabled_reason(&self) -> Option<&str> {
        self.disabled.as_deref()
    }
}
