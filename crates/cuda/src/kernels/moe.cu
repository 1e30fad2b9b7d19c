// Mixture-of-experts routing and the weighted sum of the routed experts' outputs, with the CPU
// router's arithmetic (rinfer_kernels::ops::route: ggml's softmax with its sum in double, ties
// to the lower expert id).

#define GATING_SOFTMAX_TOP_K 0
#define GATING_TOP_K_SOFTMAX 1
// The least sum renormalised weights are divided by (ggml's clamp).
#define MOE_MIN_WEIGHT_SUM 6.1035156e-5f

// x[0..len) = softmax(x): exp(x - max) in float, summed in double, scaled by the inverse sum
// rounded to float.
__device__ __forceinline__ void softmax_row(float* x, int len) {
    float max = -INFINITY;
    for (int i = 0; i < len; i++) max = fmaxf(max, x[i]);
    double sum = 0.0;
    for (int i = 0; i < len; i++) {
        x[i] = expf(x[i] - max);
        sum += (double)x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < len; i++) x[i] *= inv;
}

// Row blockIdx.x of scores [rows, experts] (overwritten) routed: its k experts, highest first,
// into ids [rows, k] and their weights into weights [rows, k]. One thread per row.
extern "C" __global__ void moe_route(float* scores, int experts, int k, int gating, int* ids,
                                     float* weights) {
    if (threadIdx.x != 0) return;
    float* s = scores + (size_t)blockIdx.x * experts;
    int* id = ids + (size_t)blockIdx.x * k;
    float* w = weights + (size_t)blockIdx.x * k;
    if (gating == GATING_SOFTMAX_TOP_K) softmax_row(s, experts);
    for (int slot = 0; slot < k; slot++) {
        int best = -1;
        for (int e = 0; e < experts; e++) {
            bool taken = false;
            for (int j = 0; j < slot; j++) taken = taken || id[j] == e;
            if (!taken && (best < 0 || s[e] > s[best])) best = e;
        }
        id[slot] = best;
        w[slot] = s[best];
    }
    if (gating == GATING_SOFTMAX_TOP_K) {
        double sum = 0.0;
        for (int j = 0; j < k; j++) sum += (double)w[j];
        const float total = fmaxf((float)sum, MOE_MIN_WEIGHT_SUM);
        for (int j = 0; j < k; j++) w[j] /= total;
    } else {
        softmax_row(w, k);
    }
}

// Expert blockIdx.x's slots, in slot order, into lists[e * max_slots ...] and their number
// into counts[e] (ids is [slots]; a row picks an expert at most once, so max_slots = rows
// suffices). One thread per expert.
extern "C" __global__ void moe_group(const int* ids, int slots, int max_slots, int* counts,
                                     int* lists) {
    if (threadIdx.x != 0) return;
    const int e = blockIdx.x;
    int* list = lists + (size_t)e * max_slots;
    int count = 0;
    for (int s = 0; s < slots && count < max_slots; s++) {
        if (ids[s] == e) list[count++] = s;
    }
    counts[e] = count;
}

// h[r, i] = sum over j < k of weights[r, j] * y[r * k + j, i], in slot order (y is [rows * k, d]).
extern "C" __global__ void moe_weighted_sum(const float* y, const float* weights, int k, int d,
                                            int rows, float* h) {
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)rows * d) return;
    const size_t r = idx / d, i = idx % d;
    const float* w = weights + r * k;
    const float* yr = y + r * k * d + i;
    float acc = w[0] * yr[0];
    for (int j = 1; j < k; j++) acc += w[j] * yr[(size_t)j * d];
    h[idx] = acc;
}
