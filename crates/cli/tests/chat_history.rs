//! `rinfer chat` resends the whole conversation each turn, and its engine reuses the earlier
//! turns' keys and values: from the second turn on only the new tokens are evaluated.

use std::io::Write;
use std::process::{Command, Stdio};

/// The fixture model of the CLI tests.
fn tiny_model() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/models/gemma3-tiny-q4_k_m.gguf"
    )
    .to_string()
}

/// `(prompt tokens, reused tokens)` of each turn, from `--verbose`'s report.
fn turns(stderr: &str) -> Vec<(usize, usize)> {
    stderr
        .lines()
        .filter_map(|line| {
            let rest = line.split("prompt: ").nth(1)?;
            let mut numbers = rest
                .split(|c: char| !c.is_ascii_digit())
                .filter(|s| !s.is_empty())
                .map(|s| s.parse::<usize>().unwrap());
            Some((numbers.next()?, numbers.next()?))
        })
        .collect()
}

#[test]
fn chat_turns_after_the_first_evaluate_only_the_new_tokens() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rinfer"))
        .args(["chat", "--model", &tiny_model(), "--verbose", "-n", "6"])
        .args(["--temperature", "0", "--ctx", "512"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the rinfer binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Hello there, how are you today?\nTell me more.\nAnd then?\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let turns = turns(&stderr);
    assert_eq!(turns.len(), 3, "{stderr}");
    assert_eq!(turns[0].1, 0, "the first turn has nothing to reuse");
    for (i, &(prompt, reused)) in turns.iter().enumerate().skip(1) {
        let (previous, _) = turns[i - 1];
        assert!(
            reused >= previous,
            "turn {}: {reused} of {prompt} tokens reused, the previous prompt had {previous}",
            i + 1
        );
    }
}
