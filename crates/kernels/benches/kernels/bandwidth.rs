//! The machine's read bandwidth: a streaming sum over a buffer far larger than the last-level
//! cache, split into one contiguous range per thread of the pool.

use rayon::ThreadPool;
use rayon::prelude::*;

use crate::timing;

/// Bytes summed per measurement.
pub const BUFFER_BYTES: usize = 2 << 30;

/// Sums `x` with eight independent lanes, so the loop vectorizes and is limited by loads.
fn sum(x: &[u64]) -> u64 {
    let (chunks, tail) = x.as_chunks::<8>();
    let mut acc = [0u64; 8];
    for c in chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a = a.wrapping_add(*v);
        }
    }
    acc.iter().chain(tail).fold(0, |s, v| s.wrapping_add(*v))
}

/// Read bandwidth in GB/s (10^9 bytes) of each pool, measured on one shared buffer.
pub fn measure(pools: &[(usize, ThreadPool)]) -> Vec<f64> {
    let words: Vec<u64> = (0..(BUFFER_BYTES / 8) as u64).collect();
    pools
        .iter()
        .map(|(threads, pool)| {
            let chunk = words.len().div_ceil(*threads);
            let secs = timing::median_secs(7, || {
                pool.install(|| {
                    let s: u64 = words.par_chunks(chunk).map(sum).sum();
                    std::hint::black_box(s);
                })
            });
            BUFFER_BYTES as f64 / secs / 1e9
        })
        .collect()
}
