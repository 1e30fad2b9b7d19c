// Runs every CUDA kernel under the host emulation (cuda_emulation.h) on small random inputs and
// compares it with a naive double-precision reference written here. Prints
// "N passed, M failed" and exits non-zero on any failure.
#include "cuda_emulation.h"

#include <cstdio>
#include <random>
#include <string>

#include "../../src/kernels/common.cuh"
#include "../../src/kernels/dequant.cuh"
#include "codebooks.cuh"  // generated into the build folder (kernels::codebooks)
#include "../../src/kernels/dequant_iq.cuh"
#include "../../src/kernels/reduce.cuh"
#include "../../src/kernels/matmul.cu"
#include "../../src/kernels/matvec_q8_1.cu"
#include "../../src/kernels/norm.cu"
#include "../../src/kernels/rope.cu"
#include "../../src/kernels/elementwise.cu"
#include "../../src/kernels/moe.cu"
#include "../../src/kernels/mma.cu"

#include "checks.h"

// ---- weight kernels -------------------------------------------------------------------------

struct Format {
    const char* name;
    int qk, bytes;
    std::vector<int> half_fields;  // byte offsets of f16 scales within a block
    std::vector<int> e8m0_fields;  // byte offsets of E8M0 exponents within a block
    int spread_half = -1;          // IQ1_M: an f16 scale in the top nibbles of 4 words from here
};

template <typename F>
static std::vector<float> dequantize(const std::vector<u8>& w, int rows, int cols) {
    std::vector<float> out((size_t)rows * cols);
    const size_t row_bytes = (size_t)cols / F::QK * F::BYTES;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols / 32; c++)
            F::deq32(w.data() + r * row_bytes, c, out.data() + (size_t)r * cols + c * 32);
    return out;
}

template <typename F>
static std::vector<u8> random_weights(const Format& f, int rows, int cols) {
    const size_t row_bytes = (size_t)cols / F::QK * F::BYTES;
    std::vector<u8> w(row_bytes * rows);
    for (auto& b : w) b = (u8)(rng() & 0xff);
    if (f.qk == 1) {
        // Float formats: fill with sane values instead of random bit patterns.
        for (size_t i = 0; i < w.size() / F::BYTES; i++) {
            const float v = uniform(-1, 1);
            u32 bits;
            std::memcpy(&bits, &v, 4);
            if (F::BYTES == 4) std::memcpy(&w[4 * i], &bits, 4);
            else {
                const u16 h = std::string(f.name) == "bf16"
                                  ? (u16)(bits >> 16)
                                  : (u16)(((bits >> 16) & 0x8000) | ((((bits >> 23) & 0xff) - 112) << 10) |
                                          ((bits >> 13) & 0x3ff));
                std::memcpy(&w[2 * i], &h, 2);
            }
        }
        return w;
    }
    for (size_t block = 0; block < w.size() / F::BYTES; block++)
        for (int off : f.half_fields) {
            const u16 h = (u16)(0x2000 + (rng() & 0x3ff));  // about 0.008 to 0.016
            std::memcpy(&w[block * F::BYTES + off], &h, 2);
        }
    for (size_t block = 0; block < w.size() / F::BYTES; block++)
        for (int off : f.e8m0_fields) w[block * F::BYTES + off] = (u8)(121 + (rng() & 3));  // 2^-7 to 2^-4
    if (f.spread_half >= 0)
        for (size_t block = 0; block < w.size() / F::BYTES; block++) {
            const u32 h = 0x2000 + (rng() & 0x3ff);
            for (int k = 0; k < 4; k++) {
                u8& high = w[block * F::BYTES + f.spread_half + 2 * k + 1];
                high = (u8)((high & 0x0f) | (((h >> (4 * k)) & 15) << 4));
            }
        }
    return w;
}

template <typename F>
static void check_weight_kernels(const Format& f, void (*matvec)(const u8*, long long, const float*, int, float*, int, const float*, int, int, int),
                                 void (*matmul)(const u8*, long long, const float*, int, float*, int, const float*, int, int, int),
                                 void (*get_rows_kernel)(const u8*, long long, const int*, int, float*, int, float, int),
                                 void (*matvec_id)(const u8*, long long, long long, const int*, const float*, int, int, float*, int, const float*, int, int),
                                 void (*matmul_id)(const u8*, long long, long long, const int*, const int*, int, int, const float*, int, int, float*, int, const float*, int, int)) {
    const int rows = 13, cols = 512, n = 9, out_offset = 5, ldy = rows + 9;
    const auto w = random_weights<F>(f, rows, cols);
    const auto dense = dequantize<F>(w, rows, cols);
    const long long row_bytes = cols / F::QK * F::BYTES;
    const auto x = random_vector((size_t)n * cols);
    const auto bias = random_vector(rows);
    for (int tokens : {1, n}) {
        std::vector<float> y((size_t)tokens * ldy, 0.0f);
        std::vector<double> want((size_t)tokens * ldy, 0.0);
        for (int t = 0; t < tokens; t++)
            for (int r = 0; r < rows; r++) {
                double s = bias[r];
                for (int c = 0; c < cols; c++) s += (double)dense[(size_t)r * cols + c] * x[(size_t)t * cols + c];
                want[(size_t)t * ldy + out_offset + r] = s;
            }
        const dim3 grid{(unsigned)((rows + MATMUL_WARPS - 1) / MATMUL_WARPS),
                        tokens == 1 ? 1u : (unsigned)((tokens + MATMUL_TOKENS - 1) / MATMUL_TOKENS)};
        launch(tokens == 1 ? matvec : matmul, grid, dim3{MATMUL_WARPS * 32}, w.data(), row_bytes,
               x.data(), cols, y.data() + out_offset, ldy, bias.data(), rows, cols, tokens);
        check(std::string(tokens == 1 ? "matvec_" : "matmul_") + f.name, y, want, 2e-4);
    }
    // Embedding lookup, scaled, then a second table accumulated.
    const std::vector<int> ids = {3, 0, 12, 3};
    std::vector<float> out(ids.size() * cols, 0.0f);
    std::vector<double> want(out.size());
    for (size_t i = 0; i < ids.size(); i++)
        for (int c = 0; c < cols; c++)
            want[i * cols + c] = (double)(dense[(size_t)ids[i] * cols + c] * 2.5f) + dense[(size_t)ids[ids.size() - 1 - i] * cols + c];
    const unsigned threads = (unsigned)std::clamp((cols / 32 + 31) / 32, 1, 8) * 32;
    launch(get_rows_kernel, dim3{(unsigned)ids.size()}, dim3{threads}, w.data(), row_bytes, ids.data(), cols, out.data(), cols, 2.5f, 0);
    std::vector<int> reversed(ids.rbegin(), ids.rend());
    launch(get_rows_kernel, dim3{(unsigned)ids.size()}, dim3{threads}, w.data(), row_bytes, reversed.data(), cols, out.data(), cols, 1.0f, 1);
    check(std::string("get_rows_") + f.name, out, want, 1e-6);

    // By expert id: 3 experts of `rows` rows stacked, 3 token rows routed to 2 experts each.
    const int experts = 3, k = 2, slots = 3 * k;
    const auto stacked = random_weights<F>(f, experts * rows, cols);
    const auto stacked_dense = dequantize<F>(stacked, experts * rows, cols);
    const auto expert_bias = random_vector((size_t)experts * rows);
    // The naive product of each slot's token row of `xs` (slot / k) and its expert's rows,
    // biased, at `out_offset` of the slot's output row.
    const auto routed_reference = [&](const std::vector<int>& routing, const std::vector<float>& xs) {
        std::vector<double> want(routing.size() * ldy, 0.0);
        for (size_t slot = 0; slot < routing.size(); slot++)
            for (int r = 0; r < rows; r++) {
                const size_t row = (size_t)routing[slot] * rows + r;
                double s = expert_bias[row];
                for (int c = 0; c < cols; c++)
                    s += (double)stacked_dense[row * cols + c] * xs[(slot / k) * cols + c];
                want[slot * ldy + out_offset + r] = s;
            }
        return want;
    };
    const std::vector<int> routed = {2, 0, 1, 2, 0, 1};
    std::vector<float> ys((size_t)slots * ldy, 0.0f);
    const std::vector<double> want_ys = routed_reference(routed, x);
    const dim3 grid{(unsigned)((rows + MATMUL_WARPS - 1) / MATMUL_WARPS), (unsigned)slots};
    launch(matvec_id, grid, dim3{MATMUL_WARPS * 32}, stacked.data(), rows * row_bytes, row_bytes,
           routed.data(), x.data(), cols, k, ys.data() + out_offset, ldy, expert_bias.data(), rows,
           cols);
    check(std::string("matvec_id_") + f.name, ys, want_ys, 2e-4);

    // The same slots grouped by expert (moe_group), then each expert's group of tokens at once;
    // 11 token rows routed so that expert 1 receives more than one group of MATMUL_TOKENS.
    const int tokens = 11, many = tokens * k;
    std::vector<int> routed_many(many);
    for (int t = 0; t < tokens; t++) {
        routed_many[t * k] = 1;
        routed_many[t * k + 1] = t % 2 == 0 ? 0 : 2;
    }
    const auto xs = random_vector((size_t)tokens * cols);
    std::vector<int> counts(experts, -1), lists((size_t)experts * tokens, -1);
    launch(moe_group, dim3{(unsigned)experts}, dim3{1}, routed_many.data(), many, tokens,
           counts.data(), lists.data());
    check(std::string("moe_group counts"), {(float)counts[0], (float)counts[1], (float)counts[2]},
          {6.0, 11.0, 5.0}, 0);
    std::vector<float> yg((size_t)many * ldy, 0.0f);
    const std::vector<double> want_yg = routed_reference(routed_many, xs);
    const int groups = (tokens + MATMUL_TOKENS - 1) / MATMUL_TOKENS;
    const dim3 grouped{(unsigned)((rows + MATMUL_WARPS - 1) / MATMUL_WARPS), (unsigned)(experts * groups)};
    launch(matmul_id, grouped, dim3{MATMUL_WARPS * 32}, stacked.data(), rows * row_bytes, row_bytes,
           counts.data(), lists.data(), tokens, groups, xs.data(), cols, k, yg.data() + out_offset, ldy,
           expert_bias.data(), rows, cols);
    check(std::string("matmul_id_") + f.name, yg, want_yg, 2e-4);
}

#define CHECK_FORMAT(suffix, ...) \
    check_weight_kernels<fmt_##suffix>(Format{#suffix, fmt_##suffix::QK, fmt_##suffix::BYTES, __VA_ARGS__}, \
                                       matvec_##suffix, matmul_##suffix, get_rows_##suffix, \
                                       matvec_id_##suffix, matmul_id_##suffix)

// ---- q8_1 activations and the integer matvec ------------------------------------------------

// The q8_1 reference: per 32-element block d = max|x| / 127, q = round(x / d), and the meta
// {d, d * sum(q[0..16]), d * sum(q[16..32]), 0}, with the kernel's f32 operations.
static void quantize_reference(const std::vector<float>& x, int ldx, int cols, int n,
                               std::vector<i8>& q, std::vector<float>& meta) {
    q.assign((size_t)n * cols, 0);
    meta.assign((size_t)n * cols / 32 * 4, 0.0f);
    for (int t = 0; t < n; t++)
        for (int b = 0; b < cols / 32; b++) {
            const float* v = &x[(size_t)t * ldx + 32 * b];
            float amax = 0.0f;
            for (int j = 0; j < 32; j++) amax = std::max(amax, std::fabs(v[j]));
            const float d = amax / 127.0f;
            int sums[2] = {0, 0};
            for (int j = 0; j < 32; j++) {
                const int code = amax == 0.0f ? 0 : (int)std::round(v[j] / d);
                q[(size_t)t * cols + 32 * b + j] = (i8)code;
                sums[j / 16] += code;
            }
            float* m = &meta[((size_t)t * (cols / 32) + b) * 4];
            m[0] = d;
            m[1] = d * (float)sums[0];
            m[2] = d * (float)sums[1];
        }
}

typedef void (*Q8_1Matvec)(const u8*, const u8*, const u8*, long long, int, int, const float*, const float*,
                           const float*, const i8*, const float*, float*, int, int, int, int);

// The activation quantizer matches its reference exactly (codes and metas, an all-zero block
// and outliers included), and each format's integer matvec, for 1, 5 and 8 token rows, matches
// the double-precision product of the dequantized weights with the dequantized q8_1 rows.
template <typename F>
static void check_q8_1_kernels(const Format& f, Q8_1Matvec matvec, Q8_1Matvec batch) {
    const int rows = 13, cols = 1280, n = 8, ldx = cols + 64, out_offset = 3, ldy = rows + 5;
    // 16-byte aligned weights, as the device's allocations are.
    const auto bytes = random_weights<F>(f, rows, cols);
    std::vector<int4> aligned((bytes.size() + 15) / 16);
    u8* w = (u8*)aligned.data();
    std::memcpy(w, bytes.data(), bytes.size());
    const auto dense = dequantize<F>(bytes, rows, cols);
    const long long row_bytes = cols / F::QK * F::BYTES;
    auto x = random_vector((size_t)n * ldx, 2.0f);
    for (int j = 0; j < 32; j++) x[(size_t)1 * ldx + 64 + j] = 0.0f;  // an all-zero block
    x[(size_t)2 * ldx + 5] = 40.0f;                                    // outliers
    x[(size_t)3 * ldx + 700] = -75.0f;
    const auto bias = random_vector(rows);

    std::vector<int4> q_store((size_t)n * cols / 16);
    std::vector<float4> meta_store((size_t)n * cols / 32);
    i8* xq = (i8*)q_store.data();
    float* meta = (float*)meta_store.data();
    launch(quantize_q8_1, dim3{(unsigned)((cols / 32 + Q8_1_BLOCKS_PER_CTA - 1) / Q8_1_BLOCKS_PER_CTA), (unsigned)n},
           dim3{Q8_1_BLOCKS_PER_CTA * 32}, x.data(), ldx, cols, xq, meta);
    std::vector<i8> want_q;
    std::vector<float> want_meta;
    quantize_reference(x, ldx, cols, n, want_q, want_meta);
    const bool same = std::memcmp(xq, want_q.data(), want_q.size()) == 0 &&
                      std::memcmp(meta, want_meta.data(), want_meta.size() * 4) == 0;
    if (same) passed++;
    else {
        failed++;
        std::printf("FAILED quantize_q8_1 (for %s): codes or metas differ from the reference\n", f.name);
    }

    for (int tokens : {1, 5, n}) {
        std::vector<float> y((size_t)tokens * ldy, 0.0f);
        std::vector<double> want(y.size(), 0.0);
        for (int t = 0; t < tokens; t++)
            for (int r = 0; r < rows; r++) {
                double s = bias[r];
                for (int c = 0; c < cols; c++) {
                    const double xv = (double)want_meta[((size_t)t * (cols / 32) + c / 32) * 4] * want_q[(size_t)t * cols + c];
                    s += (double)dense[(size_t)r * cols + c] * xv;
                }
                want[(size_t)t * ldy + out_offset + r] = s;
            }
        const unsigned per_block = MMVQ_WARPS * MMVQ_ROWS;
        const Q8_1Matvec kernel = tokens == 1 ? matvec : batch;
        const std::string name =
            std::string(tokens == 1 ? "matvec_q8_1_" : "matvec_batch_q8_1_") + f.name + " x" + std::to_string(tokens);
        launch(kernel, dim3{(rows + per_block - 1) / per_block}, dim3{MMVQ_WARPS * 32}, w, w, w, row_bytes, rows,
               rows, bias.data(), (const float*)nullptr, (const float*)nullptr, xq, meta, y.data() + out_offset, ldy,
               rows, cols, tokens);
        check(name, y, want, 1e-4);
        // The matrix as three launched together (rows 0-4, 5-8 and 9-12, each with its share
        // of the bias): the same bits.
        const int split1 = 5, split2 = 9;
        std::vector<float> parts(y.size(), 0.0f);
        launch(kernel, dim3{(rows + per_block - 1) / per_block}, dim3{MMVQ_WARPS * 32}, w,
               w + split1 * row_bytes, w + split2 * row_bytes, row_bytes, split1, split2, bias.data(),
               bias.data() + split1, bias.data() + split2, xq, meta, parts.data() + out_offset, ldy, rows, cols,
               tokens);
        const bool same_rows = std::memcmp(parts.data(), y.data(), 4 * y.size()) == 0;
        check(name + " in three matrices, the same bits", {same_rows ? 1.0f : 0.0f}, {1.0}, 0);
        // Without a bias.
        launch(kernel, dim3{(rows + per_block - 1) / per_block}, dim3{MMVQ_WARPS * 32}, w, w, w, row_bytes, rows,
               rows, (const float*)nullptr, (const float*)nullptr, (const float*)nullptr, xq, meta,
               parts.data() + out_offset, ldy, rows, cols, tokens);
        for (int t = 0; t < tokens; t++)
            for (int r = 0; r < rows; r++) want[(size_t)t * ldy + out_offset + r] -= bias[r];
        check(name + " without a bias", parts, want, 1e-4);
    }
}

#define CHECK_Q8_1(suffix, ...) \
    check_q8_1_kernels<fmt_##suffix>(Format{#suffix, fmt_##suffix::QK, fmt_##suffix::BYTES, __VA_ARGS__}, \
                                     matvec_q8_1_##suffix, matvec_batch_q8_1_##suffix)

// ---- tensor-core matmul ----------------------------------------------------------------------

// f to the nearer of the two bf16 values around it, ties to the even one (an independent
// formulation of the kernels' rounding).
static double round_bf16(float f) {
    u32 bits;
    std::memcpy(&bits, &f, 4);
    const u32 lo_bits = bits & 0xffff0000u, hi_bits = lo_bits + 0x10000u;
    const double lo = __uint_as_float(lo_bits), hi = __uint_as_float(hi_bits);
    const double below = std::fabs((double)f - lo), above = std::fabs(hi - (double)f);
    if (below != above) return below < above ? lo : hi;
    return (lo_bits & 0x10000u) == 0 ? lo : hi;
}

// Σ_c bf16(W[row, c]) · bf16(x[c]) + bias in double, and |bias| + Σ_c |bf16(W) · bf16(x)|,
// the scale of the f32 summation's error.
struct Bf16Dot {
    double value, magnitude;
};

static Bf16Dot bf16_dot(const std::vector<float>& dense, size_t row, const float* x, int cols,
                        double bias) {
    Bf16Dot d{bias, std::fabs(bias)};
    for (int c = 0; c < cols; c++) {
        const double p = round_bf16(dense[row * cols + c]) * round_bf16(x[c]);
        d.value += p;
        d.magnitude += std::fabs(p);
    }
    return d;
}

// got against the references, each error relative to the reference's magnitude.
static void check_scaled(const std::string& what, const std::vector<float>& got,
                         const std::vector<Bf16Dot>& want, double tolerance) {
    std::vector<float> scaled(got.size());
    std::vector<double> scaled_want(want.size());
    for (size_t i = 0; i < want.size(); i++) {
        const double m = want[i].magnitude > 0 ? want[i].magnitude : 1.0;
        scaled[i] = (float)(got[i] / m);
        scaled_want[i] = want[i].value / m;
    }
    check(what, scaled, scaled_want, tolerance);
}

// The tensor-core kernels against bf16_dot: products of bf16 values are exact in f32, so the
// kernel differs from the reference only by f32 summation, whose error is a multiple of
// 2^-24 · Σ|products| (about √cols multiples when the errors are random, at most cols):
// tolerance 1e-6 of that magnitude (measured: at most 1.5e-7). Weights rounded by truncation
// instead would be off by about 2^-9 / √cols ≈ 1e-4 of it.
// Rows, tokens and (for 32-element blocks) columns are not multiples of the tile: 136 rows
// (128 + 8), 70 tokens (64 + 6), 288 columns (4.5 steps of MMA_K); x rows strided wider than
// the matrix, y written at an offset into wider rows.
template <typename F>
static void check_mma_kernels(const Format& f,
                              void (*mma)(const u8*, long long, const float*, int, float*, int, const float*, int, int, int),
                              void (*mma_id)(const u8*, long long, long long, const int*, const int*, int, int, const float*, int, int, float*, int, const float*, int, int)) {
    const int rows = MMA_ROWS + 8, cols = f.qk == 256 ? 512 : 288, n = MMA_TOKENS + 6;
    const int ldx = cols + 4, out_offset = 5, ldy = rows + 9;
    const double tolerance = 1e-6;
    const auto w = random_weights<F>(f, rows, cols);
    const auto dense = dequantize<F>(w, rows, cols);
    const long long row_bytes = cols / F::QK * F::BYTES;
    const auto x = random_vector((size_t)n * ldx);
    const auto bias = random_vector(rows);
    for (int tokens : {n, 3}) {
        std::vector<float> y((size_t)tokens * ldy, 0.0f);
        std::vector<Bf16Dot> want(y.size(), Bf16Dot{0.0, 0.0});
        const bool biased = tokens == n;
        for (int t = 0; t < tokens; t++)
            for (int r = 0; r < rows; r++)
                want[(size_t)t * ldy + out_offset + r] =
                    bf16_dot(dense, r, &x[(size_t)t * ldx], cols, biased ? bias[r] : 0.0);
        const dim3 grid{(unsigned)((rows + MMA_ROWS - 1) / MMA_ROWS), (unsigned)((tokens + MMA_TOKENS - 1) / MMA_TOKENS)};
        launch(mma, grid, dim3{MMA_WARPS * 32}, w.data(), row_bytes, x.data(), ldx, y.data() + out_offset, ldy,
               biased ? bias.data() : nullptr, rows, cols, tokens);
        check_scaled(std::string("mma_") + f.name + " " + std::to_string(tokens) + " tokens", y, want, tolerance);
    }

    // By expert id: 3 experts, n tokens routed to 2 each, expert 1 receiving every token (two
    // groups of MMA_TOKENS, the second partial), experts 0 and 2 alternate tokens.
    const int experts = 3, k = 2, slots = n * k;
    const auto stacked = random_weights<F>(f, experts * rows, cols);
    const auto stacked_dense = dequantize<F>(stacked, experts * rows, cols);
    const auto expert_bias = random_vector((size_t)experts * rows);
    std::vector<int> routed(slots);
    for (int t = 0; t < n; t++) {
        routed[t * k] = t % 2 == 0 ? 0 : 2;
        routed[t * k + 1] = 1;
    }
    std::vector<int> counts(experts, -1), lists((size_t)experts * n, -1);
    launch(moe_group, dim3{(unsigned)experts}, dim3{1}, routed.data(), slots, n, counts.data(), lists.data());
    std::vector<float> y((size_t)slots * ldy, 0.0f);
    std::vector<Bf16Dot> want(y.size(), Bf16Dot{0.0, 0.0});
    for (int slot = 0; slot < slots; slot++)
        for (int r = 0; r < rows; r++) {
            const size_t row = (size_t)routed[slot] * rows + r;
            want[(size_t)slot * ldy + out_offset + r] =
                bf16_dot(stacked_dense, row, &x[(size_t)(slot / k) * ldx], cols, expert_bias[row]);
        }
    const int groups = (n + MMA_TOKENS - 1) / MMA_TOKENS;
    const dim3 grid{(unsigned)((rows + MMA_ROWS - 1) / MMA_ROWS), (unsigned)(experts * groups)};
    launch(mma_id, grid, dim3{MMA_WARPS * 32}, stacked.data(), rows * row_bytes, row_bytes, counts.data(),
           lists.data(), n, groups, x.data(), ldx, k, y.data() + out_offset, ldy, expert_bias.data(), rows, cols);
    check_scaled(std::string("mma_id_") + f.name, y, want, tolerance);
}

#define CHECK_MMA(suffix, ...) \
    check_mma_kernels<fmt_##suffix>(Format{#suffix, fmt_##suffix::QK, fmt_##suffix::BYTES, __VA_ARGS__}, \
                                    mma_##suffix, mma_id_##suffix)

static void check_bf16_rounding() {
    // Ties to even (down from an even mantissa, up from an odd one), plain rounding both ways,
    // the largest finite values, infinities and NaN.
    const u32 inputs[] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, 0x7f7fffffu,
                          0xff7f0000u, 0x7f800000u, 0xff800000u, 0x7fc00001u, 0x00000001u};
    const u32 expected[] = {0x3f80u, 0x3f82u, 0x3f81u, 0x3f80u, 0x7f80u,
                            0xff7fu, 0x7f80u, 0xff80u, 0x7fc0u, 0x0000u};
    std::vector<float> got;
    std::vector<double> want;
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        got.push_back((float)bf16_bits(__uint_as_float(inputs[i])));
        want.push_back((double)expected[i]);
    }
    check("bf16_bits", got, want, 0);
}

// ---- norms, rope ------------------------------------------------------------------------------

static void check_norms() {
    const int n = 3, d = 640;
    const auto x = random_vector(n * d, 3.0f), w = random_vector(d), b = random_vector(d);
    std::vector<float> y(n * d);
    std::vector<double> want(n * d);
    for (int i = 0; i < n; i++) {
        double ss = 0;
        for (int j = 0; j < d; j++) ss += (double)x[i * d + j] * x[i * d + j];
        const double scale = 1.0 / std::sqrt(ss / d + 1e-6);
        for (int j = 0; j < d; j++) want[i * d + j] = x[i * d + j] * scale * w[j];
    }
    launch(rms_norm, dim3{n}, dim3{threads_for(d)}, x.data(), y.data(), w.data(), d, 1e-6f);
    check("rms_norm", y, want, 1e-5);

    // A residual add fused with the norm: the bits of add_inplace, then rms_norm.
    const auto r = random_vector(n * d, 3.0f);
    std::vector<float> x_apart = x, y_apart(n * d), x_fused = x, y_fused(n * d);
    launch(add_inplace, dim3{(n * d + 255) / 256}, dim3{256}, x_apart.data(), r.data(), (long long)(n * d));
    launch(rms_norm, dim3{n}, dim3{threads_for(d)}, x_apart.data(), y_apart.data(), w.data(), d, 1e-6f);
    std::vector<i8> q_apart(n * d), q_fused(n * d);
    std::vector<float> m_apart(n * d / 8), m_fused(n * d / 8);
    launch(quantize_q8_1, dim3{(unsigned)((d / 32 + Q8_1_BLOCKS_PER_CTA - 1) / Q8_1_BLOCKS_PER_CTA), (unsigned)n},
           dim3{Q8_1_BLOCKS_PER_CTA * 32}, (const float*)y_apart.data(), d, d, q_apart.data(), m_apart.data());
    launch(add_rms_norm, dim3{n}, dim3{threads_for(d)}, x_fused.data(), r.data(), y_fused.data(), w.data(), d,
           1e-6f, q_fused.data(), m_fused.data());
    const bool same = x_apart == x_fused && std::memcmp(y_apart.data(), y_fused.data(), 4 * y_fused.size()) == 0;
    check("add_rms_norm equals add_inplace then rms_norm", {same ? 1.0f : 0.0f}, {1.0}, 0);
    const bool same_q = q_apart == q_fused && std::memcmp(m_apart.data(), m_fused.data(), 4 * m_fused.size()) == 0;
    check("add_rms_norm's q8_1 rows equal quantize_q8_1's", {same_q ? 1.0f : 0.0f}, {1.0}, 0);
    // Without the residual, nor the quantization: rms_norm's bits.
    std::vector<float> y_plain(n * d), x_plain = x;
    launch(add_rms_norm, dim3{n}, dim3{threads_for(d)}, x_plain.data(), (const float*)nullptr, y_plain.data(),
           w.data(), d, 1e-6f, (i8*)nullptr, (float*)nullptr);
    const bool plain = x_plain == x && std::memcmp(y_plain.data(), y.data(), 4 * y.size()) == 0;
    check("add_rms_norm without a residual equals rms_norm", {plain ? 1.0f : 0.0f}, {1.0}, 0);

    for (int i = 0; i < n; i++) {
        double mean = 0, var = 0;
        for (int j = 0; j < d; j++) mean += x[i * d + j];
        mean /= d;
        for (int j = 0; j < d; j++) var += (x[i * d + j] - mean) * (x[i * d + j] - mean);
        const double scale = 1.0 / std::sqrt(var / d + 1e-5);
        for (int j = 0; j < d; j++) want[i * d + j] = (x[i * d + j] - mean) * scale * w[j] + b[j];
    }
    launch(layer_norm, dim3{n}, dim3{threads_for(d)}, x.data(), y.data(), w.data(), b.data(), d, 1e-5f);
    check("layer_norm", y, want, 1e-5);

    // Per-head RMSNorm of the k section of a qkv buffer, in place.
    const int heads = 2, head_dim = 80, ld = 7 * head_dim, offset = 4 * head_dim;
    auto qkv = random_vector(n * ld);
    const auto hw = random_vector(head_dim);
    std::vector<double> expect(qkv.begin(), qkv.end());
    for (int t = 0; t < n; t++)
        for (int h = 0; h < heads; h++) {
            const int base = t * ld + offset + h * head_dim;
            double ss = 0;
            for (int j = 0; j < head_dim; j++) ss += (double)qkv[base + j] * qkv[base + j];
            const double scale = 1.0 / std::sqrt(ss / head_dim + 1e-6);
            for (int j = 0; j < head_dim; j++) expect[base + j] = qkv[base + j] * scale * hw[j];
        }
    launch(head_rms_norm, dim3{n, heads}, dim3{32}, qkv.data(), ld, offset, hw.data(), head_dim, 1e-6f);
    check("head_rms_norm", qkv, expect, 1e-5);
}

static void check_rope() {
    const int n = 4, heads = 3, head_dim = 64, ld = 5 * head_dim, offset = head_dim;
    const std::vector<int> positions = {0, 1, 17, 300};
    for (int yarn = 0; yarn < 2; yarn++)
    for (int neox = 0; neox < 2; neox++)
        for (int n_rot : {64, 32}) {
            auto x = random_vector(n * ld);
            const auto factors = std::vector<float>{1, 1, 2, 4, 8, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
            const float base = 10000.0f, freq_scale = 0.5f;
            // YaRN: extrapolated below pair 3, interpolated above pair 20, magnitudes times 1.2.
            const float low = 3.0f, high = 20.0f, mscale = yarn ? 1.2f : 0.0f;
            const float theta_scale = std::pow(base, -2.0f / n_rot);
            std::vector<double> want(x.begin(), x.end());
            for (int t = 0; t < n; t++)
                for (int h = 0; h < heads; h++) {
                    const int b0 = t * ld + offset + h * head_dim;
                    float theta = (float)positions[t];
                    for (int i = 0; i < n_rot / 2; i++) {
                        double angle = (double)(freq_scale * theta / factors[i]), magnitude = 1.0;
                        if (yarn) {
                            const double extrap = (double)(theta / factors[i]);
                            const double ramp = 1.0 - std::clamp((i - low) / (double)(high - low), 0.0, 1.0);
                            angle = freq_scale * extrap * (1.0 - ramp) + extrap * ramp;
                            magnitude = mscale;
                        }
                        const double c = std::cos(angle) * magnitude, s = std::sin(angle) * magnitude;
                        const int a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
                        want[b0 + a] = x[b0 + a] * c - x[b0 + b] * s;
                        want[b0 + b] = x[b0 + a] * s + x[b0 + b] * c;
                        theta *= theta_scale;
                    }
                }
            const unsigned threads = (unsigned)std::max(1, (n_rot / 2 + 31) / 32) * 32;
            launch(rope, dim3{n, heads}, dim3{threads}, x.data(), ld, offset, head_dim, n_rot,
                   positions.data(), theta_scale, freq_scale, factors.data(), neox, low, high, mscale);
            check("rope yarn=" + std::to_string(yarn) + " neox=" + std::to_string(neox) +
                      " n_rot=" + std::to_string(n_rot),
                  x, want, 1e-5);
        }
}

// ---- elementwise ------------------------------------------------------------------------------

static void check_elementwise() {
    const int n = 3, f = 70, ld = 2 * f;
    for (int kind = 0; kind < 4; kind++) {
        auto gu = random_vector(n * ld, 4.0f);
        std::vector<double> want(gu.begin(), gu.end());
        for (int i = 0; i < n; i++)
            for (int j = 0; j < f; j++) {
                const double g = gu[i * ld + j], u = gu[i * ld + f + j];
                const double gelu = 0.5 * g * (1 + std::tanh(0.7978846 * g * (1 + 0.044715 * g * g)));
                const double silu = g / (1 + std::exp(-g));
                const double x = std::min(g, 7.0), y = std::clamp(u, -7.0, 7.0);
                const double swiglu = x / (1 + std::exp(-1.702 * x)) * (y + 1);
                want[i * ld + j] = kind == 0 ? silu * u : kind == 1 ? gelu * u : kind == 2 ? gelu : swiglu;
            }
        const auto input = gu;
        launch(gated_activation, dim3{(unsigned)((n * f + 255) / 256)}, dim3{256}, gu.data(), f, ld, n, kind);
        check("gated_activation kind " + std::to_string(kind), gu, want, 1e-5);

        // With the q8_1 quantization of its rows (a width of whole blocks): the bits of
        // gated_activation, then quantize_q8_1.
        const int q = 64, qld = 2 * q;
        std::vector<float> apart(n * qld), fused;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < qld; j++) apart[i * qld + j] = input[i * ld + j % ld];
        fused = apart;
        std::vector<i8> q_apart(n * q), q_fused(n * q);
        std::vector<float> m_apart(n * q / 8), m_fused(n * q / 8);
        const dim3 grid{(unsigned)((q / 32 + Q8_1_BLOCKS_PER_CTA - 1) / Q8_1_BLOCKS_PER_CTA), (unsigned)n};
        launch(gated_activation, dim3{(unsigned)((n * q + 255) / 256)}, dim3{256}, apart.data(), q, qld, n, kind);
        launch(quantize_q8_1, grid, dim3{Q8_1_BLOCKS_PER_CTA * 32}, (const float*)apart.data(), qld, q,
               q_apart.data(), m_apart.data());
        launch(gated_activation_q8_1, grid, dim3{Q8_1_BLOCKS_PER_CTA * 32}, fused.data(), q, qld, n, kind,
               q_fused.data(), m_fused.data());
        const bool same = apart == fused && q_apart == q_fused &&
                          std::memcmp(m_apart.data(), m_fused.data(), 4 * m_fused.size()) == 0;
        check("gated_activation_q8_1 kind " + std::to_string(kind) + " equals gated_activation then quantize_q8_1",
              {same ? 1.0f : 0.0f}, {1.0}, 0);
    }
    const long long len = 1000;
    auto x = random_vector(len), a = random_vector(len), b = random_vector(len);
    std::vector<double> want(len);
    for (int i = 0; i < len; i++) want[i] = (double)x[i] + a[i] + (a[i] + b[i]);
    launch(add_inplace, dim3{4}, dim3{256}, x.data(), (const float*)a.data(), len);
    launch(add2_inplace, dim3{4}, dim3{256}, x.data(), (const float*)a.data(), (const float*)b.data(), len);
    check("add_inplace, add2_inplace", x, want, 1e-5);
    for (int i = 0; i < len; i++) want[i] = 30.0 * std::tanh(x[i] * 40.0 / 30.0);
    for (auto& v : x) v *= 40.0f;
    launch(softcap, dim3{4}, dim3{256}, x.data(), len, 30.0f);
    check("softcap", x, want, 1e-5);

    for (int vocab : {1, 5, 3001}) {
        auto logits = random_vector(vocab);
        int best = 0;
        for (int i = 0; i < vocab; i++)
            if (logits[i] > logits[best]) best = i;
        if (vocab > 100) logits[vocab - 7] = logits[best];  // a tie: the smaller index wins
        int out = -1;
        launch(argmax, dim3{1}, dim3{1024}, (const float*)logits.data(), vocab, &out);
        check("argmax vocab " + std::to_string(vocab), {(float)out}, {(double)best}, 0);
    }
}

// ---- mixture of experts ---------------------------------------------------------------------

static std::vector<double> softmax(const std::vector<double>& x) {
    double max = -INFINITY, sum = 0.0;
    for (double v : x) max = std::max(max, v);
    std::vector<double> p(x.size());
    for (size_t i = 0; i < x.size(); i++) sum += p[i] = std::exp(x[i] - max);
    for (auto& v : p) v /= sum;
    return p;
}

// The k largest of `x`, highest first, the lower index on ties.
static std::vector<int> top_k(const std::vector<double>& x, int k) {
    std::vector<int> order(x.size());
    for (size_t i = 0; i < x.size(); i++) order[i] = (int)i;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
    order.resize(k);
    return order;
}

static void check_moe() {
    const int rows = 5, experts = 8, k = 3;
    for (int gating : {GATING_SOFTMAX_TOP_K, GATING_TOP_K_SOFTMAX}) {
        auto scores = random_vector((size_t)rows * experts, 3.0f);
        // Row 4: a tie between experts 2 and 6 for the top slot (the lower id first).
        scores[4 * experts + 2] = scores[4 * experts + 6] = 5.0f;
        std::vector<double> want_ids, want_weights;
        for (int r = 0; r < rows; r++) {
            std::vector<double> s(scores.begin() + r * experts, scores.begin() + (r + 1) * experts);
            if (gating == GATING_SOFTMAX_TOP_K) s = softmax(s);
            const auto picked = top_k(s, k);
            std::vector<double> w;
            for (int e : picked) w.push_back(s[e]);
            if (gating == GATING_SOFTMAX_TOP_K) {
                double sum = 0.0;
                for (double v : w) sum += v;
                for (auto& v : w) v /= sum;
            } else {
                w = softmax(w);
            }
            for (int j = 0; j < k; j++) {
                want_ids.push_back(picked[j]);
                want_weights.push_back(w[j]);
            }
        }
        std::vector<int> ids((size_t)rows * k, -1);
        std::vector<float> weights((size_t)rows * k, 0.0f);
        launch(moe_route, dim3{(unsigned)rows}, dim3{1}, scores.data(), experts, k, gating,
               ids.data(), weights.data());
        const std::string label = "moe_route gating " + std::to_string(gating);
        check(label + " ids", std::vector<float>(ids.begin(), ids.end()), want_ids, 0);
        check(label + " weights", weights, want_weights, 1e-6);
    }
    const int d = 40;
    const auto y = random_vector((size_t)rows * k * d);
    const auto weights = random_vector((size_t)rows * k);
    std::vector<float> h((size_t)rows * d, 0.0f);
    std::vector<double> want(h.size(), 0.0);
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < d; i++)
            for (int j = 0; j < k; j++)
                want[(size_t)r * d + i] += (double)weights[r * k + j] * y[((size_t)r * k + j) * d + i];
    launch(moe_weighted_sum, dim3{(unsigned)((rows * d + 255) / 256)}, dim3{256}, y.data(),
           weights.data(), k, d, rows, h.data());
    check("moe_weighted_sum", h, want, 1e-5);
}

// Every quantized format and where its scales are (Format's fields after the size).
#define QUANTIZED_FORMATS(X) \
    X(q4_0, {0}) \
    X(q4_1, {0, 2}) \
    X(q5_0, {0}) \
    X(q5_1, {0, 2}) \
    X(q8_0, {0}) \
    X(mxfp4, {}, {0}) \
    X(q2_k, {80, 82}) \
    X(q3_k, {108}) \
    X(q4_k, {0, 2}) \
    X(q5_k, {0, 2}) \
    X(q6_k, {208}) \
    X(iq1_s, {0}) \
    X(iq1_m, {}, {}, 48) \
    X(iq2_xxs, {0}) \
    X(iq2_xs, {0}) \
    X(iq2_s, {0}) \
    X(iq3_xxs, {0}) \
    X(iq3_s, {0}) \
    X(iq4_nl, {0}) \
    X(iq4_xs, {0}) \
    X(tq1_0, {52}) \
    X(tq2_0, {64})

// The weight kernels, the integer matvec and the tensor-core matmul of one quantized format.
#define CHECK_QUANTIZED(suffix, ...)  \
    CHECK_FORMAT(suffix, __VA_ARGS__); \
    CHECK_Q8_1(suffix, __VA_ARGS__);   \
    CHECK_MMA(suffix, __VA_ARGS__);

int main() {
    CHECK_FORMAT(f32, {});
    CHECK_FORMAT(f16, {});
    CHECK_FORMAT(bf16, {});
    QUANTIZED_FORMATS(CHECK_QUANTIZED)
    check_bf16_rounding();
    check_norms();
    check_rope();
    check_elementwise();
    check_moe();
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
