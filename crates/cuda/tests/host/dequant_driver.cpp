// Host driver for the dequantization code of the CUDA kernels (dequant.cuh), compiled by the
// tests with the system C++ compiler. Usage: dequant_driver <suffix> <chunks> < row > floats
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#define __device__
#define __forceinline__ inline
static inline float __uint_as_float(unsigned int u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
static inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, 4);
    return f;
}
struct int4 {
    int x, y, z, w;
};
static inline unsigned int __float_as_uint(float f) {
    unsigned int u;
    std::memcpy(&u, &f, 4);
    return u;
}

#include "../../src/kernels/common.cuh"
#include "../../src/kernels/dequant.cuh"
#include "codebooks.cuh"  // generated into the build folder (kernels::codebooks)
#include "../../src/kernels/dequant_iq.cuh"

template <typename F>
static void run(const std::vector<unsigned char>& row, int chunks) {
    std::vector<float> out(32 * (size_t)chunks);
    for (int c = 0; c < chunks; c++) F::deq32(row.data(), c, out.data() + 32 * c);
    std::fwrite(out.data(), sizeof(float), out.size(), stdout);
}

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    const std::string name = argv[1];
    const int chunks = std::atoi(argv[2]);
    std::vector<unsigned char> row;
    int ch;
    while ((ch = std::getchar()) != EOF) row.push_back((unsigned char)ch);
#define CASE(suffix, F) \
    if (name == #suffix) { run<F>(row, chunks); return 0; }
    CASE(f32, fmt_f32)
    CASE(f16, fmt_f16)
    CASE(bf16, fmt_bf16)
    CASE(q4_0, fmt_q4_0)
    CASE(q4_1, fmt_q4_1)
    CASE(q5_0, fmt_q5_0)
    CASE(q5_1, fmt_q5_1)
    CASE(q8_0, fmt_q8_0)
    CASE(mxfp4, fmt_mxfp4)
    CASE(q2_k, fmt_q2_k)
    CASE(q3_k, fmt_q3_k)
    CASE(q4_k, fmt_q4_k)
    CASE(q5_k, fmt_q5_k)
    CASE(q6_k, fmt_q6_k)
    CASE(iq1_s, fmt_iq1_s)
    CASE(iq1_m, fmt_iq1_m)
    CASE(iq2_xxs, fmt_iq2_xxs)
    CASE(iq2_xs, fmt_iq2_xs)
    CASE(iq2_s, fmt_iq2_s)
    CASE(iq3_xxs, fmt_iq3_xxs)
    CASE(iq3_s, fmt_iq3_s)
    CASE(iq4_nl, fmt_iq4_nl)
    CASE(iq4_xs, fmt_iq4_xs)
    CASE(tq1_0, fmt_tq1_0)
    CASE(tq2_0, fmt_tq2_0)
    return 3;
}
