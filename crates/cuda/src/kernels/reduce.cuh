// Warp and block reductions. Blocks are whole warps, at most 1024 threads.

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
    return v;
}

// The sum of v over the block, returned to every thread.
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float partial[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    const int warps = (blockDim.x + 31) >> 5;
    v = lane < warps ? partial[lane] : 0.0f;
    return warp_sum(v);
}

// One q8_1 block quantized by a warp, lane j holding its value j: the codes to xq[0..32], the
// meta to m[0..4]: quantize_q8_1's, and the norm's (`add_rms_norm`), the gated activation's and
// the decode attention merge's, which quantize their outputs so.
__device__ __forceinline__ void quantize_q8_1_block(float v, int lane, i8* __restrict__ xq,
                                                    float* __restrict__ m) {
    float amax = fabsf(v);
    for (int offset = 16; offset > 0; offset >>= 1) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    }
    const float d = amax / 127.0f;
    const int q = amax == 0.0f ? 0 : (int)roundf(v / d);
    xq[lane] = (i8)q;
    // Sums of the codes of each half-warp (exact in f32).
    float sum = (float)q;
    for (int offset = 8; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    const float other = __shfl_xor_sync(0xffffffffu, sum, 16);
    if (lane == 0) {
        m[0] = d;
        m[1] = d * sum;
        m[2] = d * other;
        m[3] = 0.0f;
    }
}
