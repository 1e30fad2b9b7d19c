//! A forward step as data: the list of kernel launches (kernel, shape, arguments) that one
//! step performs, built from the configuration and the addresses of weights, buffers and KV
//! cache. The GPU runtime executes the list with cudarc (and captures it as a graph); the tests
//! execute the same list on the host under the CUDA emulation, with host addresses, and compare
//! the logits with the CPU forward pass. Building it needs no GPU.

mod addresses;
mod step;

pub use addresses::{
    CacheAddresses, CacheTables, LayerKv, MatrixAddress, OnDevice, StackedAddress, WeightAddresses,
    WorkAddresses, place_weights,
};
pub use step::StepBuilder;

use crate::kernels::GpuType;
use crate::kv_pool::BlockCopy;
use crate::launch::{self, LaunchShape};

/// One kernel argument, as the kernel declares it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    /// A device address (`const float*`, `const u8*`, ...); 0 is a null pointer.
    Ptr(u64),
    /// `int`.
    I32(i32),
    /// `long long`.
    I64(i64),
    /// `float`.
    F32(f32),
}

impl Arg {
    /// The argument in an 8-byte slot, as a little-endian host passes it: 4-byte values in the
    /// low half.
    pub fn to_slot(self) -> u64 {
        match self {
            Arg::Ptr(p) => p,
            Arg::I32(v) => u64::from(v as u32),
            Arg::I64(v) => v as u64,
            Arg::F32(v) => u64::from(v.to_bits()),
        }
    }
}

/// Which kernel a launch runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelRef {
    /// A kernel that does not depend on a weight format (one of
    /// [`FIXED_KERNELS`](crate::kernels::FIXED_KERNELS) or of
    /// [`kv_kernel_names`](crate::kernels::kv_kernel_names)).
    Fixed(&'static str),
    /// The decode matvec of a format.
    Matvec(GpuType),
    /// The batched matmul of a format.
    Matmul(GpuType),
    /// The mixture-of-experts matvec of a format (the expert read from device memory).
    MatvecById(GpuType),
    /// The batched mixture-of-experts matmul of a format (each expert's slots grouped).
    MatmulById(GpuType),
    /// The embedding lookup of a format.
    GetRows(GpuType),
    /// The integer matvec of a format over one q8_1 activation row.
    MatvecQ8_1(GpuType),
    /// The integer matvec of a format over 2 to `MMVQ_TOKENS` q8_1 activation rows.
    MatvecBatchQ8_1(GpuType),
    /// The batched matmul of a quantized format on tensor cores.
    Mma(GpuType),
    /// The batched mixture-of-experts matmul of a quantized format on tensor cores.
    MmaById(GpuType),
}

impl KernelRef {
    /// The kernel's name in the sources.
    pub fn name(self) -> String {
        match self {
            KernelRef::Fixed(name) => name.to_string(),
            KernelRef::Matvec(ty) => ty.matvec_kernel(),
            KernelRef::Matmul(ty) => ty.matmul_kernel(),
            KernelRef::MatvecById(ty) => ty.matvec_id_kernel(),
            KernelRef::MatmulById(ty) => ty.matmul_id_kernel(),
            KernelRef::GetRows(ty) => ty.get_rows_kernel(),
            KernelRef::MatvecQ8_1(ty) => ty.matvec_q8_1_kernel(),
            KernelRef::MatvecBatchQ8_1(ty) => ty.matvec_batch_q8_1_kernel(),
            KernelRef::Mma(ty) => ty.mma_kernel(),
            KernelRef::MmaById(ty) => ty.mma_id_kernel(),
        }
    }
}

/// The launch that copies pool block `copy.from` into `copy.to` (copy on write, see
/// [`crate::kv_pool`]) in the pool whose keys and values are at `keys` and `values`, each
/// block `block_words` 4-byte words.
pub fn copy_block(keys: u64, values: u64, block_words: i64, copy: BlockCopy) -> Launch {
    Launch::new(
        KernelRef::Fixed("kv_copy_block"),
        launch::elementwise(block_words as usize),
        &[
            Arg::Ptr(keys),
            Arg::Ptr(values),
            Arg::I64(i64::from(copy.from) * block_words),
            Arg::I64(i64::from(copy.to) * block_words),
            Arg::I64(block_words),
        ],
    )
}

/// The most arguments any kernel takes.
pub const MAX_ARGS: usize = 20;

/// One kernel launch.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    /// The kernel.
    pub kernel: KernelRef,
    /// Grid and block.
    pub shape: LaunchShape,
    /// Its arguments, in the order the kernel declares them (`args[..len]`).
    pub args: [Arg; MAX_ARGS],
    /// How many arguments.
    pub len: usize,
}

impl Launch {
    fn new(kernel: KernelRef, shape: LaunchShape, args: &[Arg]) -> Self {
        let mut all = [Arg::I32(0); MAX_ARGS];
        all[..args.len()].copy_from_slice(args);
        Self {
            kernel,
            shape,
            args: all,
            len: args.len(),
        }
    }

    /// The arguments.
    pub fn args(&self) -> &[Arg] {
        &self.args[..self.len]
    }
}
