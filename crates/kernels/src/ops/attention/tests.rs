use super::*;
use crate::ops::{KvRowMut, KvType};

/// Keys and values of one sequence, `[positions, kv_heads * head_dim]` each.
#[derive(Clone, Copy)]
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
    fn same_rows(&self, other: &Self) -> bool {
        std::ptr::eq(self.keys, other.keys)
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
    let row = |i: usize| (i, rows);
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
    let rows = Rows {
        keys: &keys,
        values: &vals,
        width: hd,
    };
    let row = |i: usize| (47 + i, rows);
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
                    block_type => KvRowMut::Blocks(block_type, &mut row),
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
            block_type => KvRow::Blocks(block_type, bytes),
        }
    }
}

/// The encoded keys and values of one sequence.
#[derive(Clone, Copy)]
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
    fn same_rows(&self, other: &Self) -> bool {
        std::ptr::eq(self.keys, other.keys)
    }
}

#[test]
fn f16_and_block_rows_attend_exactly_like_the_f32_values_they_hold() {
    // Heads of a few vector widths, and wider ones.
    for head_dim in [64, 320] {
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
    for kv_type in KvType::ALL.into_iter().filter(|&t| t != KvType::F32) {
        let (k_rows, k_plain) = Encoded::new(kv_type, &keys, width);
        let (v_rows, v_plain) = Encoded::new(kv_type, &vals, width);
        let mut got = vec![0.0f32; queries.len()];
        let encoded = EncodedRows {
            keys: &k_rows,
            values: &v_rows,
        };
        attention(&shape, &params, None, &queries, |i| (i, encoded), &mut got);
        let mut want = vec![0.0f32; queries.len()];
        let plain = Rows {
            keys: &k_plain,
            values: &v_plain,
            width,
        };
        attention(&shape, &params, None, &queries, |i| (i, plain), &mut want);
        assert_eq!(got, want, "{kv_type}");
    }
}

/// Rows of two sequences of one KV type, each row all kv heads wide.
struct TwoSequences {
    keys: [Encoded; 2],
    values: [Encoded; 2],
}

/// Query rows of two sequences, interleaved unevenly: a tile holds rows of both.
fn row_source(i: usize) -> (usize, usize) {
    if i % 3 == 2 {
        (1, 5 + i / 3)
    } else {
        (0, 40 + i - i / 3)
    }
}

#[test]
fn tiled_attention_equals_one_query_attend_bit_for_bit() {
    let rows = 2 * QUERY_TILE + 13; // two full tiles and a short one
    let windows = [None, Some(1), Some(33), Some(50)];
    for kv_type in KvType::ALL {
        // Heads of a few vector widths and a tail for f32 and f16; whole blocks otherwise.
        let head_dim = if kv_type.block_values() > 1 { 64 } else { 36 };
        // Seven query heads a kv head: four scored together, two, and one.
        let shape = AttentionShape {
            heads: 14,
            kv_heads: 2,
            head_dim,
        };
        let width = shape.kv_heads * head_dim;
        let positions = 80;
        let encode = |seed| Encoded::new(kv_type, &values(positions * width, seed), width).0;
        let seqs = TwoSequences {
            keys: [encode(11), encode(12)],
            values: [encode(13), encode(14)],
        };
        let q_dim = shape.heads * head_dim;
        let queries = values(rows * q_dim, 15);
        let sink_values = [0.5, -1.0, 40.0, 2.0, 0.0, -3.0, 1.0].repeat(2);
        for (window, softcap, sinks) in windows
            .into_iter()
            .flat_map(|w| [(w, None, false), (w, Some(3.0), true)])
        {
            let params = AttentionParams {
                scale: 0.2,
                softcap,
                window,
                sinks,
            };
            let sinks = sinks.then_some(&sink_values[..]);
            let row = |i: usize| {
                let (seq, pos) = row_source(i);
                let rows = EncodedRows {
                    keys: &seqs.keys[seq],
                    values: &seqs.values[seq],
                };
                (pos, rows)
            };
            let mut tiled = vec![0.0f32; queries.len()];
            attention(&shape, &params, sinks, &queries, row, &mut tiled);
            let group = shape.heads / shape.kv_heads;
            for i in 0..rows {
                let (pos, kv_rows) = row(i);
                for h in 0..shape.heads {
                    let kv = (h / group) * head_dim;
                    let at = (i * shape.heads + h) * head_dim;
                    let mut alone = vec![0.0f32; head_dim];
                    attend(
                        VectorKernels::detected(),
                        &params,
                        sinks.map(|s| s[h]),
                        &queries[at..at + head_dim],
                        pos,
                        |j| kv_rows.key(j).slice(kv, head_dim),
                        |j| kv_rows.value(j).slice(kv, head_dim),
                        &mut alone,
                    );
                    let got = &tiled[at..at + head_dim];
                    assert!(
                        got.iter()
                            .zip(&alone)
                            .all(|(g, a)| g.to_bits() == a.to_bits()),
                        "{kv_type} {params:?}: row {i} head {h}"
                    );
                }
            }
        }
    }
}

/// A sequence whose every key row read panics outside `allowed`.
struct Guarded<'a> {
    rows: Rows<'a>,
    allowed: std::ops::Range<usize>,
}

impl KeyValueRows for Guarded<'_> {
    fn key(&self, pos: usize) -> KvRow<'_> {
        assert!(self.allowed.contains(&pos), "key {pos} read");
        self.rows.key(pos)
    }
    fn value(&self, pos: usize) -> KvRow<'_> {
        assert!(self.allowed.contains(&pos), "value {pos} read");
        self.rows.value(pos)
    }
    fn same_rows(&self, other: &Self) -> bool {
        self.rows.same_rows(&other.rows)
    }
}

#[test]
fn a_sliding_window_tile_reads_only_the_keys_of_its_windows() {
    let shape = AttentionShape {
        heads: 2,
        kv_heads: 1,
        head_dim: 8,
    };
    let window = 20;
    let params = AttentionParams {
        scale: 0.3,
        softcap: None,
        window: Some(window),
        sinks: false,
    };
    let (first_pos, rows) = (300, 2 * QUERY_TILE);
    let (keys, vals) = (values(400 * 8, 16), values(400 * 8, 17));
    let queries = values(rows * 16, 18);
    let mut out = vec![0.0f32; queries.len()];
    let rows = Rows {
        keys: &keys,
        values: &vals,
        width: 8,
    };
    let row = |i: usize| {
        // Each tile's rows may read exactly the union of their windows.
        let tile_start = first_pos + i / QUERY_TILE * QUERY_TILE;
        let allowed = tile_start + 1 - window..tile_start + QUERY_TILE;
        (first_pos + i, Guarded { rows, allowed })
    };
    attention(&shape, &params, None, &queries, row, &mut out);
    assert!(out.iter().all(|v| v.is_finite()));
}
