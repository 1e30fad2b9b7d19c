//! Repeated timing with a median, robust to the odd slow run on a shared machine.

use std::time::Instant;

/// Runs `f` once to warm up, then `reps` times, and returns the median duration in seconds.
pub fn median_secs(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut secs: Vec<f64> = (0..reps.max(1))
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    secs.sort_by(f64::total_cmp);
    secs[secs.len() / 2]
}
