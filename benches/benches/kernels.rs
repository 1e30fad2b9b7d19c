//! Matvec (one token, decode) and matmul (128 tokens, prefill) of each packed weight type at
//! Gemma 3 270M's shapes, multiplied as the model multiplies them: repacked where this CPU has
//! a packed kernel for the type, row-major otherwise.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rinfer_benches::{PACKED_TYPES, matrix_bytes, random_matrix, values};
use rinfer_formats::GgmlType;
use rinfer_kernels::{
    ActivationBuffer, Kernels, PackedMatrix, WeightMatrix, matmul, matmul_packed, matvec,
};

/// `rows × cols` of Gemma 3 270M: FFN gate/up, FFN down, attention q (a type is measured at
/// the shapes whose rows are whole blocks of it: the K-quants' 256 values do not divide 640).
const SHAPES: [(usize, usize); 3] = [(2048, 640), (640, 2048), (1024, 640)];

/// Tokens of the prefill product.
const PREFILL_TOKENS: usize = 128;

/// A weight matrix as the model multiplies it.
enum Product<'a> {
    RowMajor(WeightMatrix<'a>),
    Packed(PackedMatrix),
}

impl<'a> Product<'a> {
    fn new(w: WeightMatrix<'a>) -> Self {
        Kernels::detected()
            .pack(&w)
            .map_or(Product::RowMajor(w), Product::Packed)
    }

    /// `y = W·x` for the `n` rows of `x` (one row is a matvec).
    fn run(&self, x: &[f32], n: usize, act: &mut ActivationBuffer, y: &mut [f32]) {
        let kernels = Kernels::detected();
        let result = match self {
            Product::RowMajor(w) if n == 1 => matvec(kernels, w, x, act, y),
            Product::RowMajor(w) => matmul(kernels, w, x, n, act, y),
            Product::Packed(p) => matmul_packed(p, x, n, act, y),
        };
        result.expect("the product's shapes fit");
    }
}

fn products(c: &mut Criterion) {
    eprintln!(
        "kernels: {} instruction set",
        Kernels::detected().isa().name()
    );
    for (name, n) in [("matvec", 1), ("matmul", PREFILL_TOKENS)] {
        let mut group = c.benchmark_group(name);
        group
            .sample_size(20)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(2));
        for ty in PACKED_TYPES {
            for (seed, (rows, cols)) in SHAPES.into_iter().enumerate() {
                if !cols.is_multiple_of(ty.block_size()) {
                    continue;
                }
                bench_product(&mut group, ty, rows, cols, n, seed as u64);
            }
        }
        group.finish();
    }
}

/// Benchmarks `W·X` of one `rows × cols` matrix of `ty` on `n` tokens.
fn bench_product(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    ty: GgmlType,
    rows: usize,
    cols: usize,
    n: usize,
    seed: u64,
) {
    let words = random_matrix(ty, rows, cols, seed).expect("a packed type has a quantizer");
    let w = WeightMatrix::new(ty, rows, cols, matrix_bytes(&words, ty, rows, cols))
        .expect("a whole number of blocks");
    let product = Product::new(w);
    let x = values(n * cols, seed ^ 1);
    let mut act = ActivationBuffer::for_matmul(n, cols, rows);
    let mut y = vec![0.0f32; n * rows];
    // Matvec streams the weights: bytes per second. Matmul computes: multiply-adds per second.
    group.throughput(if n == 1 {
        Throughput::Bytes(w.rows() as u64 * w.row(0).len() as u64)
    } else {
        Throughput::Elements((rows * cols * n) as u64)
    });
    let id = BenchmarkId::new(ty.name(), format!("{rows}x{cols}"));
    group.bench_function(id, |b| b.iter(|| product.run(&x, n, &mut act, &mut y)));
}

criterion_group!(benches, products);
criterion_main!(benches);
