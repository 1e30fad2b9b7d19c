//! The registry: every tensor type this crate implements, with everything it has for it, in one
//! table indexed by type id (ggml's type traits). A row gives the type's dequantizer and
//! quantizer and, for weight types, the activation format, the scalar reference dot product,
//! the SIMD dot product (and its tile twin) and the packed layout, each SIMD entry with the
//! instruction set it needs.
//!
//! Every other per-type list derives from this table: the kernel table of an instruction set
//! ([`crate::Kernels`]), what gets packed, [`crate::dequantize_row`] and [`crate::quantize_row`].
//! Supporting a new type, or a new kernel of a type, is one row or one entry here.

use half::{bf16, f16};
use rinfer_formats::GgmlType;

use crate::cpu::Isa;
#[cfg(target_arch = "x86_64")]
use crate::packed;
use crate::packed::PackFn;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
use crate::quant::float;
use crate::quant::{
    BlockFormat, DequantizeBytesFn, Quantize, QuantizeBytesFn, QuantizeBytesSimdFn, VecDot,
    dequantize_bytes, iq1_m, iq1_s, iq2_s, iq2_xs, iq2_xxs, iq3_s, iq3_xxs, iq4_nl, iq4_xs, mxfp4,
    q2_k, q3_k, q4_0, q4_1, q4_k, q5_0, q5_1, q5_k, q6_k, q8_0, q8_1, q8_k, quantize_bytes,
    quantize_bytes_avx512, tq1_0, tq2_0,
};

/// A dot product over raw bytes: one weight row against one quantized activation row.
///
/// `unsafe` because SIMD entries need the instruction set the registry lists beside them.
pub(crate) type VecDotFn = unsafe fn(&[u8], &[u8]) -> f32;

/// One weight row against several activation rows stored one after the other, one output per
/// activation row; bit-identical to a [`VecDotFn`] call per row.
pub(crate) type VecDotTileFn = unsafe fn(&[u8], &[u8], &mut [f32]);

/// Two weight rows stored one after the other against several activation rows, `out[r·n + t]`
/// for row `r` and activation row `t` (`n = out.len() / 2`); bit-identical to a [`VecDotFn`]
/// call per pair.
pub(crate) type VecDotPairFn = unsafe fn(&[u8], &[u8], &mut [f32]);

/// Everything this crate implements for one tensor type.
#[derive(Clone, Copy)]
pub(crate) struct TypeTraits {
    /// The type.
    pub(crate) ty: GgmlType,
    /// The alignment of its block struct (what weight data of the type must start at).
    pub(crate) align: usize,
    /// Its scalar row dequantizer (any alignment).
    pub(crate) dequantize: DequantizeBytesFn,
    /// Its scalar row quantizer (ggml's reference), where it has one.
    pub(crate) quantize: Option<QuantizeBytesFn>,
    /// Its AVX-512 row quantizer (bit-identical to `quantize`), where it has one.
    quantize_avx512: Option<QuantizeBytesSimdFn>,
    /// Its products, where it is a weight type.
    pub(crate) weight: Option<WeightTraits>,
}

/// The products of one weight type.
#[derive(Clone, Copy)]
pub(crate) struct WeightTraits {
    /// The format activations are quantized to before the dot product (ggml's `vec_dot_type`);
    /// its own row of the registry gives its quantizers.
    pub(crate) activation: GgmlType,
    /// The scalar reference dot product (safe to call on any CPU).
    pub(crate) reference: VecDotFn,
    /// The row-major SIMD dot products of this architecture, lowest instruction set first
    /// (empty slots last).
    pub(crate) simd: [Option<SimdDot>; SIMD_LEVELS],
    /// The packed layout and its kernel, where one exists.
    pub(crate) packed: Option<PackedLayout>,
}

impl SimdDot {
    /// With the two-row kernel `pairs`.
    #[cfg(target_arch = "aarch64")]
    const fn with_pairs(self, pairs: VecDotPairFn) -> Self {
        SimdDot {
            pairs: Some(pairs),
            ..self
        }
    }
}

/// The most row-major SIMD dot products one type has on one architecture.
const SIMD_LEVELS: usize = 3;

impl WeightTraits {
    /// The fastest row-major SIMD dot product that `isa` runs, where the type has one.
    pub(crate) fn simd_for(&self, isa: Isa) -> Option<SimdDot> {
        self.simd
            .iter()
            .rev()
            .flatten()
            .find(|simd| simd.isa <= isa)
            .copied()
    }
}

/// A SIMD dot product of one weight type and the instruction set it needs.
#[derive(Clone, Copy)]
pub(crate) struct SimdDot {
    /// The least instruction set that runs it.
    pub(crate) isa: Isa,
    /// The dot product.
    pub(crate) dot: VecDotFn,
    /// Its tile twin, bit-identical to one `dot` per activation row, where one exists.
    pub(crate) tile: Option<VecDotTileFn>,
    /// Its two-row twin, bit-identical to one `dot` per row and activation row, where one
    /// exists.
    pub(crate) pairs: Option<VecDotPairFn>,
}

/// A packed layout of one weight type and the instruction set its kernel needs.
#[derive(Clone, Copy)]
pub(crate) struct PackedLayout {
    /// The least instruction set that runs its kernel.
    pub(crate) isa: Isa,
    /// Packs a matrix of the type into the layout.
    pub(crate) pack: PackFn,
}

impl TypeTraits {
    /// A format that is only decoded here.
    const fn format<B: BlockFormat>() -> Self {
        TypeTraits {
            ty: B::TYPE,
            align: align_of::<B>(),
            dequantize: dequantize_bytes::<B>,
            quantize: None,
            quantize_avx512: None,
            weight: None,
        }
    }

    /// An activation format: quantized to and decoded, never a weight here.
    const fn activation<A: Quantize>() -> Self {
        TypeTraits {
            quantize: Some(quantize_bytes::<A>),
            quantize_avx512: match A::ROW_AVX512 {
                Some(_) => Some(quantize_bytes_avx512::<A>),
                None => None,
            },
            ..Self::format::<A>()
        }
    }

    /// A weight type without a quantizer here (it is only read from files).
    const fn weight<W: VecDot>() -> Self {
        TypeTraits {
            weight: Some(WeightTraits {
                activation: <W::Activation as BlockFormat>::TYPE,
                reference: dot_bytes::<W>,
                simd: [None; SIMD_LEVELS],
                packed: None,
            }),
            ..Self::format::<W>()
        }
    }

    /// A weight type with a quantizer.
    const fn quantized_weight<W: VecDot + Quantize>() -> Self {
        let quantizers = Self::activation::<W>();
        TypeTraits {
            quantize: quantizers.quantize,
            quantize_avx512: quantizers.quantize_avx512,
            ..Self::weight::<W>()
        }
    }

    /// The fastest row quantizer of this type that `isa` runs, where the type has a quantizer.
    pub(crate) fn quantizer(&self, isa: Isa) -> Option<QuantizeBytesSimdFn> {
        #[cfg(not(target_arch = "x86_64"))]
        let _ = isa;
        match self.quantize_avx512 {
            #[cfg(target_arch = "x86_64")]
            Some(simd) if isa >= Isa::Avx512 => Some(simd),
            _ => self.quantize.map(|q| q as QuantizeBytesSimdFn),
        }
    }

    /// With the SIMD dot product `simd` as well (`None`: none on this architecture), for an
    /// instruction set above those of the ones it already has.
    const fn simd(mut self, simd: Option<SimdDot>) -> Self {
        if let (Some(weight), Some(new)) = (&mut self.weight, simd) {
            let mut i = 0;
            while weight.simd[i].is_some() {
                i += 1;
            }
            if i > 0 {
                let below = weight.simd[i - 1].expect("filled slot");
                assert!(
                    (below.isa as u8) < (new.isa as u8),
                    "SIMD dot products listed lowest first"
                );
            }
            weight.simd[i] = Some(new);
        }
        self
    }

    /// With each of the SIMD dot products `simds` in turn, as [`TypeTraits::simd`].
    const fn simds<const N: usize>(mut self, simds: [Option<SimdDot>; N]) -> Self {
        let mut i = 0;
        while i < N {
            self = self.simd(simds[i]);
            i += 1;
        }
        self
    }

    /// With the packed layout `packed` (`None`: none on this architecture).
    const fn packed(mut self, packed: Option<PackedLayout>) -> Self {
        if let Some(weight) = &mut self.weight {
            weight.packed = packed;
        }
        self
    }
}

/// `Some(entry)` on the architecture `$arch` (a `target_arch` value); `None` elsewhere, where
/// the kernels it names do not exist.
macro_rules! only_on {
    ($arch:literal, $entry:expr) => {{
        #[cfg(target_arch = $arch)]
        let gated = Some($entry);
        #[cfg(not(target_arch = $arch))]
        let gated = None;
        gated
    }};
}

/// The row-major [`SimdDot`] of a kernel `$dot` that needs the instruction set `$isa`, on the
/// architecture `$arch` (`"x86_64"` or `"aarch64"`): a byte-level entry that casts
/// the rows to the kernel's blocks.
macro_rules! simd_dot {
    ($arch:literal, $isa:ident, $dot:path) => {
        only_on!(
            $arch,
            SimdDot {
                isa: Isa::$isa,
                dot: {
                    /// # Safety
                    /// The CPU must support the instruction set listed beside the entry.
                    unsafe fn entry(w: &[u8], a: &[u8]) -> f32 {
                        // SAFETY: the caller guarantees the features the kernel is compiled for.
                        unsafe { dot_with($dot, w, a) }
                    }
                    entry
                },
                tile: None,
                pairs: None,
            }
        )
    };
}

/// The [`SimdDot`] of an AVX2 kernel (one that needs AVX2, FMA and F16C and nothing more) and,
/// after `tile:`, its tile twin: byte-level entries that cast the rows to the kernels' blocks.
macro_rules! avx2 {
    ($dot:path) => {
        simd_dot!("x86_64", Avx2, $dot)
    };
    ($dot:path, tile: $tile:path) => {
        only_on!(
            "x86_64",
            SimdDot {
                tile: Some({
                    /// # Safety
                    /// The CPU must support AVX2, FMA and F16C.
                    unsafe fn entry(w: &[u8], a: &[u8], out: &mut [f32]) {
                        // SAFETY: the caller guarantees the features the kernel is compiled for.
                        unsafe { rows_with::<_, _, 1>($tile, w, a, out) }
                    }
                    entry
                }),
                ..simd_dot!("x86_64", Avx2, $dot).expect("an x86-64 entry")
            }
        )
    };
}

/// The [`SimdDot`] of an AArch64 kernel that needs the instruction set `$isa` (`Neon`,
/// `Dotprod` or `I8mm`).
macro_rules! arm {
    ($isa:ident, $dot:path) => {
        simd_dot!("aarch64", $isa, $dot)
    };
}

/// The plain NEON [`SimdDot`] of a type's `aarch64` module (`vec_dot_neon`).
macro_rules! neon {
    ($ty:ident) => {
        arm!(Neon, $ty::aarch64::vec_dot_neon)
    };
}

/// The dot-product-extension [`SimdDot`] of a type's `aarch64` module (`vec_dot_dotprod`).
macro_rules! dotprod {
    ($ty:ident) => {
        arm!(Dotprod, $ty::aarch64::vec_dot_dotprod)
    };
}

/// The int8 matrix-multiply [`SimdDot`] of a type's `aarch64` module: its dot-product kernel
/// (`vec_dot_dotprod`) for single rows and `vec_dot_pairs_i8mm` for rows in pairs.
macro_rules! i8mm {
    ($ty:ident) => {
        only_on!(
            "aarch64",
            SimdDot {
                isa: Isa::I8mm,
                ..arm!(Dotprod, $ty::aarch64::vec_dot_dotprod).expect("an AArch64 entry")
            }
            .with_pairs({
                /// # Safety
                /// The CPU must support the int8 matrix-multiply extension.
                unsafe fn entry(w: &[u8], a: &[u8], out: &mut [f32]) {
                    // SAFETY: the caller guarantees the features the kernel is compiled for.
                    unsafe { rows_with::<_, _, 2>($ty::aarch64::vec_dot_pairs_i8mm, w, a, out) }
                }
                entry
            })
        )
    };
}

/// The SIMD dot products most weight types have, lowest instruction set first: the AVX2
/// kernel of the type's `x86` module (`vec_dot`) and the NEON and dot-product-extension kernels
/// of its `aarch64` module.
macro_rules! common_simd {
    ($ty:ident) => {
        [avx2!($ty::x86::vec_dot), neon!($ty), dotprod!($ty)]
    };
}

/// The SIMD dot products of a float type: the AVX2 kernel `$dot` and its tile twin `$tile` of
/// [`float`]'s `x86` module, and the NEON kernel `$dot` of its `aarch64` module.
macro_rules! float_simd {
    ($dot:ident, $tile:ident) => {
        [
            avx2!(float::x86::$dot, tile: float::x86::$tile),
            arm!(Neon, float::aarch64::$dot),
        ]
    };
}

/// The [`PackedLayout`] of a layout of [`packed`] whose kernels need AVX-512 F, BW and VL (with
/// AVX2, FMA and F16C; VNNI where the CPU has it), named by its module and block type.
macro_rules! avx512_packed {
    ($module:ident :: $layout:ident) => {
        only_on!(
            "x86_64",
            PackedLayout {
                isa: Isa::Avx512,
                pack: packed::pack_avx512::<packed::$module::$layout>,
            }
        )
    };
}

/// A weight type with the [`common_simd!`] kernels of its module (and, `with i8mm`, the
/// [`i8mm!`] one) and the AVX-512 packed layout `packed` ([`avx512_packed!`]), built by the
/// [`TypeTraits`] constructor `$kind` (`quantized_weight` where the type has a reference
/// quantizer, `weight` where it has not).
macro_rules! common_weight {
    ($kind:ident $ty:ident :: $block:ident, packed $module:ident :: $layout:ident) => {
        TypeTraits::$kind::<$ty::$block>()
            .simds(common_simd!($ty))
            .packed(avx512_packed!($module::$layout))
    };
    ($kind:ident $ty:ident :: $block:ident, packed $module:ident :: $layout:ident, with i8mm) => {
        common_weight!($kind $ty::$block, packed $module::$layout).simd(i8mm!($ty))
    };
}

/// Every type this crate implements, by GGUF id.
static REGISTRY: [Option<TypeTraits>; TABLE_LEN] = by_id([
    TypeTraits::quantized_weight::<f32>().simds(float_simd!(vec_dot_f32, vec_dot_tile_f32)),
    TypeTraits::quantized_weight::<f16>().simds(float_simd!(vec_dot_f16, vec_dot_tile_f16)),
    TypeTraits::quantized_weight::<bf16>().simds(float_simd!(vec_dot_bf16, vec_dot_tile_bf16)),
    common_weight!(quantized_weight q4_0::BlockQ4_0, packed nibbles::BlockQ4_0x16, with i8mm),
    common_weight!(quantized_weight q4_1::BlockQ4_1, packed min_formats::BlockQ4_1x16),
    TypeTraits::quantized_weight::<q5_0::BlockQ5_0>()
        .simd(avx2!(q5_0::x86::vec_dot, tile: q5_0::x86::vec_dot_tile))
        .simd(neon!(q5_0))
        .simd(dotprod!(q5_0))
        .simd(i8mm!(q5_0))
        .packed(avx512_packed!(q5_0x16::BlockQ5_0x16)),
    common_weight!(quantized_weight q5_1::BlockQ5_1, packed min_formats::BlockQ5_1x16),
    common_weight!(quantized_weight q8_0::BlockQ8_0, packed q8_0x16::BlockQ8_0x16, with i8mm),
    TypeTraits::activation::<q8_1::BlockQ8_1>(),
    common_weight!(quantized_weight q2_k::BlockQ2K, packed q2_kx16::BlockQ2Kx16),
    common_weight!(quantized_weight q3_k::BlockQ3K, packed q3_kx16::BlockQ3Kx16),
    common_weight!(quantized_weight q4_k::BlockQ4K, packed q4_kx16::BlockQ4Kx16),
    common_weight!(quantized_weight q5_k::BlockQ5K, packed q5_kx16::BlockQ5Kx16),
    common_weight!(quantized_weight q6_k::BlockQ6K, packed q6_kx16::BlockQ6Kx16),
    TypeTraits::activation::<q8_k::BlockQ8K>(),
    common_weight!(weight iq2_xxs::BlockIq2Xxs, packed iq2_xxsx16::BlockIq2Xxsx16),
    common_weight!(weight iq2_xs::BlockIq2Xs, packed iq2_xsx16::BlockIq2Xsx16),
    common_weight!(weight iq3_xxs::BlockIq3Xxs, packed iq3_xxsx16::BlockIq3Xxsx16),
    common_weight!(weight iq1_s::BlockIq1S, packed iq1_sx16::BlockIq1Sx16),
    common_weight!(quantized_weight iq4_nl::BlockIq4Nl, packed nibbles::BlockIq4Nlx16, with i8mm),
    common_weight!(weight iq3_s::BlockIq3S, packed iq3_sx16::BlockIq3Sx16),
    common_weight!(weight iq2_s::BlockIq2S, packed iq2_sx16::BlockIq2Sx16),
    common_weight!(quantized_weight iq4_xs::BlockIq4Xs, packed iq4_xsx16::BlockIq4Xsx16),
    common_weight!(weight iq1_m::BlockIq1M, packed iq1_mx16::BlockIq1Mx16),
    common_weight!(weight tq1_0::BlockTq1_0, packed tq1_0x16::BlockTq1_0x16),
    common_weight!(weight tq2_0::BlockTq2_0, packed tq2_0x16::BlockTq2_0x16),
    common_weight!(quantized_weight mxfp4::BlockMxfp4, packed mxfp4x16::BlockMxfp4x16, with i8mm),
]);

/// Slots of a table indexed by type id: one past the largest id.
pub(crate) const TABLE_LEN: usize = GgmlType::ALL[GgmlType::ALL.len() - 1] as usize + 1;

/// Places each row at its type's id (and refuses to build when a type is listed twice).
const fn by_id<const N: usize>(rows: [TypeTraits; N]) -> [Option<TypeTraits>; TABLE_LEN] {
    let mut table = [None; TABLE_LEN];
    let mut i = 0;
    while i < N {
        let id = rows[i].ty as usize;
        assert!(
            table[id].is_none(),
            "a type is listed twice in the registry"
        );
        table[id] = Some(rows[i]);
        i += 1;
    }
    table
}

/// What the registry has for `ty`.
pub(crate) fn traits(ty: GgmlType) -> Option<&'static TypeTraits> {
    REGISTRY[ty.id() as usize].as_ref()
}

/// Every type in the registry, by id.
pub(crate) fn all() -> impl Iterator<Item = &'static TypeTraits> {
    REGISTRY.iter().flatten()
}

/// Casts raw rows to blocks and runs the scalar reference dot product.
fn dot_bytes<W: VecDot>(w: &[u8], a: &[u8]) -> f32 {
    let w: &[W] = bytemuck::cast_slice(w);
    let a: &[W::Activation] = bytemuck::cast_slice(a);
    assert_eq!(
        w.len() * W::ELEMS,
        a.len() * <W::Activation as BlockFormat>::ELEMS
    );
    W::vec_dot(w, a)
}

/// Casts raw rows to the blocks of a kernel that takes `w_rows` weight rows one after the other
/// and `a_rows` activation rows each as long as one of them, checking that the lengths agree.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn kernel_blocks<'r, W: BlockFormat, A: BlockFormat>(
    w: &'r [u8],
    a: &'r [u8],
    w_rows: usize,
    a_rows: usize,
) -> (&'r [W], &'r [A]) {
    let w: &[W] = bytemuck::cast_slice(w);
    let a: &[A] = bytemuck::cast_slice(a);
    assert!(w.len().is_multiple_of(w_rows));
    assert_eq!(w.len() / w_rows * W::ELEMS * a_rows, a.len() * A::ELEMS);
    (w, a)
}

/// Casts raw rows to the blocks of `kernel`, checks that both hold as many values, and runs it.
///
/// # Safety
/// The CPU must support the features `kernel` is compiled for.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
unsafe fn dot_with<W: BlockFormat, A: BlockFormat>(
    kernel: unsafe fn(&[W], &[A]) -> f32,
    w: &[u8],
    a: &[u8],
) -> f32 {
    let (w, a) = kernel_blocks(w, a, 1, 1);
    // SAFETY: the caller guarantees the CPU features.
    unsafe { kernel(w, a) }
}

/// As [`dot_with`] for a kernel of `W_ROWS` weight rows against several activation rows, one
/// output per pair of them: `w` holds the `W_ROWS` rows (1 for a tile kernel, 2 for a two-row
/// one), `a` holds `out.len() / W_ROWS` rows as long as one of them.
///
/// # Safety
/// The CPU must support the features `kernel` is compiled for.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
unsafe fn rows_with<W: BlockFormat, A: BlockFormat, const W_ROWS: usize>(
    kernel: unsafe fn(&[W], &[A], &mut [f32]),
    w: &[u8],
    a: &[u8],
    out: &mut [f32],
) {
    assert!(out.len().is_multiple_of(W_ROWS));
    let (w, a) = kernel_blocks(w, a, W_ROWS, out.len() / W_ROWS);
    // SAFETY: the caller guarantees the CPU features.
    unsafe { kernel(w, a, out) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_sits_at_its_types_id() {
        for (id, row) in REGISTRY.iter().enumerate() {
            if let Some(row) = row {
                assert_eq!(row.ty.id() as usize, id);
            }
        }
    }

    #[test]
    fn every_activation_format_is_in_the_registry_and_quantizable() {
        for row in all() {
            if let Some(weight) = &row.weight {
                let act = traits(weight.activation).expect("activation format listed");
                assert!(act.quantize.is_some(), "{} activations", row.ty);
            }
        }
    }

    #[test]
    fn row_major_simd_kernels_of_packed_types_serve_only_cpus_that_do_not_pack() {
        // A CPU that runs the packed kernel multiplies packed weights only (the model packs
        // every matrix it multiplies): a row-major kernel at or above the packed kernel's
        // instruction set would be reached by no CPU.
        for row in all() {
            if let Some(WeightTraits {
                packed: Some(packed),
                simd,
                ..
            }) = &row.weight
            {
                assert!(simd[0].is_some(), "{}: row-major SIMD kernel", row.ty);
                for simd in simd.iter().flatten() {
                    assert!(simd.isa < packed.isa, "{}", row.ty);
                }
            }
        }
    }
}
