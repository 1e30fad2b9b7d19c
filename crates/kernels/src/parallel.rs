//! How the product drivers split their output rows over the rayon pool: a few contiguous
//! ranges per thread, none at all for small matrices, each output written by one task so that
//! results never depend on the split.

use rayon::prelude::*;

/// Weight bytes below which a task is not worth handing to another thread: handing it over
/// and joining it costs about a microsecond, the time to stream this much.
const MIN_TASK_BYTES: usize = 16 << 10;

/// Tasks per thread of the pool: contiguous row ranges, few enough that scheduling costs
/// nothing, several so that a thread the OS delays does not hold up the whole product.
const TASKS_PER_THREAD: usize = 4;

/// Rows per task when `rows` outputs each cost `bytes_per_row` weight bytes, or `rows` when the
/// whole product should run on the calling thread.
pub(crate) fn rows_per_task(rows: usize, bytes_per_row: usize) -> usize {
    let by_size = rows * bytes_per_row / MIN_TASK_BYTES;
    let tasks = by_size.min(rayon::current_num_threads() * TASKS_PER_THREAD);
    rows.div_ceil(tasks.max(1)).max(1)
}

/// Runs `dot(first, out)` in parallel over ranges of `chunk` consecutive output rows, where
/// `out` receives `[token][row of the range]` for `n` tokens, then gathers the ranges into `y`
/// (`[token][row]`, `y.len() / n` rows). `tile` holds the ranges while `n > 1`; with one token
/// they are `y`'s own.
pub(crate) fn for_row_ranges(
    n: usize,
    chunk: usize,
    tile: &mut [f32],
    y: &mut [f32],
    dot: impl Fn(usize, &mut [f32]) + Sync,
) {
    if n == 1 {
        y.par_chunks_mut(chunk)
            .with_max_len(1)
            .enumerate()
            .for_each(|(i, out)| dot(i * chunk, out));
        return;
    }
    let rows = y.len() / n;
    let tile = &mut tile[..rows * n];
    tile.par_chunks_mut(chunk * n)
        .with_max_len(1)
        .enumerate()
        .for_each(|(i, out)| dot(i * chunk, out));
    let tile = &*tile;
    y.par_chunks_mut(rows).enumerate().for_each(|(t, yt)| {
        for (c, yc) in yt.chunks_mut(chunk).enumerate() {
            let start = c * chunk * n + t * yc.len();
            yc.copy_from_slice(&tile[start..start + yc.len()]);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_split_is_a_few_tasks_per_thread_and_none_for_small_matrices() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("pool");
        pool.install(|| {
            // 256 x 640 Q4_0: 90 KiB, five tasks; 32 x 640 Q4_0: 11 KiB, one task.
            assert_eq!(rows_per_task(256, 360), 256usize.div_ceil(5));
            assert_eq!(rows_per_task(32, 360), 32);
            // 262144 rows: at most TASKS_PER_THREAD tasks per thread.
            assert_eq!(
                rows_per_task(262_144, 680),
                262_144 / (2 * TASKS_PER_THREAD)
            );
            assert_eq!(rows_per_task(0, 680), 1);
        });
    }

    #[test]
    fn gathered_ranges_are_token_major() {
        // Three tokens, five rows in ranges of two: each output is `1000 t + row`.
        let (n, rows, chunk) = (3, 5, 2);
        let mut tile = vec![0.0; n * rows];
        let mut y = vec![0.0; n * rows];
        for_row_ranges(n, chunk, &mut tile, &mut y, |first, out| {
            let len = out.len() / n;
            for t in 0..n {
                for i in 0..len {
                    out[t * len + i] = (1000 * t + first + i) as f32;
                }
            }
        });
        let want: Vec<f32> = (0..n)
            .flat_map(|t| (0..rows).map(move |r| (1000 * t + r) as f32))
            .collect();
        assert_eq!(y, want);
    }
}
