//! `rinfer chat` resends the whole conversation each turn, and its engine reuses the earlier
//! turns' keys and values: from the second turn on only the new tokens are evaluated.

mod cli_support;

use cli_support::{fixture, rinfer_with_stdin};

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
    let model = fixture("models/gemma3-tiny-q4_k_m.gguf");
    let out = rinfer_with_stdin(
        &[
            "chat",
            "--model",
            &model,
            "--verbose",
            "-n",
            "6",
            "--temperature",
            "0",
            "--ctx",
            "512",
        ],
        b"Hello there, how are you today?\nTell me more.\nAnd then?\n",
    );
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
