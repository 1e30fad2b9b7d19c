//! Activation functions and gated (GLU) products.

use half::f16;

/// `x * sigmoid(x)`.
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// Exact GELU, `0.5 x (1 + erf(x / sqrt 2))`.
#[inline]
pub fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// GELU's tanh approximation with ggml's constants:
/// `0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x²)))`.
#[inline]
pub fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const GELU_COEF_A: f32 = 0.044715;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)).tanh())
}

/// GELU as ggml's CPU backend computes it: through an f16 table, i.e. the input and the result
/// of [`gelu_tanh`] rounded to f16, with `x <= -10 → 0` and `x >= 10 → x`.
#[inline]
pub fn gelu_tanh_f16(x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        f16::from_f32(gelu_tanh(f16::from_f32(x).to_f32())).to_f32()
    }
}

/// An activation function, as models name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `x · sigmoid(x)`.
    Silu,
    /// Exact GELU, `0.5 x (1 + erf(x / √2))`.
    GeluErf,
    /// GELU's tanh approximation with ggml's constants.
    GeluTanh,
    /// The tanh approximation through an f16 table (input and result rounded to f16), what
    /// llama.cpp's CPU backend runs for GELU.
    GeluTanhF16,
}

impl Activation {
    /// Applies the function to one value.
    #[inline]
    pub fn eval(self, x: f32) -> f32 {
        match self {
            Activation::Silu => silu(x),
            Activation::GeluErf => gelu_erf(x),
            Activation::GeluTanh => gelu_tanh(x),
            Activation::GeluTanhF16 => gelu_tanh_f16(x),
        }
    }
}

/// Applies `act` to every element of `x` in place.
pub fn apply(act: Activation, x: &mut [f32]) {
    for v in x {
        *v = act.eval(*v);
    }
}

/// Gated product (SwiGLU, GeGLU) in place: `gate = act(gate) * up` (the scalar reference of
/// [`super::VectorKernels`]' gated products).
pub fn gated_inplace(act: Activation, gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len());
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = act.eval(*g) * u;
    }
}

/// The clamp of [`swiglu_clamped_inplace`] (a constant in gpt-oss, not a model parameter).
pub const SWIGLU_LIMIT: f32 = 7.0;

/// The sigmoid slope of [`swiglu_clamped_inplace`].
pub const SWIGLU_ALPHA: f32 = 1.702;

/// gpt-oss's clamped SwiGLU in place (ggml's `swiglu_oai`): with `g = min(gate, 7)` and
/// `u = clamp(up, -7, 7)`, `gate = g * sigmoid(1.702 g) * (u + 1)`.
pub fn swiglu_clamped_inplace(gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len());
    for (g, &u) in gate.iter_mut().zip(up) {
        let x = g.min(SWIGLU_LIMIT);
        let y = u.clamp(-SWIGLU_LIMIT, SWIGLU_LIMIT);
        *g = x / (1.0 + (SWIGLU_ALPHA * -x).exp()) * (y + 1.0);
    }
}
