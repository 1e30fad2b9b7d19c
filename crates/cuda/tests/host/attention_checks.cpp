// Runs the KV-cache and attention kernels under the host emulation (cuda_emulation.h) against a
// naive double-precision reference, for both cache element types: f32, and f16 whose reference
// keys and values are rounded by the host compiler's own `_Float16` conversion (round to
// nearest even), independent of the kernels' `float_to_half`. Prints "N passed, M failed" and
// exits non-zero on any failure.
#include "cuda_emulation.h"

#include <cstdint>

#include "checks.h"

#include "../../src/kernels/common.cuh"
#include "../../src/kernels/reduce.cuh"
#include "../../src/kernels/attention.cu"

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

// The kernels and host conversions of one element type.
template <typename T>
struct Element;

template <>
struct Element<float> {
    static constexpr const char* name = "f32";
    static constexpr auto store = kv_store_f32;
    static constexpr auto store_rows = kv_store_rows_f32;
    static constexpr auto decode = attention_decode_f32;
    static constexpr auto decode_rows = attention_decode_rows_f32;
    static constexpr auto prefill = attention_prefill_f32;
    static float from_float(float f) { return f; }
    static float rounded(float f) { return f; }
};

template <>
struct Element<u16> {
    static constexpr const char* name = "f16";
    static constexpr auto store = kv_store_f16;
    static constexpr auto store_rows = kv_store_rows_f16;
    static constexpr auto decode = attention_decode_f16;
    static constexpr auto decode_rows = attention_decode_rows_f16;
    static constexpr auto prefill = attention_prefill_f16;
    static u16 from_float(float f) { return reference_half(f); }
    static float rounded(float f) { return (float)(_Float16)f; }
};

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
    for (int p = 0; p < context; p++)
        for (int i = 0; i < kv_dim; i++) {
            keys_by_pos[(size_t)p * kv_dim + i] = Element<T>::rounded(rows[(size_t)p * width + q_dim + i]);
            values_by_pos[(size_t)p * kv_dim + i] = Element<T>::rounded(rows[(size_t)p * width + q_dim + kv_dim + i]);
        }
    std::vector<T> keys((size_t)a.slots * kv_dim), values((size_t)a.slots * kv_dim);
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
                const size_t slot = (size_t)((pos0 + i) % a.slots) * kv_dim;
                const float* row = &rows[(size_t)(pos0 + i) * width];
                for (int d = 0; d < kv_dim; d++) {
                    keys[slot + d] = Element<T>::from_float(row[q_dim + d]);
                    values[slot + d] = Element<T>::from_float(row[q_dim + kv_dim + d]);
                }
            }
            continue;
        }
        launch(Element<T>::store, dim3{(unsigned)prefill}, dim3{threads_for(kv_dim)}, batch, width, q_dim, q_dim + kv_dim,
               keys.data(), values.data(), kv_dim, positions.data(), a.slots);
        std::vector<float> out((size_t)prefill * q_dim);
        launch(Element<T>::prefill, dim3{(unsigned)((prefill + PREFILL_WARPS - 1) / PREFILL_WARPS), (unsigned)a.heads},
               dim3{PREFILL_WARPS * 32}, batch, width, 0, keys.data(), values.data(), a.slots, kv_dim, a.head_dim,
               group, positions.data(), prefill, a.window, scale, a.softcap, sinks, out.data(), a.heads);
        std::vector<double> want;
        for (int i = 0; i < prefill; i++) {
            auto one = reference_attention(a, batch + (size_t)i * width, pos0 + i, keys_by_pos, values_by_pos, scale);
            want.insert(want.end(), one.begin(), one.end());
        }
        check("attention_prefill " + label + " at " + std::to_string(pos0), out, want, 1e-5);
    }
    const int longest = a.window > 0 ? std::min(a.window, context) : context;
    const int split_len = 64, splits = (longest + split_len - 1) / split_len;
    std::vector<float> partials((size_t)a.heads * splits * (a.head_dim + 2));
    for (int pos = batches * prefill; pos < context; pos++) {
        const int positions[1] = {pos};
        const float* row = rows.data() + (size_t)pos * width;
        launch(Element<T>::store, dim3{1}, dim3{threads_for(kv_dim)}, row, width, q_dim, q_dim + kv_dim, keys.data(),
               values.data(), kv_dim, positions, a.slots);
        if (pos != batches * prefill && pos != context - 1) continue;
        launch(Element<T>::decode, dim3{(unsigned)a.heads, (unsigned)splits}, dim3{ATTN_WARPS * 32}, row, 0,
               keys.data(), values.data(), a.slots, kv_dim, a.head_dim, group, positions, a.window, scale,
               a.softcap, split_len, partials.data());
        std::vector<float> out(q_dim);
        launch(attention_decode_combine, dim3{(unsigned)a.heads},
               dim3{(unsigned)std::clamp((a.head_dim + 31) / 32, 1, 8) * 32}, partials.data(), splits, a.head_dim,
               sinks, out.data());
        check("attention_decode " + label + " at " + std::to_string(pos), out,
              reference_attention(a, row, pos, keys_by_pos, values_by_pos, scale), 1e-5);
    }
}

// A batch of sequences decoded together, each over its own cache (its keys and values found
// through the tables kv_store_rows and attention_decode_rows read) and at its own position:
// every row matches the naive reference over its own keys, and equals bit for bit the
// single-sequence kernels run on that row alone.
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
    std::vector<std::vector<T>> keys(rows), values(rows);
    std::vector<float> batch((size_t)rows * width);
    std::vector<T*> key_table(rows), value_table(rows);
    for (int r = 0; r < rows; r++) {
        const int pos = positions[r];
        history[r] = random_vector((size_t)(pos + 1) * width);
        keys[r].assign((size_t)a.slots * kv_dim, T{});
        values[r].assign((size_t)a.slots * kv_dim, T{});
        // Earlier positions already in the cache's ring; the new one stored by kv_store_rows.
        for (int p = 0; p < pos; p++) {
            const size_t slot = (size_t)(p % a.slots) * kv_dim;
            for (int d = 0; d < kv_dim; d++) {
                keys[r][slot + d] = Element<T>::from_float(history[r][(size_t)p * width + q_dim + d]);
                values[r][slot + d] = Element<T>::from_float(history[r][(size_t)p * width + q_dim + kv_dim + d]);
            }
        }
        std::memcpy(&batch[(size_t)r * width], &history[r][(size_t)pos * width], 4 * width);
        key_table[r] = keys[r].data();
        value_table[r] = values[r].data();
    }
    launch(Element<T>::store_rows, dim3{(unsigned)rows}, dim3{threads_for(kv_dim)}, (const float*)batch.data(), width,
           q_dim, q_dim + kv_dim, (T* const*)key_table.data(), (T* const*)value_table.data(), kv_dim,
           positions.data(), a.slots);
    std::vector<const T*> const_keys(key_table.begin(), key_table.end());
    std::vector<const T*> const_values(value_table.begin(), value_table.end());
    std::vector<float> partials((size_t)rows * a.heads * splits * (a.head_dim + 2));
    launch(Element<T>::decode_rows, dim3{(unsigned)a.heads, (unsigned)splits, (unsigned)rows},
           dim3{ATTN_WARPS * 32}, (const float*)batch.data(), width, 0, const_keys.data(),
           const_values.data(), a.slots, kv_dim, a.head_dim, group, positions.data(), a.window, scale,
           a.softcap, split_len, partials.data());
    std::vector<float> out((size_t)rows * q_dim);
    launch(attention_decode_combine, dim3{(unsigned)a.heads, (unsigned)rows}, dim3{combine_threads},
           (const float*)partials.data(), splits, a.head_dim, sinks, out.data());
    for (int r = 0; r < rows; r++) {
        const int pos = positions[r];
        const float* q = &batch[(size_t)r * width];
        std::vector<float> keys_by_pos((size_t)(pos + 1) * kv_dim), values_by_pos((size_t)(pos + 1) * kv_dim);
        for (int p = 0; p <= pos; p++) {
            for (int d = 0; d < kv_dim; d++) {
                keys_by_pos[(size_t)p * kv_dim + d] = Element<T>::rounded(history[r][(size_t)p * width + q_dim + d]);
                values_by_pos[(size_t)p * kv_dim + d] =
                    Element<T>::rounded(history[r][(size_t)p * width + q_dim + kv_dim + d]);
            }
        }
        const std::string at = label + " row " + std::to_string(r) + " at " + std::to_string(pos);
        const std::vector<float> row_out(out.begin() + (size_t)r * q_dim, out.begin() + (size_t)(r + 1) * q_dim);
        check("attention_decode_rows " + at, row_out,
              reference_attention(a, q, pos, keys_by_pos, values_by_pos, scale), 1e-5);
        // The same row alone through the single-sequence kernels.
        const int position[1] = {pos};
        std::vector<float> alone_partials((size_t)a.heads * splits * (a.head_dim + 2)), alone(q_dim);
        launch(Element<T>::decode, dim3{(unsigned)a.heads, (unsigned)splits}, dim3{ATTN_WARPS * 32}, q, 0,
               (const T*)keys[r].data(), (const T*)values[r].data(), a.slots, kv_dim, a.head_dim, group,
               position, a.window, scale, a.softcap, split_len, alone_partials.data());
        launch(attention_decode_combine, dim3{(unsigned)a.heads}, dim3{combine_threads},
               (const float*)alone_partials.data(), splits, a.head_dim, sinks, alone.data());
        const bool same = std::memcmp(alone.data(), row_out.data(), 4 * (size_t)q_dim) == 0;
        check("attention_decode_rows " + at + " equals the row alone", {same ? 1.0f : 0.0f}, {1.0}, 0);
    }
}

int main() {
    check_half_rounding();
    for (auto run : {check_attention<float>, check_attention<u16>}) {
        // GQA, a sliding window over a ring of window + batch slots, soft-capping, MQA with
        // wide heads, and a head size that is not a multiple of 32.
        run({4, 2, 64, 0, 100, 0.0f});
        run({4, 1, 128, 40, 40 + 11, 50.0f});
        run({2, 2, 256, 0, 100, 0.0f});
        run({3, 1, 80, 20, 20 + 11, 0.0f});
        run({4, 2, 64, 0, 100, 0.0f, true});
        run({4, 4, 64, 20, 20 + 11, 0.0f, true});
    }
    // Batched decode: rows over their own caches (GQA, MQA with a window over a ring, sinks).
    for (auto run : {check_attention_rows<float>, check_attention_rows<u16>}) {
        run({4, 2, 64, 0, 100, 0.0f});
        run({4, 1, 128, 40, 40 + 11, 50.0f});
        run({3, 1, 80, 20, 20 + 11, 0.0f, true});
    }
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
