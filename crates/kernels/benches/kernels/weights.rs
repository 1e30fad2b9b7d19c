//! Random weight matrices of every benchmarked type, built from a small pool of distinct rows.

use rinfer_formats::GgmlType;

/// Distinct rows quantized per matrix; the matrix repeats them. Row content does not change
/// the speed of branch-free kernels, and quantizing hundreds of millions of values would take
/// longer than the benchmark itself.
const POOL_ROWS: usize = 64;

/// Deterministic pseudo-random numbers (a 64-bit LCG; the benchmark needs variety, not quality).
pub struct Lcg(u64);

impl Lcg {
    pub fn new(seed: u64) -> Self {
        Lcg(seed.wrapping_mul(6_364_136_223_846_793_005) ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0
    }

    /// Uniform in `-1..1`.
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// `n` values in `-1..1`.
    pub fn values(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next_f32()).collect()
    }
}

/// `POOL_ROWS` (or fewer) distinct rows of `cols` values of `ty`, concatenated.
fn pool(ty: GgmlType, rows: usize, cols: usize, rng: &mut Lcg) -> Vec<u8> {
    let row_bytes = cols / ty.block_size() * ty.type_size();
    let n = rows.min(POOL_ROWS);
    let mut out = vec![0u8; n * row_bytes];
    for row in out.chunks_exact_mut(row_bytes) {
        let x: Vec<f32> = rng.values(cols).iter().map(|v| v * 0.05).collect();
        if rinfer_kernels::quantize_row(ty, &x, row).is_err() {
            random_blocks(row, rng);
        }
    }
    out
}

/// Fills `row` with random bytes, for types without a quantizer: each byte has its bits 5 and 6
/// cleared, so that any two of them read as an f16 scale are finite and below 2^-7 in
/// magnitude (the codes keep most of their variety, which does not change a kernel's speed).
fn random_blocks(row: &mut [u8], rng: &mut Lcg) {
    for b in row.iter_mut() {
        *b = rng.next_u64() as u8 & 0x9F;
    }
}

/// `copies` back-to-back copies of one random `rows × cols` matrix of `ty`, in `u64` storage so
/// every copy is aligned for its blocks.
pub struct Matrices {
    words: Vec<u64>,
    /// Bytes of one matrix.
    pub bytes: usize,
    pub copies: usize,
}

impl Matrices {
    pub fn new(ty: GgmlType, rows: usize, cols: usize, copies: usize, seed: u64) -> Self {
        Self::new_in(Vec::new(), ty, rows, cols, copies, seed)
    }

    /// As [`Matrices::new`], reusing `words` (from [`Matrices::into_words`]): refilling memory
    /// that is already mapped is much faster than mapping a fresh gigabyte.
    pub fn new_in(
        mut words: Vec<u64>,
        ty: GgmlType,
        rows: usize,
        cols: usize,
        copies: usize,
        seed: u64,
    ) -> Self {
        let row_bytes = cols / ty.block_size() * ty.type_size();
        let bytes = rows * row_bytes;
        let pool = pool(ty, rows, cols, &mut Lcg::new(seed));
        let needed = (bytes * copies).div_ceil(8);
        if words.len() < needed {
            words.resize(needed, 0);
        }
        let all: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
        for (i, row) in all[..bytes * copies]
            .chunks_exact_mut(row_bytes)
            .enumerate()
        {
            let p = i % rows % (pool.len() / row_bytes);
            row.copy_from_slice(&pool[p * row_bytes..(p + 1) * row_bytes]);
        }
        Matrices {
            words,
            bytes,
            copies,
        }
    }

    /// The storage, for reuse by [`Matrices::new_in`].
    pub fn into_words(self) -> Vec<u64> {
        self.words
    }

    /// The bytes of copy `i`.
    pub fn copy(&self, i: usize) -> &[u8] {
        let all: &[u8] = bytemuck::cast_slice(&self.words);
        &all[i * self.bytes..(i + 1) * self.bytes]
    }
}
