use super::activation::{gated_inplace, gelu_erf, gelu_tanh, gelu_tanh_f16, silu};
use super::*;

fn close(got: f32, want: f64, rtol: f64, what: &str) {
    assert!(
        (got as f64 - want).abs() <= rtol * (1.0 + want.abs()),
        "{what}: got {got}, want {want}"
    );
}

fn row(n: usize) -> Vec<f32> {
    crate::quant::testing::spread_values(n, 37, 101, 50.0, 17.0)
}

#[test]
fn rms_norm_matches_f64() {
    let x = row(640);
    let w: Vec<f32> = (0..640).map(|i| 1.0 + i as f32 / 640.0).collect();
    let mut out = vec![0.0; 640];
    rms_norm(&x, &w, 1e-6, &mut out);
    let ms = x.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / 640.0;
    for i in 0..640 {
        close(
            out[i],
            x[i] as f64 / (ms + 1e-6).sqrt() * w[i] as f64,
            1e-6,
            "rms_norm",
        );
    }
}

#[test]
fn layer_norm_with_bias_matches_f64() {
    let x: Vec<f32> = row(256).iter().map(|v| v + 3.0).collect();
    let w = row(256);
    let b: Vec<f32> = (0..256).map(|i| i as f32 * 0.01).collect();
    let mut out = vec![0.0; 256];
    layer_norm(&x, &w, Some(&b), 1e-5, &mut out);
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / 256.0;
    let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / 256.0;
    for i in 0..256 {
        let want = (x[i] as f64 - mean) / (var + 1e-5).sqrt() * w[i] as f64 + b[i] as f64;
        close(out[i], want, 1e-5, "layer_norm");
    }
}

fn rope_f64(x: &[f32], head_dim: usize, pos: usize, p: &RopeParams) -> Vec<f64> {
    let mut out: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    for head in out.chunks_exact_mut(head_dim) {
        for i in 0..p.n_rot / 2 {
            let theta = pos as f64
                * p.freq_scale as f64
                * (p.freq_base as f64).powf(-2.0 * i as f64 / p.n_rot as f64);
            let (a, b) = match p.style {
                RopeStyle::Norm => (2 * i, 2 * i + 1),
                RopeStyle::Neox => (i, i + p.n_rot / 2),
            };
            let (x0, x1) = (head[a], head[b]);
            head[a] = x0 * theta.cos() - x1 * theta.sin();
            head[b] = x0 * theta.sin() + x1 * theta.cos();
        }
    }
    out
}

#[test]
fn rope_matches_f64_for_both_styles_and_partial_rotation() {
    let cases = [
        (RopeStyle::Norm, 32, 32, 10_000.0, 1.0),
        (RopeStyle::Neox, 128, 128, 1_000_000.0, 1.0),
        (RopeStyle::Neox, 32, 16, 10_000.0, 0.25),
    ];
    for (style, head_dim, n_rot, freq_base, freq_scale) in cases {
        let p = RopeParams {
            n_rot,
            freq_base,
            freq_scale,
            style,
            yarn: None,
            factors: true,
        };
        for pos in [0, 1, 7, 100] {
            let x = row(3 * head_dim);
            let mut got = x.clone();
            rope(&mut got, head_dim, pos, &p, None);
            let want = rope_f64(&x, head_dim, pos, &p);
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                // The f32 angle recurrence drifts by a few ulps of `pos` per pair.
                close(g, w, 2e-4, &format!("{style:?} pos {pos} dim {i}"));
            }
            if n_rot < head_dim {
                for h in 0..3 {
                    let tail = h * head_dim + n_rot..(h + 1) * head_dim;
                    assert_eq!(
                        got[tail.clone()],
                        x[tail],
                        "unrotated dims must pass through"
                    );
                }
            }
        }
    }
}

#[test]
fn activations_match_f64_formulas() {
    for i in -400..=400 {
        let x = i as f32 / 40.0;
        let xd = x as f64;
        close(silu(x), xd / (1.0 + (-xd).exp()), 1e-6, "silu");
        let tanh_ref = 0.5
            * xd
            * (1.0
                + ((2.0 / std::f64::consts::PI).sqrt() * xd * (1.0 + 0.044715 * xd * xd)).tanh());
        close(gelu_tanh(x), tanh_ref, 1e-6, "gelu_tanh");
        close(gelu_tanh_f16(x), tanh_ref, 2e-3, "gelu_tanh_f16");
        let erf_ref = 0.5 * xd * (1.0 + libm::erf(xd / std::f64::consts::SQRT_2));
        close(gelu_erf(x), erf_ref, 1e-6, "gelu_erf");
    }
    assert_eq!(gelu_tanh_f16(-12.0), 0.0);
    assert_eq!(gelu_tanh_f16(12.5), 12.5);
}

#[test]
fn gated_and_elementwise_ops_match_definitions() {
    let g = row(64);
    let u: Vec<f32> = row(64).iter().rev().copied().collect();
    for act in [Activation::Silu, Activation::GeluTanhF16] {
        let mut out = g.clone();
        gated_inplace(act, &mut out, &u);
        for i in 0..64 {
            assert_eq!(out[i], act.eval(g[i]) * u[i]);
        }
    }
    let mut acc = g.clone();
    add_inplace(&mut acc, &u);
    scale(&mut acc, 0.5);
    for i in 0..64 {
        assert_eq!(acc[i], (g[i] + u[i]) * 0.5);
    }
    let mut capped = vec![-1000.0, -1.0, 0.0, 2.0, 1000.0];
    softcap(&mut capped, 30.0);
    for (&c, x) in capped.iter().zip([-1000.0f64, -1.0, 0.0, 2.0, 1000.0]) {
        close(c, 30.0 * (x / 30.0).tanh(), 1e-6, "softcap");
    }
    let mut v = g.clone();
    apply(Activation::GeluErf, &mut v);
    assert_eq!(v[5], gelu_erf(g[5]));
}

#[test]
fn yarn_ramp_and_scale_are_ggmls_for_gpt_oss_tiny() {
    // The fixtures README: n_rot 64, base 150000, trained at 4096, factor 32 → low 8, high 18,
    // mscale 1.34657.
    let yarn = Yarn::new(64, 150_000.0, 4096, 32.0);
    assert_eq!(yarn.corr_dims, [8.0, 18.0]);
    assert!((yarn.mscale - 1.34657).abs() < 1e-5, "{}", yarn.mscale);
    let p = RopeParams {
        n_rot: 64,
        freq_base: 150_000.0,
        freq_scale: 1.0 / 32.0,
        style: RopeStyle::Neox,
        yarn: Some(yarn),
        factors: true,
    };
    let pos = 5;
    let x = row(64);
    let mut got = x.clone();
    rope(&mut got, 64, pos, &p, None);
    for i in 0..32 {
        let extrap = pos as f64 * 150_000f64.powf(-2.0 * i as f64 / 64.0);
        let ramp = 1.0 - ((i as f64 - 8.0) / 10.0).clamp(0.0, 1.0);
        let theta = extrap / 32.0 * (1.0 - ramp) + extrap * ramp;
        let m = yarn.mscale as f64;
        let (x0, x1) = (x[i] as f64, x[i + 32] as f64);
        close(
            got[i],
            m * (x0 * theta.cos() - x1 * theta.sin()),
            1e-5,
            "yarn",
        );
        close(
            got[i + 32],
            m * (x0 * theta.sin() + x1 * theta.cos()),
            1e-5,
            "yarn",
        );
    }
}

#[test]
fn clamped_swiglu_clamps_the_gate_from_above_only_and_adds_one_to_up() {
    let mut gate = [1.0f32, 9.0, -9.0, 0.0];
    let up = [0.5f32, 8.0, -8.0, 3.0];
    swiglu_clamped_inplace(&mut gate, &up);
    let want = |g: f64, u: f64| g / (1.0 + (-1.702 * g).exp()) * (u + 1.0);
    close(gate[0], want(1.0, 0.5), 1e-6, "inside the clamp");
    close(
        gate[1],
        want(7.0, 7.0),
        1e-6,
        "gate and up clamped from above",
    );
    close(
        gate[2],
        want(-9.0, -7.0),
        1e-6,
        "gate not clamped from below",
    );
    assert_eq!(gate[3], 0.0);
}
