//! The decode ceiling: generating one token reads every weight the token passes through once,
//! so a machine that reads `B` bytes a second cannot decode faster than `B / bytes per token`.
//! The bench measures `B` (a streaming sum over a buffer far larger than the last-level cache,
//! one contiguous range per thread) and reports each decode figure as a share of the ceiling.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use rinfer_formats::gguf::GgufFile;
use rinfer_transformer::{Role, TensorName};

/// Bytes summed per measurement.
const BUFFER_BYTES: usize = 1 << 30;

/// Measurements of the bandwidth; the median is kept.
const ROUNDS: usize = 7;

/// Bytes of weights one decoded token reads: every tensor whole but the tables it looks up
/// ([`Role::looked_up`]: the token embeddings, Gemma 4's per-layer input table, …), of which
/// it reads its token's row — unless the model has no `output.weight` and multiplies by the
/// token embeddings instead (tied embeddings, as Gemma's), which then it reads whole. A mixture
/// of experts reads `expert_used_count` of its `expert_count` experts in each layer, so its
/// expert tensors count by that share.
pub fn bytes_per_token(model: &Path) -> Result<u64> {
    let file = GgufFile::open(model).with_context(|| format!("reading {}", model.display()))?;
    let tied = file.tensor("output.weight").is_none();
    let meta = file.metadata();
    let experts = meta.get_str("general.architecture").ok().and_then(|arch| {
        let used = meta.get_u64(&format!("{arch}.expert_used_count")).ok()?;
        let count = meta.get_u64(&format!("{arch}.expert_count")).ok()?;
        (count > 0).then_some((used, count))
    });
    Ok(file
        .tensors()
        .map(|t| {
            let bytes = t.data.len() as u64;
            let looked_up = TensorName::parse(t.name()).is_some_and(|name| {
                name.role.looked_up() && !(tied && name.role == Role::TokenEmbd)
            });
            if looked_up {
                return bytes / t.dims().get(1).copied().unwrap_or(1).max(1);
            }
            match experts {
                Some((used, count)) if is_expert_tensor(t.name()) => bytes * used / count,
                _ => bytes,
            }
        })
        .sum())
}

/// Whether a tensor holds experts' weights: the stacked `blk.N.ffn_*_exps.*`, or one expert's
/// `blk.N.ffn_{gate,up,down}.E.weight` of older Mixtral files.
fn is_expert_tensor(name: &str) -> bool {
    let parts: Vec<&str> = name.split('.').collect();
    match parts.as_slice() {
        ["blk", _, ffn, ..] if ffn.starts_with("ffn_") && ffn.ends_with("_exps") => true,
        [
            "blk",
            _,
            "ffn_gate" | "ffn_up" | "ffn_down",
            expert,
            "weight",
        ] => expert.parse::<u32>().is_ok(),
        _ => false,
    }
}

/// The hidden bench command that prints [`read_bandwidth`] (`bench read-bandwidth THREADS`).
pub const READ_BANDWIDTH_COMMAND: &str = "read-bandwidth";

/// [`read_bandwidth`] measured in a child process: a process that has held the 1 GiB buffer
/// passes its peak memory on to every process it spawns after (Linux carries the high-water
/// mark across `exec`), so the bench, which spawns the engines, never allocates it itself.
pub fn read_bandwidth_in_child(threads: usize) -> Result<f64> {
    let exe = std::env::current_exe().context("cannot find the xtask binary")?;
    let output = std::process::Command::new(exe)
        .args(["bench", READ_BANDWIDTH_COMMAND, &threads.to_string()])
        .output()
        .context("cannot run the bandwidth measurement")?;
    anyhow::ensure!(
        output.status.success(),
        "the bandwidth measurement failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    text.trim()
        .parse()
        .with_context(|| format!("the bandwidth measurement printed {text:?}"))
}

/// `bench read-bandwidth THREADS`: prints the read bandwidth in bytes per second.
pub fn print_read_bandwidth(args: &[String]) -> Result<()> {
    let threads: usize = args
        .first()
        .and_then(|t| t.parse().ok())
        .filter(|&t| t > 0)
        .context("usage: cargo xtask bench read-bandwidth THREADS")?;
    println!("{}", read_bandwidth(threads));
    Ok(())
}

/// Read bandwidth in bytes per second with `threads` threads: the median of [`ROUNDS`].
pub fn read_bandwidth(threads: usize) -> f64 {
    let words: Vec<u64> = (0..(BUFFER_BYTES / 8) as u64).collect();
    let chunk = words.len().div_ceil(threads.max(1));
    let mut secs: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            let total = std::thread::scope(|scope| {
                let parts: Vec<_> = words
                    .chunks(chunk)
                    .map(|part| scope.spawn(move || sum(part)))
                    .collect();
                parts
                    .into_iter()
                    .map(|p| p.join().unwrap_or(0))
                    .fold(0u64, u64::wrapping_add)
            });
            std::hint::black_box(total);
            start.elapsed().as_secs_f64()
        })
        .collect();
    secs.sort_by(f64::total_cmp);
    BUFFER_BYTES as f64 / secs[ROUNDS / 2]
}

/// Sums `x` with eight independent lanes, so the loop vectorizes and is limited by loads.
fn sum(x: &[u64]) -> u64 {
    let (chunks, tail) = x.as_chunks::<8>();
    let mut acc = [0u64; 8];
    for c in chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a = a.wrapping_add(*v);
        }
    }
    acc.iter().chain(tail).fold(0, |s, v| s.wrapping_add(*v))
}

/// What the report shows about the ceiling at one thread count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ceiling {
    /// Threads.
    pub threads: usize,
    /// Read bandwidth, bytes per second.
    pub bandwidth: f64,
    /// Weight bytes one decoded token reads.
    pub bytes_per_token: u64,
}

impl Ceiling {
    /// Tokens per second at which decode would read weights at the full bandwidth.
    pub fn tokens_per_second(&self) -> f64 {
        self.bandwidth / self.bytes_per_token.max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/models")
            .join(name)
    }

    /// Every tensor's bytes, but one row of those named in `rows`.
    fn tensor_bytes(model: &Path, rows: &[&str]) -> u64 {
        let file = GgufFile::open(model).unwrap();
        let bytes = |t: &rinfer_formats::gguf::TensorView<'_>| match rows.contains(&t.name()) {
            true => t.data.len() as u64 / t.dims()[1],
            false => t.data.len() as u64,
        };
        file.tensors().map(|t| bytes(&t)).sum()
    }

    #[test]
    fn decode_reads_the_embeddings_whole_only_when_they_are_the_output_matrix() {
        // Gemma ties its output matrix to the embeddings; llama has its own `output.weight`.
        let gemma = fixture("gemma3-tiny-q4_k_m.gguf");
        assert!(
            GgufFile::open(&gemma)
                .unwrap()
                .tensor("output.weight")
                .is_none()
        );
        assert_eq!(bytes_per_token(&gemma).unwrap(), tensor_bytes(&gemma, &[]));
        let llama = fixture("llama-tiny-q8_0.gguf");
        assert!(
            GgufFile::open(&llama)
                .unwrap()
                .tensor("output.weight")
                .is_some()
        );
        assert_eq!(
            bytes_per_token(&llama).unwrap(),
            tensor_bytes(&llama, &["token_embd.weight"])
        );
    }

    #[test]
    fn decode_reads_one_row_of_gemma4s_per_layer_input_table() {
        let gemma4 = fixture("gemma4-tiny-q8_0.gguf");
        let file = GgufFile::open(&gemma4).unwrap();
        assert!(file.tensor("per_layer_token_embd.weight").is_some());
        let rows: &[&str] = match file.tensor("output.weight") {
            Some(_) => &["token_embd.weight", "per_layer_token_embd.weight"],
            None => &["per_layer_token_embd.weight"],
        };
        assert_eq!(
            bytes_per_token(&gemma4).unwrap(),
            tensor_bytes(&gemma4, rows)
        );
    }

    #[test]
    fn a_mixture_of_experts_reads_the_used_share_of_its_experts() {
        // Mixtral-style: 2 of 4 experts per token; qwen3moe: 2 of 8.
        for (name, share) in [
            ("mixtral-tiny-q8_0.gguf", 2),
            ("qwen3moe-tiny-q4_k_m.gguf", 4),
        ] {
            let model = fixture(name);
            let file = GgufFile::open(&model).unwrap();
            let tied = file.tensor("output.weight").is_none();
            let (mut dense, mut experts) = (0, 0);
            for t in file.tensors() {
                if !tied && t.name() == "token_embd.weight" {
                    dense += t.data.len() as u64 / t.dims()[1];
                } else if t.name().contains("_exps.") {
                    experts += t.data.len() as u64;
                } else {
                    dense += t.data.len() as u64;
                }
            }
            assert!(experts > 0);
            assert_eq!(bytes_per_token(&model).unwrap(), dense + experts / share);
        }
        assert!(is_expert_tensor("blk.3.ffn_gate.7.weight"));
        assert!(!is_expert_tensor("blk.3.ffn_gate.weight"));
        assert!(!is_expert_tensor("blk.3.ffn_gate_inp.weight"));
    }

    #[test]
    fn the_ceiling_is_bandwidth_over_bytes() {
        let c = Ceiling {
            threads: 2,
            bandwidth: 28.5e9,
            bytes_per_token: 246_600_000,
        };
        assert!((c.tokens_per_second() - 115.57).abs() < 0.01);
    }
}
