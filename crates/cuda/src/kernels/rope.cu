// Rotary embedding in place on the heads of a fused qkv buffer from `offset` (the step rotates
// q's heads and k's, which follow them, in one launch). grid (tokens, heads), one thread per
// rotated pair. theta follows the CPU reference exactly:
// pos multiplied by theta_scale once per pair index, then freq_scale / freq_factors[i]. With
// yarn_mscale > 0 the angle is YaRN's blend (rinfer_kernels::ops::Yarn): the extrapolated
// angle below pair yarn_low, the interpolated one above yarn_high, a linear ramp between, and
// sine and cosine scaled by yarn_mscale.
extern "C" __global__ void rope(float* base, int ld, int offset, int head_dim, int n_rot,
                                const int* positions, float theta_scale, float freq_scale,
                                const float* freq_factors, int neox, float yarn_low,
                                float yarn_high, float yarn_mscale) {
    const int i = threadIdx.x;
    const int pairs = n_rot / 2;
    if (i >= pairs) return;
    float* h = base + (size_t)blockIdx.x * ld + offset + (size_t)blockIdx.y * head_dim;
    float theta = (float)positions[blockIdx.x];
    for (int k = 0; k < i; k++) theta *= theta_scale;
    const float divisor = freq_factors ? freq_factors[i] : 1.0f;
    float angle, s, c;
    if (yarn_mscale > 0.0f) {
        const float extrap = theta / divisor;
        const float y = ((float)i - yarn_low) / fmaxf(yarn_high - yarn_low, 0.001f);
        const float ramp = 1.0f - fminf(fmaxf(y, 0.0f), 1.0f);
        angle = freq_scale * extrap * (1.0f - ramp) + extrap * ramp;
        s = sinf(angle) * yarn_mscale;
        c = cosf(angle) * yarn_mscale;
    } else {
        angle = freq_scale * theta / divisor;
        s = sinf(angle);
        c = cosf(angle);
    }
    const int a = neox ? i : 2 * i;
    const int b = neox ? i + pairs : 2 * i + 1;
    const float x0 = h[a], x1 = h[b];
    h[a] = x0 * c - x1 * s;
    h[b] = x0 * s + x1 * c;
}
