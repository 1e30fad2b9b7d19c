//! Causal attention of query rows over cached keys and values: scores, online softmax and the
//! weighted sum of values, in an order that never depends on threads or batch.

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

/// Widest head whose decoded rows [`attend`] keeps on the stack (wider ones go to the heap).
const STACK_WIDTH: usize = 256;

/// Attention of `n` query rows `queries` `[n, heads * head_dim]` into `out` (same shape).
/// `row(i)` gives query row `i`'s position and its key/value rows; it sees the keys of
/// [`AttentionParams::first_key`]`..=` its position. `sinks` holds one sink logit per head
/// when the params have sinks. One task per (row, head), each computed by [`attend`].
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
}

/// One query head at `pos` over the keys `key(j)` and values `value(j)` it sees, into `out`.
/// Keys are taken in position order, [`KEY_BLOCK`] at a time: their scores (four keys per
/// `dot4`), then one rescale of the running sum if the maximum grew, then the weighted values;
/// last, the `sink` logit (if any) joins the sum. Rows that are not f32 are decoded, four at a
/// time, into a buffer on the stack (on the heap for heads wider than 256) and then go through
/// the same kernels in the same order, so the result is the f32 computation over the stored
/// values whatever the type.
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
    let width = query.len();
    let (mut stack, mut heap);
    let decoded: &mut [f32] = if key(pos).as_f32().is_some() {
        &mut []
    } else if width <= STACK_WIDTH {
        stack = [0.0f32; 4 * STACK_WIDTH];
        &mut stack[..4 * width]
    } else {
        heap = vec![0.0f32; 4 * width];
        &mut heap
    };
    out.fill(0.0);
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0.0f32);
    let mut scores = [0.0f32; KEY_BLOCK];
    for start in (params.first_key(pos)..=pos).step_by(KEY_BLOCK) {
        let end = (start + KEY_BLOCK).min(pos + 1);
        let scores = &mut scores[..end - start];
        // Four keys per call; a short last group repeats its last key.
        for (group, j0) in scores.chunks_mut(4).zip((start..).step_by(4)) {
            let last = j0 + group.len() - 1;
            let keys = as_f32([0, 1, 2, 3].map(|d| key((j0 + d).min(last))), decoded);
            for (score, dot) in group.iter_mut().zip(vector.dot4(query, keys)) {
                *score = params.score(dot);
            }
        }
        let block_max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
        if block_max > max {
            let rescale = (max - block_max).exp();
            sum *= rescale;
            out.iter_mut().for_each(|a| *a *= rescale);
            max = block_max;
        }
        for (group, j0) in scores.chunks(4).zip((start..).step_by(4)) {
            let mut weights = [0.0f32; 4];
            for (w, &score) in weights.iter_mut().zip(group) {
                *w = (score - max).exp();
                sum += *w;
            }
            let last = j0 + group.len() - 1;
            let values = as_f32([0, 1, 2, 3].map(|d| value((j0 + d).min(last))), decoded);
            if group.len() == 4 {
                vector.axpy4(weights, values, out);
            } else {
                for (&w, v) in weights[..group.len()].iter().zip(values) {
                    vector.axpy(w, v, out);
                }
            }
        }
    }
    if let Some(sink) = sink {
        if sink > max {
            let rescale = (max - sink).exp();
            sum *= rescale;
            out.iter_mut().for_each(|a| *a *= rescale);
            max = sink;
        }
        sum += (sink - max).exp();
    }
    let inv = 1.0 / sum;
    out.iter_mut().for_each(|a| *a *= inv);
}

/// The f32 values of four rows: the rows themselves when they hold f32, else decoded into
/// consecutive parts of `decoded` (four rows wide unless every row holds f32).
fn as_f32<'b>(rows: [KvRow<'b>; 4], decoded: &'b mut [f32]) -> [&'b [f32]; 4] {
    let width = rows[0].len();
    let mut parts = decoded.chunks_exact_mut(width.max(1));
    rows.map(|row| match row.as_f32() {
        Some(values) => values,
        None => {
            let part = parts.next().expect("four rows' room");
            row.decode(part);
            &*part
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{KvRowMut, KvType};

    /// Keys and values of one sequence, `[positions, kv_heads * head_dim]` each.
    struct Rows<'a> {
        keys: &'a [f32],
        values: &'a [f32],
        width: usize,
    }

    impl Rows<'_> {
        fn key_f32(&self, pos: usize) -> &[f32] {
            &self.keys[pos * self.width..(pos + 1) * self.width]
        }
        fn value_f32(&self, pos: usize) -> &[f32] {
            &self.values[pos * self.width..(pos + 1) * self.width]
        }
    }

    impl KeyValueRows for Rows<'_> {
        fn key(&self, pos: usize) -> KvRow<'_> {
            KvRow::F32(self.key_f32(pos))
        }
        fn value(&self, pos: usize) -> KvRow<'_> {
            KvRow::F32(self.value_f32(pos))
        }
    }

    fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (((i + seed) * 37 % 101) as f32 - 50.0) / 23.0)
            .collect()
    }

    /// The definition: `softmax(scores) · values` over the visible keys, in f64.
    fn reference(
        shape: &AttentionShape,
        params: &AttentionParams,
        sinks: Option<&[f32]>,
        query: &[f32],
        pos: usize,
        rows: &Rows<'_>,
        out: &mut [f64],
    ) {
        let (hd, group) = (shape.head_dim, shape.heads / shape.kv_heads);
        for h in 0..shape.heads {
            let kv = (h / group) * hd;
            let q = &query[h * hd..(h + 1) * hd];
            let visible = params.first_key(pos)..=pos;
            let scores: Vec<f64> = visible
                .clone()
                .map(|j| {
                    let k = &rows.key_f32(j)[kv..kv + hd];
                    let dot: f64 = q.iter().zip(k).map(|(&a, &b)| a as f64 * b as f64).sum();
                    let s = dot * params.scale as f64;
                    params.softcap.map_or(s, |cap| {
                        let cap = cap as f64;
                        cap * (s / cap).tanh()
                    })
                })
                .collect();
            let sink = sinks.map(|s| s[h] as f64);
            let max = scores
                .iter()
                .cloned()
                .chain(sink)
                .fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum::<f64>() + sink.map_or(0.0, |s| (s - max).exp());
            let o = &mut out[h * hd..(h + 1) * hd];
            o.fill(0.0);
            for (j, w) in visible.zip(&weights) {
                for (o, &v) in o.iter_mut().zip(&rows.value_f32(j)[kv..kv + hd]) {
                    *o += w / total * v as f64;
                }
            }
        }
    }

    fn check_against_reference(params: AttentionParams) {
        let shape = AttentionShape {
            heads: 4,
            kv_heads: 2,
            head_dim: 40,
        };
        let positions = 75; // two full key blocks, then a short block ending in a short group
        let width = shape.kv_heads * shape.head_dim;
        let (keys, vals) = (values(positions * width, 1), values(positions * width, 2));
        let rows = Rows {
            keys: &keys,
            values: &vals,
            width,
        };
        let q_dim = shape.heads * shape.head_dim;
        let queries = values(positions * q_dim, 3);
        let mut out = vec![0.0f32; queries.len()];
        let row = |i: usize| {
            let rows = Rows {
                keys: &keys,
                values: &vals,
                width,
            };
            (i, rows)
        };
        // Sink logits around the scores' scale, one of them above every score.
        let sink_values = [0.5, -1.0, 40.0, 2.0];
        let sinks = params.sinks.then_some(&sink_values[..]);
        attention(&shape, &params, sinks, &queries, row, &mut out);
        let mut want = vec![0.0f64; q_dim];
        for pos in 0..positions {
            let query = &queries[pos * q_dim..(pos + 1) * q_dim];
            reference(&shape, &params, sinks, query, pos, &rows, &mut want);
            for (&got, &want) in out[pos * q_dim..(pos + 1) * q_dim].iter().zip(&want) {
                assert!(
                    (got as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                    "{params:?} at {pos}: got {got}, want {want}"
                );
            }
        }
    }

    #[test]
    fn causal_attention_matches_the_softmax_definition() {
        check_against_reference(AttentionParams {
            scale: 0.125,
            softcap: None,
            window: None,
            sinks: false,
        });
    }

    #[test]
    fn soft_capped_scores_match_the_definition() {
        check_against_reference(AttentionParams {
            scale: 0.5,
            softcap: Some(2.0),
            window: None,
            sinks: false,
        });
    }

    #[test]
    fn a_sliding_window_sees_only_its_last_keys() {
        check_against_reference(AttentionParams {
            scale: 0.125,
            softcap: None,
            window: Some(37),
            sinks: false,
        });
        let params = AttentionParams {
            scale: 1.0,
            softcap: None,
            window: Some(3),
            sinks: false,
        };
        assert_eq!(params.first_key(1), 0);
        assert_eq!(params.first_key(10), 8);
    }

    #[test]
    fn sink_logits_join_only_the_denominator() {
        check_against_reference(AttentionParams {
            scale: 0.125,
            softcap: None,
            window: Some(37),
            sinks: true,
        });
    }

    #[test]
    fn a_head_does_not_depend_on_the_rows_beside_it() {
        let params = AttentionParams {
            scale: 0.25,
            softcap: None,
            window: None,
            sinks: false,
        };
        let hd = 16;
        let (keys, vals) = (values(50 * hd, 4), values(50 * hd, 5));
        let query = values(hd, 6);
        let key = |j: usize| KvRow::F32(&keys[j * hd..(j + 1) * hd]);
        let value = |j: usize| KvRow::F32(&vals[j * hd..(j + 1) * hd]);
        let mut alone = vec![0.0; hd];
        attend(
            VectorKernels::detected(),
            &params,
            None,
            &query,
            49,
            key,
            value,
            &mut alone,
        );
        let shape = AttentionShape {
            heads: 1,
            kv_heads: 1,
            head_dim: hd,
        };
        let mut queries = values(3 * hd, 7);
        queries[2 * hd..].copy_from_slice(&query);
        let mut out = vec![0.0; 3 * hd];
        let row = |i: usize| {
            let rows = Rows {
                keys: &keys,
                values: &vals,
                width: hd,
            };
            (47 + i, rows)
        };
        attention(&shape, &params, None, &queries, row, &mut out);
        assert_eq!(&out[2 * hd..], &alone[..]);
    }

    /// Rows of one KV type: the encoded rows, and the f32 values they decode to.
    struct Encoded {
        rows: Vec<Vec<u8>>,
        kv_type: KvType,
    }

    impl Encoded {
        fn new(kv_type: KvType, values: &[f32], width: usize) -> (Self, Vec<f32>) {
            let bytes = kv_type.row_bytes(width).unwrap();
            let mut decoded = vec![0.0; values.len()];
            let rows = values
                .chunks(width)
                .zip(decoded.chunks_mut(width))
                .map(|(v, d)| {
                    let mut row = vec![0u8; bytes];
                    match kv_type {
                        KvType::F32 => KvRowMut::F32(bytemuck::cast_slice_mut(&mut row)),
                        KvType::F16 => KvRowMut::F16(bytemuck::cast_slice_mut(&mut row)),
                        KvType::Q8_0 => KvRowMut::Q8_0(bytemuck::cast_slice_mut(&mut row)),
                    }
                    .encode(v);
                    Self::row(kv_type, &row).decode(d);
                    row
                })
                .collect();
            (Self { rows, kv_type }, decoded)
        }

        fn row(kv_type: KvType, bytes: &[u8]) -> KvRow<'_> {
            match kv_type {
                KvType::F32 => KvRow::F32(bytemuck::cast_slice(bytes)),
                KvType::F16 => KvRow::F16(bytemuck::cast_slice(bytes)),
                KvType::Q8_0 => KvRow::Q8_0(bytemuck::cast_slice(bytes)),
            }
        }
    }

    struct EncodedRows<'a> {
        keys: &'a Encoded,
        values: &'a Encoded,
    }

    impl KeyValueRows for EncodedRows<'_> {
        fn key(&self, pos: usize) -> KvRow<'_> {
            Encoded::row(self.keys.kv_type, &self.keys.rows[pos])
        }
        fn value(&self, pos: usize) -> KvRow<'_> {
            Encoded::row(self.values.kv_type, &self.values.rows[pos])
        }
    }

    #[test]
    fn f16_and_q8_0_rows_attend_exactly_like_the_f32_values_they_hold() {
        // Heads decoded on the stack, and wider ones decoded on the heap.
        for head_dim in [64, STACK_WIDTH + 64] {
            check_encoded_rows(AttentionShape {
                heads: 4,
                kv_heads: 2,
                head_dim,
            });
        }
    }

    fn check_encoded_rows(shape: AttentionShape) {
        let params = AttentionParams {
            scale: 0.125,
            softcap: None,
            window: Some(50),
            sinks: false,
        };
        let positions = 71; // full key blocks, then a short block ending in a short group
        let width = shape.kv_heads * shape.head_dim;
        let mut keys = values(positions * width, 8);
        // Edge values: an outlier, exact zeros, a subnormal and f16's largest finite value.
        keys[5] = 300.0;
        keys[width..2 * width].fill(0.0);
        keys[2 * width] = 1e-7;
        keys[3 * width] = 65504.0 / 1024.0;
        let vals = values(positions * width, 9);
        let q_dim = shape.heads * shape.head_dim;
        let queries = values(positions * q_dim, 10);
        for kv_type in [KvType::F16, KvType::Q8_0] {
            let (k_rows, k_plain) = Encoded::new(kv_type, &keys, width);
            let (v_rows, v_plain) = Encoded::new(kv_type, &vals, width);
            let mut got = vec![0.0f32; queries.len()];
            let encoded = |i: usize| {
                let rows = EncodedRows {
                    keys: &k_rows,
                    values: &v_rows,
                };
                (i, rows)
            };
            attention(&shape, &params, None, &queries, encoded, &mut got);
            let mut want = vec![0.0f32; queries.len()];
            let plain = |i: usize| {
                let rows = Rows {
                    keys: &k_plain,
                    values: &v_plain,
                    width,
                };
                (i, rows)
            };
            attention(&shape, &params, None, &queries, plain, &mut want);
            assert_eq!(got, want, "{kv_type}");
        }
    }
}
