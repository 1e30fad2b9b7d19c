//! The model bench's command line, parsed once.

use std::path::PathBuf;

use anyhow::{Context, Result, bail, ensure};

use super::synthetic_model::{self, MODELS};

/// How to call the model bench.
pub const USAGE: &str = "\
usage: cargo xtask bench [model] [--model default|llama-1b|qwen3moe|qwen35|lfm2|deepseek2|
                                           gemma4|glm4moe|qwen35moe|PATH]
                         [--threads 1,2] [--reps 5] [--vs-llama-cpp] [--json]
       cargo xtask bench make-model [NAME] [PATH]   (NAME: a synthetic model, as for --model)

  --model         default: the default model (Gemma 3 270M Q4_K_M); or a synthetic Q4_K_M model
                  (written on first use): llama-1b: llama-shaped, 1.1B; qwen3moe: Qwen3-MoE,
                  5.1B, 64 experts, 6 used; qwen35: Qwen3.5-0.8B-shaped gated delta-net hybrid;
                  lfm2: LFM2-1.2B-shaped short-convolution hybrid; deepseek2: DeepSeek-V2-Lite's
                  latent attention and experts cut to 3.3B (10 layers, 32 experts, 6 used, 2
                  shared); gemma4: Gemma 4 E2B's layout, about 4.0B; glm4moe: GLM-4.5-Air cut to
                  3.5B (10 layers, 64 experts, 8 used, 1 shared); qwen35moe: Qwen3.5-35B-A3B cut
                  to 4.3B (16 layers, 64 experts, 8 used, 1 shared); or a GGUF file
  --threads       comma-separated thread counts, each measured (default 1,2)
  --reps          repetitions of every measurement (default 5); the median and min-max are shown
  --vs-llama-cpp  measure llama.cpp too, alternating with rinfer, and print rinfer/llama.cpp ratios
                  (llama.cpp is downloaded as source with pip and built with cmake on first use)
  --json          print one JSON object instead of tables

Beside its results a run prints the model's last recorded results on each machine kind (Intel,
AMD: the CPU's vendor), and then keeps its own as the last of its kind in
docs/bench-history/KIND.json.";

/// Which model to measure.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelChoice {
    /// The default model, fetched by `rinfer fetch`.
    Default,
    /// A synthetic model in the cache (by its name), written on first use.
    Synthetic(&'static str),
    /// A GGUF file.
    Path(PathBuf),
}

impl ModelChoice {
    /// `default`, a synthetic model's name, or else a path.
    pub fn parse(value: &str) -> Self {
        match value {
            "default" => Self::Default,
            name => match MODELS.iter().find(|(n, _)| *n == name) {
                Some(&(name, _)) => Self::Synthetic(name),
                None => Self::Path(PathBuf::from(name)),
            },
        }
    }

    /// The model's file: the default model's from `default`, a synthetic model's in the cache
    /// (written on first use), or the path given; an error when there is no such file.
    pub fn file(&self, default: impl FnOnce() -> Result<PathBuf>) -> Result<PathBuf> {
        let path = match self {
            Self::Default => default()?,
            Self::Synthetic(name) => match synthetic_model::by_name(name) {
                Some(shape) => synthetic_model::cached(shape)?,
                None => bail!("no synthetic model named {name}"),
            },
            Self::Path(path) => path.clone(),
        };
        ensure!(path.is_file(), "no model file at {}", path.display());
        Ok(path)
    }
}

/// Everything the model bench was asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchOptions {
    /// The model.
    pub model: ModelChoice,
    /// Thread counts, each measured.
    pub threads: Vec<usize>,
    /// Repetitions of every measurement.
    pub reps: usize,
    /// Measure llama.cpp too.
    pub vs_llama_cpp: bool,
    /// One JSON object instead of tables.
    pub json: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            model: ModelChoice::Default,
            threads: vec![1, 2],
            reps: 5,
            vs_llama_cpp: false,
            json: false,
        }
    }
}

impl BenchOptions {
    /// Parses the arguments after `bench [model]`; `None` when help was asked for.
    pub fn parse(args: &[String]) -> Result<Option<Self>> {
        let mut options = Self::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = |flag: &str| {
                args.next()
                    .with_context(|| format!("{flag} needs a value\n\n{USAGE}"))
            };
            match arg.as_str() {
                "--model" => options.model = ModelChoice::parse(value("--model")?),
                "--threads" => options.threads = parse_threads(value("--threads")?)?,
                "--reps" => {
                    let reps = value("--reps")?;
                    options.reps = reps
                        .parse()
                        .ok()
                        .filter(|&n: &usize| n > 0)
                        .with_context(|| format!("--reps wants a positive count, not {reps:?}"))?;
                }
                "--vs-llama-cpp" => options.vs_llama_cpp = true,
                "--json" => options.json = true,
                "-h" | "--help" | "help" => return Ok(None),
                other => bail!("unknown argument {other:?}\n\n{USAGE}"),
            }
        }
        Ok(Some(options))
    }
}

fn parse_threads(list: &str) -> Result<Vec<usize>> {
    let threads = list
        .split(',')
        .map(|n| n.trim().parse().ok().filter(|&n: &usize| n > 0))
        .collect::<Option<Vec<usize>>>();
    match threads {
        Some(threads) if !threads.is_empty() => Ok(threads),
        _ => bail!("--threads wants positive counts separated by commas, not {list:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Option<BenchOptions>> {
        BenchOptions::parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn no_arguments_give_the_documented_defaults() {
        let options = parse(&[]).unwrap().unwrap();
        assert_eq!(options, BenchOptions::default());
        assert_eq!((options.threads, options.reps), (vec![1, 2], 5));
    }

    #[test]
    fn every_flag_is_read() {
        let options = parse(&[
            "--model",
            "llama-1b",
            "--threads",
            "2,4",
            "--reps",
            "7",
            "--vs-llama-cpp",
            "--json",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            options,
            BenchOptions {
                model: ModelChoice::Synthetic("llama-1b"),
                threads: vec![2, 4],
                reps: 7,
                vs_llama_cpp: true,
                json: true,
            }
        );
        let path = parse(&["--model", "m.gguf"]).unwrap().unwrap().model;
        assert_eq!(path, ModelChoice::Path("m.gguf".into()));
    }

    #[test]
    fn bad_values_are_errors_naming_the_flag() {
        for args in [
            &["--reps", "0"][..],
            &["--threads", "1,,2"],
            &["--threads", "x"],
            &["--model"],
            &["--frobnicate"],
        ] {
            let error = parse(args).unwrap_err().to_string();
            assert!(error.contains(args[0]), "{error}");
        }
        assert_eq!(parse(&["--help"]).unwrap(), None);
    }
}
