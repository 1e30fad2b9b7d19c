//! What Q4_K and Q5_K share: 256-value super-blocks of eight 32-value sub-blocks, each with a
//! 6-bit scale and min packed into twelve bytes, f16 super-scales, and
//! `x = d * sc_j * q - dmin * m_j`. The formats differ only in how many bits a code has and
//! where they are stored, so the reference dequantizer, dot product and quantizer are written
//! once over [`ScaleMinK`].

use half::f16;
use rinfer_formats::QK_K;

use super::q8_k::BlockQ8K;
use super::util::{make_qkx2_quants, nearest_int, scale_min_k4};
use super::weighted::{importance_weights, make_qkx3_quants, make_qp_quants, sum_squares};

/// A super-block with packed 6-bit sub-block scales and mins (Q4_K, Q5_K).
pub(crate) trait ScaleMinK: Sized {
    /// ggml's settings of the reference quantizer for the format; `nmax` is its largest code.
    const SEARCH: Search;

    /// The super-block scales of the sub-block scales and of the mins (`d`, `dmin`), and the
    /// packed scales and mins.
    fn header(&self) -> (f16, f16, &[u8; 12]);
    /// Code `l` (0..32) of sub-block `j`.
    fn code(&self, j: usize, l: usize) -> u8;
    /// The block of the super-block scales, the packed scales and mins and the codes of the
    /// 256 values (sub-block `j` at `32j..32j + 32`).
    fn from_parts(d: f16, dmin: f16, scales: [u8; 12], codes: &[u8; QK_K]) -> Self;
}

/// The reference dequantizer of a [`ScaleMinK`] block.
pub(crate) fn dequantize<B: ScaleMinK>(b: &B, out: &mut [f32]) {
    let (d, dmin, scales) = b.header();
    let (d, min) = (d.to_f32(), dmin.to_f32());
    for (j, o) in out.chunks_exact_mut(32).enumerate() {
        let (sc, m) = scale_min_k4(j, scales);
        let (dl, ml) = (d * sc as f32, min * m as f32);
        for (l, o) in o.iter_mut().enumerate() {
            *o = dl * b.code(j, l) as f32 - ml;
        }
    }
}

/// The reference dot product of [`ScaleMinK`] blocks with Q8_K activations.
pub(crate) fn vec_dot<B: ScaleMinK>(w: &[B], a: &[BlockQ8K]) -> f32 {
    let (mut sumf, mut summ) = (0.0f32, 0.0f32);
    for (x, y) in w.iter().zip(a) {
        let (d, dmin, scales) = x.header();
        let (mut sumi, mut sum_mins) = (0i32, 0i32);
        for j in 0..8 {
            let (sc, m) = scale_min_k4(j, scales);
            let ys = &y.qs[32 * j..32 * j + 32];
            let s: i32 = ys
                .iter()
                .enumerate()
                .map(|(l, &v)| x.code(j, l) as i32 * v as i32)
                .sum();
            sumi += sc as i32 * s;
            sum_mins += m as i32 * (y.bsums[2 * j] as i32 + y.bsums[2 * j + 1] as i32);
        }
        sumf += y.d * d.to_f32() * sumi as f32;
        summ += y.d * dmin.to_f32() * sum_mins as f32;
    }
    sumf - summ
}

/// The search settings of ggml's reference quantizer for one format.
#[derive(Clone, Copy)]
pub(crate) struct Search {
    /// The largest code.
    pub(crate) nmax: i32,
    /// `make_qkx2_quants`'s `rmin`.
    pub(crate) rmin: f32,
    /// `make_qkx2_quants`'s `nstep`.
    pub(crate) nstep: i32,
}

/// ggml's reference quantizer of one super-block (`quantize_row_q4_K_ref` and `_q5_K_ref`):
/// each sub-block's scale and min by [`make_qkx2_quants`], both packed to 6 bits, then the
/// codes again against the stored scales.
pub(crate) fn quantize<B: ScaleMinK>(x: &[f32]) -> B {
    let Search { nmax, rmin, nstep } = B::SEARCH;
    let mut l = [0u8; QK_K];
    let mut weights = [0.0f32; 32];
    let (mut sub_scales, mut mins) = ([0.0f32; 8], [0.0f32; 8]);
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let sum_x2 = xs.iter().fold(0.0f32, |s, v| s + v * v);
        let av_x = (sum_x2 / 32.0).sqrt();
        for (w, v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        let lj = &mut l[32 * j..32 * j + 32];
        (sub_scales[j], mins[j]) =
            make_qkx2_quants(nmax, xs, &weights, lj, rmin, 0.1, nstep, false);
        max_scale = max_scale.max(sub_scales[j]);
        max_min = max_min.max(mins[j]);
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut scales = [0u8; 12];
    for j in 0..8 {
        let ls = (nearest_int(inv_scale * sub_scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        pack_scale_min(&mut scales, j, ls, lm);
    }
    let (d, dmin) = (
        f16::from_f32(max_scale / 63.0),
        f16::from_f32(max_min / 63.0),
    );
    requantize(x, nmax, d, dmin, &scales, &mut l);
    B::from_parts(d, dmin, scales, &l)
}

/// ggml's quantizer of one super-block with importance weights `qw` (`quantize_row_q4_K_impl`
/// and `_q5_K_impl`; without weights, [`quantize`]): each sub-block's scale and min by a
/// weighted search, the eight scales and the eight mins to 6 bits by another weighted search,
/// then the codes again against the stored scales.
pub(crate) fn quantize_weighted<B: ScaleMinK>(x: &[f32], qw: Option<&[f32]>) -> B {
    let Some(qw) = qw else {
        return quantize(x);
    };
    let nmax = B::SEARCH.nmax;
    let mut l = [0u8; QK_K];
    let (mut ls, mut lm) = ([0u8; 8], [0u8; 8]);
    let (mut sw, mut mins, mut sub_scales) = ([0.0f32; 8], [0.0f32; 8], [0.0f32; 8]);
    let sigma2 = 2.0 * sum_squares(&x[..QK_K]) / QK_K as f32;
    let mut w = [0.0f32; 32];
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        importance_weights(&qw[32 * j..32 * j + 32], xs, sigma2, &mut w);
        sw[j] = w.iter().fold(0.0f32, |s, v| s + v);
        let lj = &mut l[32 * j..32 * j + 32];
        (sub_scales[j], mins[j]) = make_qkx3_quants(nmax, xs, Some(&w), lj, -0.9, 0.05, 36, false);
    }
    let d_block = make_qp_quants(63, &sub_scales, &mut ls, &sw);
    let m_block = make_qp_quants(63, &mins, &mut lm, &sw);
    let mut scales = [0u8; 12];
    for j in 0..8 {
        pack_scale_min(&mut scales, j, ls[j].min(63), lm[j].min(63));
    }
    let (d, dmin) = (f16::from_f32(d_block), f16::from_f32(m_block));
    requantize(x, nmax, d, dmin, &scales, &mut l);
    B::from_parts(d, dmin, scales, &l)
}

/// Stores the 6-bit scale `ls` and min `lm` of sub-block `j` in the twelve packed bytes, as
/// [`scale_min_k4`] reads them (`out` starts zeroed).
fn pack_scale_min(out: &mut [u8; 12], j: usize, ls: u8, lm: u8) {
    if j < 4 {
        out[j] = ls;
        out[j + 4] = lm;
    } else {
        out[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
        out[j - 4] |= (ls >> 4) << 6;
        out[j] |= (lm >> 4) << 6;
    }
}

/// ggml's last pass: the codes `0..=nmax` of the 256 values `x` against the stored super-scales
/// and packed scales and mins, into `l` (a sub-block whose scale is 0 keeps its codes).
fn requantize(x: &[f32], nmax: i32, d: f16, dmin: f16, scales: &[u8; 12], l: &mut [u8; QK_K]) {
    for j in 0..8 {
        let (sc, m) = scale_min_k4(j, scales);
        let dl = d.to_f32() * sc as f32;
        if dl == 0.0 {
            continue;
        }
        let dm = dmin.to_f32() * m as f32;
        for i in 32 * j..32 * j + 32 {
            l[i] = nearest_int((x[i] + dm) / dl).clamp(0, nmax) as u8;
        }
    }
}
