//! Kernel throughput at real model shapes: matvec GB/s of weights streamed (at 1 and 2
//! threads, beside the machine's measured read bandwidth) and matmul GFLOP/s.
//!
//! Run it as `cargo xtask bench kernels [--json] [TYPE...]`, which builds it in release mode;
//! naming types (`Q4_K Q8_0`) limits the run to them. Every figure is the median of several
//! repetitions on random weights of each type, multiplied the way the model multiplies them:
//! repacked into a [`PackedMatrix`] where this CPU has a packed kernel for the type.

mod bandwidth;
mod report;
mod timing;
mod weights;

use rayon::{ThreadPool, ThreadPoolBuilder};
use rinfer_formats::GgmlType;
use rinfer_kernels::{
    ActivationBuffer, Kernels, PackedMatrix, WeightMatrix, matmul, matmul_packed,
};

use report::{MatmulRow, MatvecRow, Report};
use weights::{Lcg, Matrices};

/// `rows × cols` of real weights: Gemma 3 270M (FFN down, attention output, FFN gate/up,
/// attention q, the tied 262144-token output head) and a Llama-3-8B-sized layer.
const SHAPES: [(usize, usize); 4] = [(2048, 2048), (5632, 2048), (2048, 5632), (14_336, 4096)];

/// Thread counts matvec is measured at; matmul runs on the largest.
const THREADS: [usize; 2] = [1, 2];

/// Tokens per matmul.
const MATMUL_TOKENS: [usize; 3] = [16, 128, 512];

/// Each matvec measurement cycles through copies of its matrix totalling at least this many
/// bytes, so every call streams its weights from memory, as decode of a model larger than the
/// cache does.
const MATVEC_FOOTPRINT: usize = 1 << 30;

/// Matmuls are measured on at most this many multiply-adds (`rows × cols × n`), taking the
/// first rows of larger matrices: rows are independent, so the rate is the same, and the full
/// 262144-row and 14336-wide shapes at N = 512 would take most of the run's time.
const MATMUL_MAX_MACS: usize = 4096 * 4096 * 128;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    // `cargo bench` passes `--bench`; every other word names a type to measure.
    let only: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let kernels = Kernels::detected();
    // Every weight type with a dot product.
    let all: Vec<GgmlType> = kernels.weight_types().collect();
    if let Some(bad) = only
        .iter()
        .find(|name| !all.iter().any(|ty| ty.name() == **name))
    {
        let known: Vec<&str> = all.iter().map(|ty| ty.name()).collect();
        eprintln!(
            "bench kernels: unknown type `{bad}`; known: {}",
            known.join(" ")
        );
        std::process::exit(2);
    }
    let types = all
        .into_iter()
        .filter(|ty| only.is_empty() || only.iter().any(|name| *name == ty.name()));
    let load_before = report::load_average();
    let pools: Vec<(usize, ThreadPool)> = THREADS
        .iter()
        .map(|&n| {
            let pool = ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .expect("cannot start a rayon thread pool");
            (n, pool)
        })
        .collect();
    let progress = |msg: &str| eprintln!("bench kernels: {msg}");

    progress(&format!(
        "read bandwidth ({} MiB streaming sum)",
        bandwidth::BUFFER_BYTES >> 20
    ));
    let bandwidth = bandwidth::measure(&pools);
    let mut report = Report::new(kernels.isa().name(), &pools, &bandwidth);
    report.load[0] = load_before;

    let mut storage = Vec::new();
    for ty in types {
        progress(&format!("{ty}"));
        for (seed, &(rows, cols)) in SHAPES.iter().enumerate() {
            if !cols.is_multiple_of(ty.block_size()) {
                continue;
            }
            let seed = seed as u64 * 64 + ty.id() as u64;
            let row_bytes = cols / ty.block_size() * ty.type_size();
            let copies = MATVEC_FOOTPRINT.div_ceil(rows * row_bytes);
            let matrices = Matrices::new_in(storage, ty, rows, cols, copies, seed);
            for (i, (threads, pool)) in pools.iter().enumerate() {
                let gbs = pool.install(|| matvec_gbs(kernels, &matrices, ty, rows, cols, seed));
                report.matvec.push(MatvecRow {
                    ty,
                    rows,
                    cols,
                    threads: *threads,
                    gbs,
                    pct_of_bandwidth: 100.0 * gbs / bandwidth[i],
                });
            }
            storage = matrices.into_words();
            let (threads, pool) = pools.last().expect("at least one pool");
            for n in MATMUL_TOKENS {
                let rows_measured = rows.min((MATMUL_MAX_MACS / (cols * n)).max(64));
                let gflops =
                    pool.install(|| matmul_gflops(kernels, ty, rows_measured, cols, n, seed));
                report.matmul.push(MatmulRow {
                    ty,
                    rows,
                    cols,
                    rows_measured,
                    n,
                    threads: *threads,
                    gflops,
                });
            }
        }
    }
    report.load[1] = report::load_average();
    if json {
        println!("{}", report.json());
    } else {
        print!("{}", report.table());
    }
}

/// A weight matrix as the model multiplies it.
enum Product<'a> {
    RowMajor(WeightMatrix<'a>),
    Packed(PackedMatrix),
}

impl<'a> Product<'a> {
    fn new(kernels: &Kernels, w: WeightMatrix<'a>) -> Self {
        kernels
            .pack(&w)
            .map_or(Product::RowMajor(w), Product::Packed)
    }

    /// `y = W·x` for the `n` rows of `x` (one row is a matvec).
    fn run(
        &self,
        kernels: &Kernels,
        x: &[f32],
        n: usize,
        act: &mut ActivationBuffer,
        y: &mut [f32],
    ) {
        match self {
            Product::RowMajor(w) => matmul(kernels, w, x, n, act, y).expect("matmul"),
            Product::Packed(p) => matmul_packed(p, x, n, act, y).expect("packed matmul"),
        }
    }
}

/// GB/s of weight bytes streamed by `matvec` on the copies of one `rows × cols` matrix of `ty`
/// in `m`, in the current pool.
fn matvec_gbs(
    kernels: &Kernels,
    m: &Matrices,
    ty: GgmlType,
    rows: usize,
    cols: usize,
    seed: u64,
) -> f64 {
    let views: Vec<Product<'_>> = (0..m.copies)
        .map(|i| {
            let w = WeightMatrix::new(ty, rows, cols, m.copy(i)).expect("valid matrix");
            Product::new(kernels, w)
        })
        .collect();
    let x = Lcg::new(seed ^ 1).values(cols);
    let mut act = ActivationBuffer::for_matvec(cols);
    let mut y = vec![0.0f32; rows];
    let secs = timing::median_secs(5, || {
        for w in &views {
            w.run(kernels, &x, 1, &mut act, &mut y);
        }
    });
    (m.bytes * m.copies) as f64 / secs / 1e9
}

/// GFLOP/s (2 flops per multiply-add) of `matmul` of `rows × cols` of `ty` by `n` tokens.
fn matmul_gflops(
    kernels: &Kernels,
    ty: GgmlType,
    rows: usize,
    cols: usize,
    n: usize,
    seed: u64,
) -> f64 {
    let m = Matrices::new(ty, rows, cols, 1, seed);
    let w = WeightMatrix::new(ty, rows, cols, m.copy(0)).expect("valid matrix");
    let w = Product::new(kernels, w);
    let x = Lcg::new(seed ^ 2).values(n * cols);
    let mut act = ActivationBuffer::for_matmul(n, cols, rows);
    let mut y = vec![0.0f32; n * rows];
    let secs = timing::median_secs(3, || {
        w.run(kernels, &x, n, &mut act, &mut y);
    });
    2.0 * (rows * cols * n) as f64 / secs / 1e9
}
