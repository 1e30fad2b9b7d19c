// Row norms, one block per row. x and y may alias (in-place norms).

// y = rms_norm(x) of row `row`, with x += r first where r is given (the residual add before the
// norm, in the same launch): the sums run in one order either way.
__device__ __forceinline__ void rms_norm_row(float* x, const float* r, float* y, const float* w,
                                             int d, float eps, int row) {
    float* xr = x + (size_t)row * d;
    float* yr = y + (size_t)row * d;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        float v = xr[i];
        if (r) {
            v += r[(size_t)row * d + i];
            xr[i] = v;
        }
        sum += v * v;
    }
    sum = block_sum(sum);
    const float scale = 1.0f / sqrtf(sum / (float)d + eps);
    for (int i = threadIdx.x; i < d; i += blockDim.x) yr[i] = xr[i] * scale * w[i];
}

extern "C" __global__ void rms_norm(const float* x, float* y, const float* w, int d, float eps) {
    // x is only read: no residual.
    rms_norm_row((float*)x, nullptr, y, w, d, eps, blockIdx.x);
}

// x += r where r is given (a residual add, as add_inplace), then y = rms_norm(x), as rms_norm,
// then y's rows quantized to q8_1 where xq is given (as quantize_q8_1 quantizes them, for the
// products that read y next): one launch for what took up to three.
extern "C" __global__ void add_rms_norm(float* x, const float* r, float* y, const float* w, int d,
                                        float eps, i8* xq, float* meta) {
    rms_norm_row(x, r, y, w, d, eps, blockIdx.x);
    if (!xq) return;
    // Every value of the row written before any warp quantizes a block of them.
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, blocks = d >> 5;
    const size_t row = blockIdx.x;
    for (int b = warp; b < blocks; b += blockDim.x >> 5) {
        quantize_q8_1_block(y[row * d + 32 * b + lane], lane, xq + row * d + 32 * b,
                            meta + 4 * (row * blocks + b));
    }
}

// (x - mean) / sqrt(var + eps) * w + b; b may be null.
extern "C" __global__ void layer_norm(const float* x, float* y, const float* w, const float* b,
                                      int d, float eps) {
    const float* xr = x + (size_t)blockIdx.x * d;
    float* yr = y + (size_t)blockIdx.x * d;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < d; i += blockDim.x) sum += xr[i];
    const float mean = block_sum(sum) / (float)d;
    float sum2 = 0.0f;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        const float c = xr[i] - mean;
        sum2 += c * c;
    }
    const float scale = 1.0f / sqrtf(block_sum(sum2) / (float)d + eps);
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        const float v = (xr[i] - mean) * scale * w[i];
        yr[i] = b ? v + b[i] : v;
    }
}

// In-place RMSNorm of every head of the q (or k) section of a fused qkv buffer.
// grid (tokens, heads), one warp per head.
extern "C" __global__ void head_rms_norm(float* base, int ld, int offset, const float* w,
                                         int head_dim, float eps) {
    float* h = base + (size_t)blockIdx.x * ld + offset + (size_t)blockIdx.y * head_dim;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < head_dim; i += 32) sum += h[i] * h[i];
    sum = warp_sum(sum);
    const float scale = 1.0f / sqrtf(sum / (float)head_dim + eps);
    for (int i = threadIdx.x; i < head_dim; i += 32) h[i] = h[i] * scale * w[i];
}
