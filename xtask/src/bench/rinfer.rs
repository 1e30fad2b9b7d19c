//! The rinfer side of the model bench: the release binary, prompts of an exact token count, and
//! one `rinfer run --json` child process per measurement.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

use super::child;
use super::measure::{FIRST_TOKEN_CONTEXT, FIRST_TOKEN_PROMPT, Sample, Test};

/// Text cycled word by word to make prompts of a given length.
const PROSE: &str = "The river ran low that summer, and the children of the valley walked \
    its dry bed every morning, collecting smooth stones, old coins and the bones of fish. \
    Their grandmother said the water would come back in autumn, as it always had, but the \
    farmers watched the sky and counted the days. In the evenings the whole village gathered \
    in the square to share bread, trade news from the city and argue about the weather, the \
    price of grain and whose turn it was to mend the bridge before the rains.";

/// The `rinfer` release binary.
pub struct Rinfer {
    binary: PathBuf,
}

/// Prompt files of exact token counts, for one model.
pub struct Prompts {
    files: BTreeMap<usize, PathBuf>,
}

impl Prompts {
    fn file(&self, tokens: usize) -> Result<&Path> {
        self.files
            .get(&tokens)
            .map(PathBuf::as_path)
            .with_context(|| format!("no prompt of {tokens} tokens was prepared"))
    }
}

impl Rinfer {
    /// Builds `rinfer` in release mode.
    pub fn build() -> Result<Self> {
        crate::cargo(&["build", "--release", "-p", "rinfer-cli"])?;
        let binary = target_dir().join("release").join("rinfer");
        ensure!(binary.is_file(), "the build left no {}", binary.display());
        Ok(Self { binary })
    }

    /// The binary's path.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// The default model's path, fetched and verified first if needed.
    pub fn default_model(&self) -> Result<PathBuf> {
        let done = child::run(Command::new(&self.binary).arg("fetch"))?;
        let path = done.stdout.lines().last().unwrap_or_default().trim();
        ensure!(!path.is_empty(), "`rinfer fetch` printed no path");
        Ok(PathBuf::from(path))
    }

    /// Writes, for `model`, a prompt file of exactly the token count each test needs.
    pub fn prepare_prompts(&self, model: &Path, tests: &[Test]) -> Result<Prompts> {
        let dir = target_dir().join("bench").join("prompts");
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let stem = model.file_stem().unwrap_or_default().to_string_lossy();
        let mut files = BTreeMap::new();
        for tokens in tests.iter().filter_map(|&t| prompt_tokens(t)) {
            if files.contains_key(&tokens) {
                continue;
            }
            let text = self.prompt_of(model, tokens)?;
            let file = dir.join(format!("{stem}-{tokens}.txt"));
            std::fs::write(&file, text)
                .with_context(|| format!("cannot write {}", file.display()))?;
            files.insert(tokens, file);
        }
        Ok(Prompts { files })
    }

    /// Runs `test` once on `threads` threads in a fresh process.
    pub fn measure(
        &self,
        model: &Path,
        prompts: &Prompts,
        test: Test,
        threads: usize,
    ) -> Result<Sample> {
        let mut command = Command::new(&self.binary);
        command.args(["run", "--json", "--temperature", "0", "--threads"]);
        command.arg(threads.to_string()).arg("--model").arg(model);
        match test {
            Test::Prompt(n) => {
                command.args(["--warmup", "-n", "1", "--ctx", &(n + 1).to_string()]);
                command.arg("-f").arg(prompts.file(n)?);
            }
            Test::Generate(n) => {
                // The first token comes from the prompt pass; the `n` after it are decoded.
                command.args(["--warmup", "--ignore-eos", "-n", &(n + 1).to_string()]);
                command.args(["--ctx", &(n + 2).to_string()]);
                command.arg("-f").arg(prompts.file(1)?);
            }
            Test::FirstToken => {
                command.args(["-n", "1", "--ctx", &FIRST_TOKEN_CONTEXT.to_string()]);
                command.arg(FIRST_TOKEN_PROMPT);
            }
        }
        let (done, report) = run_report(&mut command)?;
        let number = |key: &str| report_number(&report, key);
        let value = match test {
            Test::Prompt(n) => {
                ensure!(
                    number("/prompt_tokens")? == n as f64,
                    "prompt is not {n} tokens"
                );
                number("/timings/prefill_tok_s")?
            }
            Test::Generate(n) => {
                let generated = report.pointer("/tokens").and_then(Value::as_array);
                ensure!(
                    generated.map(Vec::len) == Some(n + 1),
                    "rinfer did not generate {} tokens",
                    n + 1
                );
                number("/timings/decode_tok_s")?
            }
            Test::FirstToken => done.wall_s,
        };
        Ok(Sample::of(value, &done))
    }

    /// Tokens of `text` as `rinfer run` sees it (BOS included when the model adds one).
    fn count_tokens(&self, model: &Path, text: &str) -> Result<usize> {
        let mut command = Command::new(&self.binary);
        command.args(["tokenize", "--json", "--model"]).arg(model);
        let done = child::run(command.arg("--").arg(text))?;
        let report: Value = serde_json::from_str(done.stdout.trim())
            .with_context(|| format!("`rinfer tokenize --json` printed {:?}", done.stdout))?;
        report
            .get("tokens")
            .and_then(Value::as_array)
            .map(Vec::len)
            .context("`rinfer tokenize --json` printed no token list")
    }

    /// Prose that `model` tokenizes into exactly `tokens` tokens: the longest run of words
    /// below the count, found by bisection, then closed with one-character words.
    fn prompt_of(&self, model: &Path, tokens: usize) -> Result<String> {
        let text = |words: usize| -> String {
            let words: Vec<&str> = PROSE.split_whitespace().cycle().take(words).collect();
            words.join(" ")
        };
        let count = |text: &str| self.count_tokens(model, text);
        // Invariant: `lo` words make fewer tokens than wanted, `hi` words at least as many.
        // Every word is at least one token, so `tokens - 1` words and BOS are enough.
        let (mut lo, mut lo_count) = (0, count("")?);
        let (mut hi, mut hi_count) = (0, lo_count);
        if lo_count < tokens {
            hi = tokens - 1;
            hi_count = count(&text(hi))?;
            ensure!(hi_count >= tokens, "{hi} words make only {hi_count} tokens");
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                match count(&text(mid))? {
                    c if c >= tokens => (hi, hi_count) = (mid, c),
                    c => (lo, lo_count) = (mid, c),
                }
            }
        }
        if hi_count == tokens {
            return Ok(text(hi));
        }
        if lo_count < tokens {
            let gap = tokens - lo_count;
            for tail in [" a", " I", " 1", ".", ","] {
                let padded = text(lo) + &tail.repeat(gap);
                if count(&padded)? == tokens {
                    return Ok(padded);
                }
            }
        }
        bail!(
            "cannot make a prompt of exactly {tokens} tokens for {}: {lo} words make {lo_count}, \
             {hi} words {hi_count}",
            model.display()
        )
    }
}

/// Runs `command` (a `rinfer run --json`) to its end: how it ended and the report it printed.
pub(super) fn run_report(command: &mut Command) -> Result<(child::Finished, Value)> {
    let done = child::run(command)?;
    let report = serde_json::from_str(done.stdout.trim())
        .with_context(|| format!("`rinfer run --json` printed {:?}", done.stdout))?;
    Ok((done, report))
}

/// The number at `key` (a JSON pointer) of a `rinfer run --json` report.
pub(super) fn report_number(report: &Value, key: &str) -> Result<f64> {
    report
        .pointer(key)
        .and_then(Value::as_f64)
        .with_context(|| format!("`rinfer run --json` has no number at {key}: {report}"))
}

/// The prompt length `test` needs, if it reads a prompt file.
fn prompt_tokens(test: Test) -> Option<usize> {
    match test {
        Test::Prompt(n) => Some(n),
        Test::Generate(_) => Some(1),
        Test::FirstToken => None,
    }
}

/// Cargo's target directory (`CARGO_TARGET_DIR` when set, as cargo itself reads it, relative to
/// the workspace root where cargo runs).
fn target_dir() -> PathBuf {
    let root = crate::workspace_root();
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root.join(dir),
        None => root.join("target"),
    }
}
