//! ggml's IQ4_NL and IQ4_XS quantizer (`quantize_row_iq4_nl_impl` without importance weights,
//! seven scale trials each side), shared by both formats.

use bytemuck::Zeroable;
use half::f16;
use rinfer_formats::QK_K;

use super::{BlockIq4Nl, KVALUES};
use crate::quant::Quantize;
use crate::quant::iq4_xs::BlockIq4Xs;
use crate::quant::util::{GROUP_MAX_EPS, nearest_int};

/// Scale trials on each side of the first guess (ggml's `ntry`).
const NTRY: i32 = 7;

/// Index of the table value nearest `x` (ggml's `best_index_int8`; ties go up).
fn best_index(x: f32) -> u8 {
    let val = |i: usize| KVALUES[i] as f32;
    if x <= val(0) {
        return 0;
    }
    if x >= val(15) {
        return 15;
    }
    let (mut ml, mut mu) = (0usize, 15usize);
    while mu - ml > 1 {
        let mav = (ml + mu) / 2;
        if x < val(mav) {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    if x - val(mu - 1) < val(mu) - x {
        (mu - 1) as u8
    } else {
        mu as u8
    }
}

/// The least-squares scale of one 32-value sub-block over the table, with its first-guess codes
/// in `l`; 0 for an all-zero sub-block (whose `l` is left as it was).
fn sub_block_scale(x: &[f32], l: &mut [u8]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        return 0.0;
    }
    let sums = |id: f32, mut codes: Option<&mut [u8]>| {
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for (j, &v) in x.iter().enumerate() {
            let k = best_index(id * v);
            if let Some(codes) = codes.as_deref_mut() {
                codes[j] = k;
            }
            let q = KVALUES[k as usize] as f32;
            let w = v * v;
            sumqx += w * q * v;
            sumq2 += w * q * q;
        }
        (sumqx, sumq2)
    };
    let d = -max / KVALUES[0] as f32;
    let (sumqx, sumq2) = sums(1.0 / d, Some(l));
    let mut d = sumqx / sumq2;
    let mut best = d * sumqx;
    for itry in -NTRY..=NTRY {
        let id = (itry + KVALUES[0] as i32) as f32 / max;
        let (sumqx, sumq2) = sums(id, None);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    d
}

/// Packs 32 codes per 16 bytes: code `j` in the low nibble of byte `j`, code `j + 16` in the
/// high one.
fn pack(l: &[u8], qs: &mut [u8]) {
    for (l, q) in l.chunks_exact(32).zip(qs.chunks_exact_mut(16)) {
        for j in 0..16 {
            q[j] = l[j] | (l[j + 16] << 4);
        }
    }
}

impl Quantize for BlockIq4Nl {
    fn quantize(x: &[f32]) -> Self {
        let mut l = [0u8; 32];
        let scale = sub_block_scale(x, &mut l);
        let id = if scale != 0.0 { 1.0 / scale } else { 0.0 };
        for (c, &v) in l.iter_mut().zip(x) {
            *c = best_index(id * v);
        }
        let mut b = BlockIq4Nl {
            d: f16::from_f32(scale),
            qs: [0; 16],
        };
        pack(&l, &mut b.qs);
        b
    }
}

impl Quantize for BlockIq4Xs {
    fn quantize(x: &[f32]) -> Self {
        let mut b = BlockIq4Xs::zeroed();
        let mut l = [0u8; QK_K];
        let mut scales = [0.0f32; QK_K / 32];
        let (mut max_scale, mut amax_scale) = (0.0f32, 0.0f32);
        for (ib, s) in scales.iter_mut().enumerate() {
            *s = sub_block_scale(&x[32 * ib..32 * ib + 32], &mut l[32 * ib..32 * ib + 32]);
            if s.abs() > amax_scale {
                amax_scale = s.abs();
                max_scale = *s;
            }
        }
        let d = -max_scale / 32.0;
        b.d = f16::from_f32(d);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        for (ib, &s) in scales.iter().enumerate() {
            let ls = nearest_int(id * s).clamp(-32, 31);
            let dl = d * ls as f32;
            let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
            for j in 32 * ib..32 * ib + 32 {
                l[j] = best_index(idl * x[j]);
            }
            let ls = (ls + 32) as u8;
            b.scales_l[ib / 2] |= (ls & 0xF) << (4 * (ib % 2));
            b.scales_h |= ((ls >> 4) as u16) << (2 * ib);
        }
        pack(&l, &mut b.qs);
        b
    }
}
