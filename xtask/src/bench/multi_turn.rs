//! `cargo xtask bench serve --multi-turn`: a chat with a long system prompt (about 1,000 tokens
//! by default) whose every turn resends the whole history, as chat clients do, against
//! `rinfer serve` and llama.cpp's `llama-server` (built as the model bench builds llama-bench),
//! each with one slot, a context of 4096, the same model and threads. Prints the time to the
//! first generated text of each turn for both, side by side, and the prompt tokens rinfer
//! reused (`usage.prompt_tokens_details.cached_tokens`).
//!
//! The model is the default one, a synthetic model by name (`--model qwen35`: the hybrid of
//! gated delta nets and attention, written into the models cache on first use) or a GGUF file.
//! A model with a chat template is sent chat messages; one without (the synthetic models) a
//! plain-text transcript on `/v1/completions`, the same for both servers ([`super::dialogue`]).
//!
//! Replies are greedy with the model's end-of-generation tokens banned (read from its file),
//! so each is `--max-tokens` long; each server's conversation carries its own replies. Each
//! server first answers one unrelated request, so that turn 1 is not its first request.

use std::io::BufRead;
use std::net::SocketAddr;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::dialogue::{Dialogue, Format};
use super::llama_cpp::LlamaCpp;
use super::model_vocab::ModelVocab;
use super::options::ModelChoice;
use super::rinfer::Rinfer;
use super::server::{Server, post};

/// The context of the one slot of both servers.
const CONTEXT: usize = 4096;
/// The user's questions, one per turn (cycled).
const QUESTIONS: [&str; 6] = [
    "What does entry 3 of the log say?",
    "And entry 17?",
    "Which entries mention a storm?",
    "Summarise entries 20 to 25.",
    "What did the keeper do after the fog?",
    "Write a short closing note for the log.",
];

struct Options {
    model: ModelChoice,
    turns: usize,
    system_rules: usize,
    max_tokens: usize,
    threads: usize,
    rinfer_only: bool,
}

fn parse(args: &[&str]) -> Result<Options> {
    let mut options = Options {
        model: ModelChoice::Default,
        turns: 6,
        system_rules: 28,
        max_tokens: 32,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        rinfer_only: false,
    };
    let mut args = args.iter();
    while let Some(&arg) = args.next() {
        if arg == "--rinfer-only" {
            options.rinfer_only = true;
            continue;
        }
        let value = args
            .next()
            .with_context(|| format!("{arg} needs a value"))?;
        let number = || -> Result<usize> {
            let n: usize = value
                .parse()
                .with_context(|| format!("bad {arg} {value:?}"))?;
            if n == 0 {
                bail!("{arg} must be positive");
            }
            Ok(n)
        };
        match arg {
            "--model" => options.model = ModelChoice::parse(value),
            "--turns" => options.turns = number()?,
            "--system-rules" => options.system_rules = number()?,
            "--max-tokens" => options.max_tokens = number()?,
            "--threads" => options.threads = number()?,
            other => bail!("unknown option {other}; see `cargo xtask help`"),
        }
    }
    Ok(options)
}

/// The system prompt: `rules` numbered rules of about 35 tokens each (the default model's
/// tokenizer makes 1,422 tokens of 40).
fn system_prompt(rules: usize) -> String {
    (1..=rules)
        .map(|i| {
            format!(
                "Rule {i}: when asked about entry {i} of the lighthouse log, quote the entry \
                 exactly, give its date, then add one short remark about the weather."
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One turn as the client saw it.
struct Turn {
    /// Seconds from sending the request to the first generated text.
    first_text_s: f64,
    reply: String,
    /// Prompt tokens and the cached ones among them, when the server reports them.
    prompt_tokens: Option<u64>,
    cached_tokens: Option<u64>,
}

/// What every request of one server's conversation shares.
struct Client {
    addr: SocketAddr,
    format: Format,
    /// The `logit_bias` that bans the end-of-generation tokens.
    bias: Value,
}

impl Client {
    /// Asks `dialogue`'s next `question` as one streamed request and times its first text.
    fn turn(&self, dialogue: &Dialogue, question: &str, max_tokens: usize) -> Result<Turn> {
        let (field, conversation) = dialogue.ask(question);
        let mut body = json!({
            "max_tokens": max_tokens, "temperature": 0, "stream": true,
            "stream_options": {"include_usage": true}, "logit_bias": self.bias,
        });
        body[field] = conversation;
        let start = Instant::now();
        let reader = post(self.addr, self.format.path(), &body.to_string())?;
        let mut turn = Turn {
            first_text_s: f64::NAN,
            reply: String::new(),
            prompt_tokens: None,
            cached_tokens: None,
        };
        let mut status_ok = false;
        for line in reader.lines() {
            let line = line?;
            if line.starts_with("HTTP/1.1 ") {
                status_ok = line.contains(" 200 ");
            }
            let Some(data) = line.strip_prefix("data: ") else {
                continue;
            };
            if data.starts_with("[DONE]") {
                break;
            }
            let chunk: Value =
                serde_json::from_str(data).with_context(|| format!("a bad chunk: {data}"))?;
            if let Some(text) = self.format.text_of(&chunk).filter(|t| !t.is_empty()) {
                if turn.reply.is_empty() {
                    turn.first_text_s = start.elapsed().as_secs_f64();
                }
                turn.reply.push_str(text);
            }
            if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
                turn.prompt_tokens = usage["prompt_tokens"].as_u64();
                turn.cached_tokens = usage["prompt_tokens_details"]["cached_tokens"].as_u64();
            }
        }
        if !status_ok || turn.reply.is_empty() {
            bail!(
                "a request to {} failed or generated no text",
                self.format.path()
            );
        }
        Ok(turn)
    }

    /// A warm-up request, then the conversation.
    fn conversation(&self, options: &Options) -> Result<Vec<Turn>> {
        self.turn(&Dialogue::new(self.format, String::new()), "Hello!", 4)?;
        let mut dialogue = Dialogue::new(self.format, system_prompt(options.system_rules));
        let mut turns = Vec::with_capacity(options.turns);
        for i in 0..options.turns {
            let question = QUESTIONS[i % QUESTIONS.len()];
            let turn = self.turn(&dialogue, question, options.max_tokens)?;
            dialogue.answered(question, turn.reply.clone());
            eprintln!(
                "turn {}: first text after {:.3} s; {} of {} prompt tokens cached",
                i + 1,
                turn.first_text_s,
                count(turn.cached_tokens),
                count(turn.prompt_tokens)
            );
            turns.push(turn);
        }
        Ok(turns)
    }
}

/// A count a server reported, or `?`.
fn count(n: Option<u64>) -> String {
    n.map_or("?".into(), |n| n.to_string())
}

/// Runs the scenario and prints a Markdown table.
pub fn run(args: &[&str]) -> Result<()> {
    let options = parse(args)?;
    let rinfer = Rinfer::build()?;
    let model = options.model.file(|| rinfer.default_model())?;
    let vocab = ModelVocab::read(&model)?;
    let format = match vocab.chat_template {
        true => Format::Chat,
        false => Format::Transcript,
    };
    let bias = vocab.ban_end_of_generation();
    let threads = options.threads.to_string();
    let context = CONTEXT.to_string();
    let model_arg = model.to_string_lossy();

    eprintln!("rinfer serve:");
    let args = [
        "-m",
        &model_arg,
        "--parallel",
        "1",
        "--ctx",
        &context,
        "-t",
        &threads,
    ];
    let mut server = Server::rinfer(&args)?;
    let client = Client {
        addr: server.addr,
        format,
        bias: bias.clone(),
    };
    let ours = client.conversation(&options)?;
    server.stop();

    let theirs = if options.rinfer_only {
        None
    } else {
        let llama = LlamaCpp::obtain(&super::cache::root()?)?;
        eprintln!("llama-server:");
        let args = ["-c", &context, "-np", "1", "-t", &threads];
        let mut server = Server::llama(llama.server(), &model, &args)?;
        let client = Client {
            addr: server.addr,
            format,
            bias,
        };
        let turns = client.conversation(&options)?;
        server.stop();
        Some(turns)
    };

    println!(
        "| turn | prompt tokens | reused by rinfer | rinfer first token | llama-server first token \
         | rinfer / llama-server |\n|---:|---:|---:|---:|---:|---:|"
    );
    for (i, ours) in ours.iter().enumerate() {
        let (peer, ratio) = match &theirs {
            Some(t) => (
                format!("{:.3} s", t[i].first_text_s),
                format!("{:.2}", ours.first_text_s / t[i].first_text_s),
            ),
            None => ("-".into(), "-".into()),
        };
        println!(
            "| {} | {} | {} | {:.3} s | {peer} | {ratio} |",
            i + 1,
            count(ours.prompt_tokens),
            count(ours.cached_tokens),
            ours.first_text_s
        );
    }
    println!(
        "\nOne slot, context {CONTEXT}, {}, {}; {} threads; a system prompt of {} rules, {} \
         greedy tokens per reply (end-of-generation ids {:?} banned), each turn resending the \
         whole history.",
        model.display(),
        format.describe(),
        options.threads,
        options.system_rules,
        options.max_tokens,
        vocab.end_of_generation
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;

    use super::*;

    #[test]
    fn a_turn_reads_the_reply_and_usage_of_a_stream_and_skips_empty_chunks() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            read_request(&mut socket);
            let chunks = [
                r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
                r#"{"choices":[{"delta":{"content":"Hello"}}]}"#,
                r#"{"choices":[{"delta":{"content":" there"}}]}"#,
                r#"{"choices":[],"usage":{"prompt_tokens":1040,"prompt_tokens_details":{"cached_tokens":1001}}}"#,
            ];
            let mut body = String::new();
            for chunk in chunks {
                body.push_str(&format!("data: {chunk}\n\n"));
            }
            body.push_str("data: [DONE]\n\n");
            write!(
                socket,
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n{body}"
            )
            .unwrap();
        });
        let client = Client {
            addr,
            format: Format::Chat,
            bias: json!({}),
        };
        let dialogue = Dialogue::new(Format::Chat, String::new());
        let turn = client.turn(&dialogue, "Hi", 4).unwrap();
        server.join().unwrap();
        assert_eq!(turn.reply, "Hello there");
        assert!(turn.first_text_s >= 0.0);
        assert_eq!(
            (turn.prompt_tokens, turn.cached_tokens),
            (Some(1040), Some(1001))
        );
    }

    /// Reads one whole request (headers, then `Content-Length` bytes of body): closing a socket
    /// with unread bytes resets it, and the client's write would fail.
    fn read_request(socket: &mut std::net::TcpStream) {
        let mut request = Vec::new();
        let mut byte = [0u8; 1];
        while !request.ends_with(b"\r\n\r\n") {
            socket.read_exact(&mut byte).unwrap();
            request.push(byte[0]);
        }
        let headers = String::from_utf8(request).unwrap().to_ascii_lowercase();
        let length: usize = headers
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        let mut body = vec![0u8; length];
        socket.read_exact(&mut body).unwrap();
    }

    #[test]
    fn the_model_is_named_as_the_model_bench_names_it() {
        let options = parse(&["--model", "qwen35", "--turns", "2"]).unwrap();
        assert_eq!(
            (options.model, options.turns),
            (ModelChoice::Synthetic("qwen35"), 2)
        );
        assert_eq!(parse(&[]).unwrap().model, ModelChoice::Default);
        let path = parse(&["--model", "chat.gguf"]).unwrap().model;
        assert_eq!(path, ModelChoice::Path("chat.gguf".into()));
        assert!(parse(&["--model"]).is_err());
    }

    #[test]
    fn the_default_system_prompt_is_about_a_thousand_tokens() {
        // 40 rules are 5,701 characters and 1,422 tokens of the default model.
        let chars = system_prompt(28).len();
        assert!((3_700..4_300).contains(&chars), "{chars} characters");
    }
}
