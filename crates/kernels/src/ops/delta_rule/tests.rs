use super::*;

/// Reproducible values in `[-1, 1)` (a xorshift stream).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

struct Run {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    gates: Vec<(f32, f32)>,
    dk: usize,
    dv: usize,
}

impl Run {
    fn new(dk: usize, dv: usize, n: usize, seed: u64) -> Run {
        let decays = values(n, seed + 3);
        let betas = values(n, seed + 4);
        Run {
            q: values(n * dk, seed),
            k: values(n * dk, seed + 1),
            v: values(n * dv, seed + 2),
            gates: decays
                .iter()
                .zip(&betas)
                .map(|(d, b)| (0.75 + 0.25 * d, 0.5 + 0.5 * b))
                .collect(),
            dk,
            dv,
        }
    }

    fn tokens(&self, range: std::ops::Range<usize>) -> Vec<DeltaToken<'_>> {
        let (dk, dv) = (self.dk, self.dv);
        range
            .map(|t| DeltaToken {
                q: &self.q[t * dk..(t + 1) * dk],
                k: &self.k[t * dk..(t + 1) * dk],
                v: &self.v[t * dv..(t + 1) * dv],
                decay: self.gates[t].0,
                beta: self.gates[t].1,
            })
            .collect()
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

/// Every instruction set's kernel, fed the run in pieces of `split` tokens.
fn run_split(kernels: &VectorKernels, run: &Run, state: &mut [f32], split: usize) -> Vec<f32> {
    let n = run.gates.len();
    let mut out = vec![0.0; n * run.dv];
    for start in (0..n).step_by(split) {
        let end = (start + split).min(n);
        let tokens = run.tokens(start..end);
        kernels.delta_rule(state, &tokens, &mut out[start * run.dv..end * run.dv]);
    }
    out
}

#[test]
fn reference_matches_the_definition() {
    let (dk, dv, n) = (5, 3, 4);
    let run = Run::new(dk, dv, n, 11);
    assert!(dv < COLUMNS);
    let mut state = values(dk * dv, 9);
    let mut want: Vec<f64> = state.iter().map(|&s| s as f64).collect();
    let mut out = vec![0.0; n * dv];
    reference(&mut state, &run.tokens(0..n), &mut out);
    for (t, token) in run.tokens(0..n).iter().enumerate() {
        for s in &mut want {
            *s *= token.decay as f64;
        }
        let m: Vec<f64> = (0..dv)
            .map(|j| (0..dk).map(|i| want[i * dv + j] * token.k[i] as f64).sum())
            .collect();
        for i in 0..dk {
            for j in 0..dv {
                want[i * dv + j] +=
                    token.k[i] as f64 * token.beta as f64 * (token.v[j] as f64 - m[j]);
            }
        }
        for j in 0..dv {
            let o: f64 = (0..dk).map(|i| want[i * dv + j] * token.q[i] as f64).sum();
            let got = out[t * dv + j] as f64;
            assert!(
                (got - o).abs() < 1e-5,
                "token {t}, column {j}: {got} vs {o}"
            );
        }
    }
    for i in 0..dk {
        for j in 0..dv {
            // One slice: dv < COLUMNS.
            let (g, w) = (state[i * dv + j] as f64, want[i * dv + j]);
            assert!((g - w).abs() < 1e-5, "state ({i}, {j}): {g} vs {w}");
        }
    }
}

#[test]
fn every_instruction_set_and_split_gives_the_reference_bits() {
    let detected = crate::cpu::detected();
    for &(dk, dv) in &[(128, 128), (16, 64), (8, 48), (3, 7), (4, 33)] {
        let run = Run::new(dk, dv, 7, (dk * 31 + dv) as u64);
        let start = values(dk * dv, 5);
        let mut want_state = start.clone();
        let want = run_split(&VectorKernels::reference(), &run, &mut want_state, 7);
        for &isa in crate::cpu::Isa::ALL.iter().filter(|&&isa| isa <= detected) {
            let kernels = VectorKernels::for_isa(isa);
            for split in [1, 2, 3, 7] {
                let mut state = start.clone();
                let out = run_split(&kernels, &run, &mut state, split);
                assert_eq!(bits(&out), bits(&want), "{isa:?} {dk}×{dv} split {split}");
                assert_eq!(bits(&state), bits(&want_state), "{isa:?} {dk}×{dv} state");
            }
        }
    }
}

#[test]
fn an_empty_run_leaves_the_state() {
    let mut state = values(12, 1);
    let before = state.clone();
    VectorKernels::detected().delta_rule(&mut state, &[], &mut []);
    assert_eq!(bits(&state), bits(&before));
}
