//! The tokenizer facing text from the network and the model facing the user: a body of
//! megabytes built to defeat special-token matching tokenizes in one pass, a server can stop
//! an encode whose client has left, and generated text never shows control tokens or media
//! markers.

use std::sync::atomic::AtomicBool;

use rinfer_formats::gguf::GgufFile;
use rinfer_text::tokenizer::{Tokenizer, TokenizerError};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures");

fn gemma() -> Tokenizer {
    let file = GgufFile::open(format!("{FIXTURES}/tokenizer/ggml-vocab-gemma3.gguf")).unwrap();
    Tokenizer::from_gguf(file.metadata()).unwrap()
}

/// 2 MiB of `<`: each of Gemma 3's 6 415 special tokens starts with `<` or could, and used to be
/// searched for separately at every position (17.5 s). It now takes one pass; the ids are those
/// of the same text with special tokens off, since none of them occurs.
#[test]
fn two_mebibytes_of_angle_brackets_tokenize() {
    let tok = gemma();
    let text = "<".repeat(2 << 20);
    let ids = tok.encode(&text, false, true).unwrap();
    assert_eq!(ids, tok.encode(&text, false, false).unwrap());
    assert_eq!(tok.decode(&ids), text);
}

/// Runs of whitespace, which Gemma 3 has special tokens for (lengths 1 to 31, nested in one
/// another), split as llama.cpp splits them: longest runs first.
#[test]
fn long_whitespace_runs_split_longest_first() {
    let tok = gemma();
    let text = format!("a{}b{}c", " ".repeat(100), "\n".repeat(70));
    let ids = tok.encode(&text, false, true).unwrap();
    let run = |s: &str| tok.token_id(s).unwrap();
    let spaces31 = run(&" ".repeat(31));
    let newlines31 = run(&"\n".repeat(31));
    assert_eq!(ids.iter().filter(|&&i| i == spaces31).count(), 3);
    assert_eq!(ids.iter().filter(|&&i| i == newlines31).count(), 2);
    assert!(ids.contains(&run(&" ".repeat(7))), "{ids:?}");
    assert!(ids.contains(&run(&"\n".repeat(8))), "{ids:?}");
    assert_eq!(tok.decode(&ids), text);
}

/// A raised cancel flag ends the encode with `Cancelled`; a lowered one changes nothing.
#[test]
fn encode_stops_when_cancelled() {
    let tok = gemma();
    let text = "<start_of_turn>user\nHi<end_of_turn>".repeat(1000);
    let raised = AtomicBool::new(true);
    let err = tok
        .encode_with_cancel(&text, true, true, &raised)
        .unwrap_err();
    assert!(matches!(err, TokenizerError::Cancelled), "{err}");
    let lowered = AtomicBool::new(false);
    assert_eq!(
        tok.encode_with_cancel(&text, true, true, &lowered).unwrap(),
        tok.encode(&text, true, true).unwrap()
    );
}

/// Generated ids that are control tokens (`<end_of_turn>`) or media markers
/// (`<start_of_image>`, user-defined in Gemma 3's vocabulary) print as nothing, in `decode`
/// and in the stream decoder; user-defined text tokens such as `<table>` still print.
#[test]
fn generated_text_hides_control_tokens_and_media_markers() {
    let tok = gemma();
    let ids = tok
        .encode(
            "The capital<start_of_image> of France<end_of_image> is<end_of_turn> Paris<table>",
            false,
            true,
        )
        .unwrap();
    let image = tok.token_id("<start_of_image>").unwrap();
    assert!(ids.contains(&image), "{ids:?}");
    let expected = "The capital of France is Paris<table>";
    assert_eq!(tok.decode(&ids), expected);
    let mut stream = tok.stream_decoder();
    let streamed: String = ids.iter().filter_map(|&id| stream.push(id)).collect();
    assert_eq!(streamed, expected);
    assert_eq!(stream.push(image), None);
}
