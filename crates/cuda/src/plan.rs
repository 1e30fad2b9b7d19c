//! What loading a model puts on the GPU: every weight in its stored block format, norms and
//! biases as f32, the KV cache and the activation buffers, with their sizes. Everything is
//! validated here, before any device memory is touched, so the kernels never see a shape they
//! cannot handle.

use rinfer_transformer::{
    Block, Experts, Ffn, Gating, Handles, Mapper, Qkv, Router, Shape, Stage, Tensor, Transformer,
};

use crate::error::CudaError;
use crate::host::{HostMatrix, HostModel, HostStacked, HostView};
use crate::kernels::{GpuType, KvElement};
use crate::launch::{self, DecodeSplits, KV_BLOCK, MAX_HEAD_DIM};
use crate::nvrtc_search::NvrtcSearch;

/// How a model is loaded onto the GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadOptions {
    /// The GPU's ordinal.
    pub ordinal: usize,
    /// Positions each KV cache holds.
    pub context: usize,
    /// Largest batch per forward call (prefill chunk).
    pub max_batch: usize,
    /// Whether [`Logits::All`](crate::Logits::All) is wanted: the logits buffer then holds
    /// `max_batch` rows instead of one (`[512, 262144]` f32 is 512 MiB for Gemma 3).
    pub all_logits: bool,
    /// The most sequences one decode step runs together
    /// ([`GpuModel::forward_rows`](crate::GpuModel::forward_rows)), each KV cache a whole
    /// context of the pool.
    pub sequences: usize,
    /// The most tokens a decoding sequence guesses ahead (speculative decoding): it then feeds
    /// its last token and its guesses, a decode row each. A decode step has room for
    /// `sequences · (1 + guesses)` rows, at most `max_batch`; each row needs a logits row and
    /// its attention partials.
    pub guesses: usize,
    /// Where NVRTC is looked for (the program's environment, read once by the program).
    pub nvrtc: NvrtcSearch,
    /// The element type of the KV caches.
    pub kv: KvElement,
    /// Blocks of the KV pool beyond a whole context for each sequence: the room of the
    /// engine's prefix cache, whose blocks outlive the sequences that computed them.
    pub cached_blocks: usize,
}

/// One weight matrix as it will sit in device memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedMatrix {
    /// The tensor's name.
    pub name: String,
    /// Its format.
    pub ty: GpuType,
    /// Output features.
    pub rows: usize,
    /// Input features.
    pub cols: usize,
    /// Bytes (exactly the stored bytes: no dequantized copy).
    pub bytes: usize,
}

/// Element counts of the activation buffers, for batches of up to `max_batch` tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferSizes {
    /// Residual stream `[batch, hidden]`.
    pub x: usize,
    /// Normed input, then FFN output `[batch, hidden]`.
    pub h: usize,
    /// q | k | v `[batch, q_dim + 2 kv_dim]`.
    pub qkv: usize,
    /// Attention output `[batch, q_dim]`.
    pub attn: usize,
    /// Attention projection `[batch, hidden]`.
    pub out: usize,
    /// gate | up `[batch, 2 ffn]`.
    pub gate_up: usize,
    /// Logits `[batch, vocab]` (or `[1, vocab]` when only the last row is wanted).
    pub logits: usize,
    /// Decode-attention partials `[rows, heads, splits, head_dim + 2]`, rows the batched
    /// decode's.
    pub partials: usize,
    /// The batched decode's KV-cache tables `[layers, 2, rows]` (u64 addresses, 8 bytes).
    pub cache_tables: usize,
    /// Token ids and positions `[batch]` each (i32).
    pub ids: usize,
    /// Router scores `[batch, experts]` (mixture-of-experts layers; 0 otherwise).
    pub router: usize,
    /// Each row's experts `[batch, used]` (i32), and their weights (f32) as many.
    pub routes: usize,
    /// How many slots each expert received `[experts]` (i32).
    pub expert_counts: usize,
    /// Each expert's slots `[experts, batch]` (i32).
    pub expert_lists: usize,
    /// Every routed expert's gate | up `[batch · used, 2 expert_ffn]`.
    pub expert_gate_up: usize,
    /// Every routed expert's output `[batch · used, hidden]`.
    pub expert_out: usize,
    /// q8_1 codes of the activation rows of a decode matvec, in 4-byte words
    /// (`[min(batch, MMVQ_TOKENS), widest input]` bytes).
    pub xq: usize,
    /// Their block metas `[min(batch, MMVQ_TOKENS), widest input / 32, 4]`.
    pub xq_meta: usize,
}

impl BufferSizes {
    fn new<H: Handles>(
        c: &Transformer<H>,
        options: &LoadOptions,
        splits: &DecodeSplits,
        decode_rows: usize,
    ) -> Self {
        let b = options.max_batch;
        let logit_rows = if options.all_logits { b } else { 1 }.max(decode_rows);
        // The widest input of a dense matrix (q8_1 codes are only made for those).
        let widest = c.hidden.max(c.q_dim()).max(c.ffn_dim).next_multiple_of(32);
        let q8_1_rows = b.min(launch::MMVQ_TOKENS as usize);
        Self {
            x: b * c.hidden,
            h: b * c.hidden,
            qkv: b * (c.q_dim() + 2 * c.kv_dim()),
            attn: b * c.q_dim(),
            out: b * c.hidden,
            gate_up: if has_dense_ffn(c) {
                b * 2 * c.ffn_dim
            } else {
                0
            },
            logits: logit_rows * c.vocab_size,
            partials: decode_rows * c.heads * splits.splits * (c.head_dim + 2),
            cache_tables: 3 * c.layers() * decode_rows,
            ids: b,
            router: b * largest(c, |r, _| r.experts),
            routes: b * largest(c, |r, _| r.used),
            expert_counts: largest(c, |r, _| r.experts),
            expert_lists: b * largest(c, |r, _| r.experts),
            expert_gate_up: b * largest(c, |r, e| r.used * 2 * e.ffn_dim),
            expert_out: b * largest(c, |r, _| r.used * c.hidden),
            xq: q8_1_rows * widest / 4,
            xq_meta: q8_1_rows * widest / 32 * 4,
        }
    }

    /// Bytes of all buffers together (f32 and i32 elements are 4 bytes, addresses 8).
    pub fn bytes(&self) -> usize {
        4 * (self.x
            + self.h
            + self.qkv
            + self.attn
            + self.out
            + self.gate_up
            + self.logits
            + self.partials
            + 2 * self.cache_tables
            + 2 * self.ids
            + 1
            + self.router
            + 2 * self.routes
            + self.expert_counts
            + self.expert_lists
            + self.expert_gate_up
            + self.expert_out
            + self.xq
            + self.xq_meta)
    }
}

/// Whether some layer runs a dense FFN (a model of expert layers only needs no gate | up
/// buffer of the dense width).
fn has_dense_ffn<H: Handles>(c: &Transformer<H>) -> bool {
    c.blocks.iter().any(Block::has_dense_ffn)
}

/// The largest `size` over the model's mixture-of-experts layers (0 when it has none).
fn largest<H: Handles>(c: &Transformer<H>, size: impl Fn(&Router, &Experts) -> usize) -> usize {
    c.blocks
        .iter()
        .filter_map(|b| Some(size(b.router()?, b.experts()?)))
        .max()
        .unwrap_or(0)
}

/// The device memory a model needs, and the checks that it can run on the GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadPlan {
    /// Every matrix, in upload order (the tied LM head appears once, as `token_embd`).
    pub matrices: Vec<PlannedMatrix>,
    /// Bytes of the f32 vectors (norms, biases, q/k norms, RoPE factors).
    pub vector_bytes: usize,
    /// Whether the LM head is the token embedding.
    pub tied_lm_head: bool,
    /// KV-cache slots of each layer.
    pub kv_slots: Vec<usize>,
    /// Per layer, its index among the layers whose rows live in the shared pool of KV blocks
    /// (the full-attention ones, each block holding `KV_BLOCK` positions of all of them);
    /// `None` for a sliding-window layer, which keeps a ring of its own per sequence.
    pub kv_pool_index: Vec<Option<usize>>,
    /// Blocks of the pool: a whole context for each of `options.sequences` sequences, and
    /// `options.cached_blocks` more.
    pub kv_pool_blocks: usize,
    /// Values of one key (or value) row.
    pub kv_dim: usize,
    /// Bytes of the KV caches of all sequences: the pool's blocks and each sequence's rings
    /// (keys and values, of `options.kv`).
    pub kv_bytes: usize,
    /// Activation buffers.
    pub buffers: BufferSizes,
    /// Decode attention's split of the keys.
    pub splits: DecodeSplits,
    /// The most rows one decode step runs: `options.sequences · (1 + options.guesses)`, at
    /// least 1 and at most `max_batch`.
    pub decode_rows: usize,
    /// What the plan was made for.
    pub options: LoadOptions,
}

impl UploadPlan {
    /// Validates `model` for the GPU kernels and sizes everything for `options`.
    pub fn new(model: &HostModel<'_>, options: &LoadOptions) -> Result<Self, CudaError> {
        let (context, max_batch) = (options.context, options.max_batch);
        let c = model;
        check_config(c, context, max_batch)?;
        check_stages(c)?;
        let mut planner = Planner {
            matrices: Vec::new(),
            vectors: 0,
        };
        model.map(&mut planner)?;
        let (matrices, vectors) = (planner.matrices, planner.vectors);
        let tied_lm_head = model.output.is_none();
        if let Some(pos) = &model.position_embd
            && pos.rows < context
        {
            return Err(CudaError::Unsupported(format!(
                "a context of {context} exceeds the {} learned positions",
                pos.rows
            )));
        }

        let block = options.kv.block_values();
        if !c.kv_dim().is_multiple_of(block) {
            return Err(CudaError::Unsupported(format!(
                "a {} KV cache needs rows of a multiple of {block} values, and this model's have \
                 {}: choose --kv-type f16 or f32",
                options.kv.name(),
                c.kv_dim()
            )));
        }
        let kv_slots: Vec<usize> = (0..c.layers())
            .map(|layer| layer_slots(c, layer, context, max_batch))
            .collect();
        let mut pool_layers = 0;
        let kv_pool_index: Vec<Option<usize>> = (0..c.layers())
            .map(|layer| {
                c.window_of(layer).is_none().then(|| {
                    pool_layers += 1;
                    pool_layers - 1
                })
            })
            .collect();
        let sequences = options.sequences.max(1);
        let kv_pool_blocks =
            (sequences * context.div_ceil(KV_BLOCK)).saturating_add(options.cached_blocks);
        let row = 2 * options.kv.row_bytes(c.kv_dim());
        let rings: usize = (kv_slots.iter().zip(&kv_pool_index))
            .filter(|(_, pooled)| pooled.is_none())
            .map(|(slots, _)| slots * row)
            .sum();
        let kv_bytes = kv_pool_blocks * pool_layers * KV_BLOCK * row + sequences * rings;
        let longest = (0..c.layers())
            .map(|layer| c.window_of(layer).unwrap_or(context).min(context))
            .max()
            .unwrap_or(context);
        let splits = launch::decode_splits(longest);
        let decode_rows = sequences
            .saturating_mul(options.guesses.saturating_add(1))
            .min(max_batch);
        Ok(Self {
            matrices,
            vector_bytes: 4 * vectors,
            tied_lm_head,
            kv_slots,
            kv_pool_index,
            kv_pool_blocks,
            kv_dim: c.kv_dim(),
            kv_bytes,
            buffers: BufferSizes::new(c, options, &splits, decode_rows),
            splits,
            decode_rows,
            options: options.clone(),
        })
    }

    /// Layers in the pool's blocks.
    pub fn kv_pool_layers(&self) -> usize {
        self.kv_pool_index.iter().flatten().count()
    }

    /// Elements from one block's rows of a layer to the next block's: a pool block's size for
    /// the pooled layers, `KV_BLOCK` rows for a ring (its own buffer, the table 0, 1, 2, ...).
    pub fn kv_block_strides(&self) -> Vec<i64> {
        let rows = (KV_BLOCK * self.kv_dim) as i64;
        let pool = self.kv_pool_layers() as i64 * rows;
        let stride = |pooled: &Option<usize>| if pooled.is_some() { pool } else { rows };
        self.kv_pool_index.iter().map(stride).collect()
    }

    /// Bytes of all weights (matrices and vectors).
    pub fn weight_bytes(&self) -> usize {
        self.matrices.iter().map(|m| m.bytes).sum::<usize>() + self.vector_bytes
    }

    /// Everything together.
    pub fn total_bytes(&self) -> usize {
        self.weight_bytes() + self.kv_bytes + self.buffers.bytes()
    }

    /// An error naming the sizes when the plan does not fit in `free` bytes (with 5% and
    /// 256 MiB kept for the CUDA context, module and graph).
    pub fn check_fits(&self, free: u64) -> Result<(), CudaError> {
        let reserve = (free / 20).max(256 << 20);
        let needed = self.total_bytes() as u64;
        if needed + reserve > free {
            let mib = |b: usize| (b as u64) >> 20;
            return Err(CudaError::OutOfMemory {
                needed_mib: (needed + reserve) >> 20,
                weights_mib: mib(self.weight_bytes()),
                kv_mib: mib(self.kv_bytes),
                buffers_mib: mib(self.buffers.bytes()),
                free_mib: free >> 20,
            });
        }
        Ok(())
    }
}

/// KV slots of `layer`: a ring of `window + max_batch` on sliding-window layers, one per
/// position otherwise (the CPU cache's rule).
pub fn layer_slots<H: Handles>(
    c: &Transformer<H>,
    layer: usize,
    context: usize,
    max_batch: usize,
) -> usize {
    match c.window_of(layer) {
        Some(window) => (window + max_batch).min(context),
        None => context,
    }
}

fn check_config(c: &HostModel<'_>, context: usize, max_batch: usize) -> Result<(), CudaError> {
    let bad = |msg: String| Err(CudaError::Unsupported(msg));
    if context == 0 || max_batch == 0 {
        return bad(format!(
            "a context of {context} and batches of {max_batch} tokens"
        ));
    }
    if !c.causal || c.token_types.is_some() || c.output_norm.is_none() {
        return bad(
            "encoders (bidirectional attention, token types, no output norm: BERT) \
                    run on the CPU only; use --device cpu"
                .into(),
        );
    }
    if c.head_dim == 0 || c.head_dim > MAX_HEAD_DIM {
        return bad(format!(
            "head size {} (the attention kernels take 1 to {MAX_HEAD_DIM})",
            c.head_dim
        ));
    }
    if c.kv_heads == 0 || !c.heads.is_multiple_of(c.kv_heads) {
        return bad(format!(
            "{} query heads over {} kv heads",
            c.heads, c.kv_heads
        ));
    }
    let dense_ffn = if has_dense_ffn(c) { c.ffn_dim } else { 32 };
    for (what, width) in [
        ("hidden size", c.hidden),
        ("query width", c.q_dim()),
        ("FFN width", dense_ffn),
    ] {
        if width == 0 || !width.is_multiple_of(32) {
            return bad(format!(
                "{what} {width} (the matmul kernels need a multiple of 32)"
            ));
        }
    }
    for rope in c.blocks.iter().filter_map(Block::rope) {
        if rope.n_rot > c.head_dim || !rope.n_rot.is_multiple_of(2) {
            return bad(format!(
                "RoPE over {} of {} head dimensions",
                rope.n_rot, c.head_dim
            ));
        }
    }
    for (router, experts) in c
        .blocks
        .iter()
        .filter_map(|b| Some((b.router()?, b.experts()?)))
    {
        if router.used == 0 || router.used > router.experts {
            return bad(format!(
                "{} of {} experts per token",
                router.used, router.experts
            ));
        }
        if max_batch * router.used > launch::MAX_GRID_Y {
            return bad(format!(
                "batches of {max_batch} tokens times {} experts (the expert kernels take at \
                 most {} routed rows)",
                router.used,
                launch::MAX_GRID_Y
            ));
        }
        let groups = max_batch.div_ceil(launch::MATMUL_TOKENS as usize);
        if router.experts * groups > launch::MAX_GRID_Y {
            return bad(format!(
                "batches of {max_batch} tokens over {} experts (the expert kernels take at most \
                 {} groups of {} tokens)",
                router.experts,
                launch::MAX_GRID_Y,
                launch::MATMUL_TOKENS
            ));
        }
        if experts.ffn_dim == 0 || !experts.ffn_dim.is_multiple_of(32) {
            return bad(format!(
                "expert FFN width {} (the matmul kernels need a multiple of 32)",
                experts.ffn_dim
            ));
        }
    }
    let largest = [context, max_batch, c.vocab_size, c.hidden, c.ffn_dim * 2]
        .into_iter()
        .max()
        .unwrap_or(0);
    if i32::try_from(largest).is_err() {
        return bad(format!("a dimension of {largest} (kernels index with i32)"));
    }
    Ok(())
}

/// Every stage a GPU kernel runs: an error naming the first layer whose stages it does not
/// (the device `auto` then falls back to the CPU with that reason).
fn check_stages(c: &HostModel<'_>) -> Result<(), CudaError> {
    check_gemma4_layers(c)?;
    if c.per_layer_inputs.is_some() {
        return Err(CudaError::Unsupported(
            "the model has per-layer inputs (gemma4), which the CUDA backend does not run yet; \
             use --device cpu"
                .into(),
        ));
    }
    for (index, block) in c.blocks.iter().enumerate() {
        let unsupported = |what: &str| {
            Err(CudaError::Unsupported(format!(
                "layer {index} uses {what}, which the CUDA backend does not run yet; use \
                 --device cpu"
            )))
        };
        if block.experts().is_some_and(|e| e.ffn == Ffn::Gelu) {
            return unsupported("ungated experts");
        }
        if block.mla().is_some() {
            return unsupported("multi-head latent attention");
        }
        if block.shared_experts().is_some() {
            return unsupported("shared experts");
        }
        for stage in &block.stages {
            if let Stage::Router {
                router,
                selection_bias,
                ..
            } = stage
            {
                if !matches!(router.gating, Gating::SoftmaxTopK | Gating::TopKSoftmax) {
                    return unsupported(&format!("{:?} expert routing", router.gating));
                }
                if selection_bias.is_some() || router.scale != 1.0 {
                    return unsupported("a biased or scaled expert router");
                }
            }
        }
        let recurrent = block.stages.iter().find_map(|stage| match stage {
            Stage::ShortConv { .. } => Some("a short-convolution layer"),
            Stage::DeltaNet { .. } => Some("a gated delta-net layer"),
            Stage::AttentionGate => Some("gated attention"),
            _ => None,
        });
        if let Some(what) = recurrent {
            return unsupported(what);
        }
        if block.heads != c.model_heads() {
            return unsupported(&format!(
                "heads of its own ({} of {} values over {} kv heads, gemma4)",
                block.heads.heads, block.heads.head_dim, block.heads.kv_heads
            ));
        }
        for stage in &block.stages {
            let what = match stage {
                Stage::ValueNorm { .. } => "normed values",
                Stage::Qkv(Qkv::OptionalValue { .. }) => "values that may be its keys",
                Stage::PerLayerInput { .. } => "a per-layer input",
                Stage::OutputScale(_) => "a scaled output",
                _ => continue,
            };
            return unsupported(&format!("{what} (gemma4)"));
        }
    }
    Ok(())
}

/// Gemma 4's KV sharing and its experts beside the dense FFN, named before the features every
/// Gemma 4 layer has (which the checks after refuse too).
fn check_gemma4_layers(c: &HostModel<'_>) -> Result<(), CudaError> {
    for (index, block) in c.blocks.iter().enumerate() {
        let what = block.stages.iter().find_map(|stage| match stage {
            Stage::SharedAttention { source, .. } => Some(format!(
                "the KV cache of layer {source} (KV sharing, gemma4)"
            )),
            Stage::StashFfn | Stage::RouterNorm { .. } | Stage::ExpertScales(_) => {
                Some("experts beside a dense FFN (gemma4)".to_string())
            }
            _ => None,
        });
        if let Some(what) = what {
            return Err(CudaError::Unsupported(format!(
                "layer {index} uses {what}, which the CUDA backend does not run yet; use \
                 --device cpu"
            )));
        }
    }
    Ok(())
}

/// Checks every weight against the shape the tree implies and the kernels, and counts the
/// device memory it takes.
struct Planner {
    matrices: Vec<PlannedMatrix>,
    vectors: usize,
}

impl<'t, 'a> Mapper<'t, HostView<'a>, ()> for Planner {
    type Error = CudaError;

    fn matrix(&mut self, t: &Tensor, m: &'t HostMatrix<'a>) -> Result<(), CudaError> {
        if let Shape::Matrix { rows, .. } = t.shape {
            check_rows(t, m, rows)?;
        }
        self.matrices.push(plan_matrix(t, m)?);
        Ok(())
    }

    fn vector(&mut self, t: &Tensor, v: &'t &'a [f32]) -> Result<(), CudaError> {
        if let Shape::Vector(len) = t.shape {
            check_len(t, v.len(), len)?;
        }
        self.vectors += v.len();
        Ok(())
    }

    fn experts(&mut self, t: &Tensor, e: &'t HostStacked<'a>) -> Result<(), CudaError> {
        let Shape::Experts { count, rows, cols } = t.shape else {
            return Ok(());
        };
        self.matrices.push(plan_stacked(t, e, count, rows, cols)?);
        self.vectors += e.bias.as_ref().map_or(0, |b| b.len());
        Ok(())
    }
}

/// One projection of every expert: `experts` matrices of `[rows, cols]` in one allocation.
fn plan_stacked(
    t: &Tensor,
    m: &HostStacked<'_>,
    experts: usize,
    rows: usize,
    cols: usize,
) -> Result<PlannedMatrix, CudaError> {
    let name = t.name;
    if (m.experts, m.rows, m.cols) != (experts, rows, cols) {
        return Err(CudaError::Unsupported(format!(
            "tensor {name} holds {} experts of [{}, {}], the configuration implies {experts} of \
             [{rows}, {cols}]",
            m.experts, m.rows, m.cols
        )));
    }
    if let Some(bias) = &m.bias {
        let bias_name = Tensor {
            name: name.bias(),
            shape: Shape::Vector(experts * rows),
        };
        check_len(&bias_name, bias.len(), experts * rows)?;
    }
    let all_rows = experts
        .checked_mul(rows)
        .ok_or_else(|| CudaError::Unsupported(format!("tensor {name} has too many rows")))?;
    let all = HostMatrix {
        ty: m.ty,
        rows: all_rows,
        cols,
        data: &m.data,
    };
    plan_matrix(t, &all)
}

fn plan_matrix(t: &Tensor, m: &HostMatrix<'_>) -> Result<PlannedMatrix, CudaError> {
    let name = t.name;
    let ty = GpuType::of(m.ty).ok_or_else(|| CudaError::UnsupportedType {
        tensor: name.to_string(),
        ty: m.ty.name(),
    })?;
    let block = m.ty.block_size();
    if m.cols == 0 || !m.cols.is_multiple_of(32) || !m.cols.is_multiple_of(block) {
        return Err(CudaError::Unsupported(format!(
            "tensor {name} has rows of {} elements (the kernels need a multiple of 32 and of \
             the {} block of {block})",
            m.cols,
            m.ty.name()
        )));
    }
    let row_bytes = m.cols / block * m.ty.type_size();
    let bytes = row_bytes.checked_mul(m.rows).filter(|&b| b == m.data.len());
    let Some(bytes) = bytes else {
        return Err(CudaError::Unsupported(format!(
            "tensor {name} holds {} bytes, not {} rows of {row_bytes}",
            m.data.len(),
            m.rows
        )));
    };
    Ok(PlannedMatrix {
        name: name.to_string(),
        ty,
        rows: m.rows,
        cols: m.cols,
        bytes,
    })
}

fn check_rows(t: &Tensor, m: &HostMatrix<'_>, rows: usize) -> Result<(), CudaError> {
    if m.rows != rows {
        return Err(CudaError::Unsupported(format!(
            "tensor {} has {} rows, the configuration implies {rows}",
            t.name, m.rows
        )));
    }
    Ok(())
}

fn check_len(t: &Tensor, len: usize, expected: usize) -> Result<(), CudaError> {
    if len != expected {
        return Err(CudaError::Unsupported(format!(
            "{} has {len} values, expected {expected}",
            t.name
        )));
    }
    Ok(())
}
