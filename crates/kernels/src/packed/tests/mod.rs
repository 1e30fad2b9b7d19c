use std::fmt::Debug;

use half::f16;
use proptest::prelude::*;
use proptest::test_runner::TestCaseResult;

use super::byte_codes_reference::{self, ByteCodeRows};
use super::grid_quads;
use super::iq1_mx16::BlockIq1Mx16;
use super::iq1_sx16::BlockIq1Sx16;
use super::iq2_grid::{self, GridRows};
use super::iq2_sx16::BlockIq2Sx16;
use super::iq2_xsx16::BlockIq2Xsx16;
use super::iq2_xxsx16::BlockIq2Xxsx16;
use super::iq3_sx16::BlockIq3Sx16;
use super::iq3_xxsx16::BlockIq3Xxsx16;
use super::iq4_xsx16::BlockIq4Xsx16;
use super::min_formats::{BlockQ4_1x16, BlockQ5_1x16};
use super::mxfp4x16::BlockMxfp4x16;
use super::nibbles::{BlockIq4Nlx16, BlockQ4_0x16};
use super::q2_kx16::BlockQ2Kx16;
use super::q3_kx16::BlockQ3Kx16;
use super::q4_kx16::BlockQ4Kx16;
use super::q5_0x16::BlockQ5_0x16;
use super::q5_kx16::BlockQ5Kx16;
use super::q6_kx16::BlockQ6Kx16;
use super::q8_0x16::BlockQ8_0x16;
use super::reference::dot_rows;
use super::rows::pack_rows;
use super::tq1_0x16::BlockTq1_0x16;
use super::tq2_0x16::BlockTq2_0x16;
use super::*;
use crate::dispatch::Kernels;
use crate::quant::VecDot;
use crate::quant::iq1_m::BlockIq1M;
use crate::quant::iq1_s::BlockIq1S;
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
use crate::quant::tq1_0::BlockTq1_0;
use crate::quant::tq2_0::BlockTq2_0;

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
            a.summarize(s);
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

/// Each AVX-512 kernel of `P` that this CPU runs (the VNNI one, and the one for AVX-512 BW
/// without VNNI) matches the reference kernel bit for bit.
#[cfg(target_arch = "x86_64")]
fn check_avx512_kernels<P: Avx512Kernels>(
    case: &CaseOf<P>,
    pack: fn(&[P::Source]) -> P,
    reference: ReferenceFn<P>,
) {
    if has_avx512() {
        check_kernel(case, pack, reference, P::DOT_BW, "AVX-512 BW");
    }
    if crate::cpu::detected() >= crate::Isa::Avx512Vnni {
        check_kernel(case, pack, reference, P::DOT, "AVX-512 VNNI");
    }
}

/// The SIMD kernel `kernel` (named `name`), which this CPU runs, matches the reference kernel
/// bit for bit.
#[cfg(target_arch = "x86_64")]
fn check_kernel<P: PackedFormat>(
    case: &CaseOf<P>,
    pack: fn(&[P::Source]) -> P,
    reference: ReferenceFn<P>,
    kernel: GroupDotFn<P>,
    name: &str,
) {
    let packed = pack_group(case, pack);
    let tokens = case.a.len() / case.nb;
    let mut want = vec![[0.0; ROWS]; tokens];
    reference(&packed, &case.a, &case.s, &mut want);
    let mut got = vec![[0.0; ROWS]; tokens];
    // SAFETY: the callers run only kernels whose instruction sets this CPU has.
    unsafe { kernel(&packed, &case.a, &case.s, &mut got) };
    let what = format!("packed {:?} {name} vs reference", P::Source::TYPE);
    for (g, w) in got.iter().zip(&want) {
        assert_bits_eq(g, w, &what);
    }
}

/// On AArch64, each SIMD level's row-major dot product of the source type (NEON, dot product,
/// int8 matrix multiply) gives each row and token the packed reference's bits: the NEON kernels
/// follow the float steps of the x86 packed kernels. Types without an AArch64 kernel, or whose
/// row-major kernel multiplies another activation format (Q4_1 and Q5_1: Q8_1), are skipped.
#[cfg(target_arch = "aarch64")]
fn check_neon_kernels<P: PackedFormat>(
    case: &CaseOf<P>,
    pack: fn(&[P::Source]) -> P,
    reference: ReferenceFn<P>,
) {
    let ty = P::Source::TYPE;
    let weight = crate::registry::traits(ty).and_then(|t| t.weight);
    let Some(weight) = weight.filter(|w| w.activation == P::Act::TYPE) else {
        return;
    };
    let (nb, packed) = (case.nb, pack_group(case, pack));
    let tokens = case.a.len() / nb;
    let mut want = vec![[0.0; ROWS]; tokens];
    reference(&packed, &case.a, &case.s, &mut want);
    for &isa in &crate::Isa::ALL[1..] {
        if weight.simd_for(isa).is_none() || isa > crate::cpu::detected() {
            continue;
        }
        let kernels = Kernels::with_isa(isa);
        let k = kernels.get(ty).expect("a weight type");
        for (i, row) in case.w.chunks(nb).enumerate() {
            for (t, want) in want.iter().enumerate() {
                let at = &case.a[t * nb..(t + 1) * nb];
                let got = k.vec_dot(bytemuck::cast_slice(row), bytemuck::cast_slice(at));
                assert_bits_eq(&[got], &[want[i]], &format!("{ty} on {isa:?}: row {i}"));
            }
        }
    }
}

/// A deterministic xorshift sequence of `u64`s from `seed` (not zero).
pub(super) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
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
/// kernels (on AArch64, the source type's NEON kernels: [`check_neon_kernels`]) match the
/// reference bit for bit ([`check_avx512_kernels`]). It also writes [`reference_packing`].
macro_rules! packed_format_tests {
    ($(
        $format:ident: $packed:ty, $config:expr, blocks $blocks_per_row:expr, tokens $tokens:expr,
        scales $scales:expr, kept $row_kept:expr, magnitude $magnitude:expr,
        reference $reference:path;
    )*) => {
        $(
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
                        check_avx512_kernels::<$packed>(&case, <$packed>::pack, $reference);
                    }

                    #[cfg(target_arch = "aarch64")]
                    #[test]
                    fn neon_matches_reference_bit_exact(case in cases()) {
                        check_neon_kernels::<$packed>(&case, <$packed>::pack, $reference);
                    }
                }
            }
        )*

        /// `w` packed with the reference kernel of its type's packed format, one of those the
        /// table lists.
        fn reference_packing(w: &WeightMatrix<'_>) -> PackedMatrix {
            $(
                if w.ty() == <<$packed as PackedFormat>::Source as BlockFormat>::TYPE {
                    return PackedMatrix::pack_with::<$packed>(w, $reference, &|_| {});
                }
            )*
            panic!("no packed format of {:?}", w.ty())
        }
    };
}

/// Super-blocks are eight times the size of 32-value blocks: fewer cases of fewer blocks.
fn super_block_config() -> ProptestConfig {
    ProptestConfig::with_cases(64)
}

packed_format_tests! {
    q4_0: BlockQ4_0x16, ProptestConfig::default(), blocks 1..6, tokens 1..12,
        scales |b, d, _| b.d = d, kept q4_0_row_kept, magnitude dequantized_magnitude,
        reference byte_codes_reference::dot_group::<BlockQ4_0x16>;
    iq4_nl: BlockIq4Nlx16, ProptestConfig::default(), blocks 1..6, tokens 1..12,
        scales |b, d, _| b.d = d, kept iq4_nl_row_kept, magnitude dequantized_magnitude,
        reference byte_codes_reference::dot_group::<BlockIq4Nlx16>;
    q5_0: BlockQ5_0x16, ProptestConfig::default(), blocks 1..6, tokens 1..12,
        scales |b, d, _| b.d = d, kept q5_0_row_kept, magnitude dequantized_magnitude,
        reference byte_codes_reference::dot_group::<BlockQ5_0x16>;
    q8_0: BlockQ8_0x16, ProptestConfig::default(), blocks 1..6, tokens 1..12,
        scales |b, d, _| b.d = d, kept q8_0_row_kept, magnitude dequantized_magnitude,
        reference byte_codes_reference::dot_group::<BlockQ8_0x16>;
    mxfp4: BlockMxfp4x16, ProptestConfig::default(), blocks 1..6, tokens 1..12,
        scales mxfp4_exponent, kept mxfp4_row_kept, magnitude dequantized_magnitude,
        reference byte_codes_reference::dot_group::<BlockMxfp4x16>;
    q4_k: BlockQ4Kx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, m| (b.d, b.dmin) = (d, m), kept q4_k_row_kept, magnitude |r, a| k_magnitude(r, a, |b| b.dmin),
        reference dot_rows::<BlockQ4Kx16>;
    q5_k: BlockQ5Kx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, m| (b.d, b.dmin) = (d, m), kept q5_k_row_kept, magnitude |r, a| k_magnitude(r, a, |b| b.dmin),
        reference dot_rows::<BlockQ5Kx16>;
    q6_k: BlockQ6Kx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, _| b.d = d, kept q6_k_row_kept, magnitude dequantized_magnitude,
        reference dot_rows::<BlockQ6Kx16>;
    iq4_xs: BlockIq4Xsx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, _| b.d = d, kept iq4_xs_row_kept, magnitude dequantized_magnitude,
        reference dot_rows::<BlockIq4Xsx16>;
    q2_k: BlockQ2Kx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, m| (b.d, b.dmin) = (d, m), kept q2_k_row_kept, magnitude q2_k_magnitude,
        reference dot_rows::<BlockQ2Kx16>;
    q3_k: BlockQ3Kx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, _| b.d = d, kept q3_k_row_kept, magnitude dequantized_magnitude,
        reference dot_rows::<BlockQ3Kx16>;
    tq2_0: BlockTq2_0x16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, _| b.d = d, kept tq2_0_row_kept, magnitude dequantized_magnitude,
        reference dot_rows::<BlockTq2_0x16>;
    tq1_0: BlockTq1_0x16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, _| b.d = d, kept tq1_0_row_kept, magnitude dequantized_magnitude,
        reference dot_rows::<BlockTq1_0x16>;
    q4_1: BlockQ4_1x16, ProptestConfig::default(), blocks 1..6, tokens 1..12,
        scales |b, d, m| (b.d, b.m) = (d, m), kept q4_1_row_kept, magnitude |r, a| min_magnitude(r, a, |b| b.m),
        reference byte_codes_reference::dot_group::<BlockQ4_1x16>;
    q5_1: BlockQ5_1x16, ProptestConfig::default(), blocks 1..6, tokens 1..12,
        scales |b, d, m| (b.d, b.m) = (d, m), kept q5_1_row_kept, magnitude |r, a| min_magnitude(r, a, |b| b.m),
        reference byte_codes_reference::dot_group::<BlockQ5_1x16>;
    iq1_s: BlockIq1Sx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, _| b.d = d, kept iq1_s_row_kept, magnitude dequantized_magnitude,
        reference dot_rows::<BlockIq1Sx16>;
    iq1_m: BlockIq1Mx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, _| b.set_d(d), kept iq1_m_row_kept, magnitude dequantized_magnitude,
        reference dot_rows::<BlockIq1Mx16>;
    iq3_xxs: BlockIq3Xxsx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, _| b.d = d, kept grid_quads_row_kept, magnitude dequantized_magnitude,
        reference grid_quads::dot_group::<BlockIq3Xxsx16>;
    iq3_s: BlockIq3Sx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, _| b.d = d, kept grid_quads_row_kept, magnitude dequantized_magnitude,
        reference grid_quads::dot_group::<BlockIq3Sx16>;
    iq2_xxs: BlockIq2Xxsx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, _| b.d = d, kept grid_row_kept::<BlockIq2Xxsx16>, magnitude dequantized_magnitude,
        reference iq2_grid::dot_group::<BlockIq2Xxsx16>;
    iq2_xs: BlockIq2Xsx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, _| b.d = d, kept grid_row_kept::<BlockIq2Xsx16>, magnitude dequantized_magnitude,
        reference iq2_grid::dot_group::<BlockIq2Xsx16>;
    iq2_s: BlockIq2Sx16, super_block_config(), blocks 1..3, tokens 1..7,
        scales |b, d, _| b.d = d, kept grid_row_kept::<BlockIq2Sx16>, magnitude dequantized_magnitude,
        reference iq2_grid::dot_group::<BlockIq2Sx16>;
}

mod matmul;
mod rows_kept;

use rows_kept::*;
