//! The code table of IQ4_NL and IQ4_XS and the parts of ggml's quantizer they share
//! (`quantize_row_iq4_nl_impl` as `quantize_iq4_nl` and `quantize_iq4_xs` run it: seven scale
//! trials each side, with importance weights or without).

use super::util::{GROUP_MAX_EPS, max_by_magnitude};

/// The 16 code values of IQ4_NL and IQ4_XS (ggml's `kvalues_iq4nl`).
pub const KVALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// Scale trials on each side of the first guess (ggml's `ntry`).
const NTRY: i32 = 7;

/// Index of the table value nearest `x` (ggml's `best_index_int8`; ties go up).
pub(crate) fn best_index(x: f32) -> u8 {
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

/// The weights of the values `x` of one super-block (32 values for IQ4_NL, 256 for IQ4_XS):
/// `qw·sqrt(σ² + x²)` with `σ² = 2/len · Σx²` given the importance `qw`, else `x²`.
pub(crate) fn value_weights(x: &[f32], qw: Option<&[f32]>, weight: &mut [f32]) {
    let mut sigma2 = x.iter().fold(0.0f32, |s, v| s + v * v);
    sigma2 *= 2.0 / x.len() as f32;
    super::weighted::squares_or_importance(qw, x, sigma2, weight);
}

/// The weighted least-squares scale of one 32-value sub-block over the table, with its
/// first-guess codes in `l`; 0 for an all-zero sub-block (whose `l` is left as it was).
pub(crate) fn sub_block_scale(x: &[f32], weight: &[f32], l: &mut [u8]) -> f32 {
    let max = max_by_magnitude(x);
    if max.abs() < GROUP_MAX_EPS {
        return 0.0;
    }
    let sums = |id: f32, mut codes: Option<&mut [u8]>| {
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for (j, (&v, &w)) in x.iter().zip(weight).enumerate() {
            let k = best_index(id * v);
            if let Some(codes) = codes.as_deref_mut() {
                codes[j] = k;
            }
            let q = KVALUES[k as usize] as f32;
            sumqx += w * q * v;
            sumq2 += w * q * q;
        }
        (sumqx, sumq2)
    };
    let d = -max / KVALUES[0] as f32;
    let (sumqx, sumq2) = sums(1.0 / d, Some(l));
    let mut d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
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

#[cfg(test)]
mod tests {
    use super::super::iq4_nl::BlockIq4Nl;
    use super::super::iq4_xs::BlockIq4Xs;
    use crate::quant::testing::check_quantize_round_trip;

    proptest::proptest! {
        #[test]
        fn quantize_round_trips_within_the_table_spacing(
            x in proptest::collection::vec(-4.0f32..4.0, 2 * rinfer_formats::QK_K)
        ) {
            check_quantize_round_trip::<BlockIq4Nl>(&x, 0.2);
            check_quantize_round_trip::<BlockIq4Xs>(&x, 0.2);
        }
    }

    #[test]
    fn quantize_of_zeros_decodes_to_zeros() {
        check_quantize_round_trip::<BlockIq4Nl>(&[0.0; 512], 0.0);
        check_quantize_round_trip::<BlockIq4Xs>(&[0.0; 512], 0.0);
    }
}
