// Prefill attention over an f16 cache on tensor cores (flash attention): the query rows and
// each tile of keys and values as f16 in shared memory, scores and weighted values as wmma
// products with f32 accumulators, an online softmax per query row in between.
//
// A block takes FLASH_WARPS * 16 consecutive queries of one head: grid (⌈n / FLASH_QUERIES⌉,
// heads), FLASH_WARPS warps, each owning 16 query rows. The block walks the union of its
// queries' key ranges in tiles of FLASH_KEYS keys at multiples of FLASH_KEYS (read from the
// paged cache as attention.cu describes, 16 bytes a load where the rows allow; keys past the
// range read as zeros); per tile each warp whose rows see any of its keys
//   1. multiplies its queries by the tile's keys (S = Q Kᵀ, 16 × FLASH_KEYS) and stages S in
//      shared memory;
//   2. per row (two lanes a row), masks the keys the query does not see (causal, window),
//      soft-caps, raises the running max m, rescales the running sum l by exp(m_old − m) and
//      adds the weights p = exp(s − m), rounded to f16, which it stores as P;
//   3. rescales its output accumulators where a row's max rose (through shared memory, since
//      a wmma accumulator's layout is opaque) and adds P V.
// Last the rows' outputs are divided by l (plus exp(sink − m) where the head has a sink).
// Every step is per row, so a query's output does not depend on the other queries of the
// launch: a prompt gives the same bits in one chunk or several.
//
// Queries are scaled by `scale` before they are rounded to f16; keys and values are the
// cache's f16 bits, exact. The result differs from attention in f32 (attention.cu) by those
// roundings and the tensor cores' summation order (about 2e-4 of an output; llama.cpp's CUDA
// flash attention rounds the same). Head widths up to MAX_HEAD_DIM, padded with zeros to a multiple of 16: the kernels
// are instantiated for 4, 8 and 16 chunks of 16 dimensions (attention_prefill_mma_f16_64,
// _128, _256), so that a narrow head's accumulators take only the registers it needs.

#define FLASH_WARPS 2
#define FLASH_QUERIES (16 * FLASH_WARPS)
#define FLASH_KEYS 16
// P's row stride in halves (a multiple of 8, each warp's tile 32-byte aligned).
#define FLASH_P_LD 24

// The eight halves at p as one 16-byte vector, those from the min(8, left)-th on zero: one
// load where p is aligned and all eight are wanted.
__device__ __forceinline__ uint4 load_halves(const u16* p, int left) {
    if (left >= 8 && ((size_t)p & 15) == 0) return *(const uint4*)p;
    u32 w[4] = {0, 0, 0, 0};
    for (int i = 0; i < min(8, left); i++) w[i / 2] |= (u32)p[i] << (16 * (i % 2));
    return uint4{w[0], w[1], w[2], w[3]};
}

template <int CHUNKS>
__device__ __forceinline__ void attention_prefill_flash(
    const float* qkv, int ld, int q_off, const u16* keys, const u16* values, const int* table,
    long long block_stride, int slots, int kv_dim, int head_dim, int group, const int* positions,
    int n, int window, float scale, float softcap, const float* sinks, float* out, int heads) {
    // Staged rows: 16 * CHUNKS halves, skewed by 8 against bank conflicts.
    constexpr int WIDTH = 16 * CHUNKS, LD = WIDTH + 8;
    __shared__ __align__(32) u16 q_tile[FLASH_WARPS][16 * LD];
    __shared__ __align__(32) u16 k_tile[FLASH_KEYS * LD];
    __shared__ __align__(32) u16 v_tile[FLASH_KEYS * LD];
    __shared__ __align__(32) u16 p_tile[FLASH_WARPS][16 * FLASH_P_LD];
    __shared__ __align__(32) float staging[FLASH_WARPS][16 * 16];
    __shared__ float row_factor[FLASH_WARPS][16];
    __shared__ int rescale[FLASH_WARPS];

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int h = blockIdx.y, kv = (h / group) * head_dim;
    const int first_query = blockIdx.x * FLASH_QUERIES;
    const int last_query = min(n - 1, first_query + FLASH_QUERIES - 1);
    // Tiles start at multiples of FLASH_KEYS, whatever the block's first query: a query's
    // tiles, and so its output, do not depend on how the prompt was chunked. (The keys below
    // the lowest window, which a ring may have replaced by newer ones, are masked for all.)
    const int lowest = window > 0 ? max(0, positions[first_query] + 1 - window) : 0;
    const int begin = lowest - lowest % FLASH_KEYS;
    const int end = positions[last_query] + 1;

    // This warp's rows, and the keys any of them sees.
    const int row0 = first_query + 16 * warp;
    const int rows = max(0, min(16, n - row0));
    const int warp_first = rows > 0 && window > 0 ? max(0, positions[row0] + 1 - window) : 0;
    const int warp_last = rows > 0 ? positions[row0 + rows - 1] : -1;

    // The lane's row (two lanes a row) and the keys it sees.
    const int r = lane >> 1, half = lane & 1;
    const bool row_live = r < rows;
    const int pos = row_live ? positions[row0 + r] : -1;
    const int first = row_live && window > 0 ? max(0, pos + 1 - window) : 0;

    // The warp's queries, scaled and rounded to f16; rows past n and padding dimensions zero.
    u16* q = q_tile[warp];
    for (int e = lane; e < 16 * WIDTH; e += 32) {
        const int qr = e / WIDTH, d = e % WIDTH;
        float v = 0.0f;
        if (qr < rows && d < head_dim) v = qkv[(size_t)(row0 + qr) * ld + q_off + h * head_dim + d];
        q[qr * LD + d] = float_to_half(v * scale);
    }

    wmma::f32_acc acc[CHUNKS];
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) wmma::fill_fragment(acc[c], 0.0f);
    float m = -INFINITY, l = 0.0f;

    for (int t0 = begin; t0 < end; t0 += FLASH_KEYS) {
        __syncthreads();
        for (int e = threadIdx.x; e < FLASH_KEYS * WIDTH / 8; e += blockDim.x) {
            const int kr = e / (WIDTH / 8), d = 8 * (e % (WIDTH / 8)), j = t0 + kr;
            uint4 k = {0, 0, 0, 0}, v = {0, 0, 0, 0};
            if (j < end && d < head_dim) {
                const size_t slot = kv_row(table, block_stride, j % slots, kv_dim) + kv + d;
                k = load_halves(keys + slot, head_dim - d);
                v = load_halves(values + slot, head_dim - d);
            }
            *(uint4*)&k_tile[kr * LD + d] = k;
            *(uint4*)&v_tile[kr * LD + d] = v;
        }
        __syncthreads();
        if (rows == 0 || t0 > warp_last || t0 + FLASH_KEYS <= warp_first) continue;

        // 1. S = Q Kᵀ.
        wmma::f32_acc s;
        wmma::fill_fragment(s, 0.0f);
#pragma unroll
        for (int c = 0; c < CHUNKS; c++) {
            wmma::f16_a_row a;
            wmma::f16_b_col b;
            wmma::load_matrix_sync(a, q + 16 * c, LD);
            wmma::load_matrix_sync(b, k_tile + 16 * c, LD);
            wmma::mma_sync(s, a, b, s);
        }
        float* stage = staging[warp];
        wmma::store_matrix_sync(stage, s, 16, wmma::mem_row_major);
        __syncwarp();

        // 2. The online softmax of the lane's eight keys of its row.
        float x[8];
        float tile_max = -INFINITY;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int col = 8 * half + k, j = t0 + col;
            x[k] = -INFINITY;
            if (row_live && j >= first && j <= pos) {
                x[k] = stage[16 * r + col];
                if (softcap > 0.0f) x[k] = softcap * tanhf(x[k] / softcap);
                tile_max = fmaxf(tile_max, x[k]);
            }
        }
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        const float m_new = fmaxf(m, tile_max);
        const float factor = m_new > m ? expf(m - m_new) : 1.0f;
        float sum = 0.0f;
        u16* p = p_tile[warp];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const u16 w = x[k] == -INFINITY ? (u16)0 : float_to_half(expf(x[k] - m_new));
            p[FLASH_P_LD * r + 8 * half + k] = w;
            sum += half_to_float(w);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l = l * factor + sum;
        m = m_new;
        if (lane == 0) rescale[warp] = 0;
        __syncwarp();
        if (half == 0) row_factor[warp][r] = factor;
        if (factor != 1.0f) rescale[warp] = 1;
        __syncwarp();

        // 3. acc = acc * factor + P V.
        if (rescale[warp]) {
#pragma unroll
            for (int c = 0; c < CHUNKS; c++) {
                wmma::store_matrix_sync(stage, acc[c], 16, wmma::mem_row_major);
                __syncwarp();
                for (int e = lane; e < 256; e += 32) stage[e] *= row_factor[warp][e / 16];
                __syncwarp();
                wmma::load_matrix_sync(acc[c], stage, 16, wmma::mem_row_major);
                __syncwarp();
            }
        }
        wmma::f16_a_row a;
        wmma::load_matrix_sync(a, p, FLASH_P_LD);
#pragma unroll
        for (int c = 0; c < CHUNKS; c++) {
            wmma::f16_b_row b;
            wmma::load_matrix_sync(b, v_tile + 16 * c, LD);
            wmma::mma_sync(acc[c], a, b, acc[c]);
        }
    }
    if (rows == 0) return;

    // The rows' denominators, then the outputs.
    float total = l;
    if (sinks && row_live) total += expf(sinks[h] - m);
    __syncwarp();
    if (half == 0) row_factor[warp][r] = 1.0f / total;
    __syncwarp();
    float* stage = staging[warp];
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) {
        wmma::store_matrix_sync(stage, acc[c], 16, wmma::mem_row_major);
        __syncwarp();
        for (int e = lane; e < 256; e += 32) {
            const int er = e / 16, d = 16 * c + e % 16;
            if (er < rows && d < head_dim)
                out[(size_t)(row0 + er) * heads * head_dim + h * head_dim + d] =
                    stage[e] * row_factor[warp][er];
        }
        __syncwarp();
    }
}

// attention_prefill_mma_f16_<width>: attention_prefill_f32's arguments and result (attention.cu)
// over an f16 cache, for heads at most <width> wide; grid (⌈n / FLASH_QUERIES⌉, heads),
// FLASH_WARPS warps.
#define DEFINE_FLASH_KERNEL(width)                                                               \
    extern "C" __global__ void __launch_bounds__(FLASH_WARPS * 32) attention_prefill_mma_f16_##width( \
        const float* qkv, int ld, int q_off, const u16* keys, const u16* values, const int* table, \
        long long block_stride, int slots, int kv_dim, int head_dim, int group,                  \
        const int* positions, int n, int window, float scale, float softcap, const float* sinks, \
        float* out, int heads) {                                                                 \
        attention_prefill_flash<width / 16>(qkv, ld, q_off, keys, values, table, block_stride,   \
                                            slots, kv_dim, head_dim, group, positions, n, window, \
                                            scale, softcap, sinks, out, heads);                  \
    }

DEFINE_FLASH_KERNEL(64)
DEFINE_FLASH_KERNEL(128)
DEFINE_FLASH_KERNEL(256)
