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

/// A run's inputs as the mixer holds them: per token a row `q | k | v`, and the gates.
struct Run {
    rows: Vec<f32>,
    decay: Vec<f32>,
    beta: Vec<f32>,
    dk: usize,
    dv: usize,
}

impl Run {
    fn new(dk: usize, dv: usize, n: usize, seed: u64) -> Run {
        let decays = values(n, seed + 3);
        let betas = values(n, seed + 4);
        Run {
            rows: values(n * (2 * dk + dv), seed),
            decay: decays.iter().map(|d| 0.75 + 0.25 * d).collect(),
            beta: betas.iter().map(|b| 0.5 + 0.5 * b).collect(),
            dk,
            dv,
        }
    }

    fn len(&self) -> usize {
        self.decay.len()
    }

    fn run(&self, range: std::ops::Range<usize>) -> DeltaRun<'_> {
        let (dk, dv) = (self.dk, self.dv);
        let stride = 2 * dk + dv;
        DeltaRun {
            rows: &self.rows[range.start * stride..range.end * stride],
            stride,
            q: 0,
            k: dk,
            v: 2 * dk,
            dk,
            dv,
            decay: &self.decay[range.clone()],
            beta: &self.beta[range],
            gate_stride: 1,
        }
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

/// Every instruction set's kernel, fed the run in pieces of `split` tokens.
fn run_split(kernels: &VectorKernels, run: &Run, state: &mut [f32], split: usize) -> Vec<f32> {
    let n = run.len();
    let mut out = vec![0.0; n * run.dv];
    for start in (0..n).step_by(split) {
        let end = (start + split).min(n);
        kernels.delta_rule(
            state,
            &run.run(start..end),
            &mut out[start * run.dv..end * run.dv],
        );
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
    let whole = run.run(0..n);
    reference(&mut state, &whole, &mut out);
    for t in 0..n {
        let token = whole.token(t);
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
    let run = Run::new(3, 4, 0, 1);
    VectorKernels::detected().delta_rule(&mut state, &run.run(0..0), &mut []);
    assert_eq!(bits(&state), bits(&before));
}
