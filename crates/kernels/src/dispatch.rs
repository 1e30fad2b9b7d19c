//! The kernel table of one instruction set, built from the registry once: for each weight type
//! the dot product, tile kernel, activation quantizer and packer that this CPU runs, and the
//! vector kernels (attention's inner loops, gated activations, f16 conversion) of the same
//! instruction set, so that the drivers never switch on the type or the instruction set.

use std::ops::Range;
use std::sync::OnceLock;

use rinfer_formats::GgmlType;

use crate::cpu::{self, Isa};
use crate::error::KernelError;
use crate::operands::{TOKEN_TILE, WeightMatrix};
use crate::ops::VectorKernels;
use crate::packed::{PackFn, PackedMatrix};
use crate::quant::QuantizeBytesSimdFn;
use crate::registry::{self, TABLE_LEN, TypeTraits, VecDotFn, VecDotPairFn, VecDotTileFn};

/// The kernels of one weight type, chosen for one instruction set.
#[derive(Clone, Copy)]
pub(crate) struct TypeKernels {
    act_ty: GgmlType,
    align: usize,
    vec_dot: VecDotFn,
    vec_dot_tile: Option<VecDotTileFn>,
    vec_dot_pairs: Option<VecDotPairFn>,
    quantize_activation: QuantizeBytesSimdFn,
    pack: Option<PackFn>,
}

impl TypeKernels {
    /// The kernels of weight type `t` for `isa`, or `None` if it is no weight type.
    fn select(t: &TypeTraits, isa: Isa) -> Option<Self> {
        let weight = t.weight?;
        let simd = weight.simd_for(isa);
        Some(TypeKernels {
            act_ty: weight.activation,
            align: t.align,
            vec_dot: simd.map_or(weight.reference, |simd| simd.dot),
            vec_dot_tile: simd.and_then(|simd| simd.tile),
            vec_dot_pairs: simd.and_then(|simd| simd.pairs),
            quantize_activation: registry::traits(weight.activation)?.quantizer(isa)?,
            pack: weight
                .packed
                .filter(|packed| packed.isa <= isa)
                .map(|packed| packed.pack),
        })
    }

    /// The format activations are quantized to for [`TypeKernels::vec_dot`].
    pub(crate) fn activation_type(&self) -> GgmlType {
        self.act_ty
    }

    /// The alignment weight data of this type needs (that of its block struct).
    pub(crate) fn align(&self) -> usize {
        self.align
    }

    /// Bytes of one quantized activation row of `cols` values (`cols` a whole number of blocks).
    pub(crate) fn activation_row_bytes(&self, cols: usize) -> usize {
        cols / self.act_ty.block_size() * self.act_ty.type_size()
    }

    /// Dot product of weight row `w` with quantized activation row `a`.
    ///
    /// # Panics
    /// If either slice is misaligned for its block type or their block counts disagree;
    /// the drivers check both once per call.
    #[inline]
    pub(crate) fn vec_dot(&self, w: &[u8], a: &[u8]) -> f32 {
        // SAFETY: a `TypeKernels` is only built by `Kernels::with_isa`, which selects SIMD
        // entries only for an instruction set the running CPU was detected to support.
        unsafe { (self.vec_dot)(w, a) }
    }

    /// [`TypeKernels::vec_dot`] of weight row `w` with each of the `out.len()` activation rows
    /// that `a` holds one after the other (at most [`TOKEN_TILE`]), decoding each weight block
    /// once where the type has a tile kernel. Bit-identical to one `vec_dot` per row.
    ///
    /// # Panics
    /// As [`TypeKernels::vec_dot`], or if `a` does not split into `out.len()` equal rows.
    #[inline]
    pub(crate) fn vec_dot_tile(&self, w: &[u8], a: &[u8], out: &mut [f32]) {
        assert!(out.len() <= TOKEN_TILE && a.len().is_multiple_of(out.len().max(1)));
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

    /// Whether [`TypeKernels::vec_dot_pairs`] has a kernel of its own (rather than two
    /// [`TypeKernels::vec_dot_tile`] calls): whether the drivers should hand it rows in pairs.
    pub(crate) fn has_row_pairs(&self) -> bool {
        self.vec_dot_pairs.is_some()
    }

    /// [`TypeKernels::vec_dot_tile`] of the two weight rows `w` holds one after the other:
    /// `out[r·n + t]` for row `r` and activation row `t` (`n = out.len() / 2`, at most
    /// [`TOKEN_TILE`]). Bit-identical to one `vec_dot` per row and activation row.
    ///
    /// # Panics
    /// As [`TypeKernels::vec_dot_tile`], or if `w` or `out` does not split in two.
    #[inline]
    pub(crate) fn vec_dot_pairs(&self, w: &[u8], a: &[u8], out: &mut [f32]) {
        assert!(w.len().is_multiple_of(2) && out.len().is_multiple_of(2));
        assert!(out.len() / 2 <= TOKEN_TILE);
        match self.vec_dot_pairs {
            // SAFETY: as for `vec_dot`: only selected for an instruction set the CPU supports.
            Some(pairs) => unsafe { pairs(w, a, out) },
            None => {
                let (w0, w1) = w.split_at(w.len() / 2);
                let (o0, o1) = out.split_at_mut(out.len() / 2);
                self.vec_dot_tile(w0, a, o0);
                self.vec_dot_tile(w1, a, o1);
            }
        }
    }

    /// Quantizes `x` into `out` in the activation format.
    ///
    /// # Panics
    /// If `x` and `out` do not hold the same number of blocks.
    pub(crate) fn quantize_activation(&self, x: &[f32], out: &mut [u8]) {
        // SAFETY: as for `vec_dot`: only selected for an instruction set the CPU supports.
        unsafe { (self.quantize_activation)(x, out) }
    }
}

/// The kernel table for one instruction set: what [`crate::matvec()`] and [`crate::matmul()`]
/// run for each weight type, and which weights [`Kernels::pack`] repacks.
///
/// ```
/// use rinfer_kernels::{Isa, Kernels};
///
/// let best = Kernels::detected();
/// assert!(Kernels::scalar().isa() <= best.isa());
/// // A table never asks for more than the CPU has.
/// let highest = *Isa::ALL.last().expect("scalar at least");
/// assert_eq!(Kernels::with_isa(highest).isa(), best.isa());
/// ```
pub struct Kernels {
    isa: Isa,
    table: [Option<TypeKernels>; TABLE_LEN],
    vector: VectorKernels,
}

impl Kernels {
    /// The table for the best instruction set this CPU supports, built once per process.
    pub fn detected() -> &'static Kernels {
        static KERNELS: OnceLock<Kernels> = OnceLock::new();
        KERNELS.get_or_init(|| Kernels::with_isa(cpu::detected()))
    }

    /// A table using only the scalar reference kernels, for every product, quantizer and vector
    /// kernel it holds (for debugging and comparisons).
    pub fn scalar() -> Kernels {
        Kernels::with_isa(Isa::Scalar)
    }

    /// A table for `requested`, lowered to what the CPU supports.
    pub fn with_isa(requested: Isa) -> Kernels {
        let isa = requested.min(cpu::detected());
        let mut table = [None; TABLE_LEN];
        for t in registry::all() {
            table[t.ty.id() as usize] = TypeKernels::select(t, isa);
        }
        Kernels {
            isa,
            table,
            vector: VectorKernels::for_isa(isa),
        }
    }

    /// The instruction set this table was built for.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// The vector kernels of this table's instruction set.
    pub fn vector(&self) -> &VectorKernels {
        &self.vector
    }

    /// Whether `ty` is a weight type with a dot product (what [`crate::matvec()`] multiplies).
    pub fn multiplies(&self, ty: GgmlType) -> bool {
        self.get(ty).is_ok()
    }

    /// Every weight type with a dot product (what [`crate::matvec()`] multiplies), by id.
    pub fn weight_types(&self) -> impl Iterator<Item = GgmlType> + '_ {
        GgmlType::ALL
            .iter()
            .copied()
            .filter(|&ty| self.multiplies(ty))
    }

    /// Repacks `w` when this table has a packed kernel for its type, else `None` (the row-major
    /// kernels are then the fastest there are).
    pub fn pack(&self, w: &WeightMatrix<'_>) -> Option<PackedMatrix> {
        self.pack_releasing(w, |_| {})
    }

    /// [`Kernels::pack`], calling `release` with each byte range of `w`'s data as soon as it is
    /// packed and will not be read again here (so that a caller can give a mapped file's pages
    /// back while a large matrix is packed, instead of holding both copies at the end).
    pub fn pack_releasing(
        &self,
        w: &WeightMatrix<'_>,
        release: impl Fn(Range<usize>) + Sync,
    ) -> Option<PackedMatrix> {
        let pack = self.get(w.ty()).ok()?.pack?;
        // SAFETY: `select` keeps a packer only for an instruction set at most `self.isa`, which
        // `with_isa` lowered to what the CPU supports (and which the packer is told).
        Some(unsafe { pack(w, &release, self.isa) })
    }

    /// The kernels of weight type `ty`.
    ///
    /// # Errors
    /// [`KernelError::Unsupported`] when `ty` has no dot product.
    pub(crate) fn get(&self, ty: GgmlType) -> Result<&TypeKernels, KernelError> {
        self.table
            .get(ty.id() as usize)
            .and_then(Option::as_ref)
            .ok_or(KernelError::Unsupported { ty, op: "vec_dot" })
    }
}
