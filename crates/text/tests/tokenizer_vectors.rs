//! The tokenizer reproduces llama.cpp exactly: every test vector of llama.cpp's own vocabularies
//! (`tests/fixtures/tokenizer/ggml-vocab-*.gguf` with `.inp`/`.out`), the gemma-3-270m
//! reference (plain, with BOS, with control tokens parsed, detokenized), streaming output that
//! never splits a character, and the Hugging Face `tokenizer.json` path.

use std::path::{Path, PathBuf};

use rinfer_formats::gguf::GgufFile;
use rinfer_text::tokenizer::{TokenType, Tokenizer};
use serde_json::Value;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures");

fn fixture(rel: &str) -> PathBuf {
    Path::new(FIXTURES).join(rel)
}

fn load(vocab: &str) -> Tokenizer {
    let path = fixture(&format!("tokenizer/ggml-vocab-{vocab}.gguf"));
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_gguf(file.metadata()).unwrap_or_else(|e| panic!("{vocab}: {e}"))
}

/// The `.inp` strings paired with the `.out` ids (llama.cpp's `test-tokenizer-0` format).
fn vectors(vocab: &str) -> Vec<(String, Vec<u32>)> {
    let base = fixture(&format!("tokenizer/ggml-vocab-{vocab}.gguf"));
    let inp = std::fs::read_to_string(base.with_extension("gguf.inp")).unwrap();
    let out = std::fs::read_to_string(base.with_extension("gguf.out")).unwrap();
    let mut texts: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
    assert_eq!(texts.pop(), Some(""), "{vocab}.inp ends with a separator");
    let ids: Vec<Vec<u32>> = out
        .lines()
        .map(|l| l.split_whitespace().map(|t| t.parse().unwrap()).collect())
        .collect();
    assert_eq!(texts.len(), ids.len(), "{vocab}: .inp and .out disagree");
    texts.into_iter().map(str::to_owned).zip(ids).collect()
}

/// Encodes every vector; returns how many matched and prints each mismatch.
fn check_vocab(vocab: &str) {
    let tok = load(vocab);
    let cases = vectors(vocab);
    let mut failures = Vec::new();
    for (i, (text, expected)) in cases.iter().enumerate() {
        let got = tok.encode(text, false, false).unwrap();
        if &got != expected {
            failures.push(format!(
                "  #{i} {text:?}\n    expected {expected:?}\n    got      {got:?}"
            ));
        }
    }
    println!(
        "{vocab}: {}/{} vectors match",
        cases.len() - failures.len(),
        cases.len()
    );
    assert!(
        failures.is_empty(),
        "{vocab}: {} of {} vectors differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn llama_spm_vectors() {
    check_vocab("llama-spm");
}

#[test]
fn llama_bpe_vectors() {
    check_vocab("llama-bpe");
}

#[test]
fn qwen2_vectors() {
    check_vocab("qwen2");
}

#[test]
fn gpt2_vectors() {
    check_vocab("gpt-2");
}

#[test]
fn phi3_vectors() {
    check_vocab("phi-3");
}

#[test]
fn gemma3_vectors() {
    check_vocab("gemma3");
}

/// The special ids and flags of each vocabulary agree with `index.json`.
#[test]
fn special_ids_match_index() {
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("tokenizer/index.json")).unwrap())
            .unwrap();
    for (name, v) in index["vocabs"].as_object().unwrap() {
        let tok = load(name);
        assert_eq!(
            tok.vocab_size() as u64,
            v["n_vocab"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(tok.bos().map(u64::from), v["bos"].as_u64(), "{name} bos");
        assert_eq!(tok.eos().map(u64::from), v["eos"].as_u64(), "{name} eos");
        assert_eq!(
            tok.add_bos(),
            v["add_bos"].as_bool().unwrap(),
            "{name} add_bos"
        );
        let eos = tok.eos().unwrap();
        assert!(tok.is_eog(eos), "{name}: eos is end-of-generation");
    }
}

/// End-of-generation sets follow llama.cpp's rules (eos plus the end-of-turn texts).
#[test]
fn eog_ids_follow_llama_cpp() {
    let gemma = load("gemma3");
    let eot = gemma.token_id("<end_of_turn>").unwrap();
    assert_eq!(gemma.eot(), Some(eot));
    assert_eq!(gemma.eog_ids(), &[1, eot]);

    let qwen = load("qwen2");
    let im_end = qwen.token_id("<|im_end|>").unwrap();
    assert_eq!(qwen.eog_ids(), &[151643, im_end]);

    let llama3 = load("llama-bpe");
    let eot_id = llama3.token_id("<|eot_id|>").unwrap();
    assert!(llama3.is_eog(eot_id) && llama3.is_eog(128001));

    let phi3 = load("phi-3");
    for t in ["<|end|>", "<|endoftext|>"] {
        assert!(phi3.is_eog(phi3.token_id(t).unwrap()), "phi-3 {t}");
    }
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// Every case of llama.cpp's gemma-3-270m tokenization reference.
#[test]
fn gemma3_270m_reference() {
    let tok = load("gemma3");
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("refs/gemma3-270m.tokenize.json")).unwrap(),
    )
    .unwrap();
    let cases = reference["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 32);
    let mut failures = Vec::new();
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let plain = tok.encode(text, false, false).unwrap();
        let checks = [
            ("ids", plain.clone(), ids(&case["ids"])),
            (
                "ids_add_special",
                tok.encode(text, true, false).unwrap(),
                ids(&case["ids_add_special"]),
            ),
            (
                "ids_parse_special",
                tok.encode(text, false, true).unwrap(),
                ids(&case["ids_parse_special"]),
            ),
        ];
        for (field, got, expected) in checks {
            if got != expected {
                failures.push(format!(
                    "{field} of {text:?}: expected {expected:?}, got {got:?}"
                ));
            }
        }
        let detok = tok.decode(&ids(&case["ids"]));
        if detok != case["detokenized"].as_str().unwrap() {
            failures.push(format!("detokenized {text:?}: got {detok:?}"));
        }
        for (id, piece) in plain.iter().zip(case["pieces"].as_array().unwrap()) {
            let got = String::from_utf8_lossy(tok.token_piece(*id).unwrap());
            // Pieces of lone bytes are backslash-escaped in the reference; compare the rest.
            if !piece.as_str().unwrap().contains('\\') && got != piece.as_str().unwrap() {
                failures.push(format!(
                    "piece of {id} in {text:?}: got {got:?}, want {piece}"
                ));
            }
        }
    }
    println!(
        "gemma3-270m: {}/{} cases match",
        cases.len() - failures.len().min(cases.len()),
        cases.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A character made of several byte-fallback tokens is printed once, whole.
#[test]
fn stream_decoder_holds_split_characters() {
    let tok = load("llama-spm");
    // "🦙" is not a token in llama's vocabulary: it becomes <0xF0> <0x9F> <0xA6> <0x99>.
    let ids = tok.encode("a🦙b", false, false).unwrap();
    let bytes: Vec<u32> = "🦙"
        .bytes()
        .map(|b| tok.token_id(&format!("<0x{b:02X}>")).unwrap())
        .collect();
    assert!(ids.windows(4).any(|w| w == bytes.as_slice()), "{ids:?}");
    for &b in &bytes {
        assert_eq!(tok.token_type(b), Some(TokenType::Byte));
    }

    let mut stream = tok.stream_decoder();
    let outputs: Vec<Option<String>> = ids.iter().map(|&id| stream.push(id)).collect();
    assert!(!stream.has_pending());
    assert_eq!(stream.finish(), None);
    let printed: Vec<&str> = outputs.iter().flatten().map(String::as_str).collect();
    assert_eq!(printed.concat(), " a🦙b");
    assert!(
        printed.iter().all(|s| !s.contains('\u{FFFD}')),
        "{printed:?}"
    );
    // The three leading bytes of the llama print nothing; the fourth prints all of it.
    let first = ids.iter().position(|&i| i == bytes[0]).unwrap();
    assert_eq!(outputs[first..first + 3], [None, None, None]);
    assert_eq!(outputs[first + 3].as_deref(), Some("🦙"));
}

/// Byte-level BPE tokens can end inside a character too; the stream waits for the rest.
#[test]
fn stream_decoder_on_byte_level_bpe() {
    let tok = load("gpt-2");
    let text = "日本語 🦙 text";
    let ids = tok.encode(text, false, false).unwrap();
    let mut stream = tok.stream_decoder();
    let mut out = String::new();
    for &id in &ids {
        if let Some(s) = stream.push(id) {
            assert!(!s.contains('\u{FFFD}'), "{s:?}");
            out.push_str(&s);
        }
    }
    assert_eq!(stream.finish(), None);
    assert_eq!(out, text);
    assert_eq!(tok.decode(&ids), text);
}

/// An unfinished character at the end of the stream is flushed as U+FFFD.
#[test]
fn stream_decoder_flushes_invalid_tail() {
    let tok = load("llama-spm");
    let e2 = tok.token_id("<0xE2>").unwrap();
    let mut stream = tok.stream_decoder();
    assert_eq!(stream.push(e2), None);
    assert!(stream.has_pending());
    assert_eq!(stream.finish().as_deref(), Some("\u{FFFD}"));
}

/// Round trips: decode(encode(text)) gives the text back for SentencePiece vocabularies.
#[test]
fn spm_round_trip() {
    for vocab in ["llama-spm", "gemma3"] {
        let tok = load(vocab);
        for (text, _) in vectors(vocab) {
            // llama.cpp's SPM tokenizer adds one leading space that decode removes again.
            let ids = tok.encode(&text, false, false).unwrap();
            assert_eq!(tok.decode(&ids), text, "{vocab}");
            // After BOS the space stays, as llama_detokenize(remove_special = false) keeps it.
            let with_bos = tok.encode(&text, true, false).unwrap();
            let expected = if tok.add_space_prefix() && !text.is_empty() {
                format!(" {text}")
            } else {
                text.clone()
            };
            assert_eq!(tok.decode(&with_bos), expected, "{vocab}");
        }
    }
}

/// Control tokens are text without `parse_special` and single ids with it.
#[test]
fn parse_special_controls_control_tokens() {
    let tok = load("qwen2");
    let im_start = tok.token_id("<|im_start|>").unwrap();
    let with = tok.encode("<|im_start|>user\nhi", false, true).unwrap();
    assert_eq!(with[0], im_start);
    let without = tok.encode("<|im_start|>user\nhi", false, false).unwrap();
    assert!(!without.contains(&im_start));
    assert_eq!(tok.decode(&without), "<|im_start|>user\nhi");
    // decode hides control tokens, token_piece shows them.
    assert_eq!(tok.decode(&with), "user\nhi");
    assert_eq!(tok.token_piece(im_start), Some("<|im_start|>".as_bytes()));
}

/// A Hugging Face `tokenizer.json`: BOS from its config, special tokens only when asked for.
#[test]
fn hf_json_tokenizer_round_trips() {
    let hf = Tokenizer::from_hf_json(fixture("llama3bpe-tiny-hf/tokenizer.json")).unwrap();
    assert_eq!(hf.bos(), hf.token_id("<|begin_of_text|>"));
    assert!(hf.add_bos());
    let text = "Hello world! 123456 <|end_of_text|> done";
    let ids = hf.encode(text, true, false).unwrap();
    assert_eq!(Some(ids[0]), hf.bos());
    let eot = hf.token_id("<|end_of_text|>").unwrap();
    assert!(!ids.contains(&eot));
    assert!(hf.encode(text, false, true).unwrap().contains(&eot));
    assert_eq!(hf.decode(&hf.encode(text, false, false).unwrap()), text);
    assert!(hf.is_eog(eot));

    let mut stream = hf.stream_decoder();
    let streamed: String = hf
        .encode("Grüße", false, false)
        .unwrap()
        .iter()
        .filter_map(|&id| stream.push(id))
        .collect();
    assert_eq!(streamed, "Grüße");
}

/// Errors name the problem: an unknown tokenizer model.
#[test]
fn unsupported_model_is_reported() {
    use rinfer_formats::gguf::{Metadata, MetadataValue, ValueType};
    let mut meta = Metadata::default();
    meta.insert("tokenizer.ggml.model", MetadataValue::String("t5".into()))
        .unwrap();
    meta.insert(
        "tokenizer.ggml.tokens",
        MetadataValue::Array {
            element: ValueType::String,
            items: vec![MetadataValue::String("a".into())],
        },
    )
    .unwrap();
    let err = Tokenizer::from_gguf(&meta).unwrap_err().to_string();
    assert!(err.contains("unsupported tokenizer model \"t5\""), "{err}");

    let empty = Metadata::default();
    let err = Tokenizer::from_gguf(&empty).unwrap_err().to_string();
    assert!(err.contains("tokenizer.ggml.model"), "{err}");
}

/// The tiny test models' truncated vocabularies tokenize their reference prompts exactly as
/// llama.cpp did (`refs/<model>.json`, `llama_tokenize(add_special=true, parse_special=false)`).
#[test]
fn tiny_model_prompts_match_llama_cpp() {
    let mut checked = 0;
    for entry in std::fs::read_dir(fixture("models")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "gguf") {
            continue;
        }
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let Ok(text) = std::fs::read_to_string(fixture(&format!("refs/{name}.json"))) else {
            continue;
        };
        let reference: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            reference["settings"]["tokenize"],
            "llama_tokenize(add_special=true, parse_special=false)"
        );
        let file = GgufFile::open(&path).unwrap();
        let tok = Tokenizer::from_gguf(file.metadata()).unwrap_or_else(|e| panic!("{name}: {e}"));
        for case in reference["cases"].as_array().unwrap() {
            let prompt = case["prompt"].as_str().unwrap();
            assert_eq!(
                tok.encode(prompt, true, false).unwrap(),
                ids(&case["tokens"]),
                "{name}: {prompt:?}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 6, "only {checked} prompts found");
}

/// Gemma 4's vocabulary (`tokenizer.ggml.model = "gemma4"`: BPE over `▁` pieces with byte
/// fallback) gives back the prompts it encodes, ends generation at `<turn|>`, and parses its
/// turn markers as single control tokens.
#[test]
fn gemma4_pieces_round_trip_and_mark_turns() {
    let file = GgufFile::open(fixture("models/gemma4-tiny-q8_0.gguf")).unwrap();
    let tok = Tokenizer::from_gguf(file.metadata()).unwrap();
    let text = std::fs::read_to_string(fixture("refs/gemma4-tiny-q8_0.json")).unwrap();
    let reference: Value = serde_json::from_str(&text).unwrap();
    for case in reference["cases"].as_array().unwrap() {
        let prompt = case["prompt"].as_str().unwrap();
        let ids = tok.encode(prompt, true, false).unwrap();
        assert_eq!(ids[0], 2, "BOS first");
        assert_eq!(tok.decode(&ids[1..]), prompt);
    }
    let turn = tok.token_id("<|turn>").unwrap();
    let end = tok.token_id("<turn|>").unwrap();
    assert_eq!((turn, end), (105, 106));
    assert!(tok.is_eog(end));
    let ids = tok.encode("<|turn>user\nHi<turn|>", false, true).unwrap();
    assert_eq!(ids.first(), Some(&turn));
    assert_eq!(ids.last(), Some(&end));
    let literal = tok.encode("<|turn>", false, false).unwrap();
    assert!(!literal.contains(&turn), "{literal:?}");
}

/// A file without a vocabulary (`tokenizer.ggml.model = "none"`) has a tokenizer that cannot
/// encode text and says why.
#[test]
fn no_vocabulary_refuses_text_naming_it() {
    use rinfer_formats::gguf::{Metadata, MetadataValue};
    let mut meta = Metadata::default();
    meta.insert("tokenizer.ggml.model", MetadataValue::String("none".into()))
        .unwrap();
    let tok = Tokenizer::from_gguf(&meta).unwrap();
    assert!(!tok.has_vocabulary());
    let err = tok.encode("text", true, false).unwrap_err().to_string();
    assert!(err.contains("no vocabulary"), "{err}");
    assert_eq!(tok.decode(&[0, 5]), "");
}

/// The truncated vocabularies inside the 2026 fixture models (deepseek-llm's pre-tokenizer,
/// Llama 3's) tokenize the reference prompts (digits, currency, accents, CJK, emoji, math) as
/// llama.cpp did, BOS included, and decode them back.
#[test]
fn fixture_model_vocabularies_tokenize_the_reference_prompts() {
    for model in ["deepseek2-tiny-q8_0", "glm4moe-tiny-q8_0"] {
        let path = fixture(&format!("models/{model}.gguf"));
        let file = GgufFile::open(&path).unwrap();
        let tok = Tokenizer::from_gguf(file.metadata()).unwrap_or_else(|e| panic!("{model}: {e}"));
        let refs: Value = serde_json::from_str(
            &std::fs::read_to_string(fixture(&format!("refs/{model}.json"))).unwrap(),
        )
        .unwrap();
        for case in refs["cases"].as_array().unwrap() {
            let prompt = case["prompt"].as_str().unwrap();
            let want = ids(&case["tokens"]);
            assert_eq!(
                tok.encode(prompt, true, false).unwrap(),
                want,
                "{model} {prompt:?}"
            );
            let text = tok.decode(&want[1..]);
            assert_eq!(text, prompt, "{model} decodes {prompt:?}");
        }
    }
}
