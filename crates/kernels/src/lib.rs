//! CPU kernels for rinfer: quantized block formats, dequantization, fused quantized dot
//! products, the parallel matvec (decode) and matmul (prefill) drivers, weights repacked for
//! faster kernels, and the elementwise operations transformers need.
//!
//! Every kernel has one scalar reference; SIMD variants are chosen once at runtime from CPU
//! detection and tested against it. This crate does no file I/O and never allocates in its
//! inner loops.
//!
//! The public API:
//! - [`WeightMatrix`] views a row-major weight matrix; [`ActivationBuffer`] is the scratch the
//!   products quantize activations into.
//! - [`Kernels`] is the kernel table of one instruction set ([`Isa`]): [`matvec()`] and
//!   [`matmul()`] multiply with it, and [`Kernels::pack`] repacks a matrix into a
//!   [`PackedMatrix`] where the CPU has a faster packed kernel, multiplied by
//!   [`matmul_packed()`].
//! - [`dequantize_row`] and [`quantize_row`] convert whole rows; [`quantize_rows`] quantizes a
//!   whole tensor in parallel, as ggml's offline quantizer does.
//! - [`ops`] holds the elementwise and row-wise operations.
//! - [`codebooks`] holds the i-quants' code tables, for other backends that decode them.
//!
//! Inside, the modules depend in one direction: `operands` (shared driver types) and
//! `parallel` (row splitting) below `quant` (block formats), below `packed` (packed layouts),
//! below `registry` (the one table of types and kernels), below `dispatch` (the table of one
//! instruction set), below the `matvec` and `matmul` drivers; `convert` and `quantize` (whole
//! rows and tensors; `quantize` with the fastest quantizer of the detected `cpu` level) sit on
//! `registry`.
//!
//! ```
//! use rinfer_formats::GgmlType;
//!
//! // One Q8_0 block: f16 scale 0.5 (0x3800), then 32 signed codes 0, 1, 2, ...
//! let mut block = vec![0x00, 0x38];
//! block.extend((0..32).map(|q: u8| q));
//! let mut out = [0.0f32; 32];
//! rinfer_kernels::dequantize_row(GgmlType::Q8_0, &block, &mut out)?;
//! assert_eq!(out[3], 1.5);
//! # Ok::<(), rinfer_kernels::KernelError>(())
//! ```

mod convert;
mod cpu;
mod dispatch;
mod error;
mod matmul;
mod matvec;
mod operands;
pub mod ops;
mod packed;
mod parallel;
mod quant;
mod quantize;
mod registry;

pub use convert::{dequantize_row, quantize_row};
pub use cpu::Isa;
pub use dispatch::Kernels;
pub use error::KernelError;
pub use matmul::matmul;
pub use matvec::matvec;
pub use operands::{ActivationBuffer, WeightMatrix};
pub use packed::{
    PackedMatrix, RowsProduct, matmul_packed, matmul_packed_rows, matmul_packed_shared,
    matvec_packed_batch,
};
pub use quant::q8_0::BlockQ8_0;

/// The code tables of the i-quants as ggml defines them, for backends that decode these types
/// themselves (the CUDA kernels generate their device tables from them): the grids (entry `i`
/// a word whose byte `j` is coordinate `j`), the sign table of IQ2_XXS, IQ2_XS and IQ3_XXS, and
/// the 16 values of IQ4_NL and IQ4_XS.
pub mod codebooks {
    pub use crate::quant::iq_grids::{
        IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS,
    };
    pub use crate::quant::iq4_nl::KVALUES as IQ4_VALUES;
}
pub use quantize::{
    can_quantize, can_quantize_weighted, needs_weights, quantize_rows, quantize_rows_weighted,
};
