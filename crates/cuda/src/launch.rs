//! Grid and block shapes of every kernel, computed on the host. The constants mirror the
//! `#define`s of the CUDA sources (a test checks that they agree).

use crate::kernels::KvElement;

/// Warps (rows) per block of the matvec/matmul kernels (`MATMUL_WARPS`).
pub const MATMUL_WARPS: u32 = 4;
/// Tokens per warp of the batched matmul kernel (`MATMUL_TOKENS`).
pub const MATMUL_TOKENS: u32 = 8;
/// Warps per block of the q8_1 matvec (`MMVQ_WARPS`).
pub const MMVQ_WARPS: u32 = 4;
/// Weight rows per warp of the q8_1 matvec (`MMVQ_ROWS`).
pub const MMVQ_ROWS: u32 = 2;
/// The most activation rows one q8_1 matvec launch takes (`MMVQ_TOKENS`).
pub const MMVQ_TOKENS: u32 = 8;
/// q8_1 blocks (warps) per block of the activation quantizer (`Q8_1_BLOCKS_PER_CTA`).
pub const Q8_1_BLOCKS_PER_CTA: u32 = 4;
/// Weight rows per block of the tensor-core matmul (`MMA_ROWS`).
pub const MMA_ROWS: u32 = 128;
/// Tokens per block of the tensor-core matmul (`MMA_TOKENS`).
pub const MMA_TOKENS: u32 = 64;
/// Warps per block of the tensor-core matmul (`MMA_WARPS`).
pub const MMA_WARPS: u32 = 8;
/// Positions per block of a paged KV cache (`KV_BLOCK`; the CPU cache's `BLOCK_TOKENS`).
pub const KV_BLOCK: usize = 16;
/// Warps per block of the attention kernels (`ATTN_WARPS`).
pub const ATTN_WARPS: u32 = 4;
/// Warps (queries) per block of prefill attention (`PREFILL_WARPS`).
pub const PREFILL_WARPS: u32 = 8;
/// Keys per shared-memory tile of prefill attention (`PREFILL_TILE`).
pub const PREFILL_TILE: u32 = 16;
/// Warps per block of the tensor-core prefill attention (`FLASH_WARPS`), 16 queries each.
pub const FLASH_WARPS: u32 = 2;
/// Queries per block of the tensor-core prefill attention (`FLASH_QUERIES`).
pub const FLASH_QUERIES: usize = 16 * FLASH_WARPS as usize;
/// The widest head the attention kernels hold in registers (`MAX_HEAD_DIM`).
pub const MAX_HEAD_DIM: usize = 256;
/// Threads per block of the elementwise kernels.
pub const ELEMENTWISE_THREADS: u32 = 256;
/// The most splits decode attention uses for one head.
pub const MAX_DECODE_SPLITS: usize = 64;
/// The fewest keys one decode split covers.
pub const MIN_SPLIT_KEYS: usize = 64;

/// A kernel launch shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads in x, y, z.
    pub block: (u32, u32, u32),
}

impl LaunchShape {
    fn new(grid: (usize, usize), threads: u32) -> Self {
        Self {
            grid: (to_u32(grid.0), to_u32(grid.1), 1),
            block: (threads, 1, 1),
        }
    }
}

fn to_u32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// `y = W x` for `rows` weight rows and `n` tokens: the decode kernel for one token, the
/// batched one (tokens in groups of [`MATMUL_TOKENS`]) otherwise.
pub fn matmul(rows: usize, n: usize) -> LaunchShape {
    let groups = if n <= 1 {
        1
    } else {
        n.div_ceil(MATMUL_TOKENS as usize)
    };
    LaunchShape::new(
        (rows.div_ceil(MATMUL_WARPS as usize), groups),
        MATMUL_WARPS * 32,
    )
}

/// The q8_1 matvec of `rows` weight rows ([`MMVQ_ROWS`] per warp, any number of tokens up
/// to [`MMVQ_TOKENS`] in one launch).
pub fn matvec_q8_1(rows: usize) -> LaunchShape {
    let per_block = (MMVQ_WARPS * MMVQ_ROWS) as usize;
    LaunchShape::new((rows.div_ceil(per_block), 1), MMVQ_WARPS * 32)
}

/// The q8_1 quantization of `n` activation rows of `cols` elements: a warp per 32-element
/// block.
pub fn quantize_q8_1(n: usize, cols: usize) -> LaunchShape {
    let blocks = (cols / 32).div_ceil(Q8_1_BLOCKS_PER_CTA as usize).max(1);
    LaunchShape::new((blocks, n), Q8_1_BLOCKS_PER_CTA * 32)
}

/// `y = W x` on tensor cores for `rows` weight rows and `n` tokens: a block per tile of
/// [`MMA_ROWS`] rows × [`MMA_TOKENS`] tokens.
pub fn mma(rows: usize, n: usize) -> LaunchShape {
    LaunchShape::new(
        (
            rows.div_ceil(MMA_ROWS as usize),
            n.div_ceil(MMA_TOKENS as usize),
        ),
        MMA_WARPS * 32,
    )
}

/// Batched `y = W_e x` on tensor cores: per grid.y one group of up to [`MMA_TOKENS`] of the
/// slots one expert received, `groups` groups per expert.
pub fn mma_grouped_by_id(rows: usize, experts: usize, groups: usize) -> LaunchShape {
    LaunchShape::new(
        (rows.div_ceil(MMA_ROWS as usize), experts * groups),
        MMA_WARPS * 32,
    )
}

/// The largest grid.y a launch may have.
pub const MAX_GRID_Y: usize = 65_535;

/// `y = W_id x` for `rows` rows of each of `slots` routed (row, expert) pairs: a block of
/// [`MATMUL_WARPS`] weight rows per grid.x, one slot per grid.y.
pub fn matmul_by_id(rows: usize, slots: usize) -> LaunchShape {
    LaunchShape::new(
        (rows.div_ceil(MATMUL_WARPS as usize), slots),
        MATMUL_WARPS * 32,
    )
}

/// Batched `y = W_e x` for `rows` rows: per grid.y one group of up to [`MATMUL_TOKENS`] of the
/// slots one expert received, `groups` groups per expert.
pub fn matmul_grouped_by_id(rows: usize, experts: usize, groups: usize) -> LaunchShape {
    LaunchShape::new(
        (rows.div_ceil(MATMUL_WARPS as usize), experts * groups),
        MATMUL_WARPS * 32,
    )
}

/// Routing (one thread per row) and grouping (one thread per expert).
pub fn route(rows: usize) -> LaunchShape {
    LaunchShape::new((rows, 1), 1)
}

/// One block per row of width `d`: a whole number of warps, at most 1024 threads.
pub fn per_row(rows: usize, d: usize) -> LaunchShape {
    let threads = d.div_ceil(32).clamp(1, 32) as u32 * 32;
    LaunchShape::new((rows, 1), threads)
}

/// Embedding lookup of `n` rows of `cols` elements (a thread per 32-element chunk).
pub fn get_rows(n: usize, cols: usize) -> LaunchShape {
    let threads = (cols / 32).div_ceil(32).clamp(1, 8) as u32 * 32;
    LaunchShape::new((n, 1), threads)
}

/// Per-head kernels (head norm): one warp per (token, head).
pub fn per_head(n: usize, heads: usize) -> LaunchShape {
    LaunchShape::new((n, heads), 32)
}

/// RoPE: one thread per rotated pair of each (token, head).
pub fn rope(n: usize, heads: usize, rope_dims: usize) -> LaunchShape {
    let threads = (rope_dims / 2).div_ceil(32).max(1) as u32 * 32;
    LaunchShape::new((n, heads), threads)
}

/// One thread per element.
pub fn elementwise(len: usize) -> LaunchShape {
    LaunchShape::new(
        (len.div_ceil(ELEMENTWISE_THREADS as usize).max(1), 1),
        ELEMENTWISE_THREADS,
    )
}

/// How decode attention splits the keys of one head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeSplits {
    /// Keys per split.
    pub split_len: usize,
    /// Splits per head, fixed for the longest window so one graph serves every position.
    pub splits: usize,
}

/// The split of `max_keys` (the longest any layer attends: the context, or the window on a
/// model whose every layer slides) into at most [`MAX_DECODE_SPLITS`] splits of at least
/// [`MIN_SPLIT_KEYS`] keys.
pub fn decode_splits(max_keys: usize) -> DecodeSplits {
    let max_keys = max_keys.max(1);
    let split_len = max_keys
        .div_ceil(MAX_DECODE_SPLITS)
        .max(MIN_SPLIT_KEYS)
        .next_multiple_of(32);
    DecodeSplits {
        split_len,
        splits: max_keys.div_ceil(split_len),
    }
}

/// Decode attention: grid (heads, splits).
pub fn attention_decode(heads: usize, splits: &DecodeSplits) -> LaunchShape {
    LaunchShape::new((heads, splits.splits), ATTN_WARPS * 32)
}

/// The merge of decode splits: one block per head.
pub fn attention_combine(heads: usize, head_dim: usize) -> LaunchShape {
    LaunchShape::new((heads, 1), (head_dim.div_ceil(32).clamp(1, 8) as u32) * 32)
}

/// Decode attention of a batch of sequences, one query row each: grid (heads, blocks, rows),
/// each of a row's blocks computing every `blocks`-th of its splits. `rows` rows launch about
/// as many blocks as one row does: at short positions most splits are empty, and a block
/// passes over an empty one at the cost of two stores.
pub fn attention_decode_rows(heads: usize, splits: &DecodeSplits, rows: usize) -> LaunchShape {
    let blocks = splits.splits.div_ceil(rows.max(1));
    LaunchShape {
        grid: (to_u32(heads), to_u32(blocks), to_u32(rows)),
        block: (ATTN_WARPS * 32, 1, 1),
    }
}

/// The merge of the decode splits of `rows` query rows: one block per (head, row).
pub fn attention_combine_rows(heads: usize, head_dim: usize, rows: usize) -> LaunchShape {
    let mut shape = attention_combine(heads, head_dim);
    shape.grid.1 = to_u32(rows);
    shape
}

/// Prefill attention over a cache of `element`s ([`KvElement::prefill_kernel`]): grid (query
/// groups, heads), a warp per query over f32 and q8_0, a warp per 16 queries over f16.
pub fn attention_prefill(element: KvElement, n: usize, heads: usize) -> LaunchShape {
    let (queries, warps) = match element {
        KvElement::F32 | KvElement::Q8_0 => (PREFILL_WARPS as usize, PREFILL_WARPS),
        KvElement::F16 => (FLASH_QUERIES, FLASH_WARPS),
    };
    LaunchShape::new((n.div_ceil(queries), heads), warps * 32)
}

/// Argmax over the vocabulary: one block.
pub fn argmax() -> LaunchShape {
    LaunchShape::new((1, 1), 1024)
}
