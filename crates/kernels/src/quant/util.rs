//! Scalar helpers shared by the reference quantizers, written to round exactly as ggml does.

/// Rounds to the nearest integer, ties to even, exactly like ggml's `nearest_int`
/// (valid for `|x| <= 4194303`).
#[inline]
pub(crate) fn nearest_int(x: f32) -> i32 {
    let v = x + 12_582_912.0;
    (v.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// C's `roundf` (to nearest, ties away from zero) for `|x| < 2^31`, the range of quantization
/// codes; NaN gives 0. Written out because `f32::round` is a library call on baseline x86-64,
/// which made quantizing an activation row cost a tenth of a small matvec.
#[inline]
pub(crate) fn round_away(x: f32) -> f32 {
    let t = x as i32 as f32;
    // `x - t` is exact: the fraction of a float is always representable.
    if (x - t).abs() >= 0.5 {
        t + 1.0f32.copysign(x)
    } else {
        t
    }
}

/// The value of `x` with the largest magnitude (the first of equal ones; 0 when all are 0),
/// as ggml's quantizers find it.
#[inline]
pub(crate) fn max_by_magnitude(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    max
}

/// ggml's symmetric coding of the values `x` to codes `0..2·half` centred on `half`: the scale
/// `d = max / −half` of the value `max` of largest magnitude and the code of `v`,
/// `v / d + half + 0.5` truncated, at most `2·half − 1`.
#[inline]
pub(crate) fn centred_code(x: &[f32], half: i32) -> (f32, impl Fn(f32) -> i32) {
    let d = max_by_magnitude(x) / -(half as f32);
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let offset = half as f32 + 0.5;
    (d, move |v: f32| {
        ((v * id + offset) as i32).min(2 * half - 1)
    })
}

/// The smallest and largest of `x`, starting from `(min, max)` as ggml's affine quantizers
/// compare (a NaN never replaces a bound).
#[inline]
pub(crate) fn min_max(x: &[f32], (mut min, mut max): (f32, f32)) -> (f32, f32) {
    for &v in x {
        min = if v < min { v } else { min };
        max = if v > max { v } else { max };
    }
    (min, max)
}

/// ggml's affine coding of values in `min..=max` to codes `0..=top`: the scale
/// `d = (max − min) / top` and the code of `v`, `(v − min) / d + 0.5` truncated, at most `top`
/// (0 when all the values are equal).
#[inline]
pub(crate) fn affine_code(min: f32, max: f32, top: i32) -> (f32, impl Fn(f32) -> i32) {
    let d = (max - min) / top as f32;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    (d, move |v: f32| (((v - min) * id + 0.5) as i32).min(top))
}

/// Values below this magnitude count as an all-zero group (ggml's `GROUP_MAX_EPS`).
pub(crate) const GROUP_MAX_EPS: f32 = 1e-15;

/// The value of `x` with the largest magnitude ([`max_by_magnitude`]), or `None` with the
/// first `x.len()` codes of `l` set to 0 when it is below [`GROUP_MAX_EPS`]: the first step of
/// ggml's symmetric quantizers.
#[inline]
pub(crate) fn symmetric_max(x: &[f32], l: &mut [i8]) -> Option<f32> {
    let max = max_by_magnitude(x);
    if max.abs() < GROUP_MAX_EPS {
        l[..x.len()].fill(0);
        return None;
    }
    Some(max)
}

/// The 32 codes of a block packed as Q4_0 packs them: code `j` in the low nibble of `qs[j]`,
/// code `j + 16` in the high one.
#[inline]
pub(crate) fn split_nibbles(qs: &[u8; 16]) -> [u8; 32] {
    std::array::from_fn(|j| if j < 16 { qs[j] & 0xF } else { qs[j - 16] >> 4 })
}

/// Packs codes 32 per 16 bytes as [`split_nibbles`] reads them (`l` whole blocks of 32).
pub(crate) fn pack_split_nibbles(l: &[u8], qs: &mut [u8]) {
    for (l, q) in l.chunks_exact(32).zip(qs.chunks_exact_mut(16)) {
        for j in 0..16 {
            q[j] = l[j] | (l[j + 16] << 4);
        }
    }
}

/// `Σ codes_j · q8_j`: the exact integer dot product of a block's 32 codes with the codes of
/// a Q8_0 or Q8_1 block.
#[inline]
pub(crate) fn dot_codes(codes: [i32; 32], q8: &[i8; 32]) -> i32 {
    codes.iter().zip(q8).map(|(&c, &q)| c * q as i32).sum()
}

/// `code · d` for each of the 32 integer values `codes` of a block at scale `d`: the
/// dequantizer of the 32-value formats without a min.
#[inline]
pub(crate) fn scale_codes(d: f32, codes: [i32; 32], out: &mut [f32]) {
    for (o, &c) in out.iter_mut().zip(&codes) {
        *o = c as f32 * d;
    }
}

/// `code · d + m` for each of the 32 codes `codes` of a block at scale `d` with the min `m`:
/// the dequantizer of the 32-value formats with a min.
#[inline]
pub(crate) fn scale_codes_min(d: f32, m: f32, codes: [i32; 32], out: &mut [f32]) {
    for (o, &c) in out.iter_mut().zip(&codes) {
        *o = c as f32 * d + m;
    }
}

/// The 4-bit field `i` of `bytes`, two to a byte, low nibble first.
#[inline]
pub(crate) fn nibble(bytes: &[u8], i: usize) -> u8 {
    (bytes[i / 2] >> (4 * (i % 2))) & 0xF
}

/// Packs 4-bit `values` two to a byte into `out`, low nibble first (as [`nibble`] reads them).
pub(crate) fn pack_nibbles(values: &[u8], out: &mut [u8]) {
    for (o, pair) in out.iter_mut().zip(values.chunks_exact(2)) {
        *o = pair[0] | pair[1] << 4;
    }
}

/// Packs the 2-bit codes `l` of a 256-value super-block as Q2_K and Q3_K store them: byte
/// `32n + k` holds codes `128n + 32i + k` at bits `2i`.
pub(crate) fn pack_two_bit_codes(l: &[u8; 256], qs: &mut [u8; 64]) {
    for n in 0..2 {
        let l = &l[128 * n..128 * n + 128];
        for k in 0..32 {
            qs[32 * n + k] = l[k] | (l[k + 32] << 2) | (l[k + 64] << 4) | (l[k + 96] << 6);
        }
    }
}

/// The 6-bit scale and min of sub-block `j` of a Q4_K/Q5_K super-block.
#[inline]
pub(crate) fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// All eight 6-bit scales, then all eight 6-bit mins, of a Q4_K/Q5_K super-block: ggml's
/// word-wise unpacking, equal to [`scale_min_k4`] for each sub-block.
#[inline]
pub(crate) fn scales_mins_k4(q: &[u8; 12]) -> [u8; 16] {
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    let (words, _) = q.as_chunks::<4>();
    let [u0, u1, u2] = [0, 1, 2].map(|k| u32::from_le_bytes(words[k]));
    let out = [
        u0 & LOW6,
        (u2 & LOW4) | (((u0 >> 6) & LOW2) << 4),
        u1 & LOW6,
        ((u2 >> 4) & LOW4) | (((u1 >> 6) & LOW2) << 4),
    ];
    bytemuck::cast(out.map(u32::to_le))
}

/// Affine quantization of one sub-block to `0..=nmax` with a grid search over the scale
/// (ggml's `make_qkx2_quants`). Writes codes to `l` and returns `(scale, -min)`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
) -> (f32, f32) {
    let n = x.len();
    let mut laux = [0u8; 32];
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l[..n].fill(0);
        return (0.0, -min);
    }
    let err = |d: f32| if use_mad { d.abs() } else { d * d };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l[i] = q as u8;
        let diff = scale * l[i] as f32 + min - x[i];
        best_error += weights[i] * err(diff);
    }
    if nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            laux[i] = q as u8;
            let w = weights[i];
            let q = q as f32;
            sum_l += w * q;
            sum_l2 += w * q * q;
            sum_xl += w * q * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * err(diff);
            }
            if cur_error < best_error {
                l[..n].copy_from_slice(&laux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Symmetric quantization of one 16-value group to `-nmax..nmax` with a few rounds of
/// coordinate descent on the codes (ggml's `make_q3_quants` with `do_rmse`). Writes codes
/// offset by `nmax` to `l` and returns the scale.
pub(crate) fn make_q3_quants(nmax: i32, x: &[f32], l: &mut [i8]) -> f32 {
    let n = x.len();
    let Some(max) = symmetric_max(x, l) else {
        return 0.0;
    };
    let iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for i in 0..n {
        let q = nearest_int(iscale * x[i]).clamp(-nmax, nmax - 1);
        l[i] = q as i8;
        let w = x[i] * x[i];
        sumlx += w * x[i] * q as f32;
        suml2 += w * q as f32 * q as f32;
    }
    for _ in 0..5 {
        let mut changed = false;
        for i in 0..n {
            let w = x[i] * x[i];
            let li = l[i] as f32;
            let mut slx = sumlx - w * x[i] * li;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * li * li;
                let new_l = nearest_int(x[i] * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != l[i] as i32 {
                    slx += w * x[i] * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l[i] = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    for v in &mut l[..n] {
        *v += nmax as i8;
    }
    if suml2 > 0.0 { sumlx / suml2 } else { 0.0 }
}
