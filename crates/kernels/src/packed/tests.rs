use std::fmt::Debug;

use half::f16;
use proptest::prelude::*;
use proptest::test_runner::TestCaseResult;

use super::iq4_xsx16::{self, BlockIq4Xsx16};
use super::min_formats::{BlockQ4_1x16, BlockQ5_1x16};
use super::mxfp4x16::{self, BlockMxfp4x16};
use super::nibbles::{BlockIq4Nlx16, BlockQ4_0x16};
use super::q2_kx16::{self, BlockQ2Kx16};
use super::q3_kx16::{self, BlockQ3Kx16};
use super::q4_kx16::{self, BlockQ4Kx16};
use super::q5_0x16::{self, BlockQ5_0x16};
use super::q5_kx16::{self, BlockQ5Kx16};
use super::q6_kx16::{self, BlockQ6Kx16};
use super::q8_0x16::{self, BlockQ8_0x16};
use super::rows::pack_rows;
use super::*;
use crate::dispatch::Kernels;
use crate::quant::VecDot;
use crate::quant::iq4_nl::{BlockIq4Nl, KVALUES};
use crate::quant::iq4_xs::BlockIq4Xs;
use crate::quant::mxfp4::BlockMxfp4;
use crate::quant::q2_k::BlockQ2K;
use crate::quant::q3_k::BlockQ3K;
use crate::quant::q4_0::BlockQ4_0;
use crate::quant::q4_1::BlockQ4_1;
use crate::quant::q4_k::BlockQ4K;
use crate::quant::q5_0::BlockQ5_0;
use crate::quant::q5_1::BlockQ5_1;
use crate::quant::q5_k::BlockQ5K;
use crate::quant::q6_k::BlockQ6K;
use crate::quant::q8_0::BlockQ8_0;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::testing::*;

/// One row group: up to sixteen rows `w` of `nb` source blocks each, and token rows `a`
/// (`nb` activation blocks each) with their summaries `s`.
#[derive(Debug)]
struct GroupCase<W, A> {
    w: Vec<W>,
    nb: usize,
    a: Vec<A>,
    s: Vec<BlockSummary>,
}

/// The [`GroupCase`] of packed format `P`.
type CaseOf<P> = GroupCase<<P as PackedFormat>::Source, <P as PackedFormat>::Act>;

/// A packed format's scalar reference kernel.
type ReferenceFn<P> = fn(&[P], &[<P as PackedFormat>::Act], &[BlockSummary], &mut [[f32; ROWS]]);

/// Checks row `i` of a packed block against the source block it was packed from (`None` for
/// the padding rows past the last).
type RowCheck<P> = fn(&P, usize, Option<&<P as PackedFormat>::Source>) -> TestCaseResult;

/// The rounding scale of one row's dot product against one token.
type Magnitude<P> = fn(&[<P as PackedFormat>::Source], &[<P as PackedFormat>::Act]) -> f64;

/// Random [`GroupCase`]s of 1 to 16 rows, `blocks_per_row` blocks and `tokens` tokens: source
/// blocks from [`blocks_with_scales`] (`scales` sets their scale fields), activations from
/// [`activations`] quantized and summarized.
fn group_case<P: PackedFormat>(
    blocks_per_row: Range<usize>,
    tokens: Range<usize>,
    scales: fn(&mut P::Source, f16, f16),
) -> impl Strategy<Value = CaseOf<P>>
where
    P::Source: Debug,
    P::Act: Debug,
{
    (1usize..=ROWS, blocks_per_row, tokens).prop_flat_map(move |(rows, nb, tokens)| {
        (
            blocks_with_scales(rows * nb, scales),
            Just(nb),
            activation_rows::<P>(tokens, nb),
        )
            .prop_map(|(w, nb, (a, s))| GroupCase { w, nb, a, s })
    })
}

/// `tokens` activation rows of `nb` blocks quantized to `P::Act`, with their summaries.
fn activation_rows<P: PackedFormat>(
    tokens: usize,
    nb: usize,
) -> impl Strategy<Value = (Vec<P::Act>, Vec<BlockSummary>)>
where
    P::Act: Debug,
{
    let elems = P::Source::ELEMS;
    prop::collection::vec(activations(nb * elems), tokens).prop_map(move |rows| {
        let a: Vec<P::Act> = rows.iter().flat_map(|x| quantize::<P::Act>(x)).collect();
        let mut s = vec![BlockSummary::default(); a.len() * elems / 32];
        for (a, s) in a.iter().zip(s.chunks_mut(elems / 32)) {
            P::summarize(a, s);
        }
        (a, s)
    })
}

/// Packs the rows of `case` (at most sixteen) with `pack`, one packed block per column.
fn pack_group<P: PackedFormat>(case: &CaseOf<P>, pack: fn(&[P::Source]) -> P) -> Vec<P> {
    let rows: Vec<&[P::Source]> = case.w.chunks(case.nb).collect();
    (0..case.nb)
        .map(|b| {
            let column: Vec<P::Source> = rows.iter().map(|r| r[b]).collect();
            pack(&column)
        })
        .collect()
}

/// Packing keeps every row of every block: `row_kept` holds for each row of each packed block.
fn check_packing<P: PackedFormat>(
    case: &CaseOf<P>,
    pack: fn(&[P::Source]) -> P,
    row_kept: RowCheck<P>,
) -> TestCaseResult {
    let packed = pack_group(case, pack);
    let rows: Vec<&[P::Source]> = case.w.chunks(case.nb).collect();
    for (b, p) in packed.iter().enumerate() {
        for i in 0..ROWS {
            row_kept(p, i, rows.get(i).map(|row| &row[b]))?;
        }
    }
    Ok(())
}

/// The reference kernel matches the f64 dot of the dequantized operands within `1e-4` of
/// `magnitude`, for every row and token.
fn check_reference_kernel<P: PackedFormat>(
    case: &CaseOf<P>,
    pack: fn(&[P::Source]) -> P,
    reference: ReferenceFn<P>,
    magnitude: Magnitude<P>,
) -> TestCaseResult {
    let (nb, packed) = (case.nb, pack_group(case, pack));
    let mut out = vec![[0.0; ROWS]; case.a.len() / nb];
    reference(&packed, &case.a, &case.s, &mut out);
    for (t, out) in out.iter().enumerate() {
        for (i, row) in case.w.chunks(nb).enumerate() {
            let at = &case.a[t * nb..(t + 1) * nb];
            let (dw, da) = (dequantize(row), dequantize(at));
            let exact: f64 = dw.iter().zip(&da).map(|(x, y)| *x as f64 * *y as f64).sum();
            prop_assert!(
                (out[i] as f64 - exact).abs() <= 1e-4 * magnitude(row, at) + 1e-30,
                "row {} token {}: {} vs {}",
                i,
                t,
                out[i],
                exact
            );
        }
    }
    Ok(())
}

/// Where AVX-512 runs, the kernel `avx512` matches the reference kernel bit for bit.
#[cfg(target_arch = "x86_64")]
fn check_avx512_kernel<P: PackedFormat>(
    case: &CaseOf<P>,
    pack: fn(&[P::Source]) -> P,
    reference: ReferenceFn<P>,
    avx512: GroupDotFn<P>,
) {
    if !has_avx512() {
        return;
    }
    let packed = pack_group(case, pack);
    let tokens = case.a.len() / case.nb;
    let mut want = vec![[0.0; ROWS]; tokens];
    reference(&packed, &case.a, &case.s, &mut want);
    let mut got = vec![[0.0; ROWS]; tokens];
    // SAFETY: AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C were detected just above, all a packed
    // AVX-512 kernel needs.
    unsafe { avx512(&packed, &case.a, &case.s, &mut got) };
    let what = format!("packed {:?} AVX-512 vs reference", P::Source::TYPE);
    for (g, w) in got.iter().zip(&want) {
        assert_bits_eq(g, w, &what);
    }
}

/// `sum |w_i| * |a_i|` over one row and token, the rounding scale of formats without mins.
fn dequantized_magnitude<W: VecDot>(row: &[W], at: &[W::Activation]) -> f64 {
    dot_magnitude(row, at) as f64
}

/// Stamps out, in module `$format`, the properties of the packed format `$packed` on row
/// groups of `$blocks_per_row` blocks and `$tokens` tokens from [`group_case`] (`$scales` sets a
/// source block's scale fields), run `$config` many times: packing keeps every row
/// ([`check_packing`] with `$row_kept`), the reference kernel `$reference` matches the
/// dequantized dot within `1e-4` of `$magnitude` ([`check_reference_kernel`]), and the AVX-512
/// kernel `$avx512` matches the reference bit for bit ([`check_avx512_kernel`]).
macro_rules! packed_format_tests {
    ($(
        $format:ident: $packed:ty, $config:expr, blocks $blocks_per_row:expr, tokens $tokens:expr,
        scales $scales:expr, kept $row_kept:expr, magnitude $magnitude:expr,
        kernels $reference:path, $avx512:path;
    )*) => {$(
        mod $format {
            use super::*;

            fn cases() -> impl Strategy<Value = CaseOf<$packed>> {
                group_case::<$packed>($blocks_per_row, $tokens, $scales)
            }

            proptest! {
                #![proptest_config($config)]

                #[test]
                fn packing_keeps_every_row(case in cases()) {
                    check_packing::<$packed>(&case, <$packed>::pack, $row_kept)?;
                }

                #[test]
                fn reference_matches_dequantized_dot(case in cases()) {
                    check_reference_kernel::<$packed>(
                        &case, <$packed>::pack, $reference, $magnitude,
                    )?;
                }

                #[cfg(target_arch = "x86_64")]
                #[test]
                fn avx512_matches_reference_bit_exact(case in cases()) {
                    check_avx512_kernel::<$packed>(&case, <$packed>::pack, $reference, $avx512);
                }
            }
        }
    )*};
}

/// Super-blocks are eight times the size of 32-value blocks: fewer cases of fewer blocks.
fn super_block_config() -> ProptestConfig {
    ProptestConfig::with_cases(64)
}

packed_format_tests! {
    q4_0: BlockQ4_0x16, ProptestConfig::default(), blocks 1..6, tokens 1..12,
        scales |b, d, _| b.d = d, kept q4_0_row_kept, magnitude dequantized_magnitude,
        kernels BlockQ4_0x16::dot_group, nibbles_avx512::dot_group_q4_0;
    iq4_nl: BlockIq4Nlx16, ProptestConfig::default(), blocks 1..6, tokens 1..12,
        scales |b, d, _| b.d = d, kept iq4_nl_row_kept, magnitude dequantized_magnitude,
        kernels BlockIq4Nlx16::dot_group, nibbles_avx512::dot_group_iq4_nl;
    q5_0: BlockQ5_0x16, ProptestConfig::default(), blocks 1..6, tokens 1..12,
        scales |b, d, _| b.d = d, kept q5_0_row_kept, magnitude dequantized_magnitude,
        kernels q5_0x16::dot_group, q5_0x16_avx512::dot_group;
    q8_0: BlockQ8_0x16, ProptestConfig::default(), blocks 1..6, tokens 1..12,
        scales |b, d, _| b.d = d, kept q8_0_row_kept, magnitude dequantized_magnitude,
        kernels q8_0x16::dot_group, q8_0x16_avx512::dot_group;
    mxfp4: BlockMxfp4x16, ProptestConfig::default(), blocks 1..6, tokens 1..12,
        scales mxfp4_exponent, kept mxfp4_row_kept, magnitude dequantized_magnitude,
        kernels mxfp4x16::dot_group, mxfp4x16_avx512::dot_group;
    q4_k: BlockQ4Kx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, m| (b.d, b.dmin) = (d, m), kept q4_k_row_kept, magnitude q4_k_magnitude,
        kernels q4_kx16::dot_group, q4_kx16_avx512::dot_group;
    q5_k: BlockQ5Kx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, m| (b.d, b.dmin) = (d, m), kept q5_k_row_kept, magnitude q5_k_magnitude,
        kernels q5_kx16::dot_group, q5_kx16_avx512::dot_group;
    q6_k: BlockQ6Kx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, _| b.d = d, kept q6_k_row_kept, magnitude dequantized_magnitude,
        kernels q6_kx16::dot_group, q6_kx16_avx512::dot_group;
    iq4_xs: BlockIq4Xsx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, _| b.d = d, kept iq4_xs_row_kept, magnitude dequantized_magnitude,
        kernels iq4_xsx16::dot_group, iq4_xsx16_avx512::dot_group;
    q2_k: BlockQ2Kx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, m| (b.d, b.dmin) = (d, m), kept q2_k_row_kept, magnitude q2_k_magnitude,
        kernels q2_kx16::dot_group, q2_kx16_avx512::dot_group;
    q3_k: BlockQ3Kx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, _| b.d = d, kept q3_k_row_kept, magnitude dequantized_magnitude,
        kernels q3_kx16::dot_group, q3_kx16_avx512::dot_group;
    q4_1: BlockQ4_1x16, ProptestConfig::default(), blocks 1..6, tokens 1..12,
        scales |b, d, m| (b.d, b.m) = (d, m), kept q4_1_row_kept, magnitude q4_1_magnitude,
        kernels BlockQ4_1x16::dot_group, min_formats_avx512::dot_group_q4_1;
    q5_1: BlockQ5_1x16, ProptestConfig::default(), blocks 1..6, tokens 1..12,
        scales |b, d, m| (b.d, b.m) = (d, m), kept q5_1_row_kept, magnitude q5_1_magnitude,
        kernels BlockQ5_1x16::dot_group, min_formats_avx512::dot_group_q5_1;
}

/// A Q5_0 row keeps its scale and codes; padding rows are zero.
fn q5_0_row_kept(p: &BlockQ5_0x16, i: usize, block: Option<&BlockQ5_0>) -> TestCaseResult {
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
fn indices(qs: &[u8; 16]) -> Vec<usize> {
    let low = qs.iter().map(|&q| (q & 0xF) as usize);
    low.chain(qs.iter().map(|&q| (q >> 4) as usize)).collect()
}

/// A Q4_0 row keeps its scale and indices (each index `n` coded as `n`, standing for `n − 8`).
fn q4_0_row_kept(p: &BlockQ4_0x16, i: usize, block: Option<&BlockQ4_0>) -> TestCaseResult {
    if let Some(block) = block {
        prop_assert_eq!(p.d[i], block.d.to_bits());
        let codes: Vec<i32> = (0..32).map(|j| p.code(i, j) - 8).collect();
        let want: Vec<i32> = indices(&block.qs).iter().map(|&n| n as i32 - 8).collect();
        prop_assert_eq!(codes, want);
    }
    Ok(())
}

/// An IQ4_NL row keeps its scale and its table values (coded plus 128).
fn iq4_nl_row_kept(p: &BlockIq4Nlx16, i: usize, block: Option<&BlockIq4Nl>) -> TestCaseResult {
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
fn iq4_xs_row_kept(p: &BlockIq4Xsx16, i: usize, block: Option<&BlockIq4Xs>) -> TestCaseResult {
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
fn q2_k_row_kept(p: &BlockQ2Kx16, i: usize, block: Option<&BlockQ2K>) -> TestCaseResult {
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

/// A Q3_K row keeps its scale, group scales and codes: they rebuild its dequantized values
/// exactly.
fn q3_k_row_kept(p: &BlockQ3Kx16, i: usize, block: Option<&BlockQ3K>) -> TestCaseResult {
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
fn q2_k_magnitude(row: &[BlockQ2K], at: &[BlockQ8K]) -> f64 {
    let mins: f64 = row
        .iter()
        .map(|b| b.dmin.to_f32().abs() as f64 * 15.0 * 16.0 * 2048.0)
        .sum();
    dequantized_magnitude(row, at) + mins * at[0].d.abs() as f64
}

/// A Q4_1 row keeps its scale, min and codes: they rebuild its dequantized values exactly.
fn q4_1_row_kept(p: &BlockQ4_1x16, i: usize, block: Option<&BlockQ4_1>) -> TestCaseResult {
    let codes = |j| p.q.code(i, j);
    check_min_row(p.q.d[i], p.m[i], codes, block)
}

/// A Q5_1 row keeps its scale, min and codes: they rebuild its dequantized values exactly.
fn q5_1_row_kept(p: &BlockQ5_1x16, i: usize, block: Option<&BlockQ5_1>) -> TestCaseResult {
    let codes = |j| p.q.code(i, j);
    check_min_row(p.q.d[i], p.m[i], codes, block)
}

/// `d · code + m` of every value of a packed row equals the source block's dequantized value.
fn check_min_row<W: BlockFormat>(
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

/// The rounding scale of Q4_1: `Σ (|x − m| + |m|)·|a|` over the dequantized values `x` (the
/// scaled codes and the min are summed apart, then added).
fn q4_1_magnitude(row: &[BlockQ4_1], at: &[BlockQ8_0]) -> f64 {
    min_magnitude(row, at, |b| b.m)
}

/// As [`q4_1_magnitude`], for Q5_1.
fn q5_1_magnitude(row: &[BlockQ5_1], at: &[BlockQ8_0]) -> f64 {
    min_magnitude(row, at, |b| b.m)
}

fn min_magnitude<W: BlockFormat>(row: &[W], at: &[BlockQ8_0], min: fn(&W) -> f16) -> f64 {
    let (dw, da) = (dequantize(row), dequantize(at));
    let mins = row.iter().flat_map(|b| vec![min(b).to_f32(); W::ELEMS]);
    dw.iter()
        .zip(mins)
        .zip(&da)
        .map(|((x, m), y)| ((x - m).abs() as f64 + m.abs() as f64) * y.abs() as f64)
        .sum()
}

/// A Q8_0 row keeps its scale and codes (stored offset by 128).
fn q8_0_row_kept(p: &BlockQ8_0x16, i: usize, block: Option<&BlockQ8_0>) -> TestCaseResult {
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
fn mxfp4_exponent(b: &mut BlockMxfp4, d: f16, _: f16) {
    b.e = 112 + (d.to_bits() % 24) as u8;
}

/// An MXFP4 row keeps its scale and codes; padding rows are zero.
fn mxfp4_row_kept(p: &BlockMxfp4x16, i: usize, block: Option<&BlockMxfp4>) -> TestCaseResult {
    let codes: Vec<u8> = (0..32).map(|j| p.code(i, j)).collect();
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
fn q4_k_row_kept(p: &BlockQ4Kx16, i: usize, block: Option<&BlockQ4K>) -> TestCaseResult {
    let Some(block) = block else {
        return Ok(());
    };
    check_k_row(p, |j, l| p.code(i, j, l), i, block, block.d, block.dmin)
}

/// A Q5_K row keeps every code (fifth bits included), scale and min.
fn q5_k_row_kept(p: &BlockQ5Kx16, i: usize, block: Option<&BlockQ5K>) -> TestCaseResult {
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
fn check_k_row<W: BlockFormat>(
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
fn q6_k_row_kept(p: &BlockQ6Kx16, i: usize, block: Option<&BlockQ6K>) -> TestCaseResult {
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

/// The Q4_K reference kernel's rounding scale: `sum |w_i a_i|` plus a bound on the min terms
/// (`|dmin| * 63` per sub-block against code sums of at most `8 * 4064`, times the activation
/// scale), which cancel against the scaled codes.
fn q4_k_magnitude(row: &[BlockQ4K], at: &[BlockQ8K]) -> f64 {
    k_magnitude(row, at, |b| b.dmin)
}

/// As [`q4_k_magnitude`], for Q5_K.
fn q5_k_magnitude(row: &[BlockQ5K], at: &[BlockQ8K]) -> f64 {
    k_magnitude(row, at, |b| b.dmin)
}

fn k_magnitude<W: BlockFormat>(row: &[W], at: &[BlockQ8K], dmin: fn(&W) -> f16) -> f64 {
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

/// A deterministic `rows × cols` matrix of `ty` and `tokens` activation rows.
fn matrix_case(ty: GgmlType, rows: usize, cols: usize, tokens: usize) -> (Vec<u8>, Vec<f32>) {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let x: Vec<f32> = (0..rows * cols)
        .map(|_| (next() % 2001) as f32 / 1000.0 - 1.0)
        .collect();
    let w = match ty {
        GgmlType::Q4_0 => bytemuck::cast_slice(&quantize::<BlockQ4_0>(&x)).to_vec(),
        // No IQ4_NL quantizer here: Q4_0's blocks carry the same bytes (a scale, 32 indices).
        GgmlType::Iq4Nl => bytemuck::cast_slice(&quantize::<BlockQ4_0>(&x)).to_vec(),
        GgmlType::Q5_0 => bytemuck::cast_slice(&quantize::<BlockQ5_0>(&x)).to_vec(),
        GgmlType::Q8_0 => bytemuck::cast_slice(&quantize::<BlockQ8_0>(&x)).to_vec(),
        GgmlType::Q4K => bytemuck::cast_slice(&quantize::<BlockQ4K>(&x)).to_vec(),
        GgmlType::Q5K => bytemuck::cast_slice(&quantize::<BlockQ5K>(&x)).to_vec(),
        GgmlType::Iq4Xs => bytemuck::cast_slice(&quantize::<BlockIq4Xs>(&x)).to_vec(),
        GgmlType::Q2K => bytemuck::cast_slice(&quantize::<BlockQ2K>(&x)).to_vec(),
        GgmlType::Q4_1 => bytemuck::cast_slice(&quantize::<BlockQ4_1>(&x)).to_vec(),
        GgmlType::Q5_1 => bytemuck::cast_slice(&quantize::<BlockQ5_1>(&x)).to_vec(),
        GgmlType::Q3K => bytemuck::cast_slice(&quantize::<BlockQ3K>(&x)).to_vec(),
        // No quantizer here: random codes under exponents of 2^-8 to 2^-1.
        GgmlType::MXFP4 => (0..rows * cols / 32)
            .flat_map(|_| {
                let e = 120 + (next() % 8) as u8;
                std::iter::once(e).chain((0..16).map(|_| next() as u8).collect::<Vec<_>>())
            })
            .collect(),
        _ => bytemuck::cast_slice(&quantize::<BlockQ6K>(&x)).to_vec(),
    };
    let acts = (0..tokens * cols)
        .map(|_| (next() % 2001) as f32 / 100.0 - 10.0)
        .collect();
    (w, acts)
}

/// `w` packed with the scalar reference kernel, and with this CPU's kernel where it has one.
fn packings_here(w: &WeightMatrix<'_>) -> Vec<(&'static str, PackedMatrix)> {
    let reference = match w.ty() {
        GgmlType::Q4_0 => {
            PackedMatrix::pack_with::<BlockQ4_0x16>(w, BlockQ4_0x16::dot_group, &|_| {})
        }
        GgmlType::Iq4Nl => {
            PackedMatrix::pack_with::<BlockIq4Nlx16>(w, BlockIq4Nlx16::dot_group, &|_| {})
        }
        GgmlType::Q5_0 => PackedMatrix::pack_with::<BlockQ5_0x16>(w, q5_0x16::dot_group, &|_| {}),
        GgmlType::Q8_0 => PackedMatrix::pack_with::<BlockQ8_0x16>(w, q8_0x16::dot_group, &|_| {}),
        GgmlType::Q4K => PackedMatrix::pack_with::<BlockQ4Kx16>(w, q4_kx16::dot_group, &|_| {}),
        GgmlType::Q5K => PackedMatrix::pack_with::<BlockQ5Kx16>(w, q5_kx16::dot_group, &|_| {}),
        GgmlType::Iq4Xs => {
            PackedMatrix::pack_with::<BlockIq4Xsx16>(w, iq4_xsx16::dot_group, &|_| {})
        }
        GgmlType::Q2K => PackedMatrix::pack_with::<BlockQ2Kx16>(w, q2_kx16::dot_group, &|_| {}),
        GgmlType::Q4_1 => {
            PackedMatrix::pack_with::<BlockQ4_1x16>(w, BlockQ4_1x16::dot_group, &|_| {})
        }
        GgmlType::Q5_1 => {
            PackedMatrix::pack_with::<BlockQ5_1x16>(w, BlockQ5_1x16::dot_group, &|_| {})
        }
        GgmlType::Q3K => PackedMatrix::pack_with::<BlockQ3Kx16>(w, q3_kx16::dot_group, &|_| {}),
        GgmlType::MXFP4 => {
            PackedMatrix::pack_with::<BlockMxfp4x16>(w, mxfp4x16::dot_group, &|_| {})
        }
        _ => PackedMatrix::pack_with::<BlockQ6Kx16>(w, q6_kx16::dot_group, &|_| {}),
    };
    let mut packings = vec![("reference", reference)];
    if let Some(simd) = Kernels::detected().pack(w) {
        packings.push(("simd", simd));
    }
    packings
}

#[test]
fn matmul_packed_is_the_same_for_any_batch_and_thread_count() {
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Iq4Nl,
        GgmlType::Q5_0,
        GgmlType::Q8_0,
        GgmlType::MXFP4,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
        GgmlType::Iq4Xs,
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q4_1,
        GgmlType::Q5_1,
    ] {
        check_batch_and_thread_invariance(ty);
    }
}

fn check_batch_and_thread_invariance(ty: GgmlType) {
    let (rows, cols, tokens) = (200, 512, 21);
    let (data, x) = matrix_case(ty, rows, cols, tokens);
    let w = WeightMatrix::new(ty, rows, cols, &data).unwrap();
    for (name, packed) in packings_here(&w) {
        let run = |threads: usize, x: &[f32], n: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut act = ActivationBuffer::for_matmul(n, cols, rows);
            let mut y = vec![0.0; n * rows];
            pool.install(|| matmul_packed(&packed, x, n, &mut act, &mut y))
                .unwrap();
            y
        };
        let batched = run(1, &x, tokens);
        for threads in [2, 3] {
            assert_bits_eq(&run(threads, &x, tokens), &batched, name);
        }
        let one_by_one: Vec<f32> = x.chunks(cols).flat_map(|x| run(2, x, 1)).collect();
        assert_bits_eq(&one_by_one, &batched, name);
        let mut act = ActivationBuffer::for_matmul(tokens, cols, rows);
        let mut row_major = vec![0.0; tokens * rows];
        crate::matmul(
            Kernels::detected(),
            &w,
            &x,
            tokens,
            &mut act,
            &mut row_major,
        )
        .unwrap();
        // Q4_1's and Q5_1's row-major kernels take the activation sums as Q8_1 keeps them, `d·Σa`
        // rounded to f16, which is off by more than the tolerance here; the packed kernels take
        // the exact integer sums, so they are held to the exact product of what they multiply.
        let want = match ty {
            GgmlType::Q4_1 | GgmlType::Q5_1 => exact_product(&w, &x),
            _ => row_major,
        };
        for (p, r) in batched.iter().zip(&want) {
            assert!(
                (p - r).abs() <= 1e-3 * r.abs().max(1.0),
                "{name}: packed {p} vs {r}"
            );
        }
    }
}

/// `W·x` in f64 over the dequantized weights and the activations as Q8_0 quantizes them.
fn exact_product(w: &WeightMatrix<'_>, x: &[f32]) -> Vec<f32> {
    let cols = w.cols();
    let mut weights = vec![0.0f32; w.rows() * cols];
    for (r, out) in weights.chunks_mut(cols).enumerate() {
        crate::dequantize_row(w.ty(), w.row(r), out).unwrap();
    }
    let acts: Vec<f32> = x
        .chunks(cols)
        .flat_map(|x| dequantize(&quantize::<BlockQ8_0>(x)))
        .collect();
    acts.chunks(cols)
        .flat_map(|a| {
            weights.chunks(cols).map(move |row| {
                let dot: f64 = row.iter().zip(a).map(|(&w, &a)| w as f64 * a as f64).sum();
                dot as f32
            })
        })
        .collect()
}

#[test]
fn matmul_packed_checks_lengths_and_scratch() {
    let (data, x) = matrix_case(GgmlType::Q5_0, 32, 64, 2);
    let w = WeightMatrix::new(GgmlType::Q5_0, 32, 64, &data).unwrap();
    let packed = PackedMatrix::pack_with::<BlockQ5_0x16>(&w, q5_0x16::dot_group, &|_| {});
    let mut y = vec![0.0; 64];
    let mut small = ActivationBuffer::for_matvec(64);
    assert!(matches!(
        matmul_packed(&packed, &x, 2, &mut small, &mut y),
        Err(KernelError::ScratchTooSmall { .. })
    ));
    let mut act = ActivationBuffer::for_matmul(2, 64, 32);
    assert!(matches!(
        matmul_packed(&packed, &x[..10], 2, &mut act, &mut y),
        Err(KernelError::LengthMismatch { .. })
    ));
    assert!(matmul_packed(&packed, &x, 2, &mut act, &mut y).is_ok());
}

#[test]
fn stacked_experts_multiply_as_if_each_were_packed_alone() {
    // Three experts of 48 rows stacked, as an expert tensor is: each expert's rows of the
    // stacked matrix give the bits of that expert packed on its own.
    let (experts, rows, cols, tokens) = (3, 48, 512, 5);
    for ty in [GgmlType::Q4K, GgmlType::Q6K, GgmlType::Q8_0] {
        let (data, x) = matrix_case(ty, experts * rows, cols, tokens);
        let stacked = WeightMatrix::new(ty, experts * rows, cols, &data).unwrap();
        let slab = data.len() / experts;
        for (name, packed) in packings_here(&stacked) {
            assert!((0..=experts).all(|e| packed.splits_at(e * rows)));
            for e in 0..experts {
                let alone = WeightMatrix::new(ty, rows, cols, &data[e * slab..(e + 1) * slab]);
                let alone = packings_here(&alone.unwrap())
                    .into_iter()
                    .find(|(n, _)| *n == name)
                    .unwrap()
                    .1;
                for n in [1, tokens] {
                    let x = &x[..n * cols];
                    let mut act = ActivationBuffer::for_matmul(n, cols, experts * rows);
                    let (mut part, mut want) = (vec![0.0; n * rows], vec![0.0; n * rows]);
                    let range = e * rows..(e + 1) * rows;
                    matmul_packed_rows(&packed, range, x, n, &mut act, &mut part).unwrap();
                    matmul_packed(&alone, x, n, &mut act, &mut want).unwrap();
                    assert_bits_eq(&part, &want, name);
                }
            }
        }
    }
}

#[test]
fn a_batch_of_products_gives_each_the_bits_it_gives_alone() {
    // Two stacked matrices of three 48-row experts, products over two inputs in any order.
    let (rows, cols) = (48, 512);
    for ty in [GgmlType::Q4K, GgmlType::Q6K, GgmlType::Q8_0] {
        let (gate, x) = matrix_case(ty, 3 * rows, cols, 2);
        let (up, _) = matrix_case(ty, 3 * rows, cols + 256, 0);
        let up = &up[..gate.len()];
        let gate = WeightMatrix::new(ty, 3 * rows, cols, &gate).unwrap();
        let up = WeightMatrix::new(ty, 3 * rows, cols, up).unwrap();
        for ((name, gate), (_, up)) in packings_here(&gate).into_iter().zip(packings_here(&up)) {
            let expert = |m, e: usize, input| RowsProduct {
                matrix: m,
                rows: e * rows..(e + 1) * rows,
                input,
            };
            let products = [
                expert(&gate, 2, 0),
                expert(&up, 2, 0),
                expert(&gate, 0, 1),
                expert(&up, 1, 1),
            ];
            let mut act = ActivationBuffer::for_matmul(2, cols, 0);
            let mut y = vec![0.0; products.len() * rows];
            matvec_packed_batch(&products, &x, 2, &mut act, &mut y).unwrap();
            for (p, got) in products.iter().zip(y.chunks(rows)) {
                let x = &x[p.input * cols..(p.input + 1) * cols];
                let mut want = vec![0.0; rows];
                matmul_packed_rows(p.matrix, p.rows.clone(), x, 1, &mut act, &mut want).unwrap();
                assert_bits_eq(got, &want, name);
            }
            let mut short = vec![0.0; rows];
            let bad = [RowsProduct {
                rows: 16..24,
                ..expert(&gate, 0, 0)
            }];
            let err = matvec_packed_batch(&bad, &x, 2, &mut act, &mut short[..8]);
            assert!(matches!(err, Err(KernelError::RowRange { .. })));
        }
    }
}

#[test]
fn packed_row_ranges_must_fall_on_row_groups() {
    let (data, x) = matrix_case(GgmlType::Q8_0, 40, 64, 1);
    let w = WeightMatrix::new(GgmlType::Q8_0, 40, 64, &data).unwrap();
    let packed = PackedMatrix::pack_with::<BlockQ8_0x16>(&w, q8_0x16::dot_group, &|_| {});
    let mut act = ActivationBuffer::for_matvec(64);
    for bad in [8..40, 16..24, 32..48] {
        let mut y = vec![0.0; bad.len()];
        assert!(matches!(
            matmul_packed_rows(&packed, bad, &x, 1, &mut act, &mut y),
            Err(KernelError::RowRange { .. })
        ));
    }
    for good in [0..16, 16..40, 32..40] {
        let mut y = vec![0.0; good.len()];
        assert!(matmul_packed_rows(&packed, good, &x, 1, &mut act, &mut y).is_ok());
    }
}

#[test]
fn packing_releases_every_source_byte_once() {
    let (rows, cols) = (1000, 4096);
    let (data, _) = matrix_case(GgmlType::Q8_0, rows, cols, 0);
    let w = WeightMatrix::new(GgmlType::Q8_0, rows, cols, &data).unwrap();
    let released = std::sync::Mutex::new(Vec::new());
    let _ = pack_rows::<BlockQ8_0x16>(&w, q8_0x16::dot_group, &|r: Range<usize>| {
        released.lock().unwrap().push(r)
    });
    let released = released.into_inner().unwrap();
    assert!(released.len() > 1, "one release per slab: {released:?}");
    for pair in released.windows(2) {
        assert_eq!(pair[0].end, pair[1].start);
    }
    assert_eq!(released.first().map(|r| r.start), Some(0));
    assert_eq!(released.last().map(|r| r.end), Some(data.len()));
}

#[test]
fn misaligned_rows_pack_the_same() {
    let (rows, cols) = (40, 512);
    let (data, _) = matrix_case(GgmlType::Q4K, rows, cols, 0);
    let mut shifted = vec![0u8; data.len() + 1];
    shifted[1..].copy_from_slice(&data);
    let aligned = WeightMatrix::new(GgmlType::Q4K, rows, cols, &data).unwrap();
    let misaligned = WeightMatrix::new(GgmlType::Q4K, rows, cols, &shifted[1..]).unwrap();
    let a = pack_rows::<BlockQ4Kx16>(&aligned, q4_kx16::dot_group, &|_| {});
    let b = pack_rows::<BlockQ4Kx16>(&misaligned, q4_kx16::dot_group, &|_| {});
    assert!(a.blocks == b.blocks);
}

/// Where AMX runs, the AMX byte-code kernels match the reference bit for bit, for token counts
/// that fill tiles partly and wholly (and below the tile threshold, where they use VNNI).
#[cfg(target_arch = "x86_64")]
mod amx_kernels {
    use super::*;
    use crate::packed::{
        amx, min_formats_avx512, mxfp4x16_avx512, nibbles_avx512, q5_0x16_avx512, q8_0x16_avx512,
    };

    fn check_amx<P: PackedFormat>(
        case: &CaseOf<P>,
        pack: fn(&[P::Source]) -> P,
        reference: ReferenceFn<P>,
        kernel: GroupDotFn<P>,
    ) {
        if amx::available() {
            check_avx512_kernel::<P>(case, pack, reference, kernel);
        }
    }

    #[test]
    fn amx_availability_is_reported() {
        if !amx::available() {
            eprintln!("AMX-INT8 is not usable here: the AMX kernels are not exercised");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn q5_0_amx_matches_reference_bit_exact(
            case in group_case::<BlockQ5_0x16>(1..6, 1..40, |b, d, _| b.d = d),
        ) {
            check_amx::<BlockQ5_0x16>(
                &case, BlockQ5_0x16::pack, q5_0x16::dot_group, q5_0x16_avx512::dot_group_amx,
            );
        }

        #[test]
        fn q4_0_amx_matches_reference_bit_exact(
            case in group_case::<BlockQ4_0x16>(1..6, 1..40, |b, d, _| b.d = d),
        ) {
            check_amx::<BlockQ4_0x16>(
                &case, BlockQ4_0x16::pack, BlockQ4_0x16::dot_group,
                nibbles_avx512::dot_group_q4_0_amx,
            );
        }

        #[test]
        fn iq4_nl_amx_matches_reference_bit_exact(
            case in group_case::<BlockIq4Nlx16>(1..6, 1..40, |b, d, _| b.d = d),
        ) {
            check_amx::<BlockIq4Nlx16>(
                &case, BlockIq4Nlx16::pack, BlockIq4Nlx16::dot_group,
                nibbles_avx512::dot_group_iq4_nl_amx,
            );
        }

        #[test]
        fn mxfp4_amx_matches_reference_bit_exact(
            case in group_case::<BlockMxfp4x16>(1..6, 1..40, mxfp4_exponent),
        ) {
            check_amx::<BlockMxfp4x16>(
                &case, BlockMxfp4x16::pack, mxfp4x16::dot_group, mxfp4x16_avx512::dot_group_amx,
            );
        }

        #[test]
        fn q4_1_amx_matches_reference_bit_exact(
            case in group_case::<BlockQ4_1x16>(1..6, 1..40, |b, d, m| (b.d, b.m) = (d, m)),
        ) {
            check_amx::<BlockQ4_1x16>(
                &case, BlockQ4_1x16::pack, BlockQ4_1x16::dot_group,
                min_formats_avx512::dot_group_q4_1_amx,
            );
        }

        #[test]
        fn q5_1_amx_matches_reference_bit_exact(
            case in group_case::<BlockQ5_1x16>(1..6, 1..40, |b, d, m| (b.d, b.m) = (d, m)),
        ) {
            check_amx::<BlockQ5_1x16>(
                &case, BlockQ5_1x16::pack, BlockQ5_1x16::dot_group,
                min_formats_avx512::dot_group_q5_1_amx,
            );
        }

        #[test]
        fn q8_0_amx_matches_reference_bit_exact(
            case in group_case::<BlockQ8_0x16>(1..6, 1..40, |b, d, _| b.d = d),
        ) {
            check_amx::<BlockQ8_0x16>(
                &case, BlockQ8_0x16::pack, q8_0x16::dot_group, q8_0x16_avx512::dot_group_amx,
            );
        }
    }
}
