// Rotary embedding in place on the q (or k) section of a fused qkv buffer.
// grid (tokens, heads), one thread per rotated pair. theta follows the CPU reference exactly:
// pos multiplied by theta_scale once per pair index, then freq_scale / freq_factors[i].
extern "C" __global__ void rope(float* base, int ld, int offset, int head_dim, int n_rot,
                                const int* positions, float theta_scale, float freq_scale,
                                const float* freq_factors, int neox) {
    const int i = threadIdx.x;
    const int pairs = n_rot / 2;
    if (i >= pairs) return;
    float* h = base + (size_t)blockIdx.x * ld + offset + (size_t)blockIdx.y * head_dim;
    float theta = (float)positions[blockIdx.x];
    for (int k = 0; k < i; k++) theta *= theta_scale;
    const float divisor = freq_factors ? freq_factors[i] : 1.0f;
    const float angle = freq_scale * theta / divisor;
    const float s = sinf(angle), c = cosf(angle);
    const int a = neox ? i : 2 * i;
    const int b = neox ? i + pairs : 2 * i + 1;
    const float x0 = h[a], x1 = h[b];
    h[a] = x0 * c - x1 * s;
    h[b] = x0 * s + x1 * c;
}
