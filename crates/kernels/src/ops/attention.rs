//! Causal attention of query rows over cached keys and values: scores, online softmax and the
//! weighted sum of values, in an order that never depends on threads or batch.

use std::ops::RangeInclusive;

use rayon::prelude::*;

use super::VectorKernels;
use super::kv_row::KvRow;

/// Keys scored together before the values they weight are summed.
pub const KEY_BLOCK: usize = 32;

/// How scores are formed and which keys a query sees.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionParams {
    /// Scores are `q · k * scale` (usually `1 / sqrt(head_dim)`).
    pub scale: f32,
    /// Scores become `cap * tanh(score / cap)`.
    pub softcap: Option<f32>,
    /// A query at `pos` sees the keys `pos + 1 - window ..= pos`; without a window every key
    /// from position 0.
    pub window: Option<usize>,
    /// Each head has a learned sink logit that joins the softmax's denominator only (gpt-oss):
    /// the weights of the keys then sum to less than one.
    pub sinks: bool,
}

impl AttentionParams {
    /// The first key position a query at `pos` sees.
    pub fn first_key(&self, pos: usize) -> usize {
        self.window.map_or(0, |w| (pos + 1).saturating_sub(w))
    }

    /// The score of a raw dot product.
    #[inline]
    fn score(&self, dot: f32) -> f32 {
        let s = dot * self.scale;
        match self.softcap {
            Some(cap) => cap * (s / cap).tanh(),
            None => s,
        }
    }
}

/// Head counts and width: query head `h` reads kv head `h / (heads / kv_heads)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (`heads` must be a multiple).
    pub kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
}

/// Where a query row finds the keys and values it attends over: rows of every kv head
/// (`kv_heads * head_dim` values), by position, in the cache's type (a q8_0 row's blocks must
/// not span two heads).
pub trait KeyValueRows {
    /// The key row at `pos`.
    fn key(&self, pos: usize) -> KvRow<'_>;
    /// The value row at `pos`.
    fn value(&self, pos: usize) -> KvRow<'_>;
}

/// Query rows a task of [`attention`] takes together: each key block is read once for all of
/// them (and all the query heads that share its kv head).
pub const QUERY_TILE: usize = 16;

/// Attention of `n` query rows `queries` `[n, heads * head_dim]` into `out` (same shape).
/// `row(i)` gives query row `i`'s position and its key/value rows; it sees the keys of
/// [`AttentionParams::first_key`]`..=` its position. `sinks` holds one sink logit per head
/// when the params have sinks.
///
/// Each query head computes exactly what [`attend`] computes for it alone, so the result never
/// depends on the batch or the threads. Tasks: one per tile of [`QUERY_TILE`] rows and kv head,
/// walking the key blocks that meet the tile's windows once for the tile; with fewer than two
/// tiles of rows (decoding), one per row and query head.
///
/// # Panics
/// When `queries` and `out` differ in length or are not whole rows, or when `sinks` is not one
/// value per head exactly when the params have sinks (a caller bug).
pub fn attention<R: KeyValueRows>(
    shape: &AttentionShape,
    params: &AttentionParams,
    sinks: Option<&[f32]>,
    queries: &[f32],
    row: impl Fn(usize) -> (usize, R) + Sync,
    out: &mut [f32],
) {
    let AttentionShape {
        heads,
        kv_heads,
        head_dim: hd,
    } = *shape;
    assert_eq!(queries.len(), out.len());
    assert!(queries.len().is_multiple_of(heads * hd));
    assert_eq!(sinks.map(<[f32]>::len), params.sinks.then_some(heads));
    let group = heads / kv_heads;
    let vector = VectorKernels::detected();
    let rows = queries.len() / (heads * hd);
    if rows < 2 * QUERY_TILE {
        out.par_chunks_mut(hd).enumerate().for_each(|(job, acc)| {
            let (i, h) = (job / heads, job % heads);
            let (pos, rows) = row(i);
            let kv = (h / group) * hd;
            let query = &queries[job * hd..(job + 1) * hd];
            let key = |j: usize| rows.key(j).slice(kv, hd);
            let value = |j: usize| rows.value(j).slice(kv, hd);
            let sink = sinks.map(|s| s[h]);
            attend(vector, params, sink, query, pos, key, value, acc);
        });
        return;
    }
    // The outputs of the heads of one kv head in one row lie together; a task takes those of
    // its tile's rows.
    let mut tasks: Vec<Vec<&mut [f32]>> = (0..rows.div_ceil(QUERY_TILE) * kv_heads)
        .map(|_| Vec::with_capacity(QUERY_TILE))
        .collect();
    for (part, heads_out) in out.chunks_mut(group * hd).enumerate() {
        let (i, kv) = (part / kv_heads, part % kv_heads);
        tasks[i / QUERY_TILE * kv_heads + kv].push(heads_out);
    }
    tasks.into_par_iter().enumerate().for_each(|(task, outs)| {
        let tile = Tile {
            first_row: task / kv_heads * QUERY_TILE,
            kv_head: task % kv_heads,
            shape,
            params,
            sinks,
            queries,
        };
        tile.attend(vector, &row, outs);
    });
}

/// One task of [`attention`]: the heads of one kv head in consecutive query rows.
struct Tile<'q> {
    first_row: usize,
    kv_head: usize,
    shape: &'q AttentionShape,
    params: &'q AttentionParams,
    sinks: Option<&'q [f32]>,
    queries: &'q [f32],
}

impl Tile<'_> {
    /// Attends the tile's rows into `outs` (per row, its heads of the kv head): key block by
    /// key block, each query head over the keys of the block it sees, then the sinks and the
    /// normalisation — per query head the operations of [`attend`], in its order.
    fn attend<R: KeyValueRows>(
        &self,
        vector: &VectorKernels,
        row: &impl Fn(usize) -> (usize, R),
        mut outs: Vec<&mut [f32]>,
    ) {
        let AttentionShape {
            heads,
            kv_heads,
            head_dim: hd,
        } = *self.shape;
        let group = heads / kv_heads;
        let rows: Vec<(usize, R)> = (self.first_row..self.first_row + outs.len())
            .map(row)
            .collect();
        let mut running = vec![Running::EMPTY; rows.len() * group];
        outs.iter_mut().for_each(|o| o.fill(0.0));
        let first = rows
            .iter()
            .map(|&(pos, _)| self.params.first_key(pos))
            .min();
        let last = rows.iter().map(|&(pos, _)| pos).max();
        let (Some(first), Some(last)) = (first, last) else {
            return;
        };
        let kv = self.kv_head * hd;
        for block in first / KEY_BLOCK..=last / KEY_BLOCK {
            let block_keys = block * KEY_BLOCK..=block * KEY_BLOCK + KEY_BLOCK - 1;
            for (r, ((pos, kv_rows), out)) in rows.iter().zip(&mut outs).enumerate() {
                let lo = self.params.first_key(*pos).max(*block_keys.start());
                let hi = (*pos).min(*block_keys.end());
                if lo > hi {
                    continue;
                }
                let key = |j: usize| kv_rows.key(j).slice(kv, hd);
                let value = |j: usize| kv_rows.value(j).slice(kv, hd);
                let heads_out = out.chunks_exact_mut(hd);
                let states = &mut running[r * group..(r + 1) * group];
                for (g, (out, state)) in heads_out.zip(states).enumerate() {
                    let query = self.query(r, self.kv_head * group + g);
                    state.attend_block(vector, self.params, query, lo..=hi, &key, &value, out);
                }
            }
        }
        for (r, out) in outs.iter_mut().enumerate() {
            let states = &running[r * group..(r + 1) * group];
            for (g, (out, state)) in out.chunks_exact_mut(hd).zip(states).enumerate() {
                let sink = self.sinks.map(|s| s[self.kv_head * group + g]);
                state.finish(sink, out);
            }
        }
    }

    /// The query of head `h` of the tile's row `r`.
    fn query(&self, r: usize, h: usize) -> &[f32] {
        let hd = self.shape.head_dim;
        let at = ((self.first_row + r) * self.shape.heads + h) * hd;
        &self.queries[at..at + hd]
    }
}

/// One query head at `pos` over the keys `key(j)` and values `value(j)` it sees, into `out`.
/// Keys are taken in position order by key block (positions `b * KEY_BLOCK ..` up to the next
/// multiple, cut to the visible keys): their scores (four keys per `dot4`), then one rescale of
/// the running sum if the maximum grew, then the weighted values; last, the `sink` logit (if
/// any) joins the sum. Rows of every KV type are read in place by kernels that compute exactly
/// what they compute on the decoded f32 values, so the result is the f32 computation over the
/// stored values whatever the type.
#[allow(clippy::too_many_arguments)]
pub fn attend<'a>(
    vector: &VectorKernels,
    params: &AttentionParams,
    sink: Option<f32>,
    query: &[f32],
    pos: usize,
    key: impl Fn(usize) -> KvRow<'a>,
    value: impl Fn(usize) -> KvRow<'a>,
    out: &mut [f32],
) {
    out.fill(0.0);
    let first = params.first_key(pos);
    let mut state = Running::EMPTY;
    for block in first / KEY_BLOCK..=pos / KEY_BLOCK {
        let keys = (block * KEY_BLOCK).max(first)..=(block * KEY_BLOCK + KEY_BLOCK - 1).min(pos);
        state.attend_block(vector, params, query, keys, &key, &value, out);
    }
    state.finish(sink, out);
}

/// The online softmax of one query head: the largest score so far and the sum of the weights
/// relative to it (the weighted values, relative to it too, live in the output).
#[derive(Clone, Copy, Debug)]
struct Running {
    max: f32,
    sum: f32,
}

impl Running {
    /// Before any key.
    const EMPTY: Running = Running {
        max: f32::NEG_INFINITY,
        sum: 0.0,
    };

    /// Adds the keys `keys` (within one key block) to the query head's sum `out`.
    #[allow(clippy::too_many_arguments)]
    fn attend_block<'a>(
        &mut self,
        vector: &VectorKernels,
        params: &AttentionParams,
        query: &[f32],
        keys: RangeInclusive<usize>,
        key: &impl Fn(usize) -> KvRow<'a>,
        value: &impl Fn(usize) -> KvRow<'a>,
        out: &mut [f32],
    ) {
        let (start, end) = (*keys.start(), *keys.end() + 1);
        let mut scores = [0.0f32; KEY_BLOCK];
        let scores = &mut scores[..end - start];
        // Four keys per call; a short last group repeats its last key.
        for (group, j0) in scores.chunks_mut(4).zip((start..).step_by(4)) {
            let last = j0 + group.len() - 1;
            let keys = [0, 1, 2, 3].map(|d| key((j0 + d).min(last)));
            for (score, dot) in group.iter_mut().zip(vector.dot4_rows(query, keys)) {
                *score = params.score(dot);
            }
        }
        let block_max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
        self.rescale_to(block_max, out);
        for (group, j0) in scores.chunks(4).zip((start..).step_by(4)) {
            let mut weights = [0.0f32; 4];
            for (w, &score) in weights.iter_mut().zip(group) {
                *w = (score - self.max).exp();
                self.sum += *w;
            }
            if group.len() == 4 {
                let values = [0, 1, 2, 3].map(|d| value(j0 + d));
                vector.axpy4_rows(weights, values, out);
            } else {
                for (&w, j) in weights[..group.len()].iter().zip(j0..) {
                    vector.axpy_row(w, value(j), out);
                }
            }
        }
    }

    /// Makes `max` the maximum if it is larger, rescaling the sums.
    fn rescale_to(&mut self, max: f32, out: &mut [f32]) {
        if max > self.max {
            let rescale = (self.max - max).exp();
            self.sum *= rescale;
            out.iter_mut().for_each(|a| *a *= rescale);
            self.max = max;
        }
    }

    /// Adds the `sink` logit (if any) to the sum and divides `out` by the sum.
    fn finish(mut self, sink: Option<f32>, out: &mut [f32]) {
        if let Some(sink) = sink {
            self.rescale_to(sink, out);
            self.sum += (sink - self.max).exp();
        }
        let inv = 1.0 / self.sum;
        out.iter_mut().for_each(|a| *a *= inv);
    }
}

#[cfg(test)]
mod tests;
