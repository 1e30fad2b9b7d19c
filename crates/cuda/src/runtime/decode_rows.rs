//! The batched decode: the last token of each of several sequences (and the guesses of those
//! that speculate) in one pass over the weights, every row storing to and attending over its
//! own sequence's KV cache.
//!
//! The rows' caches are reached through a table of addresses in device memory
//! ([`CacheTables`]), written before each step together with the rows' token ids and
//! positions. The launches therefore depend only on the number of rows, and a CUDA graph is
//! captured per row count and replayed whichever sequences fill the rows
//! ([`DecodeGraph`] keyed by that count, the policy of the single-sequence graphs otherwise).

use crate::error::CudaError;
use crate::graph_policy::StepPlan;
use crate::runtime::buffers::GpuKvCache;
use crate::runtime::driver::driver;
use crate::runtime::model::GpuModel;

impl GpuModel {
    /// Decodes several sequences in one pass: sequence `i` feeds the tokens `seqs[i].0` (its
    /// last token, then any guesses) at the positions following its cache `seqs[i].1`, a row
    /// each, every row storing its keys and values there and attending over that cache up to
    /// its own position. Returns the logits `[rows, vocab]`, the rows in order. A row's logits
    /// are those of the same token decoded alone, bit for bit: they do not depend on which
    /// rows share the step nor on their order
    /// ([`StepBuilder::decode`](crate::program::StepBuilder::decode)). At most
    /// [`UploadPlan::decode_rows`] rows, each sequence with its own cache; on an error no cache
    /// has grown.
    pub fn forward_rows(
        &mut self,
        seqs: &mut [(&[u32], &mut GpuKvCache)],
    ) -> Result<&[f32], CudaError> {
        let n: usize = seqs.iter().map(|(tokens, _)| tokens.len()).sum();
        if n == 0 {
            return Ok(&[]);
        }
        self.check_rows(seqs, n)?;
        self.ctx
            .bind_to_thread()
            .map_err(driver("context binding"))?;
        for (tokens, cache) in seqs.iter_mut() {
            self.reserve(cache, tokens.len())?;
        }
        if let Err(error) = self.write_rows(seqs).and_then(|()| self.step_rows(n)) {
            self.rows.graphs.invalidate(n as u64);
            return Err(error);
        }
        let logits = self.logits_to_host(n)?;
        for (tokens, cache) in seqs.iter_mut() {
            cache.len += tokens.len();
        }
        Ok(logits)
    }

    /// Why the batched decode runs without CUDA graphs, if it does.
    pub fn rows_graph_disabled_reason(&self) -> Option<&str> {
        self.rows.graphs.disabled_reason()
    }

    /// Refuses more than `decode_rows` rows (`n` in all), a token outside the vocabulary, a
    /// foreign cache or one without room for its tokens, and a cache given twice.
    fn check_rows(&self, seqs: &[(&[u32], &mut GpuKvCache)], n: usize) -> Result<(), CudaError> {
        let max = self.plan.decode_rows;
        if n > max {
            return Err(CudaError::TooManyRows { requested: n, max });
        }
        for (i, (tokens, cache)) in seqs.iter().enumerate() {
            self.check_feed(tokens, cache)?;
            if seqs[..i].iter().any(|(_, other)| other.id == cache.id) {
                return Err(CudaError::CacheTwice);
            }
        }
        Ok(())
    }

    /// Writes the rows' token ids, positions and cache tables to the device: a sequence's
    /// tokens at successive positions, each row naming its cache.
    fn write_rows(&mut self, seqs: &[(&[u32], &mut GpuKvCache)]) -> Result<(), CudaError> {
        let state = &mut self.rows;
        let mut n = 0;
        for (tokens, cache) in seqs {
            for (i, &token) in tokens.iter().enumerate() {
                state.ids[n] = token as i32;
                state.positions[n] = (cache.len + i) as i32;
                state
                    .tables
                    .set_row(&mut state.table, n, cache.layers.iter().copied());
                n += 1;
            }
        }
        const UPLOAD: &str = "decode rows upload";
        let mut dst = self.work.tokens.slice.slice_mut(..n);
        self.stream
            .memcpy_htod(&state.ids[..n], &mut dst)
            .map_err(driver(UPLOAD))?;
        let mut dst = self.work.positions.slice.slice_mut(..n);
        self.stream
            .memcpy_htod(&state.positions[..n], &mut dst)
            .map_err(driver(UPLOAD))?;
        let mut dst = self.work.cache_tables.slice.slice_mut(..state.table.len());
        self.stream
            .memcpy_htod(&state.table, &mut dst)
            .map_err(driver(UPLOAD))
    }

    /// Runs the step of `n` rows: replays its graph, capturing it first if needed, or
    /// launches the kernels when graphs are off.
    fn step_rows(&mut self, n: usize) -> Result<(), CudaError> {
        let key = n as u64;
        match self.rows.graphs.plan(key) {
            StepPlan::Launch => self.launch_rows(n),
            StepPlan::Replay => self.replay_rows(key),
            StepPlan::Capture => {
                match self.record_graph(|model| model.launch_rows(n)) {
                    Ok(graph) => self.rows.graphs.captured(graph, key),
                    Err(error) => {
                        self.rows.graphs.capture_failed(key, error.to_string());
                        return self.launch_rows(n);
                    }
                }
                self.replay_rows(key)
            }
        }
    }

    /// Builds and launches the step of `n` rows.
    fn launch_rows(&mut self, n: usize) -> Result<(), CudaError> {
        self.launch_built(|model, launches| model.builder().decode(n, &model.rows.tables, launches))
    }

    fn replay_rows(&mut self, key: u64) -> Result<(), CudaError> {
        let graph = self
            .rows
            .graphs
            .graph(key)
            .ok_or_else(|| CudaError::Driver {
                op: "graph replay",
                message: "no graph was captured".into(),
            })?;
        graph.launch().map_err(driver("graph replay"))
    }
}
