//! The per-type kernel table: for each weight type, its fused dot product, the quantizer of its
//! activation format and its dequantizer, chosen once for the CPU so that drivers never switch
//! on the type or the instruction set.

use std::sync::OnceLock;

use half::{bf16, f16};
use rinfer_formats::GgmlType;

use crate::cpu::{self, Isa};
use crate::error::KernelError;
use crate::quant::{
    self, BlockFormat, VecDot, iq4_nl, iq4_xs, q2_k, q3_k, q4_0, q4_1, q4_k, q5_0, q5_1, q5_k,
    q6_k, q8_0,
};

/// A dot product over raw bytes: one weight row against one quantized activation row.
///
/// `unsafe` because SIMD entries need the instruction set they were selected for; only
/// [`Kernels`] builds tables, after checking it.
type VecDotFn = unsafe fn(&[u8], &[u8]) -> f32;

/// One weight row against several activation rows stored one after the other, one output per
/// activation row; bit-identical to a [`VecDotFn`] call per row.
type VecDotTileFn = unsafe fn(&[u8], &[u8], &mut [f32]);

/// The kernels of one weight type.
#[derive(Clone, Copy)]
pub struct TypeKernels {
    ty: GgmlType,
    act_ty: GgmlType,
    align: usize,
    act_align: usize,
    vec_dot: VecDotFn,
    vec_dot_tile: Option<VecDotTileFn>,
    quantize_activation: quant::QuantizeBytesFn,
    dequantize: quant::DequantizeBytesFn,
}

impl TypeKernels {
    fn of<W: VecDot>() -> Self {
        TypeKernels {
            ty: W::TYPE,
            act_ty: <W::Activation as BlockFormat>::TYPE,
            align: align_of::<W>(),
            act_align: align_of::<W::Activation>(),
            vec_dot: dot_bytes::<W>,
            vec_dot_tile: None,
            quantize_activation: quant::quantize_bytes::<W::Activation>,
            dequantize: quant::dequantize_bytes::<W>,
        }
    }

    /// The weight type.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// The format activations are quantized to for [`TypeKernels::vec_dot`].
    pub fn activation_type(&self) -> GgmlType {
        self.act_ty
    }

    /// The alignment weight data of this type needs (that of its block struct).
    pub fn align(&self) -> usize {
        self.align
    }

    /// The alignment a quantized activation row needs.
    pub fn activation_align(&self) -> usize {
        self.act_align
    }

    /// Bytes of one quantized activation row of `cols` values (`cols` a whole number of blocks).
    pub fn activation_row_bytes(&self, cols: usize) -> usize {
        cols / self.act_ty.block_size() * self.act_ty.type_size()
    }

    /// Dot product of weight row `w` with quantized activation row `a`.
    ///
    /// # Panics
    /// If either slice is misaligned for its block type or their block counts disagree;
    /// the drivers check both once per call.
    #[inline]
    pub fn vec_dot(&self, w: &[u8], a: &[u8]) -> f32 {
        // SAFETY: a `TypeKernels` is only built by `Kernels::with_isa`, which selects SIMD
        // entries only for an instruction set the running CPU was detected to support.
        unsafe { (self.vec_dot)(w, a) }
    }

    /// [`TypeKernels::vec_dot`] of weight row `w` with each of the `out.len()` activation rows
    /// that `a` holds one after the other (at most [`crate::matmul::TOKEN_TILE`]), decoding each
    /// weight block once where the type has a tile kernel. Bit-identical to one `vec_dot` per
    /// row.
    ///
    /// # Panics
    /// As [`TypeKernels::vec_dot`], or if `a` does not split into `out.len()` equal rows.
    #[inline]
    pub fn vec_dot_tile(&self, w: &[u8], a: &[u8], out: &mut [f32]) {
        assert!(out.len() <= crate::matmul::TOKEN_TILE && a.len().is_multiple_of(out.len().max(1)));
        match self.vec_dot_tile {
            // SAFETY: as for `vec_dot`: only selected for an instruction set the CPU supports.
            Some(tile) => unsafe { tile(w, a, out) },
            None => {
                let a_row = a.len() / out.len().max(1);
                for (o, at) in out.iter_mut().zip(a.chunks_exact(a_row.max(1))) {
                    *o = self.vec_dot(w, at);
                }
            }
        }
    }

    /// Quantizes `x` into `out` in the activation format.
    ///
    /// # Panics
    /// If `out` is misaligned or `x` and `out` do not hold the same number of blocks.
    pub fn quantize_activation(&self, x: &[f32], out: &mut [u8]) {
        (self.quantize_activation)(x, out);
    }

    /// Dequantizes a whole number of blocks of `bytes` into `out`.
    pub fn dequantize(&self, bytes: &[u8], out: &mut [f32]) {
        (self.dequantize)(bytes, out);
    }
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

/// Every weight type with a dot product, by GGUF id.
const TABLE_LEN: usize = 42;

/// The kernel table for one instruction set.
pub struct Kernels {
    isa: Isa,
    table: [Option<TypeKernels>; TABLE_LEN],
}

impl Kernels {
    /// The table for the best instruction set this CPU supports, built once per process.
    pub fn detected() -> &'static Kernels {
        static KERNELS: OnceLock<Kernels> = OnceLock::new();
        KERNELS.get_or_init(|| Kernels::with_isa(cpu::detected()))
    }

    /// A table using only the scalar reference kernels (for debugging and comparisons).
    pub fn scalar() -> Kernels {
        Kernels::with_isa(Isa::Scalar)
    }

    /// A table for `requested`, lowered to what the CPU supports.
    pub fn with_isa(requested: Isa) -> Kernels {
        let isa = requested.min(cpu::detected());
        let mut table = [None; TABLE_LEN];
        for k in [
            TypeKernels::of::<f32>(),
            TypeKernels::of::<f16>(),
            TypeKernels::of::<bf16>(),
            TypeKernels::of::<q4_0::BlockQ4_0>(),
            TypeKernels::of::<q4_1::BlockQ4_1>(),
            TypeKernels::of::<q5_0::BlockQ5_0>(),
            TypeKernels::of::<q5_1::BlockQ5_1>(),
            TypeKernels::of::<q8_0::BlockQ8_0>(),
            TypeKernels::of::<q2_k::BlockQ2K>(),
            TypeKernels::of::<q3_k::BlockQ3K>(),
            TypeKernels::of::<q4_k::BlockQ4K>(),
            TypeKernels::of::<q5_k::BlockQ5K>(),
            TypeKernels::of::<q6_k::BlockQ6K>(),
            TypeKernels::of::<iq4_nl::BlockIq4Nl>(),
            TypeKernels::of::<iq4_xs::BlockIq4Xs>(),
        ] {
            let mut k = k;
            if let Some(simd) = simd_vec_dot(isa, k.ty) {
                k.vec_dot = simd;
                k.vec_dot_tile = simd_vec_dot_tile(isa, k.ty);
            }
            table[k.ty.id() as usize] = Some(k);
        }
        Kernels { isa, table }
    }

    /// The instruction set this table was built for.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// The kernels of weight type `ty`.
    ///
    /// # Errors
    /// [`KernelError::Unsupported`] when `ty` has no dot product.
    pub fn get(&self, ty: GgmlType) -> Result<&TypeKernels, KernelError> {
        self.table
            .get(ty.id() as usize)
            .and_then(Option::as_ref)
            .ok_or(KernelError::Unsupported { ty, op: "vec_dot" })
    }
}

#[cfg(target_arch = "x86_64")]
fn simd_vec_dot(isa: Isa, ty: GgmlType) -> Option<VecDotFn> {
    if isa < Isa::Avx2 {
        return None;
    }
    if isa >= Isa::Avx512 {
        // AVX-512 variants exist where they beat AVX2 in `cargo xtask bench kernels`.
        match ty {
            GgmlType::Q5_0 => return Some(avx512::q5_0),
            GgmlType::Q6K => return Some(avx512::q6_k),
            _ => {}
        }
    }
    Some(match ty {
        GgmlType::F32 => avx2::f32,
        GgmlType::F16 => avx2::f16,
        GgmlType::BF16 => avx2::bf16,
        GgmlType::Q4_0 => avx2::q4_0,
        GgmlType::Q4_1 => avx2::q4_1,
        GgmlType::Q5_0 => avx2::q5_0,
        GgmlType::Q5_1 => avx2::q5_1,
        GgmlType::Q8_0 => avx2::q8_0,
        GgmlType::Q2K => avx2::q2_k,
        GgmlType::Q3K => avx2::q3_k,
        GgmlType::Q4K => avx2::q4_k,
        GgmlType::Q5K => avx2::q5_k,
        GgmlType::Q6K => avx2::q6_k,
        GgmlType::Iq4Nl => avx2::iq4_nl,
        GgmlType::Iq4Xs => avx2::iq4_xs,
        _ => return None,
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn simd_vec_dot(_isa: Isa, _ty: GgmlType) -> Option<VecDotFn> {
    None
}

/// Tile kernels for the types whose weight decoding dominates prefill, each the twin of the
/// `simd_vec_dot` entry chosen under the same conditions (`matmul_rows_are_bit_identical_to_matvec`
/// checks the pairing).
#[cfg(target_arch = "x86_64")]
fn simd_vec_dot_tile(isa: Isa, ty: GgmlType) -> Option<VecDotTileFn> {
    match ty {
        GgmlType::Q5_0 if isa >= Isa::Avx512 => Some(avx512::q5_0_tile),
        GgmlType::Q5_0 if isa >= Isa::Avx2 => Some(avx2::q5_0_tile),
        _ => None,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn simd_vec_dot_tile(_isa: Isa, _ty: GgmlType) -> Option<VecDotTileFn> {
    None
}

/// Defines, for each `name: kernel, weight block, activation block;`, an
/// `unsafe fn name(w: &[u8], a: &[u8]) -> f32` that casts the raw rows to blocks and runs the
/// SIMD kernel, which needs the CPU features the first argument names.
#[cfg(target_arch = "x86_64")]
macro_rules! entries {
    ($features:literal; $($name:ident: $kernel:path, $w:ty, $a:ty;)*) => {$(
        #[doc = concat!("# Safety\nThe CPU must support ", $features, ".")]
        pub(super) unsafe fn $name(w: &[u8], a: &[u8]) -> f32 {
            let w: &[$w] = bytemuck::cast_slice(w);
            let a: &[$a] = bytemuck::cast_slice(a);
            assert_eq!(
                w.len() * <$w as BlockFormat>::ELEMS,
                a.len() * <$a as BlockFormat>::ELEMS
            );
            // SAFETY: the caller guarantees the CPU features the kernel is compiled for.
            unsafe { $kernel(w, a) }
        }
    )*};
}

/// Defines, for each `name: kernel, weight block, activation block;`, an
/// `unsafe fn name(w: &[u8], a: &[u8], out: &mut [f32])` for a tile kernel: one weight row against
/// `out.len()` activation rows stored one after the other.
#[cfg(target_arch = "x86_64")]
macro_rules! tile_entries {
    ($features:literal; $($name:ident: $kernel:path, $w:ty, $a:ty;)*) => {$(
        #[doc = concat!("# Safety\nThe CPU must support ", $features, ".")]
        pub(super) unsafe fn $name(w: &[u8], a: &[u8], out: &mut [f32]) {
            let w: &[$w] = bytemuck::cast_slice(w);
            let a: &[$a] = bytemuck::cast_slice(a);
            assert_eq!(
                w.len() * <$w as BlockFormat>::ELEMS * out.len(),
                a.len() * <$a as BlockFormat>::ELEMS
            );
            // SAFETY: the caller guarantees the CPU features the kernel is compiled for.
            unsafe { $kernel(w, a, out) }
        }
    )*};
}

/// Byte-level entry points of the AVX-512 kernels.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use crate::quant::{BlockFormat, q5_0, q6_k, q8_0, q8_k};

    entries! {
        "AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C";
        q5_0: q5_0::avx512::vec_dot, q5_0::BlockQ5_0, q8_0::BlockQ8_0;
        q6_k: q6_k::avx512::vec_dot, q6_k::BlockQ6K, q8_k::BlockQ8K;
    }

    tile_entries! {
        "AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C";
        q5_0_tile: q5_0::avx512::vec_dot_tile, q5_0::BlockQ5_0, q8_0::BlockQ8_0;
    }
}

/// Byte-level entry points of the AVX2 kernels.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use crate::quant::{
        BlockFormat, float, iq4_nl, iq4_xs, q2_k, q3_k, q4_0, q4_1, q4_k, q5_0, q5_1, q5_k, q6_k,
        q8_0, q8_1, q8_k,
    };

    entries! {
        "AVX2, FMA and F16C";
        f32: float::x86::vec_dot_f32, f32, f32;
        f16: float::x86::vec_dot_f16, half::f16, f32;
        bf16: float::x86::vec_dot_bf16, half::bf16, f32;
        q4_0: q4_0::x86::vec_dot, q4_0::BlockQ4_0, q8_0::BlockQ8_0;
        q4_1: q4_1::x86::vec_dot, q4_1::BlockQ4_1, q8_1::BlockQ8_1;
        q5_0: q5_0::x86::vec_dot, q5_0::BlockQ5_0, q8_0::BlockQ8_0;
        q5_1: q5_1::x86::vec_dot, q5_1::BlockQ5_1, q8_1::BlockQ8_1;
        q8_0: q8_0::x86::vec_dot, q8_0::BlockQ8_0, q8_0::BlockQ8_0;
        q2_k: q2_k::x86::vec_dot, q2_k::BlockQ2K, q8_k::BlockQ8K;
        q3_k: q3_k::x86::vec_dot, q3_k::BlockQ3K, q8_k::BlockQ8K;
        q4_k: q4_k::x86::vec_dot, q4_k::BlockQ4K, q8_k::BlockQ8K;
        q5_k: q5_k::x86::vec_dot, q5_k::BlockQ5K, q8_k::BlockQ8K;
        q6_k: q6_k::x86::vec_dot, q6_k::BlockQ6K, q8_k::BlockQ8K;
        iq4_nl: iq4_nl::x86::vec_dot, iq4_nl::BlockIq4Nl, q8_0::BlockQ8_0;
        iq4_xs: iq4_xs::x86::vec_dot, iq4_xs::BlockIq4Xs, q8_k::BlockQ8K;
    }

    tile_entries! {
        "AVX2, FMA and F16C";
        q5_0_tile: q5_0::x86::vec_dot_tile, q5_0::BlockQ5_0, q8_0::BlockQ8_0;
    }
}
