//! CPU kernels for rinfer: quantized block formats, dequantization, fused quantized dot
//! products, the parallel matvec (decode) and matmul (prefill) drivers, and the elementwise
//! operations transformers need.
//!
//! Every kernel has one scalar reference; SIMD variants are chosen once at runtime from CPU
//! detection and tested against it. This crate does no file I/O and never allocates in its
//! inner loops.
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

pub mod block;
pub mod cpu;
pub mod dispatch;
mod error;
pub mod matmul;
pub mod matvec;
pub mod ops;
pub mod packed;
pub mod quant;

pub use cpu::Isa;
pub use dispatch::{Kernels, TypeKernels};
pub use error::KernelError;
pub use matmul::matmul;
pub use matvec::{ActivationBuffer, WeightMatrix, matvec};
pub use packed::PackedMatrix;
pub use quant::{BlockFormat, Quantize, VecDot, dequantize_row, quantize_row};
