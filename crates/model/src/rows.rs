//! Per-row operations over the rows of a batch (norms, biases, residual sums), on the pool once
//! the batch is large enough to be worth handing out. Each row is computed alone by the same
//! code either way, so the result never depends on the split nor on the thread count.

use rayon::prelude::*;

/// Rows below which a per-row operation stays on the calling thread: handing rows to the pool
/// and joining costs about as much as normalising a few dozen rows of a small model.
const MIN_PARALLEL_ROWS: usize = 32;

/// Rows each task takes at least.
const MIN_TASK_ROWS: usize = 8;

/// Whether `len` values in rows of `width` are worth splitting over the pool.
fn parallel(len: usize, width: usize) -> bool {
    len >= MIN_PARALLEL_ROWS * width
}

/// `f(row)` for every `width`-long row of `x`.
pub(crate) fn each(x: &mut [f32], width: usize, f: impl Fn(&mut [f32]) + Sync + Send) {
    if width == 0 {
        return;
    }
    if parallel(x.len(), width) {
        x.par_chunks_exact_mut(width)
            .with_min_len(MIN_TASK_ROWS)
            .for_each(f);
    } else {
        x.chunks_exact_mut(width).for_each(f);
    }
}

/// `f(x row, y row)` for every pair of `width`-long rows of `x` and `y` (as long as each other).
pub(crate) fn each_with(
    x: &mut [f32],
    y: &[f32],
    width: usize,
    f: impl Fn(&mut [f32], &[f32]) + Sync,
) {
    if width == 0 {
        return;
    }
    debug_assert_eq!(x.len(), y.len());
    if parallel(x.len(), width) {
        x.par_chunks_exact_mut(width)
            .zip(y.par_chunks_exact(width))
            .with_min_len(MIN_TASK_ROWS)
            .for_each(|(x, y)| f(x, y));
    } else {
        x.chunks_exact_mut(width)
            .zip(y.chunks_exact(width))
            .for_each(|(x, y)| f(x, y));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_visited_once_on_either_path() {
        for rows in [
            1,
            MIN_PARALLEL_ROWS - 1,
            MIN_PARALLEL_ROWS,
            3 * MIN_PARALLEL_ROWS + 5,
        ] {
            let width = 3;
            let mut x: Vec<f32> = (0..rows * width).map(|i| i as f32).collect();
            each(&mut x, width, |row| row.iter_mut().for_each(|v| *v += 1.0));
            let y = x.clone();
            each_with(&mut x, &y, width, |x, y| {
                x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
            });
            let want: Vec<f32> = (0..rows * width).map(|i| 2.0 * (i as f32 + 1.0)).collect();
            assert_eq!(x, want);
        }
    }
}
