//! Where every weight, buffer and KV-cache layer lives: device addresses in the runtime, host
//! addresses under the emulation.

use rinfer_transformer::{Handles, Mapper, Tensor, Transformer};

use super::Arg;
use crate::error::CudaError;
use crate::host::{HostMatrix, HostModel, HostStacked, HostView};
use crate::kernels::GpuType;

/// A weight matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatrixAddress {
    /// Its bytes.
    pub ptr: u64,
    /// Its format.
    pub ty: GpuType,
    /// Output features.
    pub rows: usize,
    /// Input features.
    pub cols: usize,
    /// Bytes per row.
    pub row_bytes: i64,
}

/// One projection of every expert, stacked: expert `e`'s rows at `ptr + e * expert_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackedAddress {
    /// Expert 0's rows.
    pub ptr: u64,
    /// Its format.
    pub ty: GpuType,
    /// Output features of one expert.
    pub rows: usize,
    /// Input features.
    pub cols: usize,
    /// Bytes per row.
    pub row_bytes: i64,
    /// Bytes per expert.
    pub expert_bytes: i64,
    /// Biases `[experts, rows]` f32.
    pub bias: Option<u64>,
}

impl MatrixAddress {
    /// The arguments of the matrix product kernels: the matrix, the kernel's input arguments
    /// `input`, the outputs `(y, ldy)`, the bias and the number of tokens `n`.
    pub(crate) fn product_args(
        &self,
        input: &[Arg],
        (y, ldy): (u64, usize),
        bias: Option<u64>,
        n: usize,
    ) -> Vec<Arg> {
        [
            &[Arg::Ptr(self.ptr), Arg::I64(self.row_bytes)][..],
            input,
            &[
                Arg::Ptr(y),
                Arg::I32(ldy as i32),
                Arg::Ptr(bias.unwrap_or(0)),
                Arg::I32(self.rows as i32),
                Arg::I32(self.cols as i32),
                Arg::I32(n as i32),
            ],
        ]
        .concat()
    }
}

impl StackedAddress {
    /// The arguments of the by-expert-id kernels: the experts, the kernel's routing arguments
    /// `routing`, the activations `(x, ldx, x_div)` and the outputs `(y, ldy)`.
    pub(crate) fn by_id_args(
        &self,
        routing: &[Arg],
        (x, ldx, x_div): (u64, usize, usize),
        (y, ldy): (u64, usize),
    ) -> Vec<Arg> {
        [
            &[
                Arg::Ptr(self.ptr),
                Arg::I64(self.expert_bytes),
                Arg::I64(self.row_bytes),
            ][..],
            routing,
            &[
                Arg::Ptr(x),
                Arg::I32(ldx as i32),
                Arg::I32(x_div as i32),
                Arg::Ptr(y),
                Arg::I32(ldy as i32),
                Arg::Ptr(self.bias.unwrap_or(0)),
                Arg::I32(self.rows as i32),
                Arg::I32(self.cols as i32),
            ],
        ]
        .concat()
    }
}

/// Device addresses of the weights: a matrix, an f32 vector, a layer's stacked experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OnDevice;

impl Handles for OnDevice {
    type Matrix = MatrixAddress;
    type Vector = u64;
    type Experts = StackedAddress;
}

/// The model with every weight at its device address (host addresses under emulation).
pub type WeightAddresses = Transformer<OnDevice>;

/// Places every weight of `model` (validated by an [`UploadPlan`](crate::UploadPlan)) with
/// `place_bytes` (matrices) and `place_floats` (norms, biases), which return the address the
/// data now has: an upload in the runtime, the host address under emulation. A tied LM head
/// stays the token embedding, placed once.
pub fn place_weights(
    model: &HostModel<'_>,
    place_bytes: impl FnMut(&[u8]) -> Result<u64, CudaError>,
    place_floats: impl FnMut(&[f32]) -> Result<u64, CudaError>,
) -> Result<WeightAddresses, CudaError> {
    model.map(&mut Placer {
        bytes: place_bytes,
        floats: place_floats,
    })
}

/// The two placement functions of [`place_weights`].
struct Placer<B, F> {
    bytes: B,
    floats: F,
}

impl<'t, 'a, B, F> Mapper<'t, HostView<'a>, OnDevice> for Placer<B, F>
where
    B: FnMut(&[u8]) -> Result<u64, CudaError>,
    F: FnMut(&[f32]) -> Result<u64, CudaError>,
{
    type Error = CudaError;

    fn matrix(&mut self, t: &Tensor, m: &'t HostMatrix<'a>) -> Result<MatrixAddress, CudaError> {
        let ty = GpuType::of(m.ty).ok_or_else(|| CudaError::UnsupportedType {
            tensor: t.name.to_string(),
            ty: m.ty.name(),
        })?;
        Ok(MatrixAddress {
            ptr: (self.bytes)(m.data)?,
            ty,
            rows: m.rows,
            cols: m.cols,
            row_bytes: (m.data.len() / m.rows.max(1)) as i64,
        })
    }

    fn vector(&mut self, _: &Tensor, v: &'t &'a [f32]) -> Result<u64, CudaError> {
        (self.floats)(v)
    }

    fn experts(&mut self, t: &Tensor, m: &'t HostStacked<'a>) -> Result<StackedAddress, CudaError> {
        let ty = GpuType::of(m.ty).ok_or_else(|| CudaError::UnsupportedType {
            tensor: t.name.to_string(),
            ty: m.ty.name(),
        })?;
        let expert_bytes = m.data.len() / m.experts.max(1);
        Ok(StackedAddress {
            ptr: (self.bytes)(&m.data)?,
            ty,
            rows: m.rows,
            cols: m.cols,
            row_bytes: (expert_bytes / m.rows.max(1)) as i64,
            expert_bytes: expert_bytes as i64,
            bias: m.bias.as_deref().map(&mut self.floats).transpose()?,
        })
    }
}

/// The activation buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkAddresses {
    /// Residual stream `[n, hidden]`.
    pub x: u64,
    /// Normed input / FFN output `[n, hidden]`.
    pub h: u64,
    /// q | k | v `[n, q_dim + 2 kv_dim]`.
    pub qkv: u64,
    /// Attention output `[n, q_dim]`.
    pub attn: u64,
    /// Attention projection `[n, hidden]`.
    pub out: u64,
    /// gate | up `[n, 2 ffn]`.
    pub gate_up: u64,
    /// Logits `[rows, vocab]`.
    pub logits: u64,
    /// Decode-attention partials.
    pub partials: u64,
    /// Router scores `[n, experts]`.
    pub router: u64,
    /// Each row's experts `[n, used]` (i32).
    pub expert_ids: u64,
    /// Their weights `[n, used]`.
    pub expert_weights: u64,
    /// How many slots each expert received `[experts]` (i32).
    pub expert_counts: u64,
    /// Each expert's slots `[experts, n]` (i32).
    pub expert_lists: u64,
    /// Every routed expert's gate | up `[n · used, 2 expert_ffn]`.
    pub expert_gate_up: u64,
    /// Every routed expert's output `[n · used, hidden]`.
    pub expert_out: u64,
    /// q8_1 codes of up to `MMVQ_TOKENS` activation rows `[rows, cols]` (i8), for the
    /// integer matvec.
    pub xq: u64,
    /// Their block metas `[rows, cols / 32]` ({d, d Σq first half, d Σq second half, 0}).
    pub xq_meta: u64,
    /// Token ids `[n]` (i32).
    pub tokens: u64,
    /// Positions `[n]` (i32).
    pub positions: u64,
    /// The argmax `[1]` (i32).
    pub argmax: u64,
}

/// One layer of one sequence's KV cache as the kernels read it (`attention.cu`): slot `s`
/// (position `p` at `p % slots`) is row `s % KV_BLOCK` of block `table[s / KV_BLOCK]`, the
/// blocks `block_stride` elements apart from `keys` and from `values`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerKv {
    /// The layer's key rows of block 0.
    pub keys: u64,
    /// Its value rows of block 0.
    pub values: u64,
    /// The block table `[⌈slots / KV_BLOCK⌉]` (i32).
    pub table: u64,
    /// Elements from a block's rows to the next block's.
    pub block_stride: i64,
    /// Slots (positions a full-attention layer holds; a sliding-window layer's ring).
    pub slots: usize,
}

/// The KV cache of one sequence, per layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheAddresses {
    /// Each layer's keys, values and block table, of the step's `KvElement`.
    pub layers: Vec<LayerKv>,
}

/// The KV caches of the rows of a batched decode step, each row a sequence with its own cache,
/// found through tables in device memory: one buffer of `[layers, 3, rows]` addresses, per
/// layer the rows' keys, their values, then their block tables. The table is rewritten before
/// each step, so the launches (and a CUDA graph of them) depend only on the number of rows,
/// not on which sequences they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheTables {
    /// Where the table buffer is.
    pub base: u64,
    /// Rows each layer's tables hold (the most sequences one step decodes).
    pub rows: usize,
    /// KV-cache slots of each layer (the same in every cache of a model).
    pub slots: Vec<usize>,
    /// The block stride of each layer (the same in every cache of a model).
    pub block_strides: Vec<i64>,
}

impl CacheTables {
    /// Entries (addresses) of the whole table.
    pub fn len(&self) -> usize {
        3 * self.rows * self.slots.len()
    }

    /// Whether the table is empty (a model without layers).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Index in the table of the keys of layer `layer`, row `row`; the values' is `rows`
    /// further, the block table's `2 rows`.
    pub fn index(&self, layer: usize, row: usize) -> usize {
        3 * layer * self.rows + row
    }

    /// Layer `layer` as the batched kernels take it: `keys`, `values` and `table` are the
    /// addresses of its tables of the rows' keys, values and block tables.
    pub fn layer(&self, layer: usize) -> LayerKv {
        let keys = self.base + 8 * self.index(layer, 0) as u64;
        let rows = 8 * self.rows as u64;
        LayerKv {
            keys,
            values: keys + rows,
            table: keys + 2 * rows,
            block_stride: self.block_strides[layer],
            slots: self.slots[layer],
        }
    }

    /// Writes row `row`'s cache (its layers) into `table`, the host image of the table buffer.
    pub fn set_row(
        &self,
        table: &mut [u64],
        row: usize,
        layers: impl IntoIterator<Item = LayerKv>,
    ) {
        for (layer, kv) in layers.into_iter().enumerate() {
            let at = self.index(layer, row);
            table[at] = kv.keys;
            table[at + self.rows] = kv.values;
            table[at + 2 * self.rows] = kv.table;
        }
    }
}
