//! The recurrences of hybrid models' mixers, one sequence at a time: a causal depthwise
//! convolution that carries its last inputs between calls (the gated delta rule is in
//! [`super::delta_rule`]), and the scalar functions of their gates.
//!
//! The convolution runs token by token in position order, with one fixed summation order per
//! output value, so a sequence fed in one call or in many, on any number of threads, gives the
//! same bits. Its loops run over contiguous channels, which the compiler vectorizes without
//! reordering any sum (each lane is its own output).
//!
//! *Convolution.* For `n` rows of `channels` inputs `x_t` and a kernel `w[c, j]` of `taps`
//! taps per channel, `y_t[c] = Σ_{j < taps} w[c, j]·x_{t-taps+1+j}[c]`, summed over `j`
//! upward; the rows before the first are the `taps - 1` rows of `window` (oldest first, zeros
//! for a new sequence), which then holds the last `taps - 1` inputs.

/// Channels of [`causal_conv`]'s chunks.
const CONV_CHUNK: usize = 16;
/// Taps of [`causal_conv`]'s blocks.
const CONV_TAP_BLOCK: usize = 8;

/// The causal convolution of `n = x.len() / channels` rows continuing `window`, into `out`;
/// `window` then holds the last `taps - 1` rows of inputs.
///
/// # Panics
/// If `kernel` is not `channels × taps`, `window` not `(taps - 1) × channels`, or `x` and
/// `out` not the same whole number of rows.
pub fn causal_conv(
    kernel: &[f32],
    taps: usize,
    channels: usize,
    window: &mut [f32],
    x: &[f32],
    out: &mut [f32],
) {
    assert!(taps >= 1 && kernel.len() == channels * taps);
    assert_eq!(window.len(), (taps - 1) * channels);
    assert_eq!(x.len(), out.len());
    assert!(channels > 0 && x.len().is_multiple_of(channels));
    let n = x.len() / channels;
    let held = taps - 1;
    out.fill(0.0);
    // Channels a chunk at a time and taps a block at a time: the block's kernel values are
    // copied tap by tap onto the stack, so the loops over channels read contiguously and
    // vectorize (no allocation). Each output still adds its taps in order.
    for c0 in (0..channels).step_by(CONV_CHUNK) {
        let width = CONV_CHUNK.min(channels - c0);
        for j0 in (0..taps).step_by(CONV_TAP_BLOCK) {
            let block = CONV_TAP_BLOCK.min(taps - j0);
            let mut by_tap = [[0f32; CONV_CHUNK]; CONV_TAP_BLOCK];
            for (k, row) in by_tap[..block].iter_mut().enumerate() {
                for (c, w) in row[..width].iter_mut().enumerate() {
                    *w = kernel[(c0 + c) * taps + j0 + k];
                }
            }
            for t in 0..n {
                let y = &mut out[t * channels + c0..][..width];
                for (k, w) in by_tap[..block].iter().enumerate() {
                    // Input row t - taps + 1 + j, i.e. row t + j of window ++ x.
                    let r = t + j0 + k;
                    let src = if r < held {
                        &window[r * channels + c0..][..width]
                    } else {
                        &x[(r - held) * channels + c0..][..width]
                    };
                    for ((acc, &s), &w) in y.iter_mut().zip(src).zip(w) {
                        *acc += w * s;
                    }
                }
            }
        }
    }
    if held == 0 {
        return;
    }
    // The last `held` rows of window ++ x become the window.
    if n >= held {
        window.copy_from_slice(&x[(n - held) * channels..n * channels]);
    } else {
        window.copy_within(n * channels.., 0);
        let keep = (held - n) * channels;
        window[keep..].copy_from_slice(x);
    }
}

/// `x / max(sqrt(Σx²), eps)` in place, the sum in f64 (ggml's `l2_norm`).
pub fn l2_norm_inplace(x: &mut [f32], eps: f32) {
    let sum: f64 = x.iter().map(|&v| (v as f64) * (v as f64)).sum();
    let scale = 1.0 / (sum.sqrt() as f32).max(eps);
    for v in x {
        *v *= scale;
    }
}

/// `1 / (1 + e^-x)`.
#[inline]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// `ln(1 + e^x)`, `x` itself above 20 (ggml's threshold).
#[inline]
pub fn softplus(x: f32) -> f32 {
    if x > 20.0 { x } else { x.exp().ln_1p() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (((i + seed) * 37 % 101) as f32 - 50.0) / 61.0)
            .collect()
    }

    /// The convolution straight from its definition, in f64, over the whole sequence.
    fn conv_reference(kernel: &[f32], taps: usize, channels: usize, x: &[f32]) -> Vec<f64> {
        let n = x.len() / channels;
        let mut out = vec![0.0; x.len()];
        for t in 0..n {
            for c in 0..channels {
                for j in 0..taps {
                    let src = (t + j) as isize - (taps as isize - 1);
                    if src >= 0 {
                        out[t * channels + c] +=
                            kernel[c * taps + j] as f64 * x[src as usize * channels + c] as f64;
                    }
                }
            }
        }
        out
    }

    #[test]
    fn conv_in_any_split_matches_the_definition_bit_for_bit_across_splits() {
        // Channel counts within one chunk and across several, tap counts within one block and
        // across two.
        for (taps, channels) in [(1, 5), (2, 5), (3, 5), (4, 5), (4, 37), (10, 21)] {
            let n = 9;
            let kernel = values(channels * taps, taps);
            let x = values(n * channels, 7);
            let want = conv_reference(&kernel, taps, channels, &x);
            let mut whole = vec![0.0; x.len()];
            let mut window = vec![0.0; (taps - 1) * channels];
            causal_conv(&kernel, taps, channels, &mut window, &x, &mut whole);
            for (g, w) in whole.iter().zip(&want) {
                assert!((*g as f64 - w).abs() < 1e-5, "taps {taps}: {g} vs {w}");
            }
            // Each output adds its taps in order, in f32.
            let in_order: Vec<f32> = (0..n * channels)
                .map(|i| {
                    let (t, c) = (i / channels, i % channels);
                    (0..taps).fold(0.0f32, |acc, j| match (t + j).checked_sub(taps - 1) {
                        Some(r) => acc + kernel[c * taps + j] * x[r * channels + c],
                        None => acc + kernel[c * taps + j] * 0.0,
                    })
                })
                .collect();
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&whole),
                bits(&in_order),
                "taps {taps}, channels {channels}"
            );
            for split in [1, 2, 5] {
                let mut window = vec![0.0; (taps - 1) * channels];
                let mut parts = vec![0.0; x.len()];
                for (xs, ys) in x
                    .chunks(split * channels)
                    .zip(parts.chunks_mut(split * channels))
                {
                    causal_conv(&kernel, taps, channels, &mut window, xs, ys);
                }
                assert_eq!(bits(&parts), bits(&whole), "taps {taps}, split {split}");
            }
        }
    }

    #[test]
    fn l2_norm_and_softplus_edges() {
        let mut zero = vec![0.0; 4];
        l2_norm_inplace(&mut zero, 1e-6);
        assert!(zero.iter().all(|v| *v == 0.0));
        let mut x = vec![3.0, 4.0];
        l2_norm_inplace(&mut x, 1e-6);
        assert_eq!(x, vec![0.6, 0.8]);
        assert_eq!(softplus(30.0), 30.0);
        assert!((softplus(0.0) - std::f32::consts::LN_2).abs() < 1e-7);
        assert!(softplus(-100.0) >= 0.0);
    }
}
