// KV-cache writes and attention. A layer's cache is `slots` rows of kv_dim keys and as many of
// values; position p lives in slot p % slots (sliding-window layers keep a ring of their own;
// full-attention layers have a slot per position). The rows are paged in blocks of KV_BLOCK
// (the CPU cache's block size): slot s is row s % KV_BLOCK of block table[s / KV_BLOCK], at
// element table[s / KV_BLOCK] * block_stride + (s % KV_BLOCK) * kv_dim of the layer's keys
// (values alike). A pool whose blocks hold every layer puts a layer's base at its rows of block
// 0 and block_stride at a whole block; a contiguous cache is the table 0, 1, 2, ... with
// block_stride KV_BLOCK * kv_dim. Sequences sharing a prefix list the same blocks; the host
// copies a shared block before a sequence writes into it, so the kernels never see sharing. Scores are
// q·k * scale, optionally soft-capped, with an online softmax in position order per warp. A
// head's sink logit (gpt-oss; sinks null otherwise) joins the softmax's denominator only.
//
// The cache holds its elements as f32 (`float`), as f16 bits (`u16`, rounded to nearest even
// when stored, as the CPU's f16 cache) or as q8_0 blocks (`q8_0_kv`, below): every kernel that
// touches the cache is a template over that element type, instantiated by DEFINE_KV_KERNELS for
// each (`kv_store_f16`, ...), but prefill attention, here over the f32 and q8_0 caches (an f16
// cache's is attention_mma.cu's, on tensor cores). All arithmetic is f32; an element is
// widened when read (an f16 one exactly, a q8_0 one as its code times its block's scale).

#define KV_BLOCK 16
#define ATTN_WARPS 4
#define MAX_HEAD_DIM 256
#define DIMS_PER_LANE (MAX_HEAD_DIM / 32)
// Keys whose scores a warp computes together before adding them in order.
#define ATTN_GROUP 4

__device__ __forceinline__ float kv_load(const float* p, size_t i) { return p[i]; }
__device__ __forceinline__ float kv_load(const u16* p, size_t i) { return half_to_float(p[i]); }
__device__ __forceinline__ void kv_put(float* p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void kv_put(u16* p, size_t i, float v) { p[i] = float_to_half(v); }

// A q8_0 cache, as the CPU's: each row of kv_dim values (a multiple of 32) is kv_dim / 32
// blocks of an f16 scale d and 32 int8 codes (34 bytes), value = code * d. Element offsets
// count values, as for the other types, so value i of a layer's rows is code i % 32 of block
// i / 32 (every row, and so every block, starts at a multiple of 32 values).
#define Q8_0_BLOCK_BYTES 34
struct q8_0_kv {
    u8 byte;
};

template <typename T>
struct is_q8_0_kv {
    static constexpr bool value = false;
};
template <>
struct is_q8_0_kv<q8_0_kv> {
    static constexpr bool value = true;
};

__device__ __forceinline__ float kv_load(const q8_0_kv* p, size_t i) {
    const u8* block = (const u8*)p + (i >> 5) * Q8_0_BLOCK_BYTES;
    const u16 d = (u16)(block[0] | (block[1] << 8));
    return (float)(i8)block[2 + (i & 31)] * half_to_float(d);
}

// Value `lane` of the 32-value block at element offset i0 (a multiple of 32), one warp per
// block: d = max|x| / 127, each code x / d rounded half away from zero (as x times 1 / d),
// ggml's q8_0 and the CPU cache's; d stored as f16.
__device__ __forceinline__ void kv_put_block(q8_0_kv* p, size_t i0, float x, int lane) {
    float amax = fabsf(x);
    for (int offset = 16; offset > 0; offset >>= 1) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    u8* block = (u8*)p + (i0 >> 5) * Q8_0_BLOCK_BYTES;
    block[2 + lane] = (u8)(i8)roundf(x * id);
    if (lane == 0) {
        const u16 h = float_to_half(d);
        block[0] = (u8)(h & 0xff);
        block[1] = (u8)(h >> 8);
    }
}

// Element offset of slot `slot`'s row in a layer's paged keys or values.
__device__ __forceinline__ size_t kv_row(const int* table, long long block_stride, int slot,
                                         int kv_dim) {
    return (size_t)table[slot / KV_BLOCK] * (size_t)block_stride +
           (size_t)(slot % KV_BLOCK) * kv_dim;
}

// Copies the k and v sections of token t's qkv row into its cache slot (keys, values): value
// by value, or into a q8_0 cache a warp per 32-value block, the keys' blocks then the values'.
template <typename T>
__device__ __forceinline__ void kv_store_row(const float* qkv, int ld, int k_off, int v_off,
                                             T* keys, T* values, const int* table,
                                             long long block_stride, int kv_dim,
                                             const int* positions, int slots, int t) {
    const float* row = qkv + (size_t)t * ld;
    const size_t slot = kv_row(table, block_stride, positions[t] % slots, kv_dim);
    if constexpr (is_q8_0_kv<T>::value) {
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, blocks = kv_dim >> 5;
        for (int b = warp; b < 2 * blocks; b += blockDim.x >> 5) {
            const bool value = b >= blocks;
            const int i0 = 32 * (value ? b - blocks : b);
            kv_put_block(value ? values : keys, slot + i0,
                         row[(value ? v_off : k_off) + i0 + lane], lane);
        }
    } else {
        for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
            kv_put(keys, slot + i, row[k_off + i]);
            kv_put(values, slot + i, row[v_off + i]);
        }
    }
}

// A warp's online softmax over keys in position order: the running max m of the scores, the
// sum s of exp(score - m), and the lane's dimensions lane + 32k of the sum of the values
// weighted by exp(score - m), in acc[k]; qr[k] holds the same dimensions of the query.
struct online_softmax {
    float qr[DIMS_PER_LANE], acc[DIMS_PER_LANE];
    float m, s;

    // Empty, for the query q.
    __device__ __forceinline__ void start(const float* q, int lane, int head_dim) {
#pragma unroll
        for (int k = 0; k < DIMS_PER_LANE; k++) {
            const int d = lane + 32 * k;
            qr[k] = d < head_dim ? q[d] : 0.0f;
            acc[k] = 0.0f;
        }
        m = -INFINITY;
        s = 0.0f;
    }

    // Rescales s and acc to the max x where x is above m.
    __device__ __forceinline__ void raise_max(float x) {
        if (x > m) {
            const float rescale = expf(m - x);
            s *= rescale;
#pragma unroll
            for (int k = 0; k < DIMS_PER_LANE; k++) acc[k] *= rescale;
            m = x;
        }
    }

    // Adds the next keys of a group of up to ATTN_GROUP, key g (dimension d: key(g, d), its
    // value's value(g, d)) where bit g of `active` is set. The group's dot products and warp
    // sums are independent and run together; then each active key updates the softmax in
    // order, so the result is that of adding the active keys one by one.
    template <typename Key, typename Value>
    __device__ __forceinline__ void add_group(int lane, int head_dim, float scale, float softcap,
                                              unsigned active, Key key, Value value) {
        float score[ATTN_GROUP];
#pragma unroll
        for (int g = 0; g < ATTN_GROUP; g++) {
            float dot = 0.0f;
            if (active >> g & 1) {
#pragma unroll
                for (int k = 0; k < DIMS_PER_LANE; k++) {
                    const int d = lane + 32 * k;
                    if (d < head_dim) dot += qr[k] * key(g, d);
                }
            }
            score[g] = warp_sum(dot) * scale;
        }
#pragma unroll
        for (int g = 0; g < ATTN_GROUP; g++) {
            if (!(active >> g & 1)) continue;
            float x = score[g];
            if (softcap > 0.0f) x = softcap * tanhf(x / softcap);
            raise_max(x);
            const float weight = expf(x - m);
            s += weight;
#pragma unroll
            for (int k = 0; k < DIMS_PER_LANE; k++) {
                const int d = lane + 32 * k;
                if (d < head_dim) acc[k] += weight * value(g, d);
            }
        }
    }
};

// One warp's online-softmax pass of the query q over keys begin, begin + stride, ... < end,
// ATTN_GROUP keys at a time.
template <typename T>
__device__ __forceinline__ void attend(const float* q, const T* keys, const T* values,
                                       const int* table, long long block_stride, int slots,
                                       int kv_dim, int kv, int head_dim, int begin,
                                       int end, int stride, float scale, float softcap,
                                       online_softmax* out) {
    const int lane = threadIdx.x & 31;
    out->start(q, lane, head_dim);
    for (int j = begin; j < end; j += ATTN_GROUP * stride) {
        size_t slot[ATTN_GROUP];
        unsigned active = 0;
#pragma unroll
        for (int g = 0; g < ATTN_GROUP; g++) {
            const int key = j + g * stride;
            active |= (unsigned)(key < end) << g;
            slot[g] = key < end ? kv_row(table, block_stride, key % slots, kv_dim) + kv : 0;
        }
        out->add_group(lane, head_dim, scale, softcap, active,
                       [&](int g, int d) { return kv_load(keys, slot[g] + d); },
                       [&](int g, int d) { return kv_load(values, slot[g] + d); });
    }
}

// The splits of one head of a decode query at position pos, split-K: block (head, b) of
// ATTN_WARPS warps computes splits b, b + gridDim.y, ... of the `splits` splits. Split s covers
// keys [first + s * split_len, ...) of the query's window; its warps interleave over those keys
// and merge in shared memory. Writes part[head, s] = (max, sum, acc[head_dim]); an empty split
// writes (-inf, 0) only. A split's values do not depend on which block computes it, so a batch
// launches fewer blocks a row (most splits are empty at short positions) and a row still gets
// the bits it gets alone.
template <typename T>
__device__ __forceinline__ void attention_decode_split(
    const float* q, const T* keys, const T* values, const int* table, long long block_stride,
    int slots, int kv_dim, int head_dim,
    int group, int pos, int window, float scale, float softcap, int split_len, int splits,
    float* part) {
    __shared__ float sm_max[ATTN_WARPS], sm_sum[ATTN_WARPS];
    __shared__ float sm_acc[ATTN_WARPS][MAX_HEAD_DIM];
    const int h = blockIdx.x;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int first = window > 0 ? max(0, pos + 1 - window) : 0;
    for (int split = blockIdx.y; split < splits; split += gridDim.y) {
        const int begin = first + split * split_len;
        const int end = min(begin + split_len, pos + 1);
        float* out = part + ((size_t)h * splits + split) * (head_dim + 2);
        if (begin >= end) {
            if (threadIdx.x == 0) {
                out[0] = -INFINITY;
                out[1] = 0.0f;
            }
            continue;
        }
        online_softmax softmax;
        attend(q + h * head_dim, keys, values, table, block_stride, slots, kv_dim,
               (h / group) * head_dim, head_dim,
               begin + warp, end, ATTN_WARPS, scale, softcap, &softmax);
        if (lane == 0) {
            sm_max[warp] = softmax.m;
            sm_sum[warp] = softmax.s;
        }
#pragma unroll
        for (int k = 0; k < DIMS_PER_LANE; k++) {
            const int d = lane + 32 * k;
            if (d < head_dim) sm_acc[warp][d] = softmax.acc[k];
        }
        __syncthreads();
        float total_max = -INFINITY;
        for (int w = 0; w < ATTN_WARPS; w++) {
            if (sm_sum[w] > 0.0f) total_max = fmaxf(total_max, sm_max[w]);
        }
        for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
            float a = 0.0f;
            for (int w = 0; w < ATTN_WARPS; w++) {
                if (sm_sum[w] > 0.0f) a += expf(sm_max[w] - total_max) * sm_acc[w][d];
            }
            out[2 + d] = a;
        }
        if (threadIdx.x == 0) {
            float total = 0.0f;
            for (int w = 0; w < ATTN_WARPS; w++) {
                if (sm_sum[w] > 0.0f) total += expf(sm_max[w] - total_max) * sm_sum[w];
            }
            out[0] = total_max;
            out[1] = total;
        }
        // The next split writes the shared arrays again.
        __syncthreads();
    }
}

// Merges the splits of attention_decode (and the head's sink) into out[head * head_dim + d],
// grid (heads); of attention_decode_rows into out[row, head * head_dim + d], grid (heads, rows).
// The splits' (max, sum) pairs are read in parallel; one thread then lists the non-empty
// splits in order with their weights exp(max - total max) (a graph sized for the longest
// context leaves most of them empty at short positions), and each output dimension sums over
// that list only, in split order as before. With xq (head_dim a multiple of 32), each warp
// also quantizes its 32 outputs to q8_1 for the output projection, row r's into xq[r, q_dim]
// and meta[r, q_dim / 32, 4] as quantize_q8_1 would.
#define MAX_DECODE_SPLITS 64
extern "C" __global__ void attention_decode_combine(const float* part, int splits, int head_dim,
                                                    const float* sinks, float* out, i8* xq,
                                                    float* meta) {
    __shared__ float split_max[MAX_DECODE_SPLITS], split_sum[MAX_DECODE_SPLITS];
    __shared__ float weight[MAX_DECODE_SPLITS];
    __shared__ int used[MAX_DECODE_SPLITS];
    __shared__ int n_used;
    __shared__ float inv;
    const int h = blockIdx.x, heads = gridDim.x;
    part += (size_t)blockIdx.y * heads * splits * (head_dim + 2);
    out += (size_t)blockIdx.y * heads * head_dim;
    const float* p = part + (size_t)h * splits * (head_dim + 2);
    for (int s = threadIdx.x; s < splits; s += blockDim.x) {
        split_max[s] = p[(size_t)s * (head_dim + 2)];
        split_sum[s] = p[(size_t)s * (head_dim + 2) + 1];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float total_max = -INFINITY;
        for (int s = 0; s < splits; s++) {
            if (split_sum[s] > 0.0f) total_max = fmaxf(total_max, split_max[s]);
        }
        if (sinks) total_max = fmaxf(total_max, sinks[h]);
        float total = sinks ? expf(sinks[h] - total_max) : 0.0f;
        int n = 0;
        for (int s = 0; s < splits; s++) {
            if (split_sum[s] > 0.0f) {
                const float w = expf(split_max[s] - total_max);
                total += w * split_sum[s];
                weight[n] = w;
                used[n++] = s;
            }
        }
        n_used = n;
        inv = 1.0f / total;
    }
    __syncthreads();
    const size_t q_dim = (size_t)heads * head_dim;
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float a = 0.0f;
        for (int i = 0; i < n_used; i++) a += weight[i] * p[(size_t)used[i] * (head_dim + 2) + 2 + d];
        const float v = a * inv;
        out[(size_t)h * head_dim + d] = v;
        if (xq) {
            const size_t block = ((size_t)h * head_dim + d) >> 5;
            quantize_q8_1_block(v, (int)(threadIdx.x & 31), xq + blockIdx.y * q_dim + 32 * block,
                                meta + 4 * (blockIdx.y * (q_dim >> 5) + block));
        }
    }
}

// Prefill: causal (and windowed) attention of n tokens over the cache, tiled. grid
// (ceil(n / PREFILL_WARPS), heads); each warp owns one query, the block's warps consecutive
// queries of one head. The block walks the union of its queries' key ranges in tiles of
// PREFILL_TILE keys staged in shared memory, so each key and value is read from global memory
// once per block instead of once per query; each warp skips the keys outside its own causal
// window. out is [n, heads * head_dim].
#define PREFILL_WARPS 8
#define PREFILL_TILE 16
#if PREFILL_TILE % ATTN_GROUP != 0
#error "a prefill tile holds whole groups of keys"
#endif

template <typename T>
__device__ __forceinline__ void attention_prefill_tiles(
    const float* qkv, int ld, int q_off, const T* keys, const T* values, const int* table,
    long long block_stride, int slots, int kv_dim, int head_dim, int group, const int* positions,
    int n, int window, float scale, float softcap, const float* sinks, float* out, int heads) {
    __shared__ float tile_k[PREFILL_TILE][MAX_HEAD_DIM];
    __shared__ float tile_v[PREFILL_TILE][MAX_HEAD_DIM];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int first_query = blockIdx.x * PREFILL_WARPS;
    const int last_query = min(n - 1, first_query + PREFILL_WARPS - 1);
    const int i = first_query + warp;
    const int h = blockIdx.y;
    const bool active = i < n;
    const int pos = active ? positions[i] : 0;
    const int first = window > 0 ? max(0, pos + 1 - window) : 0;
    const int low = positions[first_query];
    const int begin = window > 0 ? max(0, low + 1 - window) : 0;
    const int end = positions[last_query] + 1;
    const int kv = (h / group) * head_dim;

    const float* q = qkv + (size_t)(active ? i : 0) * ld + q_off + h * head_dim;
    online_softmax softmax;
    softmax.start(q, lane, head_dim);
    for (int t0 = begin; t0 < end; t0 += PREFILL_TILE) {
        __syncthreads();
        for (int e = threadIdx.x; e < PREFILL_TILE * head_dim; e += blockDim.x) {
            const int r = e / head_dim, d = e % head_dim;
            const int j = t0 + r;
            if (j < end) {
                const size_t slot = kv_row(table, block_stride, j % slots, kv_dim) + kv;
                tile_k[r][d] = kv_load(keys, slot + d);
                tile_v[r][d] = kv_load(values, slot + d);
            }
        }
        __syncthreads();
        if (!active) continue;
        for (int r = 0; r < PREFILL_TILE; r += ATTN_GROUP) {
            unsigned active = 0;
#pragma unroll
            for (int g = 0; g < ATTN_GROUP; g++) {
                const int j = t0 + r + g;
                active |= (unsigned)(j >= first && j <= pos) << g;
            }
            if (active == 0) continue;
            softmax.add_group(lane, head_dim, scale, softcap, active,
                              [&](int g, int d) { return tile_k[r + g][d]; },
                              [&](int g, int d) { return tile_v[r + g][d]; });
        }
    }
    if (!active) return;
    if (sinks) {
        const float sink = sinks[h];
        softmax.raise_max(sink);
        softmax.s += expf(sink - softmax.m);
    }
    const float inv = 1.0f / softmax.s;
    float* o = out + (size_t)i * heads * head_dim + h * head_dim;
#pragma unroll
    for (int k = 0; k < DIMS_PER_LANE; k++) {
        const int d = lane + 32 * k;
        if (d < head_dim) o[d] = softmax.acc[k] * inv;
    }
}

// The kernels over a cache of element type T, named with `suffix`. A cache is given as its
// layer's keys and values, its block table and the block stride (see the top of this file).
//
// kv_store: the k and v sections of each token's qkv row into its cache slot. grid (tokens).
//
// kv_store_rows: kv_store for a batch of sequences, each row into its own cache: row i's keys
// and values go to keys[i] and values[i] through block table tables[i] (tables of the rows'
// addresses for this layer), slot positions[i] % slots. grid (rows).
//
// attention_decode: one token at position positions[0], split-K: grid (heads, splits),
// ATTN_WARPS warps, part [heads, splits, head_dim + 2]. The splits are sized for the longest
// window so that one CUDA graph serves every position.
//
// attention_decode_rows: a batch of sequences, one query row each: grid (heads, blocks, rows),
// a row's blocks sharing its splits (attention_decode_split). Row i (its q at qkv + i * ld + q_off) attends at position positions[i] over its own cache
// (keys[i], values[i], tables[i], as kv_store_rows'), into part [rows, heads, splits,
// head_dim + 2]. Each row computes exactly what attention_decode computes for it alone, so a
// row's output does not depend on the other rows of the batch.

#define DEFINE_KV_KERNELS(suffix, T)                                                             \
    extern "C" __global__ void kv_store_##suffix(                                                \
        const float* qkv, int ld, int k_off, int v_off, T* keys, T* values, const int* table,    \
        long long block_stride, int kv_dim, const int* positions, int slots) {                   \
        kv_store_row(qkv, ld, k_off, v_off, keys, values, table, block_stride, kv_dim,           \
                     positions, slots, (int)blockIdx.x);                                         \
    }                                                                                            \
    extern "C" __global__ void kv_store_rows_##suffix(                                           \
        const float* qkv, int ld, int k_off, int v_off, T* const* keys, T* const* values,        \
        const int* const* tables, long long block_stride, int kv_dim, const int* positions,      \
        int slots) {                                                                             \
        const int row = blockIdx.x;                                                              \
        kv_store_row(qkv, ld, k_off, v_off, keys[row], values[row], tables[row], block_stride,   \
                     kv_dim, positions, slots, row);                                             \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(ATTN_WARPS * 32) attention_decode_##suffix(     \
        const float* qkv, int q_off, const T* keys, const T* values, const int* table,           \
        long long block_stride, int slots, int kv_dim, int head_dim, int group,                  \
        const int* positions, int window, float scale, float softcap, int split_len, int splits, \
        float* part) {                                                                           \
        attention_decode_split(qkv + q_off, keys, values, table, block_stride, slots, kv_dim,    \
                               head_dim, group, positions[0], window, scale, softcap, split_len, \
                               splits, part);                                                    \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(ATTN_WARPS * 32) attention_decode_rows_##suffix( \
        const float* qkv, int ld, int q_off, const T* const* keys, const T* const* values,       \
        const int* const* tables, long long block_stride, int slots, int kv_dim, int head_dim,   \
        int group, const int* positions, int window, float scale, float softcap, int split_len,  \
        int splits, float* part) {                                                               \
        const int row = blockIdx.z;                                                              \
        attention_decode_split(qkv + (size_t)row * ld + q_off, keys[row], values[row],           \
                               tables[row], block_stride, slots, kv_dim, head_dim, group,        \
                               positions[row], window, scale, softcap, split_len, splits,        \
                               part + (size_t)row * gridDim.x * splits * (head_dim + 2));        \
    }

DEFINE_KV_KERNELS(f32, float)
DEFINE_KV_KERNELS(f16, u16)
DEFINE_KV_KERNELS(q8_0, q8_0_kv)

// Prefill over an f32 or a q8_0 cache (an f16 cache's runs on tensor cores: attention_mma.cu).
#define DEFINE_PREFILL_TILES(suffix, T)                                                           \
    extern "C" __global__ void __launch_bounds__(PREFILL_WARPS * 32) attention_prefill_##suffix(  \
        const float* qkv, int ld, int q_off, const T* keys, const T* values, const int* table,   \
        long long block_stride, int slots, int kv_dim, int head_dim, int group,                  \
        const int* positions, int n, int window, float scale, float softcap, const float* sinks, \
        float* out, int heads) {                                                                 \
        attention_prefill_tiles(qkv, ld, q_off, keys, values, table, block_stride, slots,        \
                                kv_dim, head_dim, group, positions, n, window, scale, softcap,   \
                                sinks, out, heads);                                              \
    }

DEFINE_PREFILL_TILES(f32, float)
DEFINE_PREFILL_TILES(q8_0, q8_0_kv)

// Copy on write of a shared block: `words` 4-byte words of keys and of values from word
// offset `from` to word offset `to` (a pool's whole block, every layer; blocks are whole words
// for every element type). grid-stride over the words.
extern "C" __global__ void kv_copy_block(u32* keys, u32* values, long long from, long long to,
                                         long long words) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < words;
         i += (long long)gridDim.x * blockDim.x) {
        keys[to + i] = keys[from + i];
        values[to + i] = values[from + i];
    }
}
