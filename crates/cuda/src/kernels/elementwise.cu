// Activations, residual adds, soft-capping and the greedy argmax.

#define ACT_SILU_GATED 0
#define ACT_GELU_GATED 1
#define ACT_GELU 2
#define ACT_SWIGLU_CLAMPED 3
// gpt-oss's clamped SwiGLU (rinfer_kernels::ops::swiglu_clamped_inplace).
#define SWIGLU_LIMIT 7.0f
#define SWIGLU_ALPHA 1.702f

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

// GELU's tanh approximation with ggml's constants.
__device__ __forceinline__ float gelu_tanh(float x) {
    const float sqrt_2_over_pi = 0.7978846f;
    return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * (1.0f + 0.044715f * x * x)));
}

// The activation of the gate value at g, its up value at g[f].
__device__ __forceinline__ float gated_value(const float* g, int f, int kind) {
    if (kind == ACT_GELU) return gelu_tanh(*g);
    if (kind == ACT_SWIGLU_CLAMPED) {
        const float x = fminf(*g, SWIGLU_LIMIT);
        const float y = fminf(fmaxf(g[f], -SWIGLU_LIMIT), SWIGLU_LIMIT);
        return x / (1.0f + expf(SWIGLU_ALPHA * -x)) * (y + 1.0f);
    }
    const float a = kind == ACT_SILU_GATED ? silu(*g) : gelu_tanh(*g);
    return a * g[f];
}

// gu is [n, ld] with the gate in columns [0, f) and up in [f, 2f); the result replaces the gate.
extern "C" __global__ void gated_activation(float* gu, int f, int ld, int n, int kind) {
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)n * f) return;
    const size_t i = idx / f, j = idx % f;
    float* g = gu + i * ld + j;
    *g = gated_value(g, f, kind);
}

// gated_activation, each row's result then quantized to q8_1 as quantize_q8_1 quantizes it
// (for the down projection's q8_1 product): a warp per 32-value block, grid as quantize_q8_1's
// (ceil(f / 32 / Q8_1_BLOCKS_PER_CTA), n).
extern "C" __global__ void __launch_bounds__(Q8_1_BLOCKS_PER_CTA * 32) gated_activation_q8_1(
    float* gu, int f, int ld, int n, int kind, i8* xq, float* meta) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int block = blockIdx.x * Q8_1_BLOCKS_PER_CTA + warp, t = blockIdx.y;
    if (block >= (f >> 5) || t >= n) return;
    float* g = gu + (size_t)t * ld + block * 32 + lane;
    const float v = gated_value(g, f, kind);
    *g = v;
    quantize_q8_1_block(v, lane, xq + (size_t)t * f + block * 32,
                        meta + 4 * ((size_t)t * (f >> 5) + block));
}

extern "C" __global__ void add_inplace(float* x, const float* a, long long len) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)len) x[i] += a[i];
}

// x += a + b (the parallel block's residual).
extern "C" __global__ void add2_inplace(float* x, const float* a, const float* b, long long len) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)len) x[i] += a[i] + b[i];
}

extern "C" __global__ void softcap(float* x, long long len, float cap) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)len) x[i] = cap * tanhf(x[i] / cap);
}

// The index of the largest value (the smallest index among equals), one block.
extern "C" __global__ void argmax(const float* x, int len, int* out) {
    __shared__ float best_value[32];
    __shared__ int best_index[32];
    float value = -INFINITY;
    int index = 0x7fffffff;
    for (int i = threadIdx.x; i < len; i += blockDim.x) {
        if (x[i] > value) {
            value = x[i];
            index = i;
        }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, value, offset);
        const int k = __shfl_xor_sync(0xffffffffu, index, offset);
        if (v > value || (v == value && k < index)) {
            value = v;
            index = k;
        }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        best_value[warp] = value;
        best_index[warp] = index;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        const int warps = (blockDim.x + 31) >> 5;
        for (int w = 1; w < warps; w++) {
            if (best_value[w] > value || (best_value[w] == value && best_index[w] < index)) {
                value = best_value[w];
                index = best_index[w];
            }
        }
        *out = index == 0x7fffffff ? 0 : index;
    }
}
