// Runs the KV-cache and attention kernels under the host emulation (cuda_emulation.h) against a
// naive double-precision reference, for every cache element type: f32; f16, whose reference
// keys and values are rounded by the host compiler's own `_Float16` conversion (round to
// nearest even), independent of the kernels' `float_to_half`; and q8_0, whose reference blocks
// are quantized here by ggml's rule (and compared byte for byte with what kv_store writes). Every cache is read through a
// block table: a contiguous one (the table 0, 1, 2, ...) and a paged one (its blocks scattered
// in a pool of several layers) must give bit-identical outputs, and two sequences sharing a
// prefix's blocks, one copying a shared block before writing into it, each see only their own
// keys. Prints "N passed, M failed" and exits non-zero on any failure.
#include "cuda_emulation.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "checks.h"

#include "../../src/kernels/common.cuh"
#include "../../src/kernels/reduce.cuh"
#include "../../src/kernels/attention.cu"
#include "../../src/kernels/attention_mma.cu"

// ---- f16 rounding -----------------------------------------------------------------------------

static u16 reference_half(float f) {
    const _Float16 h = (_Float16)f;
    u16 bits;
    std::memcpy(&bits, &h, 2);
    return bits;
}

// float_to_half against the compiler's conversion: every float whose low 13 bits are one of
// the patterns that decide the rounding (ties, just below and above), over every exponent and
// sign, plus infinities and NaN; and half_to_float ∘ float_to_half is the identity on halves.
static void check_half_rounding() {
    int wrong = 0;
    const u32 lows[] = {0, 1, 0xfff, 0x1000, 0x1001, 0x1fff, 0x0800, 0x17ff};
    for (u32 sign = 0; sign < 2; sign++)
        for (u32 exponent = 0; exponent < 255; exponent++)
            for (u32 top = 0; top < 1024; top += 7)
                for (u32 low : lows) {
                    const u32 bits = (sign << 31) | (exponent << 23) | (top << 13) | low;
                    const float f = __uint_as_float(bits);
                    if (float_to_half(f) != reference_half(f)) wrong++;
                }
    // Subnormal halves: every shift of the rounding position.
    for (u32 bits = 0x33000000u; bits < 0x38800000u; bits += 0x1357u)
        if (float_to_half(__uint_as_float(bits)) != reference_half(__uint_as_float(bits))) wrong++;
    for (float f : {INFINITY, -INFINITY, 65504.0f, 65519.99f, 65520.0f, 1e-8f, -0.0f})
        if (float_to_half(f) != reference_half(f)) wrong++;
    const u16 nan = float_to_half(__uint_as_float(0x7fc00000u));
    if ((nan & 0x7c00u) != 0x7c00u || (nan & 0x3ffu) == 0) wrong++;
    for (u32 h = 0; h < 0x10000u; h++) {
        if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) continue;  // NaN payloads
        if (float_to_half(half_to_float((u16)h)) != h) wrong++;
    }
    check("float_to_half rounds like _Float16", {(float)wrong}, {0.0}, 0);
}

// ---- the cache's element types ------------------------------------------------------------------

// The kernels and host conversions of one element type: `storage(n)` units of T hold n values
// (a row's length a multiple of `block` values); put_row writes n values at element offset
// `at` as the cache stores them, round_row gives the values a read returns.
template <typename T>
struct Element;

// The types that convert value by value.
template <typename T, typename Self>
struct ValueElement {
    static constexpr int block = 1;
    static size_t storage(size_t values) { return values; }
    static void put_row(T* base, size_t at, const float* x, int n) {
        for (int i = 0; i < n; i++) base[at + i] = Self::from_float(x[i]);
    }
    static void round_row(const float* x, float* out, int n) {
        for (int i = 0; i < n; i++) out[i] = Self::rounded(x[i]);
    }
};

template <>
struct Element<float> : ValueElement<float, Element<float>> {
    static constexpr const char* name = "f32";
    static constexpr auto store = kv_store_f32;
    static constexpr auto store_rows = kv_store_rows_f32;
    static constexpr auto decode = attention_decode_f32;
    static constexpr auto decode_rows = attention_decode_rows_f32;
    static float from_float(float f) { return f; }
    static float rounded(float f) { return f; }
};

template <>
struct Element<u16> : ValueElement<u16, Element<u16>> {
    static constexpr const char* name = "f16";
    static constexpr auto store = kv_store_f16;
    static constexpr auto store_rows = kv_store_rows_f16;
    static constexpr auto decode = attention_decode_f16;
    static constexpr auto decode_rows = attention_decode_rows_f16;
    static u16 from_float(float f) { return reference_half(f); }
    static float rounded(float f) { return (float)(_Float16)f; }
};

template <>
struct Element<q8_0_kv> {
    static constexpr const char* name = "q8_0";
    static constexpr auto store = kv_store_q8_0;
    static constexpr auto store_rows = kv_store_rows_q8_0;
    static constexpr auto decode = attention_decode_q8_0;
    static constexpr auto decode_rows = attention_decode_rows_q8_0;
    static constexpr int block = 32;
    static size_t storage(size_t values) { return values / 32 * Q8_0_BLOCK_BYTES; }
    // ggml's q8_0: d = max|x| / 127, codes x * (1 / d) rounded half away from zero, d as f16.
    static u16 quantize(const float* x, i8* codes) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < 32; j++) codes[j] = (i8)std::round(x[j] * id);
        return reference_half(d);
    }
    static void put_row(q8_0_kv* base, size_t at, const float* x, int n) {
        for (int b = 0; b < n / 32; b++) {
            u8* block = (u8*)base + (at / 32 + b) * Q8_0_BLOCK_BYTES;
            const u16 d = quantize(x + 32 * b, (i8*)block + 2);
            block[0] = (u8)(d & 0xff);
            block[1] = (u8)(d >> 8);
        }
    }
    static void round_row(const float* x, float* out, int n) {
        for (int b = 0; b < n / 32; b++) {
            i8 codes[32];
            const float d = (float)std::bit_cast<_Float16>(quantize(x + 32 * b, codes));
            for (int j = 0; j < 32; j++) out[32 * b + j] = (float)codes[j] * d;
        }
    }
};

// `values` values of `x` as the cache stores them.
template <typename T>
static std::vector<T> filled(size_t values, float x) {
    std::vector<T> out(Element<T>::storage(values));
    const std::vector<float> xs(values, x);
    Element<T>::put_row(out.data(), 0, xs.data(), (int)values);
    return out;
}

// ---- caches -----------------------------------------------------------------------------------

// One layer of one sequence's cache as the kernels see it: the layer's keys and values in a
// pool of blocks, the sequence's block table and the pool's block stride.
template <typename T>
struct Cache {
    std::vector<T> keys, values;  // the whole pool
    std::vector<int> table;
    size_t base = 0;  // element offset of the layer's rows in block 0
    long long stride = 0;
    int kv_dim = 0;

    T* k() { return keys.data() + Element<T>::storage(base); }
    T* v() { return values.data() + Element<T>::storage(base); }
    // Element offset of slot `slot`'s row from k() and v().
    size_t row(int slot) const {
        return (size_t)table[slot / KV_BLOCK] * (size_t)stride + (size_t)(slot % KV_BLOCK) * kv_dim;
    }
    void put(int slot, const float* k_row, const float* v_row) {
        Element<T>::put_row(k(), row(slot), k_row, kv_dim);
        Element<T>::put_row(v(), row(slot), v_row, kv_dim);
    }
};

static int blocks_for(int slots) { return (slots + KV_BLOCK - 1) / KV_BLOCK; }

// A buffer of its own, the table 0, 1, 2, ...: row `slot` at slot * kv_dim.
template <typename T>
static Cache<T> contiguous_cache(int slots, int kv_dim) {
    Cache<T> c;
    const size_t len = (size_t)blocks_for(slots) * KV_BLOCK * kv_dim;
    c.keys.assign(Element<T>::storage(len), T{});
    c.values.assign(Element<T>::storage(len), T{});
    for (int b = 0; b < blocks_for(slots); b++) c.table.push_back(b);
    c.stride = (long long)KV_BLOCK * kv_dim;
    c.kv_dim = kv_dim;
    return c;
}

// Layer 1 of a pool of 3 layers and twice the blocks needed (plus one), the sequence's blocks
// listed in a shuffled order; the rest of the pool holds 100, which no key here comes near.
template <typename T>
static Cache<T> paged_cache(int slots, int kv_dim) {
    const int layers = 3, layer = 1, pool = 2 * blocks_for(slots) + 1;
    Cache<T> c;
    const size_t len = (size_t)pool * layers * KV_BLOCK * kv_dim;
    c.keys = filled<T>(len, 100.0f);
    c.values = c.keys;
    std::vector<int> ids(pool);
    for (int b = 0; b < pool; b++) ids[b] = b;
    std::shuffle(ids.begin(), ids.end(), rng);
    c.table.assign(ids.begin(), ids.begin() + blocks_for(slots));
    c.base = (size_t)layer * KV_BLOCK * kv_dim;
    c.stride = (long long)layers * KV_BLOCK * kv_dim;
    c.kv_dim = kv_dim;
    return c;
}

static bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

// ---- attention --------------------------------------------------------------------------------

struct AttentionCase {
    int heads, kv_heads, head_dim, window, slots;
    float softcap;
    bool sinks = false;
};

// Per-head sink logits of the cases with sinks: one far above every score.
static const float SINKS[4] = {0.5f, -1.0f, 40.0f, 2.0f};

// Naive causal attention of the query at `pos` over keys stored by position.
static std::vector<double> reference_attention(const AttentionCase& a, const float* q, int pos,
                                               const std::vector<float>& keys_by_pos,
                                               const std::vector<float>& values_by_pos, float scale) {
    const int kv_dim = a.kv_heads * a.head_dim, group = a.heads / a.kv_heads;
    std::vector<double> out(a.heads * a.head_dim);
    const int first = a.window > 0 ? std::max(0, pos + 1 - a.window) : 0;
    for (int h = 0; h < a.heads; h++) {
        const int kv = (h / group) * a.head_dim;
        std::vector<double> scores;
        double mx = -1e300;
        for (int j = first; j <= pos; j++) {
            double s = 0;
            for (int d = 0; d < a.head_dim; d++) s += (double)q[h * a.head_dim + d] * keys_by_pos[(size_t)j * kv_dim + kv + d];
            s *= scale;
            if (a.softcap > 0) s = a.softcap * std::tanh(s / a.softcap);
            scores.push_back(s);
            mx = std::max(mx, s);
        }
        if (a.sinks) mx = std::max(mx, (double)SINKS[h]);
        double sum = a.sinks ? std::exp(SINKS[h] - mx) : 0.0;
        for (auto& s : scores) sum += (s = std::exp(s - mx));
        for (int d = 0; d < a.head_dim; d++) {
            double acc = 0;
            for (int j = first; j <= pos; j++) acc += scores[j - first] * values_by_pos[(size_t)j * kv_dim + kv + d];
            out[h * a.head_dim + d] = acc / sum;
        }
    }
    return out;
}

// Prefill attention's error against the naive reference: the f32 tiles over an f32 or a q8_0
// cache; the tensor-core flash attention over an f16 one (attention_mma.cu) rounds the scaled
// queries and the softmax weights to f16.
template <typename T>
constexpr double PREFILL_TOLERANCE = std::is_same_v<T, u16> ? 1e-3 : 1e-5;

// Prefill attention of the n queries of `batch` (q | k | v rows `width` wide) at `positions`
// over a cache (its keys, values, block table and stride), with the kernel and launch shape
// the runtime takes for the element type and head width.
template <typename T>
static std::vector<float> run_prefill(const AttentionCase& a, const T* keys, const T* values, const int* table,
                                      long long stride, const float* batch, int width, const int* positions, int n,
                                      float scale, const float* sinks) {
    const int kv_dim = a.kv_heads * a.head_dim, group = a.heads / a.kv_heads;
    std::vector<float> out((size_t)n * a.heads * a.head_dim, 0.0f);
    auto run = [&](auto kernel, unsigned queries, unsigned warps) {
        launch(kernel, dim3{(n + queries - 1) / queries, (unsigned)a.heads}, dim3{32 * warps}, batch, width, 0, keys,
               values, table, stride, a.slots, kv_dim, a.head_dim, group, positions, n, a.window, scale, a.softcap,
               sinks, out.data(), a.heads);
    };
    if constexpr (std::is_same_v<T, float>) {
        run(attention_prefill_f32, PREFILL_WARPS, PREFILL_WARPS);
    } else if constexpr (std::is_same_v<T, q8_0_kv>) {
        run(attention_prefill_q8_0, PREFILL_WARPS, PREFILL_WARPS);
    } else {
        run(a.head_dim <= 64    ? attention_prefill_mma_f16_64
            : a.head_dim <= 128 ? attention_prefill_mma_f16_128
                                : attention_prefill_mma_f16_256,
            FLASH_QUERIES, FLASH_WARPS);
    }
    return out;
}

// run_prefill over both caches: bit-identical, and within PREFILL_TOLERANCE of `want`.
template <typename T>
static void check_prefill(const std::string& label, const AttentionCase& a, Cache<T> (&caches)[2],
                          const float* batch, int width, const int* positions, int n, float scale,
                          const float* sinks, const std::vector<double>& want) {
    std::vector<float> outs[2];
    for (int which = 0; which < 2; which++) {
        Cache<T>& c = caches[which];
        outs[which] = run_prefill<T>(a, c.k(), c.v(), c.table.data(), c.stride, batch, width, positions, n, scale,
                                     sinks);
    }
    check("attention_prefill " + label + " paged equals contiguous",
          {same_bits(outs[0], outs[1]) ? 1.0f : 0.0f}, {1.0}, 0);
    check("attention_prefill " + label, outs[0], want, PREFILL_TOLERANCE<T>);
}

template <typename T>
static void check_attention(const AttentionCase& a) {
    const std::string label = "heads=" + std::to_string(a.heads) + "/" + std::to_string(a.kv_heads) +
                              " hd=" + std::to_string(a.head_dim) + " window=" + std::to_string(a.window) +
                              " softcap=" + std::to_string((int)a.softcap) + (a.sinks ? " sinks" : "") + " " + Element<T>::name;
    const float* sinks = a.sinks ? SINKS : nullptr;
    const int q_dim = a.heads * a.head_dim, kv_dim = a.kv_heads * a.head_dim;
    const int width = q_dim + 2 * kv_dim, group = a.heads / a.kv_heads;
    const float scale = 1.0f / std::sqrt((float)a.head_dim);
    const int context = 100, prefill = 11;
    // Every position's q | k | v row, stored through kv_store as the forward pass does.
    const auto rows = random_vector((size_t)context * width);
    std::vector<float> keys_by_pos((size_t)context * kv_dim), values_by_pos((size_t)context * kv_dim);
    for (int p = 0; p < context; p++) {
        const float* row = &rows[(size_t)p * width + q_dim];
        Element<T>::round_row(row, &keys_by_pos[(size_t)p * kv_dim], kv_dim);
        Element<T>::round_row(row + kv_dim, &values_by_pos[(size_t)p * kv_dim], kv_dim);
    }
    // The same keys in a contiguous cache and in a paged one: every output bit-identical.
    Cache<T> caches[2] = {contiguous_cache<T>(a.slots, kv_dim), paged_cache<T>(a.slots, kv_dim)};
    // Prefill in batches of `prefill` as the forward pass does (keys stored, then attention),
    // checking every query of the first batch and of the last one, then decode token by token
    // with split-K, checking the first and last steps. Unchecked batches only store their keys.
    const int decode_from = context - 5;
    const int batches = decode_from / prefill;
    for (int batch_index = 0; batch_index < batches; batch_index++) {
        const int pos0 = batch_index * prefill;
        std::vector<int> positions(prefill);
        for (int i = 0; i < prefill; i++) positions[i] = pos0 + i;
        const float* batch = rows.data() + (size_t)pos0 * width;
        if (batch_index != 0 && batch_index != batches - 1) {
            // Unchecked batches: store their keys and values on the host.
            for (int i = 0; i < prefill; i++) {
                const float* row = &rows[(size_t)(pos0 + i) * width];
                for (auto& c : caches) c.put((pos0 + i) % a.slots, row + q_dim, row + q_dim + kv_dim);
            }
            continue;
        }
        for (Cache<T>& c : caches)
            launch(Element<T>::store, dim3{(unsigned)prefill}, dim3{threads_for(kv_dim)}, batch, width, q_dim,
                   q_dim + kv_dim, c.k(), c.v(), (const int*)c.table.data(), c.stride, kv_dim, positions.data(),
                   a.slots);
        if (batch_index == 0) {
            // What kv_store wrote, byte for byte what the reference stores.
            Cache<T> want = contiguous_cache<T>(a.slots, kv_dim);
            for (int i = 0; i < prefill; i++) {
                const float* row = batch + (size_t)i * width;
                want.put(positions[i] % a.slots, row + q_dim, row + q_dim + kv_dim);
            }
            const size_t bytes = want.keys.size() * sizeof(T);
            const bool same = std::memcmp(want.keys.data(), caches[0].keys.data(), bytes) == 0 &&
                              std::memcmp(want.values.data(), caches[0].values.data(), bytes) == 0;
            check("kv_store " + label + " writes the reference's bytes", {same ? 1.0f : 0.0f}, {1.0}, 0);
        }
        std::vector<double> want;
        for (int i = 0; i < prefill; i++) {
            auto one = reference_attention(a, batch + (size_t)i * width, pos0 + i, keys_by_pos, values_by_pos, scale);
            want.insert(want.end(), one.begin(), one.end());
        }
        check_prefill(label + " at " + std::to_string(pos0), a, caches, batch, width, positions.data(), prefill,
                      scale, sinks, want);
    }
    const int longest = a.window > 0 ? std::min(a.window, context) : context;
    const int split_len = 64, splits = (longest + split_len - 1) / split_len;
    std::vector<float> partials((size_t)a.heads * splits * (a.head_dim + 2));
    for (int pos = batches * prefill; pos < context; pos++) {
        const int positions[1] = {pos};
        const float* row = rows.data() + (size_t)pos * width;
        for (auto& c : caches)
            launch(Element<T>::store, dim3{1}, dim3{threads_for(kv_dim)}, row, width, q_dim, q_dim + kv_dim, c.k(),
                   c.v(), (const int*)c.table.data(), c.stride, kv_dim, (const int*)positions, a.slots);
        if (pos != batches * prefill && pos != context - 1) continue;
        std::vector<float> outs[2];
        for (int which = 0; which < 2; which++) {
            Cache<T>& c = caches[which];
            launch(Element<T>::decode, dim3{(unsigned)a.heads, (unsigned)splits}, dim3{ATTN_WARPS * 32}, row, 0,
                   (const T*)c.k(), (const T*)c.v(), (const int*)c.table.data(), c.stride, a.slots, kv_dim,
                   a.head_dim, group, (const int*)positions, a.window, scale, a.softcap, split_len, splits,
                   partials.data());
            outs[which].assign(q_dim, 0.0f);
            launch(attention_decode_combine, dim3{(unsigned)a.heads},
                   dim3{(unsigned)std::clamp((a.head_dim + 31) / 32, 1, 8) * 32}, (const float*)partials.data(),
                   splits, a.head_dim, sinks, outs[which].data(), (i8*)nullptr, (float*)nullptr);
        }
        const std::vector<float>& out = outs[0];
        check("attention_decode " + label + " paged equals contiguous at " + std::to_string(pos),
              {same_bits(outs[0], outs[1]) ? 1.0f : 0.0f}, {1.0}, 0);
        check("attention_decode " + label + " at " + std::to_string(pos), out,
              reference_attention(a, row, pos, keys_by_pos, values_by_pos, scale), 1e-5);
    }
    // The whole context as one prompt (where the cache holds it all): several blocks of
    // queries, every warp of a block, and blocks whose last warps have no rows.
    if (a.slots < context) return;
    std::vector<int> positions(context);
    std::vector<double> want;
    for (int p = 0; p < context; p++) {
        positions[p] = p;
        auto one = reference_attention(a, rows.data() + (size_t)p * width, p, keys_by_pos, values_by_pos, scale);
        want.insert(want.end(), one.begin(), one.end());
    }
    check_prefill(label + " whole context", a, caches, rows.data(), width, positions.data(), context, scale, sinks,
                  want);
}

// A prompt attended in one launch and in chunks of 13, 29 and the rest (the keys of every
// position already in the cache) gives the same bits for every query: each query's output
// depends on its own row and keys only, whatever the launch's other queries.
template <typename T>
static void check_prefill_chunking(AttentionCase a) {
    const int context = 100;
    a.slots = context;
    const std::string label = "chunked prefill heads=" + std::to_string(a.heads) + "/" + std::to_string(a.kv_heads) +
                              " hd=" + std::to_string(a.head_dim) + " window=" + std::to_string(a.window) + " " +
                              Element<T>::name;
    const int q_dim = a.heads * a.head_dim, kv_dim = a.kv_heads * a.head_dim, width = q_dim + 2 * kv_dim;
    const float scale = 1.0f / std::sqrt((float)a.head_dim);
    const auto rows = random_vector((size_t)context * width);
    Cache<T> c = paged_cache<T>(a.slots, kv_dim);
    std::vector<int> positions(context);
    for (int p = 0; p < context; p++) {
        positions[p] = p;
        c.put(p, &rows[(size_t)p * width + q_dim], &rows[(size_t)p * width + q_dim + kv_dim]);
    }
    const float* sinks = a.sinks ? SINKS : nullptr;
    const std::vector<float> whole = run_prefill<T>(a, c.k(), c.v(), c.table.data(), c.stride, rows.data(), width,
                                                    positions.data(), context, scale, sinks);
    std::vector<float> chunked;
    for (int p0 = 0, len = 13; p0 < context; p0 += len, len = std::min(2 * len + 3, context - p0)) {
        const std::vector<float> part = run_prefill<T>(a, c.k(), c.v(), c.table.data(), c.stride,
                                                       &rows[(size_t)p0 * width], width, &positions[p0], len, scale,
                                                       sinks);
        chunked.insert(chunked.end(), part.begin(), part.end());
    }
    check(label, {same_bits(whole, chunked) ? 1.0f : 0.0f}, {1.0}, 0);
}

// A batch of sequences decoded together, each over its own cache (its keys and values found
// through the tables kv_store_rows and attention_decode_rows read) and at its own position:
// every row matches the naive reference over its own keys, and equals bit for bit the
// single-sequence kernels run on that row alone over a contiguous copy of its paged cache.
// Rows of `cols` values to q8_1 blocks, a warp per block: grid (cols / 32, rows).
__global__ void quantize_rows(const float* x, int cols, i8* xq, float* meta) {
    const size_t row = blockIdx.y, block = blockIdx.x;
    const int lane = (int)(threadIdx.x & 31);
    quantize_q8_1_block(x[row * cols + 32 * block + lane], lane, xq + row * cols + 32 * block,
                        meta + 4 * (row * (cols / 32) + block));
}

template <typename T>
static void check_attention_rows(const AttentionCase& a) {
    const std::string label = "heads=" + std::to_string(a.heads) + "/" + std::to_string(a.kv_heads) +
                              " hd=" + std::to_string(a.head_dim) + " window=" + std::to_string(a.window) +
                              (a.sinks ? " sinks" : "") + " " + Element<T>::name;
    const float* sinks = a.sinks ? SINKS : nullptr;
    const int q_dim = a.heads * a.head_dim, kv_dim = a.kv_heads * a.head_dim;
    const int width = q_dim + 2 * kv_dim, group = a.heads / a.kv_heads;
    const float scale = 1.0f / std::sqrt((float)a.head_dim);
    const int context = 100;
    // Positions in one split, across a split boundary, past the window's ring, and the first.
    const std::vector<int> positions = {5, 70, 93, 0};
    const int rows = (int)positions.size();
    const int longest = a.window > 0 ? std::min(a.window, context) : context;
    const int split_len = 64, splits = (longest + split_len - 1) / split_len;
    const unsigned combine_threads = (unsigned)std::clamp((a.head_dim + 31) / 32, 1, 8) * 32;
    std::vector<std::vector<float>> history(rows);
    // Each row's cache paged, and a contiguous copy of it for the row alone.
    std::vector<Cache<T>> paged, contiguous;
    std::vector<float> batch((size_t)rows * width);
    std::vector<T*> key_table(rows), value_table(rows);
    std::vector<const int*> block_tables(rows);
    for (int r = 0; r < rows; r++) {
        const int pos = positions[r];
        history[r] = random_vector((size_t)(pos + 1) * width);
        paged.push_back(paged_cache<T>(a.slots, kv_dim));
        contiguous.push_back(contiguous_cache<T>(a.slots, kv_dim));
        // Earlier positions already in the cache's ring; the new one stored by kv_store_rows.
        for (int p = 0; p < pos; p++) {
            const float* row = &history[r][(size_t)p * width];
            paged[r].put(p % a.slots, row + q_dim, row + q_dim + kv_dim);
            contiguous[r].put(p % a.slots, row + q_dim, row + q_dim + kv_dim);
        }
        std::memcpy(&batch[(size_t)r * width], &history[r][(size_t)pos * width], 4 * width);
        key_table[r] = paged[r].k();
        value_table[r] = paged[r].v();
        block_tables[r] = paged[r].table.data();
    }
    launch(Element<T>::store_rows, dim3{(unsigned)rows}, dim3{threads_for(kv_dim)}, (const float*)batch.data(), width,
           q_dim, q_dim + kv_dim, (T* const*)key_table.data(), (T* const*)value_table.data(),
           (const int* const*)block_tables.data(), paged[0].stride, kv_dim, positions.data(), a.slots);
    std::vector<const T*> const_keys(key_table.begin(), key_table.end());
    std::vector<const T*> const_values(value_table.begin(), value_table.end());
    // Ones, not zeros: an empty split that a block leaves unwritten would count.
    std::vector<float> partials((size_t)rows * a.heads * splits * (a.head_dim + 2), 1.0f);
    // Fewer blocks than splits a row, each computing several splits, as a batch launches them.
    const unsigned blocks = (unsigned)std::max(1, splits / 3);
    launch(Element<T>::decode_rows, dim3{(unsigned)a.heads, blocks, (unsigned)rows},
           dim3{ATTN_WARPS * 32}, (const float*)batch.data(), width, 0, const_keys.data(),
           const_values.data(), (const int* const*)block_tables.data(), paged[0].stride, a.slots, kv_dim, a.head_dim, group, positions.data(), a.window, scale,
           a.softcap, split_len, splits, partials.data());
    std::vector<float> out((size_t)rows * q_dim);
    // Merged with the q8_1 quantization for the output projection where whole blocks allow.
    const bool quantize = a.head_dim % 32 == 0;
    std::vector<i8> xq(quantize ? (size_t)rows * q_dim : 0);
    std::vector<float> meta(quantize ? (size_t)rows * q_dim / 8 : 0);
    launch(attention_decode_combine, dim3{(unsigned)a.heads, (unsigned)rows}, dim3{combine_threads},
           (const float*)partials.data(), splits, a.head_dim, sinks, out.data(), quantize ? xq.data() : nullptr,
           quantize ? meta.data() : nullptr);
    if (quantize) {
        std::vector<i8> want_xq(xq.size());
        std::vector<float> want_meta(meta.size());
        launch(quantize_rows, dim3{(unsigned)(q_dim / 32), (unsigned)rows}, dim3{32}, (const float*)out.data(), q_dim,
               want_xq.data(), want_meta.data());
        const bool same = want_xq == xq && std::memcmp(want_meta.data(), meta.data(), 4 * meta.size()) == 0;
        check("attention_decode_combine " + label + " quantizes its output as quantize_q8_1 does",
              {same ? 1.0f : 0.0f}, {1.0}, 0);
    }
    for (int r = 0; r < rows; r++) {
        const int pos = positions[r];
        const float* q = &batch[(size_t)r * width];
        std::vector<float> keys_by_pos((size_t)(pos + 1) * kv_dim), values_by_pos((size_t)(pos + 1) * kv_dim);
        for (int p = 0; p <= pos; p++) {
            const float* row = &history[r][(size_t)p * width + q_dim];
            Element<T>::round_row(row, &keys_by_pos[(size_t)p * kv_dim], kv_dim);
            Element<T>::round_row(row + kv_dim, &values_by_pos[(size_t)p * kv_dim], kv_dim);
        }
        const std::string at = label + " row " + std::to_string(r) + " at " + std::to_string(pos);
        const std::vector<float> row_out(out.begin() + (size_t)r * q_dim, out.begin() + (size_t)(r + 1) * q_dim);
        check("attention_decode_rows " + at, row_out,
              reference_attention(a, q, pos, keys_by_pos, values_by_pos, scale), 1e-5);
        // The same row alone through the single-sequence kernels, over the contiguous copy of
        // its cache (its new position stored there by kv_store).
        const int position[1] = {pos};
        Cache<T>& c = contiguous[r];
        launch(Element<T>::store, dim3{1}, dim3{threads_for(kv_dim)}, q, width, q_dim, q_dim + kv_dim, c.k(), c.v(),
               (const int*)c.table.data(), c.stride, kv_dim, (const int*)position, a.slots);
        std::vector<float> alone_partials((size_t)a.heads * splits * (a.head_dim + 2)), alone(q_dim);
        launch(Element<T>::decode, dim3{(unsigned)a.heads, (unsigned)splits}, dim3{ATTN_WARPS * 32}, q, 0,
               (const T*)c.k(), (const T*)c.v(), (const int*)c.table.data(), c.stride, a.slots, kv_dim,
               a.head_dim, group,
               position, a.window, scale, a.softcap, split_len, splits, alone_partials.data());
        launch(attention_decode_combine, dim3{(unsigned)a.heads}, dim3{combine_threads},
               (const float*)alone_partials.data(), splits, a.head_dim, sinks, alone.data(), (i8*)nullptr,
               (float*)nullptr);
        const bool same = std::memcmp(alone.data(), row_out.data(), 4 * (size_t)q_dim) == 0;
        check("attention_decode_rows " + at + " equals the row alone over a contiguous cache", {same ? 1.0f : 0.0f},
              {1.0}, 0);
    }
}


// Two sequences share the blocks of a 20-position prefix (block 0 full, block 1 holding rows
// 0 to 3), as the prefix cache and n > 1 choices share them. Sequence B is about to write
// position 20 into the shared block 1: it copies that block (every layer, kv_copy_block) into
// a free one first and lists the copy; block 0 stays shared. Then A and B each store six positions of their own
// and attend (prefill), and store one more each and decode together as two rows. Each sees the
// prefix and its own keys only (against the naive reference), and the shared block 0 is never
// written.
template <typename T>
static void check_shared_prefix() {
    const AttentionCase a{4, 2, 64, 0, 64, 0.0f};
    const std::string label = std::string("shared prefix ") + Element<T>::name;
    const int q_dim = a.heads * a.head_dim, kv_dim = a.kv_heads * a.head_dim;
    const int width = q_dim + 2 * kv_dim, group = a.heads / a.kv_heads;
    const float scale = 1.0f / std::sqrt((float)a.head_dim);
    const int prefix = 20, own = 6, layers = 2, layer = 1, pool = 10;
    // The pool and the two sequences' views of it (their tables differ).
    Cache<T> A;
    A.keys = filled<T>((size_t)pool * layers * KV_BLOCK * kv_dim, 100.0f);
    A.values = A.keys;
    A.base = (size_t)layer * KV_BLOCK * kv_dim;
    A.stride = (long long)layers * KV_BLOCK * kv_dim;
    A.kv_dim = kv_dim;
    A.table = {3, 7, 1, 4};
    const auto history_a = random_vector((size_t)(prefix + own + 1) * width);
    auto history_b = random_vector((size_t)(prefix + own + 1) * width);
    std::copy(history_a.begin(), history_a.begin() + (size_t)prefix * width, history_b.begin());
    std::vector<int> positions(own + 1);
    // A's prefill of the prefix (its keys stored by kv_store).
    for (int p = 0; p < prefix; p++) {
        const int at[1] = {p};
        launch(Element<T>::store, dim3{1}, dim3{threads_for(kv_dim)}, &history_a[(size_t)p * width], width, q_dim,
               q_dim + kv_dim, A.k(), A.v(), (const int*)A.table.data(), A.stride, kv_dim, (const int*)at, a.slots);
    }
    // B shares blocks 3 and 7, copies block 7 to block 5 before writing into it.
    std::vector<int> table_b = {3, 7, 8, 9};
    const size_t block = Element<T>::storage((size_t)layers * KV_BLOCK * kv_dim);
    const std::vector<T> shared_block(A.keys.begin() + 3 * block, A.keys.begin() + 4 * block);
    const long long words = (long long)(block * sizeof(T) / 4);
    launch(kv_copy_block, dim3{2}, dim3{128}, (u32*)A.keys.data(), (u32*)A.values.data(), 7 * words, 5 * words,
           words);
    table_b[1] = 5;
    const int* tables[2] = {A.table.data(), table_b.data()};
    const std::vector<float>* histories[2] = {&history_a, &history_b};
    for (int i = 0; i < own; i++) positions[i] = prefix + i;
    for (int s = 0; s < 2; s++) {
        const float* batch = &(*histories[s])[(size_t)prefix * width];
        launch(Element<T>::store, dim3{(unsigned)own}, dim3{threads_for(kv_dim)}, batch, width, q_dim, q_dim + kv_dim,
               A.k(), A.v(), tables[s], A.stride, kv_dim, (const int*)positions.data(), a.slots);
    }
    auto by_pos = [&](const std::vector<float>& h, int upto, int off) {
        std::vector<float> out((size_t)(upto + 1) * kv_dim);
        for (int p = 0; p <= upto; p++)
            Element<T>::round_row(&h[(size_t)p * width + off], &out[(size_t)p * kv_dim], kv_dim);
        return out;
    };
    for (int s = 0; s < 2; s++) {
        const std::vector<float>& h = *histories[s];
        const float* batch = &h[(size_t)prefix * width];
        const std::vector<float> out = run_prefill<T>(a, A.k(), A.v(), tables[s], A.stride, batch, width,
                                                      positions.data(), own, scale, nullptr);
        const auto keys = by_pos(h, prefix + own - 1, q_dim), values = by_pos(h, prefix + own - 1, q_dim + kv_dim);
        std::vector<double> want;
        for (int i = 0; i < own; i++) {
            auto one = reference_attention(a, batch + (size_t)i * width, prefix + i, keys, values, scale);
            want.insert(want.end(), one.begin(), one.end());
        }
        check("attention_prefill " + label + " sequence " + "AB"[s], out, want, PREFILL_TOLERANCE<T>);
    }
    // One more position each, decoded together as two rows.
    const int last = prefix + own;
    std::vector<float> batch((size_t)2 * width);
    for (int s = 0; s < 2; s++)
        std::copy_n(&(*histories[s])[(size_t)last * width], width, &batch[(size_t)s * width]);
    const int row_positions[2] = {last, last};
    T* key_rows[2] = {A.k(), A.k()};
    T* value_rows[2] = {A.v(), A.v()};
    launch(Element<T>::store_rows, dim3{2}, dim3{threads_for(kv_dim)}, (const float*)batch.data(), width, q_dim,
           q_dim + kv_dim, (T* const*)key_rows, (T* const*)value_rows, (const int* const*)tables, A.stride, kv_dim,
           (const int*)row_positions, a.slots);
    const int split_len = 64, splits = 1;
    std::vector<float> partials((size_t)2 * a.heads * splits * (a.head_dim + 2)), out((size_t)2 * q_dim);
    const T* const_keys[2] = {A.k(), A.k()};
    const T* const_values[2] = {A.v(), A.v()};
    launch(Element<T>::decode_rows, dim3{(unsigned)a.heads, (unsigned)splits, 2}, dim3{ATTN_WARPS * 32},
           (const float*)batch.data(), width, 0, (const T* const*)const_keys, (const T* const*)const_values,
           (const int* const*)tables, A.stride, a.slots, kv_dim, a.head_dim, group, (const int*)row_positions, 0,
           scale, 0.0f, split_len, splits, partials.data());
    launch(attention_decode_combine, dim3{(unsigned)a.heads, 2}, dim3{64}, (const float*)partials.data(), splits,
           a.head_dim, (const float*)nullptr, out.data(), (i8*)nullptr, (float*)nullptr);
    for (int s = 0; s < 2; s++) {
        const std::vector<float>& h = *histories[s];
        const auto keys = by_pos(h, last, q_dim), values = by_pos(h, last, q_dim + kv_dim);
        const std::vector<float> row(out.begin() + (size_t)s * q_dim, out.begin() + (size_t)(s + 1) * q_dim);
        check("attention_decode_rows " + label + " sequence " + "AB"[s], row,
              reference_attention(a, &batch[(size_t)s * width], last, keys, values, scale), 1e-5);
    }
    const bool untouched =
        std::memcmp(shared_block.data(), A.keys.data() + 3 * block, shared_block.size() * sizeof(T)) == 0;
    check("the shared block is never written (" + label + ")", {untouched ? 1.0f : 0.0f}, {1.0}, 0);
}

int main() {
    check_half_rounding();
    for (auto run : {check_attention<float>, check_attention<u16>}) {
        // GQA, a sliding window over a ring of window + batch slots, soft-capping, MQA with
        // wide heads, and head sizes that are not a multiple of 32, nor of 8.
        run({4, 2, 64, 0, 100, 0.0f});
        run({4, 1, 128, 40, 40 + 11, 50.0f});
        run({2, 2, 256, 0, 100, 0.0f});
        run({3, 1, 80, 20, 20 + 11, 0.0f});
        run({2, 1, 36, 0, 100, 0.0f});
        run({4, 2, 64, 0, 100, 0.0f, true});
        run({4, 4, 64, 20, 20 + 11, 0.0f, true});
    }
    // Batched decode: rows over their own caches (GQA, MQA with a window over a ring, sinks).
    for (auto run : {check_attention_rows<float>, check_attention_rows<u16>}) {
        run({4, 2, 64, 0, 100, 0.0f});
        run({4, 1, 128, 40, 40 + 11, 50.0f});
        run({3, 1, 80, 20, 20 + 11, 0.0f, true});
    }
    // A window whose start moves through the tiles, and none.
    for (auto run : {check_prefill_chunking<float>, check_prefill_chunking<u16>}) {
        run({4, 2, 64, 0, 0, 0.0f});
        run({3, 1, 80, 21, 0, 0.0f, true});
    }
    // A q8_0 cache, its rows a multiple of 32 values: GQA, a window over a ring with
    // soft-capping, wide heads, sinks.
    for (auto c : std::initializer_list<AttentionCase>{{4, 2, 64, 0, 100, 0.0f},
                                                       {4, 1, 128, 40, 40 + 11, 50.0f},
                                                       {2, 2, 256, 0, 100, 0.0f},
                                                       {4, 4, 64, 20, 20 + 11, 0.0f, true}}) {
        check_attention<q8_0_kv>(c);
        check_attention_rows<q8_0_kv>(c);
    }
    check_prefill_chunking<q8_0_kv>({4, 2, 64, 0, 0, 0.0f});
    check_shared_prefix<float>();
    check_shared_prefix<u16>();
    check_shared_prefix<q8_0_kv>();
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
