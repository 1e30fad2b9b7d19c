//! The GPU runtime over cudarc (feature `cuda`): opening the device, compiling and loading the
//! kernels, uploading weights, the forward step and its CUDA graph.

mod buffers;
mod decode_rows;
mod driver;
mod kernels;
mod launcher;
mod model;
mod modules;
mod nvrtc;
mod row_state;
mod weights;

pub use buffers::GpuKvCache;
pub use driver::{compile_kernels, probe};
pub use model::GpuModel;
pub use nvrtc::Nvrtc;
