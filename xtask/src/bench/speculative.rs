//! `cargo xtask bench speculative`: decode speed of the release `rinfer run` with and without
//! prompt-lookup speculation (`--speculate ngram`) on the default model, greedy, on tasks whose
//! answer is grounded in the input (rewriting a given source file with a small change, quoting
//! a given passage) and on free generation; with the share of guessed tokens accepted, and a
//! check that both modes wrote the same tokens. `--draft-model PATH` measures speculation with
//! that draft model (`--speculate draft`) instead of prompt lookup; the default model ships
//! with none.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

use super::child;
use super::rinfer::Rinfer;
use super::stats::Summary;

const USAGE: &str = "usage: cargo xtask bench speculative [--model PATH] [--threads N] \
    [--repeat N] [--max-tokens N] [--draft-max N] [--draft-model PATH]";

/// The file the rewrite task hands the model (read from the workspace).
const SOURCE_FILE: &str = "crates/model/src/engine/generate.rs";

const PASSAGE: &str = "The harbour town kept two calendars. The first was the church's, \
    printed each winter and pinned inside every kitchen door. The second was the sea's, which \
    nobody printed: the week the herring came, the night of the highest tide, the morning the \
    ice left the bay.\n\nWhen the two calendars disagreed, the town followed the sea. Weddings \
    moved, the school closed for a week each spring so that the children could help with the \
    nets, and once, in a year nobody forgot, the harvest festival was held in a fishing shed \
    because the square was under a foot of water.\n\nThe old harbour master kept notes on both \
    calendars for forty years, in a ledger that now sits in the library beside the door.";

/// One task: its name and the user turn that asks for it.
struct Task {
    name: &'static str,
    ask: String,
}

fn tasks() -> Result<Vec<Task>> {
    let path = crate::workspace_root().join(SOURCE_FILE);
    let source = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(vec![
        Task {
            name: "rewrite a source file",
            ask: format!(
                "Here is a Rust source file:\n\n```rust\n{source}```\n\nRewrite the whole file \
                 with the method `score` renamed to `score_tokens`. Output only the complete \
                 file."
            ),
        },
        Task {
            name: "quote a passage",
            ask: format!(
                "{PASSAGE}\n\nQuote the second and third paragraphs of the text above word for \
                 word."
            ),
        },
        Task {
            name: "free generation",
            ask: "Write a long story about a lighthouse keeper who finds a message in a bottle."
                .into(),
        },
    ])
}

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
        "| task | plain tok/s | speculative tok/s | speed-up | accepted / guessed | same tokens |"
    );
    println!("|---|---|---|---|---|---|");
    for (i, task) in tasks()?.iter().enumerate() {
        let prompt = dir.join(format!("task-{i}.txt"));
        std::fs::write(&prompt, &task.ask)
            .with_context(|| format!("cannot write {}", prompt.display()))?;
        let (mut plain, mut fast) = (Vec::new(), Vec::new());
        // Alternate the modes so both see the same machine state.
        for _ in 0..options.repeat {
            plain.push(measure(&rinfer, &model, &prompt, &options, false)?);
            fast.push(measure(&rinfer, &model, &prompt, &options, true)?);
        }
        let speed = |runs: &[Run]| {
            Summary::of(&runs.iter().map(|r| r.decode_tok_s).collect::<Vec<_>>())
                .expect("at least one run")
        };
        let (p, f) = (speed(&plain), speed(&fast));
        let (drafted, accepted) = fast
            .iter()
            .fold((0, 0), |(d, a), r| (d + r.drafted, a + r.accepted));
        let same = plain
            .iter()
            .chain(&fast)
            .all(|r| r.tokens == plain[0].tokens);
        let rate = if drafted == 0 {
            0.0
        } else {
            accepted as f64 / drafted as f64
        };
        println!(
            "| {} | {} | {} | {:.2}× | {accepted} / {drafted} ({:.0} %) | {} |",
            task.name,
            p.show(1),
            f.show(1),
            f.median / p.median.max(1e-9),
            rate * 100.0,
            if same { "yes" } else { "NO" },
        );
    }
    Ok(())
}

/// One greedy `rinfer run --json` of `prompt` (a user turn), speculating or not.
fn measure(
    rinfer: &Rinfer,
    model: &Path,
    prompt: &Path,
    options: &Options,
    speculate: bool,
) -> Result<Run> {
    let mut command = Command::new(rinfer.binary());
    command.args(["run", "--json", "--warmup", "--temperature", "0"]);
    command.args(["--chat-template", "gemma", "--ctx", "4096"]);
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
    let done = child::run(&mut command)?;
    let report: Value = serde_json::from_str(done.stdout.trim())
        .with_context(|| format!("`rinfer run --json` printed {:?}", done.stdout))?;
    let number = |key: &str| -> Result<f64> {
        report
            .pointer(key)
            .and_then(Value::as_f64)
            .with_context(|| format!("`rinfer run --json` has no number at {key}: {report}"))
    };
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
