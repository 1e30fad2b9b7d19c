//! `cargo xtask bench speculative`: decode speed of the release `rinfer run` with and without
//! prompt-lookup speculation (`--speculate ngram`) on the default model, greedy, on tasks that
//! copy a given text, edit one (the text again with a few changes) or write freely
//! ([`tasks`]); with the tokens each verification step yields and the share of guessed tokens
//! accepted (both independent of the machine), the speed-up of each kind of task, and a check
//! that both modes wrote the same tokens. `--draft-model PATH` measures speculation with
//! that draft model (`--speculate draft`) instead of prompt lookup; the default model ships
//! with none.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

use super::rinfer::{Rinfer, report_number, run_report};
use super::stats::Summary;
use tasks::{Kind, SOURCE_FILE, Task};

mod tasks;

const USAGE: &str = "usage: cargo xtask bench speculative [--model PATH] [--threads N] \
    [--repeat N] [--max-tokens N] [--draft-max N] [--draft-model PATH]";

/// What the bench is asked to do.
struct Options {
    model: Option<PathBuf>,
    threads: Option<usize>,
    repeat: usize,
    max_tokens: usize,
    draft_max: usize,
    /// The draft model that guesses (`None`: prompt lookup).
    draft_model: Option<PathBuf>,
}

impl Options {
    fn parse(args: &[&str]) -> Result<Option<Self>> {
        let mut options = Self {
            model: None,
            threads: None,
            repeat: 3,
            max_tokens: 256,
            draft_max: 8,
            draft_model: None,
        };
        let mut args = args.iter();
        while let Some(&flag) = args.next() {
            if matches!(flag, "-h" | "--help") {
                return Ok(None);
            }
            let value = args
                .next()
                .with_context(|| format!("{flag} needs a value\n{USAGE}"))?;
            let number = || -> Result<usize> {
                value
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n > 0)
                    .with_context(|| format!("{flag} wants a positive integer, not {value:?}"))
            };
            match flag {
                "--model" => options.model = Some(PathBuf::from(value)),
                "--threads" => options.threads = Some(number()?),
                "--repeat" => options.repeat = number()?,
                "--max-tokens" => options.max_tokens = number()?,
                "--draft-max" => options.draft_max = number()?,
                "--draft-model" => options.draft_model = Some(PathBuf::from(value)),
                _ => bail!("unknown option {flag}\n{USAGE}"),
            }
        }
        Ok(Some(options))
    }
}

/// One run's outcome.
struct Run {
    tokens: Vec<u64>,
    decode_tok_s: f64,
    drafted: u64,
    accepted: u64,
}

/// Runs the bench with `args` (the arguments after `bench speculative`).
pub fn run(args: &[&str]) -> Result<()> {
    let Some(options) = Options::parse(args)? else {
        println!("{USAGE}");
        return Ok(());
    };
    let rinfer = Rinfer::build()?;
    let model = match &options.model {
        Some(path) => path.clone(),
        None => rinfer.default_model()?,
    };
    ensure!(model.is_file(), "no model file at {}", model.display());
    match &options.draft_model {
        Some(draft) => {
            ensure!(
                draft.is_file(),
                "no draft model file at {}",
                draft.display()
            );
            println!("speculation: the draft model {}", draft.display());
        }
        None => println!("speculation: prompt lookup"),
    }
    let dir = crate::workspace_root().join("target/bench/speculative");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    println!(
        "| task | kind | plain tok/s | speculative tok/s | speed-up | tokens / step | \
         accepted / guessed | same tokens |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let source = std::fs::read_to_string(crate::workspace_root().join(SOURCE_FILE))
        .with_context(|| format!("cannot read {SOURCE_FILE}"))?;
    let mut kinds: BTreeMap<Kind, Vec<Outcome>> = BTreeMap::new();
    for (i, task) in tasks::tasks(&source).iter().enumerate() {
        let outcome = measure_task(
            &rinfer,
            &model,
            &options,
            &dir.join(format!("task-{i}.txt")),
            task,
        )?;
        println!(
            "| {} | {} | {} | {} | {:.2}× | {:.2} | {} / {} ({:.0} %) | {} |",
            task.name,
            task.kind.name(),
            outcome.plain.show(1),
            outcome.fast.show(1),
            outcome.speed_up(),
            outcome.tokens_per_step(),
            outcome.accepted,
            outcome.drafted,
            outcome.acceptance() * 100.0,
            if outcome.same { "yes" } else { "NO" },
        );
        kinds.entry(task.kind).or_default().push(outcome);
    }
    println!("\n| kind | speed-up (geometric mean) | tokens / step |");
    println!("|---|---|---|");
    for (kind, outcomes) in &kinds {
        let n = outcomes.len() as f64;
        let speed_up = outcomes.iter().map(|o| o.speed_up().ln()).sum::<f64>() / n;
        let tokens = outcomes.iter().map(|o| o.decoded).sum::<u64>();
        let steps = outcomes.iter().map(|o| o.decoded - o.accepted).sum::<u64>();
        println!(
            "| {} | {:.2}× | {:.2} |",
            kind.name(),
            speed_up.exp(),
            tokens as f64 / steps.max(1) as f64
        );
    }
    Ok(())
}

/// One task's runs in both modes, summed over the repeats.
struct Outcome {
    plain: Summary,
    fast: Summary,
    /// Tokens the speculating runs decoded after the first.
    decoded: u64,
    drafted: u64,
    accepted: u64,
    /// Whether every run wrote the same tokens.
    same: bool,
}

impl Outcome {
    fn speed_up(&self) -> f64 {
        self.fast.median / self.plain.median.max(1e-9)
    }

    /// Decoded tokens per verification step: each step yields its confirmed guesses and one
    /// token of its own.
    fn tokens_per_step(&self) -> f64 {
        self.decoded as f64 / (self.decoded - self.accepted).max(1) as f64
    }

    fn acceptance(&self) -> f64 {
        self.accepted as f64 / self.drafted.max(1) as f64
    }
}

/// Runs `task` (its user turn written to `prompt`) plainly and speculating, alternating.
fn measure_task(
    rinfer: &Rinfer,
    model: &Path,
    options: &Options,
    prompt: &Path,
    task: &Task,
) -> Result<Outcome> {
    std::fs::write(prompt, &task.ask)
        .with_context(|| format!("cannot write {}", prompt.display()))?;
    let (mut plain, mut fast) = (Vec::new(), Vec::new());
    // Alternate the modes so both see the same machine state.
    for _ in 0..options.repeat {
        plain.push(measure(rinfer, model, (prompt, task.chat), options, false)?);
        fast.push(measure(rinfer, model, (prompt, task.chat), options, true)?);
    }
    let speed = |runs: &[Run]| {
        Summary::of(&runs.iter().map(|r| r.decode_tok_s).collect::<Vec<_>>())
            .expect("at least one run")
    };
    let sum = |count: fn(&Run) -> u64| fast.iter().map(count).sum::<u64>();
    Ok(Outcome {
        plain: speed(&plain),
        fast: speed(&fast),
        decoded: sum(|r| r.tokens.len().saturating_sub(1) as u64),
        drafted: sum(|r| r.drafted),
        accepted: sum(|r| r.accepted),
        same: plain
            .iter()
            .chain(&fast)
            .all(|r| r.tokens == plain[0].tokens),
    })
}

/// One greedy `rinfer run --json` of `prompt` (a user turn when `chat`, else raw text),
/// speculating or not.
fn measure(
    rinfer: &Rinfer,
    model: &Path,
    (prompt, chat): (&Path, bool),
    options: &Options,
    speculate: bool,
) -> Result<Run> {
    let mut command = Command::new(rinfer.binary());
    command.args(["run", "--json", "--warmup", "--temperature", "0"]);
    command.args(["--ctx", "4096"]);
    if chat {
        command.args(["--chat-template", "gemma"]);
    }
    command.args(["-n", &options.max_tokens.to_string()]);
    command.args(["--draft-max", &options.draft_max.to_string()]);
    match (speculate, &options.draft_model) {
        (false, _) => command.args(["--speculate", "off"]),
        (true, None) => command.args(["--speculate", "ngram"]),
        (true, Some(draft)) => command
            .args(["--speculate", "draft", "--draft-model"])
            .arg(draft),
    };
    if let Some(threads) = options.threads {
        command.args(["--threads", &threads.to_string()]);
    }
    command.arg("--model").arg(model).arg("-f").arg(prompt);
    let (_, report) = run_report(&mut command)?;
    let number = |key: &str| report_number(&report, key);
    let tokens = report
        .get("tokens")
        .and_then(Value::as_array)
        .context("`rinfer run --json` printed no tokens")?
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    Ok(Run {
        tokens,
        decode_tok_s: number("/timings/decode_tok_s")?,
        drafted: number("/timings/drafted_tokens")? as u64,
        accepted: number("/timings/accepted_tokens")? as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::Options;

    #[test]
    fn options_parse_and_refuse_what_they_do_not_know() {
        let options = Options::parse(&["--repeat", "5", "--draft-max", "4"])
            .unwrap()
            .unwrap();
        assert_eq!((options.repeat, options.draft_max), (5, 4));
        assert_eq!(
            options.draft_model, None,
            "prompt lookup unless a draft model is named"
        );
        let drafted = Options::parse(&["--draft-model", "small.gguf"])
            .unwrap()
            .unwrap();
        assert_eq!(drafted.draft_model, Some("small.gguf".into()));
        assert!(Options::parse(&["--help"]).unwrap().is_none());
        assert!(Options::parse(&["--repeat", "0"]).is_err());
        assert!(Options::parse(&["--bogus", "1"]).is_err());
    }
}
