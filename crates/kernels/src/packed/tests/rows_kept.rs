//! What each packed format must keep of its source rows, and the rounding scale of its
//! reference kernel.

use super::*;
use crate::packed::grid_quads::GridQuadRows;
use crate::quant::signed_grid::SignedGrid;

/// A Q5_0 row keeps its scale and codes; padding rows are zero.
pub(super) fn q5_0_row_kept(
    p: &BlockQ5_0x16,
    i: usize,
    block: Option<&BlockQ5_0>,
) -> TestCaseResult {
    let codes: Vec<i32> = (0..32).map(|j| p.code(i, j)).collect();
    match block {
        Some(block) => {
            prop_assert_eq!(p.d[i], block.d.to_bits());
            prop_assert_eq!(codes, block.codes().to_vec());
        }
        None => {
            prop_assert_eq!(p.d[i], 0, "padding row {}", i);
            prop_assert!(codes.iter().all(|&c| c == 0), "padding row {}", i);
        }
    }
    Ok(())
}

/// The four-bit indices of one Q4_0 / IQ4_NL block, in value order.
pub(super) fn indices(qs: &[u8; 16]) -> Vec<usize> {
    let low = qs.iter().map(|&q| (q & 0xF) as usize);
    low.chain(qs.iter().map(|&q| (q >> 4) as usize)).collect()
}

/// A Q4_0 row keeps its scale and indices (each index `n` coded as `n`, standing for `n − 8`).
pub(super) fn q4_0_row_kept(
    p: &BlockQ4_0x16,
    i: usize,
    block: Option<&BlockQ4_0>,
) -> TestCaseResult {
    if let Some(block) = block {
        prop_assert_eq!(p.d[i], block.d.to_bits());
        let codes: Vec<i32> = (0..32).map(|j| p.code(i, j) - 8).collect();
        let want: Vec<i32> = indices(&block.qs).iter().map(|&n| n as i32 - 8).collect();
        prop_assert_eq!(codes, want);
    }
    Ok(())
}

/// An IQ4_NL row keeps its scale and its table values (coded plus 128).
pub(super) fn iq4_nl_row_kept(
    p: &BlockIq4Nlx16,
    i: usize,
    block: Option<&BlockIq4Nl>,
) -> TestCaseResult {
    if let Some(block) = block {
        prop_assert_eq!(p.d[i], block.d.to_bits());
        let codes: Vec<i32> = (0..32).map(|j| p.code(i, j) - 128).collect();
        let want: Vec<i32> = indices(&block.qs)
            .iter()
            .map(|&n| KVALUES[n] as i32)
            .collect();
        prop_assert_eq!(codes, want);
    }
    Ok(())
}

/// An IQ4_XS row keeps its super-scale, sub-block scales and table values (coded plus 128).
pub(super) fn iq4_xs_row_kept(
    p: &BlockIq4Xsx16,
    i: usize,
    block: Option<&BlockIq4Xs>,
) -> TestCaseResult {
    let Some(block) = block else {
        return Ok(());
    };
    prop_assert_eq!(p.d[i], block.d.to_bits());
    for j in 0..8 {
        prop_assert_eq!(p.sc[j][i] as i32, block.scale(j));
        let codes: Vec<i32> = (0..32).map(|l| p.code(i, j, l) - 128).collect();
        let qs: &[u8; 16] = block.qs[16 * j..16 * j + 16].try_into().unwrap();
        let want: Vec<i32> = indices(qs).iter().map(|&n| KVALUES[n] as i32).collect();
        prop_assert_eq!(codes, want);
    }
    Ok(())
}

/// A Q2_K row keeps its scales, mins and codes: they rebuild its dequantized values exactly.
pub(super) fn q2_k_row_kept(p: &BlockQ2Kx16, i: usize, block: Option<&BlockQ2K>) -> TestCaseResult {
    let Some(block) = block else {
        return Ok(());
    };
    prop_assert_eq!(
        (p.d[i], p.dmin[i]),
        (block.d.to_bits(), block.dmin.to_bits())
    );
    let deq = dequantize(std::slice::from_ref(block));
    let (d, dmin) = (block.d.to_f32(), block.dmin.to_f32());
    for g in 0..16 {
        let (sc, m) = p.scale_min(i, g);
        let (dl, ml) = (d * sc as f32, dmin * m as f32);
        for l in 0..16 {
            let code = super::two_bits::code(&p.qs, i, g, l);
            prop_assert_eq!((dl * code as f32 - ml).to_bits(), deq[16 * g + l].to_bits());
        }
    }
    Ok(())
}

/// A TQ2_0 row keeps its scale and codes: they rebuild its dequantized values exactly (each
/// code `q` standing for `q − 1`); padding rows are zero.
pub(super) fn tq2_0_row_kept(
    p: &BlockTq2_0x16,
    i: usize,
    block: Option<&BlockTq2_0>,
) -> TestCaseResult {
    let codes: Vec<i32> = (0..256)
        .map(|v| super::two_bits::code(&p.qs, i, v / 16, v % 16))
        .collect();
    match block {
        Some(block) => {
            prop_assert_eq!(p.d[i], block.d.to_bits());
            let d = block.d.to_f32();
            let rebuilt: Vec<u32> = codes
                .iter()
                .map(|&q| ((q - 1) as f32 * d).to_bits())
                .collect();
            let want: Vec<u32> = dequantize(std::slice::from_ref(block))
                .iter()
                .map(|v| v.to_bits())
                .collect();
            prop_assert_eq!(rebuilt, want);
        }
        None => {
            prop_assert_eq!(p.d[i], 0, "padding row {}", i);
            prop_assert!(codes.iter().all(|&c| c == 0), "padding row {}", i);
        }
    }
    Ok(())
}

/// A TQ1_0 row keeps its scale and trits: they rebuild its dequantized values exactly (each
/// trit `t` standing for `t − 1`); padding rows are zero bytes (trits 0) under a zero scale.
pub(super) fn tq1_0_row_kept(
    p: &BlockTq1_0x16,
    i: usize,
    block: Option<&BlockTq1_0>,
) -> TestCaseResult {
    let Some(block) = block else {
        prop_assert_eq!(p.d[i], 0, "padding row {}", i);
        prop_assert!((0..256).all(|v| p.trit(i, v) == 0), "padding row {}", i);
        return Ok(());
    };
    prop_assert_eq!(p.d[i], block.d.to_bits());
    let d = block.d.to_f32();
    let rebuilt: Vec<u32> = (0..256)
        .map(|v| ((p.trit(i, v) - 1) as f32 * d).to_bits())
        .collect();
    let want: Vec<u32> = dequantize(std::slice::from_ref(block))
        .iter()
        .map(|v| v.to_bits())
        .collect();
    prop_assert_eq!(rebuilt, want);
    Ok(())
}

/// A Q3_K row keeps its scale, group scales and codes: they rebuild its dequantized values
/// exactly.
pub(super) fn q3_k_row_kept(p: &BlockQ3Kx16, i: usize, block: Option<&BlockQ3K>) -> TestCaseResult {
    let Some(block) = block else {
        return Ok(());
    };
    prop_assert_eq!(p.d[i], block.d.to_bits());
    let deq = dequantize(std::slice::from_ref(block));
    let d = block.d.to_f32();
    for g in 0..16 {
        let dl = d * p.sc[g][i] as f32;
        for l in 0..16 {
            let value = p.code(i, g, l) - BlockQ3Kx16::OFFSET;
            prop_assert_eq!((dl * value as f32).to_bits(), deq[16 * g + l].to_bits());
        }
    }
    Ok(())
}

/// The Q2_K reference kernel's rounding scale: `sum |w_i a_i|` plus a bound on the min terms
/// (`|dmin| * 15` per group against group sums of at most `16 * 128`, times the activation
/// scale), which cancel against the scaled codes.
pub(super) fn q2_k_magnitude(row: &[BlockQ2K], at: &[BlockQ8K]) -> f64 {
    let mins: f64 = row
        .iter()
        .map(|b| b.dmin.to_f32().abs() as f64 * 15.0 * 16.0 * 2048.0)
        .sum();
    dequantized_magnitude(row, at) + mins * at[0].d.abs() as f64
}

/// A Q4_1 row keeps its scale, min and codes: they rebuild its dequantized values exactly.
pub(super) fn q4_1_row_kept(
    p: &BlockQ4_1x16,
    i: usize,
    block: Option<&BlockQ4_1>,
) -> TestCaseResult {
    let codes = |j| p.q.code(i, j);
    check_min_row(p.q.d[i], p.m[i], codes, block)
}

/// A Q5_1 row keeps its scale, min and codes: they rebuild its dequantized values exactly.
pub(super) fn q5_1_row_kept(
    p: &BlockQ5_1x16,
    i: usize,
    block: Option<&BlockQ5_1>,
) -> TestCaseResult {
    let codes = |j| p.q.code(i, j);
    check_min_row(p.q.d[i], p.m[i], codes, block)
}

/// `d · code + m` of every value of a packed row equals the source block's dequantized value.
pub(super) fn check_min_row<W: BlockFormat>(
    d: u16,
    m: u16,
    code: impl Fn(usize) -> i32,
    block: Option<&W>,
) -> TestCaseResult {
    let Some(block) = block else {
        return Ok(());
    };
    let (d, m) = (f16::from_bits(d).to_f32(), f16::from_bits(m).to_f32());
    let deq = dequantize(std::slice::from_ref(block));
    for (j, want) in deq.iter().enumerate() {
        prop_assert_eq!(
            (d * code(j) as f32 + m).to_bits(),
            want.to_bits(),
            "value {}",
            j
        );
    }
    Ok(())
}

/// The rounding scale of Q4_1 and Q5_1 (`min(b)` a block's min): `Σ (|x − m| + |m|)·|a|`
/// over the dequantized values `x` (the scaled codes and the min are summed apart, then added).
pub(super) fn min_magnitude<W: BlockFormat>(
    row: &[W],
    at: &[BlockQ8_0],
    min: fn(&W) -> f16,
) -> f64 {
    let (dw, da) = (dequantize(row), dequantize(at));
    let mins = row.iter().flat_map(|b| vec![min(b).to_f32(); W::ELEMS]);
    dw.iter()
        .zip(mins)
        .zip(&da)
        .map(|((x, m), y)| ((x - m).abs() as f64 + m.abs() as f64) * y.abs() as f64)
        .sum()
}

/// A Q8_0 row keeps its scale and codes (stored offset by 128).
pub(super) fn q8_0_row_kept(
    p: &BlockQ8_0x16,
    i: usize,
    block: Option<&BlockQ8_0>,
) -> TestCaseResult {
    if let Some(block) = block {
        prop_assert_eq!(p.d[i], block.d.to_bits());
        let codes: Vec<i32> = (0..32).map(|j| p.code(i, j) - 128).collect();
        let want: Vec<i32> = block.qs.iter().map(|&q| q as i32).collect();
        prop_assert_eq!(codes, want);
    }
    Ok(())
}

/// An MXFP4 exponent from a random f16 scale: powers of two from `2^-16` to `2^7`, where
/// products stay finite.
pub(super) fn mxfp4_exponent(b: &mut BlockMxfp4, d: f16, _: f16) {
    b.e = 112 + (d.to_bits() % 24) as u8;
}

/// An MXFP4 row keeps its scale and codes; padding rows are zero.
pub(super) fn mxfp4_row_kept(
    p: &BlockMxfp4x16,
    i: usize,
    block: Option<&BlockMxfp4>,
) -> TestCaseResult {
    let codes: Vec<u8> = (0..32).map(|j| p.index(i, j)).collect();
    match block {
        Some(block) => {
            prop_assert_eq!(p.d[i], crate::quant::mxfp4::e8m0_to_f32_half(block.e));
            let want: Vec<u8> = (0..16)
                .map(|j| block.qs[j] & 0xF)
                .chain((0..16).map(|j| block.qs[j] >> 4))
                .collect();
            prop_assert_eq!(codes, want);
        }
        None => {
            prop_assert_eq!(p.d[i], 0.0, "padding row {}", i);
            prop_assert!(codes.iter().all(|&c| c == 0), "padding row {}", i);
        }
    }
    Ok(())
}

/// A Q4_K row keeps every code, scale and min: they rebuild its dequantized values.
pub(super) fn q4_k_row_kept(p: &BlockQ4Kx16, i: usize, block: Option<&BlockQ4K>) -> TestCaseResult {
    let Some(block) = block else {
        return Ok(());
    };
    check_k_row(p, |j, l| p.code(i, j, l), i, block, block.d, block.dmin)
}

/// A Q5_K row keeps every code (fifth bits included), scale and min.
pub(super) fn q5_k_row_kept(p: &BlockQ5Kx16, i: usize, block: Option<&BlockQ5K>) -> TestCaseResult {
    let Some(block) = block else {
        return Ok(());
    };
    check_k_row(
        &p.low,
        |j, l| p.code(i, j, l),
        i,
        block,
        block.d,
        block.dmin,
    )
}

/// Row `i` of a Q4_K-shaped packed block (scales and mins in `p`, codes from `code(j, l)`)
/// rebuilds the dequantized values of `block`.
pub(super) fn check_k_row<W: BlockFormat>(
    p: &BlockQ4Kx16,
    code: impl Fn(usize, usize) -> i32,
    i: usize,
    block: &W,
    d: f16,
    dmin: f16,
) -> TestCaseResult {
    let deq = dequantize(std::slice::from_ref(block));
    let (d, dmin) = (d.to_f32(), dmin.to_f32());
    for j in 0..8 {
        for l in 0..32 {
            let want = deq[32 * j + l];
            let got =
                d * p.sc[j][i] as f32 * code(j, l) as f32 - dmin * p.m[j / 2][2 * i + j % 2] as f32;
            prop_assert!(got == want || (got - want).abs() <= 1e-6 * want.abs());
        }
    }
    Ok(())
}

/// A Q6_K row keeps its scale, group scales and codes (stored offset by 32).
pub(super) fn q6_k_row_kept(p: &BlockQ6Kx16, i: usize, block: Option<&BlockQ6K>) -> TestCaseResult {
    let Some(block) = block else {
        return Ok(());
    };
    prop_assert_eq!(p.d[i], block.d.to_bits());
    for (g, &sc) in block.scales.iter().enumerate() {
        prop_assert_eq!(p.sc[g][i], sc);
    }
    let codes: Vec<i32> = (0..256).map(|c| p.code(i, c) - 32).collect();
    let want: Vec<i32> = block.codes().iter().map(|&q| q as i32).collect();
    prop_assert_eq!(codes, want);
    Ok(())
}

/// The Q4_K and Q5_K reference kernels' rounding scale (`dmin(b)` a block's min scale):
/// `sum |w_i a_i|` plus a bound on the min terms (`|dmin| * 63` per sub-block against code sums
/// of at most `8 * 4064`, times the activation scale), which cancel against the scaled codes.
pub(super) fn k_magnitude<W: BlockFormat>(row: &[W], at: &[BlockQ8K], dmin: fn(&W) -> f16) -> f64 {
    let (dw, da) = (dequantize(row), dequantize(at));
    let products: f64 = dw
        .iter()
        .zip(&da)
        .map(|(x, y)| (*x as f64 * *y as f64).abs())
        .sum();
    let mins: f64 = row
        .iter()
        .map(|b| dmin(b).to_f32().abs() as f64 * 63.0 * 8.0 * 4064.0)
        .sum();
    products + mins * at[0].d.abs() as f64
}

/// An IQ1_S row keeps its scale, grid entries, sub-block scales and shift signs; padding rows
/// are zero.
pub(super) fn iq1_s_row_kept(
    p: &BlockIq1Sx16,
    i: usize,
    block: Option<&BlockIq1S>,
) -> TestCaseResult {
    let Some(block) = block else {
        prop_assert_eq!(p.d[i], 0, "padding row {}", i);
        prop_assert!(
            (0..32).all(|g| p.grid.index(i, g) == 0),
            "padding row {}",
            i
        );
        return Ok(());
    };
    prop_assert_eq!(p.d[i], block.d.to_bits());
    for j in 0..8 {
        prop_assert_eq!(p.scale(i, j), block.scale(j));
        prop_assert_eq!(p.delta_sign(i, j), block.delta_sign(j));
        for l in 0..4 {
            prop_assert_eq!(p.grid.entry(i, 4 * j + l), block.entry(j, l));
        }
    }
    Ok(())
}

/// An IQ1_M row keeps its scale, grid entries, half scales and shift signs; padding rows are
/// zero.
pub(super) fn iq1_m_row_kept(
    p: &BlockIq1Mx16,
    i: usize,
    block: Option<&BlockIq1M>,
) -> TestCaseResult {
    let Some(block) = block else {
        prop_assert_eq!(p.d(i), 0, "padding row {}", i);
        prop_assert!(
            (0..32).all(|g| p.grid.index(i, g) == 0),
            "padding row {}",
            i
        );
        return Ok(());
    };
    prop_assert_eq!(p.d(i), block.d().to_bits());
    for h in 0..16 {
        prop_assert_eq!(p.scale(i, h), block.scale(h));
    }
    for g in 0..32 {
        prop_assert_eq!(p.grid.entry(i, g), block.entry(g));
        prop_assert_eq!(p.delta_sign(i, g), block.delta_sign(g));
    }
    Ok(())
}

/// An IQ3_XXS or IQ3_S row keeps its scale, its signed grid values and its multipliers;
/// padding rows are zero (indices, signs and levels).
pub(super) fn grid_quads_row_kept<P>(p: &P, i: usize, block: Option<&P::Source>) -> TestCaseResult
where
    P: GridQuadRows,
    P::Source: SignedGrid,
{
    let values: Vec<i32> = (0..256).map(|v| p.value(i, v / 4, v % 4)).collect();
    let multipliers: Vec<i32> = (0..8).map(|j| p.multiplier(i, j)).collect();
    match block {
        Some(block) => {
            prop_assert_eq!(p.quads().d[i], block.d().to_bits());
            let want: Vec<i32> = (0..32)
                .flat_map(|g| block.group(g))
                .map(|v| v as i32)
                .collect();
            prop_assert_eq!(values, want);
            let want: Vec<i32> = (0..8).map(|j| block.multiplier(j)).collect();
            prop_assert_eq!(multipliers, want);
        }
        None => {
            prop_assert_eq!(p.quads().d[i], 0, "padding row {}", i);
            prop_assert!((0..64).all(|q| p.index(i, q) == 0), "padding row {}", i);
            prop_assert!(p.quads().signs.iter().all(|s| (s >> (4 * i)) & 0xF == 0));
            prop_assert!(multipliers.iter().all(|&m| m == 1), "padding row {}", i);
        }
    }
    Ok(())
}

/// An IQ2 row keeps its scale, its scale levels and its signed grid values; padding rows have
/// a zero scale.
pub(super) fn grid_row_kept<P: GridRows>(
    p: &P,
    i: usize,
    block: Option<&P::Source>,
) -> TestCaseResult
where
    P::Source: crate::quant::signed_grid::SignedGrid,
{
    use crate::quant::signed_grid::SignedGrid;
    let Some(block) = block else {
        prop_assert_eq!(p.d()[i], 0, "padding row {}", i);
        return Ok(());
    };
    prop_assert_eq!(p.d()[i], block.d().to_bits());
    let runs = P::RUNS;
    for r in 0..runs {
        prop_assert_eq!(p.level(i, r), block.level(r), "run {}", r);
    }
    for g in 0..32 {
        prop_assert_eq!(p.group(i, g), block.group(g), "group {}", g);
    }
    Ok(())
}
