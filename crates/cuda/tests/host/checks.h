// What every host check program shares: a seeded generator, random inputs, and `check`, which
// compares a kernel's output with a double-precision reference and counts passes and failures.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

inline int passed = 0, failed = 0;
inline std::mt19937 rng(1234);

inline float uniform(float lo, float hi) {
    return std::uniform_real_distribution<float>(lo, hi)(rng);
}

inline std::vector<float> random_vector(size_t n, float scale = 1.0f) {
    std::vector<float> v(n);
    for (auto& x : v) x = uniform(-scale, scale);
    return v;
}

inline void check(const std::string& what, const std::vector<float>& got,
                  const std::vector<double>& want, double tolerance) {
    double worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < want.size(); i++) {
        const double err = std::fabs(got[i] - want[i]) / std::max(1.0, std::fabs(want[i]));
        if (!(err <= worst)) {
            worst = err;
            at = i;
        }
    }
    if (worst <= tolerance && got.size() >= want.size()) {
        passed++;
    } else {
        failed++;
        std::printf("FAILED %s: element %zu got %g want %g (error %g)\n", what.c_str(), at,
                    (double)got[at], want[at], worst);
    }
}

inline unsigned threads_for(size_t d) { return (unsigned)std::clamp<size_t>((d + 31) / 32, 1, 32) * 32; }
