//! Causal attention of query rows over cached keys and values: scores, online softmax and the
//! weighted sum of values, in an order that never depends on threads or batch.
//!
//! Keys are taken in blocks of [`KEY_BLOCK`] aligned to absolute positions, with softcap,
//! sliding window and sink logits applied in a fixed order. A task decodes each key block's
//! keys and values of its kv head once into f32 rows (`KvRow::decode`, exact) for all its query
//! rows that read the same cache (`KeyValueRows::same_rows`) and all its query heads; then each
//! query head scores the block's keys it sees, rescales once, weights them and adds the
//! weighted values, exactly as the one-query `attend` does, so results are batch-invariant.
//! Prefill takes one task per 16 query rows (all heads, kv head by kv head) and decodes only
//! the keys of the tile's windows; a decode batch of fewer than two tiles takes one task per
//! (row, kv head), or per row and an equal share of a kv head's query heads where that would
//! leave threads idle. A task's outputs lie together, and its key block and softmax states live
//! on its stack, so a decode step allocates nothing.

use std::ops::RangeInclusive;

use rayon::prelude::*;

use super::VectorKernels;
use super::kv_row::KvRow;

/// Keys scored together before the values they weight are summed.
pub const KEY_BLOCK: usize = 32;

pub use rinfer_transformer::AttentionParams;

/// Scaled dot products with their largest `max` as scores, softcapped where the model caps
/// them, and the largest score.
#[inline]
fn capped(params: &AttentionParams, scores: &mut [f32], max: f32) -> f32 {
    let Some(cap) = params.softcap else {
        return max;
    };
    scores.iter_mut().for_each(|s| *s = cap * (*s / cap).tanh());
    scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s))
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
    /// Whether `other` reads the same rows (the same sequence's cache layer): query rows that
    /// share their rows decode each key block once for all of them.
    fn same_rows(&self, other: &Self) -> bool;
}

/// Query rows a task of [`attention`] takes together: each key block is decoded once for all
/// of them (and all the query heads that share its kv head).
pub const QUERY_TILE: usize = 16;

/// Attention of `n` query rows `queries` `[n, heads * head_dim]` into `out` (same shape).
/// `row(i)` gives query row `i`'s position and its key/value rows; it sees the keys of
/// [`AttentionParams::first_key`]`..=` its position. `sinks` holds one sink logit per head
/// when the params have sinks.
///
/// Each query head computes exactly what [`attend`] computes for it alone, so the result never
/// depends on the batch or the threads. Tasks: one per tile of [`QUERY_TILE`] rows (prefill;
/// all heads, kv head by kv head), decoding each key block of a kv head that meets the tile's
/// windows once into f32 rows for the tile; with fewer than two tiles of rows (decoding), one
/// per row and kv head, or per row and an equal share of a kv head's query heads where that
/// would leave threads idle.
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
    let rows = queries.len() / (heads * hd);
    let split = if rows >= 2 * QUERY_TILE {
        Split {
            rows: QUERY_TILE,
            heads,
        }
    } else {
        // The most query heads of one kv head per task (each task decodes its kv head's keys
        // once) that still gives every thread a task.
        let threads = rayon::current_num_threads();
        let per_task = (1..=group)
            .rev()
            .find(|&g| group.is_multiple_of(g) && rows * kv_heads * (group / g) >= threads)
            .unwrap_or(1);
        Split {
            rows: 1,
            heads: per_task,
        }
    };
    // A task's outputs lie together: whole rows, or heads of one row.
    let tasks_per_row_span = heads / split.heads;
    let vector = VectorKernels::detected();
    out.par_chunks_mut(split.rows * split.heads * hd)
        .enumerate()
        .for_each(|(task, out)| {
            let tile = Tile {
                first_row: task / tasks_per_row_span * split.rows,
                first_head: task % tasks_per_row_span * split.heads,
                heads: split.heads,
                shape,
                params,
                sinks,
                queries,
            };
            tile.attend(vector, &row, out);
        });
}

/// How [`attention`] splits its work: tasks of `rows` query rows (at most [`QUERY_TILE`]) and
/// `heads` query heads (all of them, or with one row those of one kv head or a share of them).
struct Split {
    rows: usize,
    heads: usize,
}

/// Head widths whose key blocks a task keeps on its stack (each tier a stack buffer of that
/// width, so narrow heads do not clear a buffer sized for wide ones); wider heads use the heap.
const STACK_HEAD_DIMS: [usize; 4] = [32, 64, 128, 256];

/// Online-softmax states a task keeps on its stack.
const STACK_STATES: usize = 256;

/// Runs `f` on `len` copies of `fill`, on the stack where they fit in `N`.
fn with_buffer<T: Copy, const N: usize, O>(
    len: usize,
    fill: T,
    f: impl FnOnce(&mut [T]) -> O,
) -> O {
    if len <= N {
        let mut stack = [fill; N];
        f(&mut stack[..len])
    } else {
        f(&mut vec![fill; len])
    }
}

/// One task of [`attention`]: query heads `first_head..first_head + heads` of consecutive query
/// rows.
struct Tile<'q> {
    first_row: usize,
    first_head: usize,
    heads: usize,
    shape: &'q AttentionShape,
    params: &'q AttentionParams,
    sinks: Option<&'q [f32]>,
    queries: &'q [f32],
}

impl Tile<'_> {
    /// Attends the tile's rows into `out` (`[row][head of the tile][head_dim]`): per kv head,
    /// for each set of rows that read the same rows, key block by key block, the keys some row
    /// sees decoded once, then each query head over the keys of the block it sees; last the
    /// sinks and the normalisation — per query head the operations of [`attend`], in its order.
    fn attend<R: KeyValueRows>(
        &self,
        vector: &VectorKernels,
        row: &impl Fn(usize) -> (usize, R),
        out: &mut [f32],
    ) {
        let (hd, heads) = (self.shape.head_dim, self.heads);
        let n = out.len() / (heads * hd);
        out.fill(0.0);
        // Each row's position, and its set: the first row of the tile that reads the same rows.
        let (mut pos, mut set) = ([0; QUERY_TILE], [0; QUERY_TILE]);
        for r in 0..n {
            let (at, rows) = row(self.first_row + r);
            let same = |&s: &usize| row(self.first_row + s).1.same_rows(&rows);
            (pos[r], set[r]) = (at, (0..r).map(|s| set[s]).find(same).unwrap_or(r));
        }
        let (pos, set) = (&pos[..n], &set[..n]);
        with_buffer::<_, STACK_STATES, _>(n * heads, Running::EMPTY, |running| {
            KeyBlock::with(hd, |block| {
                let group = self.shape.heads / self.shape.kv_heads;
                let last_head = self.first_head + heads - 1;
                for kv in self.first_head / group..=last_head / group {
                    let first = self.first_head.max(kv * group);
                    let kv_heads = first..=last_head.min(kv * group + group - 1);
                    self.attend_kv_head(vector, row, (pos, set), kv_heads, block, running, out);
                }
            });
            for (at, (out, state)) in out.chunks_exact_mut(hd).zip(running).enumerate() {
                let sink = self.sinks.map(|s| s[self.first_head + at % heads]);
                state.finish(sink, out);
            }
        });
    }

    /// [`Self::attend`]'s work for the query heads `heads` of one kv head: the rows at
    /// positions `pos` by sets that read the same rows (`set`: each row's first row of its
    /// set), each set key block by key block.
    #[allow(clippy::too_many_arguments)]
    fn attend_kv_head<R: KeyValueRows>(
        &self,
        vector: &VectorKernels,
        row: &impl Fn(usize) -> (usize, R),
        (pos, set): (&[usize], &[usize]),
        heads: RangeInclusive<usize>,
        block: &mut KeyBlock<'_>,
        running: &mut [Running],
        out: &mut [f32],
    ) {
        let hd = self.shape.head_dim;
        let kv = *heads.start() / (self.shape.heads / self.shape.kv_heads);
        let seen = |r: usize| self.params.first_key(pos[r])..=pos[r];
        for (r0, _) in set.iter().enumerate().filter(|&(r, &s)| r == s) {
            let (_, kv_rows) = row(self.first_row + r0);
            let mut sharing = [0; QUERY_TILE];
            let mut count = 0;
            for (r, _) in set.iter().enumerate().filter(|&(_, &s)| s == r0) {
                sharing[count] = r;
                count += 1;
            }
            let sharing = &sharing[..count];
            let first = sharing.iter().map(|&r| *seen(r).start()).min().unwrap_or(0);
            let last = sharing.iter().map(|&r| pos[r]).max().unwrap_or(0);
            for b in first / KEY_BLOCK..=last / KEY_BLOCK {
                let start = b * KEY_BLOCK;
                let cut = |r: usize| {
                    let keys = seen(r);
                    (*keys.start()).max(start)..=(*keys.end()).min(start + KEY_BLOCK - 1)
                };
                let needed = |j: usize| sharing.iter().any(|&r| cut(r).contains(&j));
                let key = |j: usize| kv_rows.key(j).slice(kv * hd, hd);
                let value = |j: usize| kv_rows.value(j).slice(kv * hd, hd);
                block.decode(start, key, value, needed);
                for &r in sharing {
                    let keys = cut(r);
                    if keys.is_empty() {
                        continue;
                    }
                    let (k, v) = block.rows(keys);
                    // Query heads four or two at a time where the CPU scores them together.
                    let mut h = *heads.start();
                    while h <= *heads.end() {
                        let at = r * self.heads + h - self.first_head;
                        if h + 3 <= *heads.end() {
                            let queries = [0, 1, 2, 3].map(|i| self.query(r, h + i));
                            let outs = &mut out[at * hd..(at + 4) * hd];
                            let states = &mut running[at..at + 4];
                            Running::attend_block_quad(
                                vector,
                                self.params,
                                queries,
                                (k, v),
                                states,
                                outs,
                            );
                            h += 4;
                        } else if h < *heads.end() {
                            let queries = [self.query(r, h), self.query(r, h + 1)];
                            let outs = out[at * hd..(at + 2) * hd].split_at_mut(hd);
                            let states = running[at..at + 2].split_at_mut(1);
                            let states = [&mut states.0[0], &mut states.1[0]];
                            Running::attend_block_pair(
                                vector,
                                self.params,
                                queries,
                                k,
                                v,
                                states,
                                outs,
                            );
                            h += 2;
                        } else {
                            let query = self.query(r, h);
                            let out = &mut out[at * hd..(at + 1) * hd];
                            running[at].attend_block(vector, self.params, query, k, v, out);
                            h += 1;
                        }
                    }
                }
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

/// One key block's keys and values of one kv head, decoded to f32 rows.
struct KeyBlock<'b> {
    head_dim: usize,
    start: usize,
    keys: &'b mut [f32],
    values: &'b mut [f32],
}

impl KeyBlock<'_> {
    /// Runs `f` on a block for heads `head_dim` wide, its rows on the stack where they fit.
    fn with<O>(head_dim: usize, f: impl FnOnce(&mut KeyBlock<'_>) -> O) -> O {
        const fn floats(head_dim: usize) -> usize {
            2 * KEY_BLOCK * head_dim
        }
        let run = |rows: &mut [f32]| {
            let (keys, values) = rows.split_at_mut(rows.len() / 2);
            f(&mut KeyBlock {
                head_dim,
                start: 0,
                keys,
                values,
            })
        };
        let len = floats(head_dim);
        match head_dim {
            w if w <= STACK_HEAD_DIMS[0] => {
                with_buffer::<_, { floats(STACK_HEAD_DIMS[0]) }, _>(len, 0.0, run)
            }
            w if w <= STACK_HEAD_DIMS[1] => {
                with_buffer::<_, { floats(STACK_HEAD_DIMS[1]) }, _>(len, 0.0, run)
            }
            w if w <= STACK_HEAD_DIMS[2] => {
                with_buffer::<_, { floats(STACK_HEAD_DIMS[2]) }, _>(len, 0.0, run)
            }
            _ => with_buffer::<_, { floats(STACK_HEAD_DIMS[3]) }, _>(len, 0.0, run),
        }
    }

    /// Decodes the keys `key(j)` and values `value(j)` of the block at `start` that `needed`
    /// asks for.
    fn decode<'a>(
        &mut self,
        start: usize,
        key: impl Fn(usize) -> KvRow<'a>,
        value: impl Fn(usize) -> KvRow<'a>,
        needed: impl Fn(usize) -> bool,
    ) {
        let hd = self.head_dim;
        self.start = start;
        let slots = self
            .keys
            .chunks_exact_mut(hd)
            .zip(self.values.chunks_exact_mut(hd));
        for (j, (k, v)) in (start..).zip(slots) {
            if needed(j) {
                key(j).decode(k);
                value(j).decode(v);
            }
        }
    }

    /// The decoded keys and values of the positions `keys` (within the block).
    fn rows(&self, keys: RangeInclusive<usize>) -> (&[f32], &[f32]) {
        let hd = self.head_dim;
        let span = (keys.start() - self.start) * hd..(keys.end() + 1 - self.start) * hd;
        (&self.keys[span.clone()], &self.values[span])
    }
}

/// One query head at `pos` over the keys `key(j)` and values `value(j)` it sees, into `out`.
/// Keys are taken in position order by key block (positions `b * KEY_BLOCK ..` up to the next
/// multiple, cut to the visible keys), decoded to f32: their scores
/// ([`VectorKernels::scaled_dots`]), then one rescale of the running sum if the maximum grew, the
/// weights ([`VectorKernels::exp_shifted`]) added to the sum in key order, and the weighted
/// values ([`VectorKernels::axpy_rows`]); last, the `sink` logit (if any) joins the sum.
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
    let hd = query.len();
    out.fill(0.0);
    let first = params.first_key(pos);
    let mut state = Running::EMPTY;
    KeyBlock::with(hd, |block| {
        for b in first / KEY_BLOCK..=pos / KEY_BLOCK {
            let keys = (b * KEY_BLOCK).max(first)..=(b * KEY_BLOCK + KEY_BLOCK - 1).min(pos);
            block.decode(b * KEY_BLOCK, &key, &value, |j| keys.contains(&j));
            let (k, v) = block.rows(keys);
            state.attend_block(vector, params, query, k, v, out);
        }
    });
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

    /// Adds the keys `keys` and values `values` (f32 rows of one key block, as many as the
    /// query is long each) to the query head's sum `out`.
    fn attend_block(
        &mut self,
        vector: &VectorKernels,
        params: &AttentionParams,
        query: &[f32],
        keys: &[f32],
        values: &[f32],
        out: &mut [f32],
    ) {
        let mut scores = [0.0f32; KEY_BLOCK];
        let scores = &mut scores[..keys.len() / query.len().max(1)];
        let max = vector.scaled_dots(query, keys, params.scale, scores);
        let block_max = capped(params, scores, max);
        self.add_block(vector, scores, block_max, values, out);
    }

    /// [`Self::attend_block`] for two query heads over the same keys, each state and output
    /// getting the bits `attend_block` gives it.
    #[allow(clippy::too_many_arguments)]
    fn attend_block_pair(
        vector: &VectorKernels,
        params: &AttentionParams,
        queries: [&[f32]; 2],
        keys: &[f32],
        values: &[f32],
        states: [&mut Running; 2],
        outs: (&mut [f32], &mut [f32]),
    ) {
        let n = keys.len() / queries[0].len().max(1);
        let (mut s0, mut s1) = ([0.0f32; KEY_BLOCK], [0.0f32; KEY_BLOCK]);
        let (s0, s1) = (&mut s0[..n], &mut s1[..n]);
        let [m0, m1] = vector.scaled_dots_pair(queries, keys, params.scale, [&mut *s0, &mut *s1]);
        let [m0, m1] = [capped(params, s0, m0), capped(params, s1, m1)];
        let [state0, state1] = states;
        state0.weigh_block(vector, s0, m0, outs.0);
        state1.weigh_block(vector, s1, m1, outs.1);
        vector.axpy_rows_pair([s0, s1], values, [outs.0, outs.1]);
    }

    /// [`Self::attend_block`] for four query heads over the same keys and values (`states` and
    /// `outs`, `[head][head_dim]`, theirs in order), each state and output getting the bits
    /// `attend_block` gives it.
    fn attend_block_quad(
        vector: &VectorKernels,
        params: &AttentionParams,
        queries: [&[f32]; 4],
        (keys, values): (&[f32], &[f32]),
        states: &mut [Running],
        outs: &mut [f32],
    ) {
        let hd = queries[0].len();
        let n = keys.len() / hd.max(1);
        let mut scores = [[0.0f32; KEY_BLOCK]; 4];
        let [s0, s1, s2, s3] = &mut scores;
        let (s0, s1, s2, s3) = (&mut s0[..n], &mut s1[..n], &mut s2[..n], &mut s3[..n]);
        let maxes = vector.scaled_dots_quad(queries, keys, params.scale, [s0, s1, s2, s3]);
        let [s0, s1, s2, s3] = &mut scores;
        let scores = [&mut s0[..n], &mut s1[..n], &mut s2[..n], &mut s3[..n]];
        let mut outs = outs.chunks_exact_mut(hd);
        let mut heads = states.iter_mut().zip(scores).zip(maxes);
        for _ in 0..2 {
            let mut pair = [(); 2].map(|_| {
                let ((state, scores), max) = heads.next().expect("four heads");
                let out = outs.next().expect("four outputs");
                let max = capped(params, scores, max);
                state.weigh_block(vector, scores, max, out);
                (scores, out)
            });
            let [(w0, y0), (w1, y1)] = &mut pair;
            vector.axpy_rows_pair([w0, w1], values, [y0, y1]);
        }
    }

    /// Adds a block's `scores` (the largest `block_max`) weighting `values` to the sum `out`.
    fn add_block(
        &mut self,
        vector: &VectorKernels,
        scores: &mut [f32],
        block_max: f32,
        values: &[f32],
        out: &mut [f32],
    ) {
        self.weigh_block(vector, scores, block_max, out);
        vector.axpy_rows(scores, values, out);
    }

    /// The first half of [`Self::add_block`]: rescales to the block's maximum and turns its
    /// `scores` into weights, added to the sum; the weighted values are left to the caller.
    fn weigh_block(
        &mut self,
        vector: &VectorKernels,
        scores: &mut [f32],
        block_max: f32,
        out: &mut [f32],
    ) {
        self.rescale_to(block_max, out);
        vector.exp_shifted(scores, self.max);
        // In key order, as llama.cpp's flash attention sums (a tree order flipped a near-tied
        // expert choice in a MoE fixture).
        for &w in scores.iter() {
            self.sum += w;
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
