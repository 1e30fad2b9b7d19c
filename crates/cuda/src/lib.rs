//! NVIDIA GPU backend for rinfer through `cudarc`: weights preloaded in their quantized block
//! formats, GPU-resident layers and KV cache, and the backend's own kernels.
//!
//! Nothing is implemented here yet; the crate exists so the layering is fixed from the start.
//! It must never be required to build or test the workspace on a machine without CUDA.
