//! The GPU program on host buffers for the emulated tests: the CUDA kernels built for the host
//! as a shared library and run launch by launch, host buffers standing in for the device's, and
//! a pool of KV blocks with its block tables, readied before each step as the runtime readies
//! them (copy on write of shared blocks through the emulated `kv_copy_block`).

// The engine's device seam, which only the engine tests use.
#[allow(dead_code)]
pub mod device;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use rinfer_cuda::kv_pool::{BlockAllocator, KV_BLOCK, SharedBlocks, lock};
use rinfer_cuda::program::{
    CacheAddresses, CacheTables, Launch, LayerKv, StepBuilder, WorkAddresses, copy_block,
    place_weights,
};
use rinfer_cuda::{LoadOptions, UploadPlan};
use rinfer_model::Model;

pub use crate::common::load_options;

pub type EmulateLaunch =
    unsafe extern "C" fn(*const u8, *const u32, *const u32, *const u64, i32) -> i32;

/// The emulation keeps its state in globals: one test at a time runs kernels through it.
static EMULATION: Mutex<()> = Mutex::new(());

/// Runs `test` with the emulator's launch entry point, its turn taken.
pub fn with_emulator(test: impl FnOnce(&EmulateLaunch)) {
    let _turn = EMULATION
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let library = emulator();
    // SAFETY: the symbol has this signature in emulator.cpp.
    let emulate: libloading::Symbol<'_, EmulateLaunch> =
        unsafe { library.get(b"rinfer_emulate_launch\0") }.expect("the emulator entry point");
    test(&emulate);
}

/// The kernels built for the host as a shared library (once: the tests run in parallel).
fn emulator() -> libloading::Library {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let lib = BUILT.get_or_init(build_emulator);
    // SAFETY: the library was built from the emulator source; loading it runs no initialisers
    // beyond the C++ runtime's.
    unsafe { libloading::Library::new(lib) }.expect("load the emulator")
}

fn build_emulator() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cuda_emulator");
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("librinfer_cuda_emulator.so");
    let source: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "../cuda/tests/host/emulator.cpp",
    ]
    .iter()
    .collect();
    rinfer_cuda::kernels::codebooks::write_host_headers(&dir).unwrap();
    let status = Command::new("c++")
        .args(["-std=c++20", "-O2", "-w", "-shared", "-fPIC", "-I"])
        .arg(&dir)
        .arg("-o")
        .arg(&lib)
        .arg(&source)
        .status()
        .expect("a host C++ compiler (`c++`) is needed to emulate the CUDA kernels");
    assert!(status.success(), "compiling {} failed", source.display());
    lib
}

pub fn run(emulate: &EmulateLaunch, launches: &[Launch]) {
    for l in launches {
        let name = format!("{}\0", l.kernel.name());
        let grid = [l.shape.grid.0, l.shape.grid.1, l.shape.grid.2];
        let block = [l.shape.block.0, l.shape.block.1, l.shape.block.2];
        let slots: Vec<u64> = l.args().iter().map(|a| a.to_slot()).collect();
        // SAFETY: the slots hold the kernel's arguments in its declared order, every pointer a
        // live host buffer of this test (or a weight of the mapped model) of the size the
        // upload plan computed; the emulator only reads the arrays passed for this call.
        let status = unsafe {
            emulate(
                name.as_ptr(),
                grid.as_ptr(),
                block.as_ptr(),
                slots.as_ptr(),
                slots.len() as i32,
            )
        };
        assert_eq!(status, 0, "launch of {} failed ({status})", l.kernel.name());
    }
}

/// Host buffers standing in for the GPU's, and their addresses.
pub struct HostBuffers {
    f32s: Vec<Vec<f32>>,
    pub tokens: Vec<i32>,
    pub positions: Vec<i32>,
    pub expert_ids: Vec<i32>,
    pub expert_counts: Vec<i32>,
    pub expert_lists: Vec<i32>,
    pub argmax: Vec<i32>,
}

impl HostBuffers {
    pub fn new(plan: &UploadPlan) -> Self {
        let b = &plan.buffers;
        let sizes = [
            b.x,
            b.h,
            b.qkv,
            b.attn,
            b.out,
            b.gate_up,
            b.logits,
            b.partials,
            b.router,
            b.routes,
            b.expert_gate_up,
            b.expert_out,
            b.xq,
            b.xq_meta,
        ];
        Self {
            f32s: sizes.iter().map(|&n| vec![0.0; n]).collect(),
            tokens: vec![0; b.ids],
            positions: vec![0; b.ids],
            expert_ids: vec![0; b.routes],
            expert_counts: vec![0; b.expert_counts],
            expert_lists: vec![0; b.expert_lists],
            argmax: vec![0],
        }
    }

    pub fn work(&mut self) -> WorkAddresses {
        let a: Vec<u64> = self
            .f32s
            .iter_mut()
            .map(|v| v.as_mut_ptr() as u64)
            .collect();
        WorkAddresses {
            x: a[0],
            h: a[1],
            qkv: a[2],
            attn: a[3],
            out: a[4],
            gate_up: a[5],
            logits: a[6],
            partials: a[7],
            router: a[8],
            expert_weights: a[9],
            expert_gate_up: a[10],
            expert_out: a[11],
            xq: a[12],
            xq_meta: a[13],
            expert_ids: self.expert_ids.as_mut_ptr() as u64,
            expert_counts: self.expert_counts.as_mut_ptr() as u64,
            expert_lists: self.expert_lists.as_mut_ptr() as u64,
            tokens: self.tokens.as_mut_ptr() as u64,
            positions: self.positions.as_mut_ptr() as u64,
            argmax: self.argmax.as_mut_ptr() as u64,
        }
    }

    pub fn logits(&self) -> &[f32] {
        &self.f32s[6]
    }
}

/// Runs `test` with `model`'s GPU program on host buffers laid out by the upload plan for
/// `options`: the weights are the mapped model's own bytes, and the pool of KV blocks starts
/// empty (its plan is `gpu.pool.plan`).
pub fn with_host_gpu<R>(
    emulate: &EmulateLaunch,
    model: &Model,
    options: &LoadOptions,
    test: impl FnOnce(Emulated<'_, '_>) -> R,
) -> R {
    let view = model.gpu_view().unwrap();
    let plan = UploadPlan::new(&view, options).unwrap();
    let weights = place_weights(
        &view,
        |bytes| Ok(bytes.as_ptr() as u64),
        |floats| Ok(floats.as_ptr() as u64),
    )
    .unwrap();
    let mut buffers = HostBuffers::new(&plan);
    let work = buffers.work();
    let builder = StepBuilder {
        model: &weights,
        work: &work,
        splits: plan.splits,
        kv: plan.options.kv,
    };
    test(Emulated {
        emulate,
        builder: &builder,
        buffers: &mut buffers,
        pool: HostPool::new(&plan),
    })
}

/// The GPU program on host buffers: the emulator, the step builder, the buffers its
/// addresses point into and the pool of KV blocks.
pub struct Emulated<'e, 'b> {
    pub emulate: &'e EmulateLaunch,
    pub builder: &'e StepBuilder<'b>,
    pub buffers: &'e mut HostBuffers,
    pub pool: HostPool,
}

/// The pool of KV blocks on host buffers (`[blocks, pool layers, KV_BLOCK, kv_dim]` keys,
/// values alike, bytes of the plan's element type), with four times the blocks the plan asks
/// for (room for forks), and its allocator (shared, as the runtime shares it with its caches
/// and the engine's prefix cache), which hands them out in descending order so that no table
/// is the identity.
pub struct HostPool {
    pub keys: Vec<u8>,
    pub values: Vec<u8>,
    pub blocks: SharedBlocks,
    pub plan: UploadPlan,
}

/// One sequence's KV cache on host buffers: its pool blocks (and the table the kernels read,
/// of fixed length, so its address does not move), its rings and their table 0, 1, 2, ...
pub struct HostCache {
    pub blocks: Vec<u32>,
    pub table: Vec<u32>,
    pub rings: Vec<(Vec<u8>, Vec<u8>)>,
    pub ring_table: Vec<u32>,
    pub len: usize,
}

impl HostPool {
    pub fn new(plan: &UploadPlan) -> Self {
        let count = 4 * plan.kv_pool_blocks;
        let block = plan.kv_pool_layers() * KV_BLOCK * Self::row_bytes(plan);
        let mut blocks = BlockAllocator::new(count);
        let (mut all, mut copies) = (Vec::new(), Vec::new());
        blocks
            .prepare(&mut all, 0, count * KV_BLOCK, &mut copies)
            .unwrap();
        blocks.truncate(&mut all, 0);
        Self {
            keys: vec![0; count * block],
            values: vec![0; count * block],
            blocks: Arc::new(Mutex::new(blocks)),
            plan: plan.clone(),
        }
    }

    pub fn row_bytes(plan: &UploadPlan) -> usize {
        plan.options.kv.row_bytes(plan.kv_dim)
    }

    pub fn new_cache(&self) -> HostCache {
        let plan = &self.plan;
        let ring_slots = (plan.kv_slots.iter().zip(&plan.kv_pool_index))
            .filter(|(_, pooled)| pooled.is_none())
            .map(|(&slots, _)| slots);
        let ring = |slots: usize| vec![0u8; slots * Self::row_bytes(plan)];
        let longest = ring_slots.clone().max().unwrap_or(0);
        HostCache {
            blocks: Vec::new(),
            table: vec![0; plan.options.context.div_ceil(KV_BLOCK)],
            rings: ring_slots.map(|slots| (ring(slots), ring(slots))).collect(),
            ring_table: (0..longest.div_ceil(KV_BLOCK) as u32).collect(),
            len: 0,
        }
    }

    /// Readies `cache` for `n` more positions as the runtime does: copies of the shared blocks
    /// they fall in (the emulated `kv_copy_block`), fresh blocks past its table.
    pub fn reserve(&mut self, emulate: &EmulateLaunch, cache: &mut HostCache, n: usize) {
        let mut copies = Vec::new();
        let (from, to) = (cache.len, cache.len + n);
        let mut blocks = lock(&self.blocks);
        blocks
            .prepare(&mut cache.blocks, from, to, &mut copies)
            .unwrap();
        let words = (self.keys.len() / blocks.capacity() / 4) as i64;
        drop(blocks);
        let (keys, values) = (
            self.keys.as_mut_ptr() as u64,
            self.values.as_mut_ptr() as u64,
        );
        let copy = |&c| copy_block(keys, values, words, c);
        run(emulate, &copies.iter().map(copy).collect::<Vec<_>>());
        cache.table[..cache.blocks.len()].copy_from_slice(&cache.blocks);
    }

    /// A cache that shares `cache`'s blocks, its rings copied (a prefix reused).
    pub fn fork(&mut self, cache: &HostCache) -> HostCache {
        HostCache {
            blocks: lock(&self.blocks).fork(&cache.blocks, cache.len),
            table: cache.table.clone(),
            rings: cache.rings.clone(),
            ring_table: cache.ring_table.clone(),
            len: cache.len,
        }
    }

    /// Where `cache`'s layers are.
    pub fn addresses(&mut self, cache: &mut HostCache) -> CacheAddresses {
        let strides = self.plan.kv_block_strides();
        let row_bytes = Self::row_bytes(&self.plan);
        let (keys, values) = (
            self.keys.as_mut_ptr() as u64,
            self.values.as_mut_ptr() as u64,
        );
        let mut rings = cache.rings.iter_mut();
        let pooled = self.plan.kv_slots.iter().zip(&self.plan.kv_pool_index);
        let layers = pooled.enumerate().map(|(layer, (&slots, pooled))| {
            let (keys, values, table) = match pooled {
                Some(index) => {
                    let offset = (index * KV_BLOCK * row_bytes) as u64;
                    (keys + offset, values + offset, cache.table.as_mut_ptr())
                }
                None => {
                    let (k, v) = rings.next().unwrap();
                    let table = cache.ring_table.as_mut_ptr();
                    (k.as_mut_ptr() as u64, v.as_mut_ptr() as u64, table)
                }
            };
            LayerKv {
                keys,
                values,
                table: table as u64,
                block_stride: strides[layer],
                slots,
            }
        });
        CacheAddresses {
            layers: layers.collect(),
        }
    }
}

impl Emulated<'_, '_> {
    fn vocab(&self) -> usize {
        self.builder.model.vocab_size
    }

    /// Runs `tokens` through `cache` as one sequence's prefill step (prompt tokens, any
    /// number) and returns the last row's logits.
    pub fn step(&mut self, tokens: &[u32], cache: &mut HostCache) -> Vec<f32> {
        self.step_rows(tokens, cache, 1).to_vec()
    }

    /// A new cache for each of `prompts`, each prompt run through its own as one step.
    pub fn prefilled(&mut self, prompts: &[Vec<u32>]) -> Vec<HostCache> {
        prompts
            .iter()
            .map(|prompt| {
                let mut cache = self.pool.new_cache();
                self.step(prompt, &mut cache);
                cache
            })
            .collect()
    }

    /// Runs `tokens` like [`Self::step`] and returns the logits of its last `rows` tokens,
    /// `[rows, vocab]`.
    pub fn step_rows(&mut self, tokens: &[u32], cache: &mut HostCache, rows: usize) -> &[f32] {
        let n = tokens.len();
        for (i, &t) in tokens.iter().enumerate() {
            self.buffers.tokens[i] = t as i32;
            self.buffers.positions[i] = (cache.len + i) as i32;
        }
        self.pool.reserve(self.emulate, cache, n);
        let mut launches = Vec::new();
        let addresses = self.pool.addresses(cache);
        self.builder
            .prefill(n, &addresses, n - rows, rows, &mut launches);
        run(self.emulate, &launches);
        cache.len += n;
        &self.buffers.logits()[..rows * self.vocab()]
    }

    /// Decodes `token` alone over `cache` (the runtime's single-sequence decode step) and
    /// returns its logits.
    pub fn decode_token(&mut self, token: u32, cache: &mut HostCache) -> Vec<f32> {
        self.buffers.tokens[0] = token as i32;
        self.buffers.positions[0] = cache.len as i32;
        self.pool.reserve(self.emulate, cache, 1);
        let mut launches = Vec::new();
        let addresses = self.pool.addresses(cache);
        self.builder.decode_token(&addresses, &mut launches);
        run(self.emulate, &launches);
        cache.len += 1;
        self.buffers.logits()[..self.vocab()].to_vec()
    }

    /// Runs one batched decode step, row `i` the token `rows[i].1` of the sequence whose cache
    /// is `caches[rows[i].0]`, and returns each row's logits.
    pub fn decode(
        &mut self,
        rows: &[(usize, u32)],
        caches: &mut [HostCache],
        plan: &UploadPlan,
    ) -> Vec<Vec<f32>> {
        let mut by_seq: Vec<Option<&mut HostCache>> = caches.iter_mut().map(Some).collect();
        let tokens: Vec<[u32; 1]> = rows.iter().map(|&(_, token)| [token]).collect();
        let mut rows: Vec<(&[u32], &mut HostCache)> = rows
            .iter()
            .zip(&tokens)
            .map(|(&(seq, _), token)| {
                (
                    &token[..],
                    by_seq[seq].take().expect("one row per sequence"),
                )
            })
            .collect();
        let vocab = self.vocab();
        self.decode_rows(&mut rows, plan)
            .chunks_exact(vocab)
            .map(<[f32]>::to_vec)
            .collect()
    }

    /// Runs one batched decode step as the runtime does: sequence `i` feeds the tokens
    /// `seqs[i].0` at the positions following its cache `seqs[i].1`, a row each; returns the
    /// logits `[rows, vocab]`.
    pub fn decode_rows(
        &mut self,
        seqs: &mut [(&[u32], &mut HostCache)],
        plan: &UploadPlan,
    ) -> &[f32] {
        let mut table = vec![0u64; plan.buffers.cache_tables];
        let tables = CacheTables {
            base: table.as_mut_ptr() as u64,
            rows: plan.decode_rows,
            slots: plan.kv_slots.clone(),
            block_strides: plan.kv_block_strides(),
        };
        let mut n = 0;
        for (tokens, cache) in seqs.iter_mut() {
            self.pool.reserve(self.emulate, cache, tokens.len());
            let layers = self.pool.addresses(cache).layers;
            for (i, &token) in tokens.iter().enumerate() {
                self.buffers.tokens[n] = token as i32;
                self.buffers.positions[n] = (cache.len + i) as i32;
                tables.set_row(&mut table, n, layers.iter().copied());
                n += 1;
            }
        }
        assert!(
            n <= plan.decode_rows,
            "{n} rows in a pass of {}",
            plan.decode_rows
        );
        let mut launches = Vec::new();
        self.builder.decode(n, &tables, &mut launches);
        run(self.emulate, &launches);
        for (tokens, cache) in seqs.iter_mut() {
            cache.len += tokens.len();
        }
        &self.buffers.logits()[..n * self.vocab()]
    }
}
