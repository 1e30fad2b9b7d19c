//! The chat template is chosen in one place, the same way for every front end: the user's
//! `--chat-template FILE|NAME`, else the model's own template, else the built-in format of the
//! model's family, else an error that names the flag. A model template that does not parse
//! costs a one-line warning, not the model.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rinfer_formats::gguf::{GgufFile, GgufWriter, MetadataValue};
use rinfer_model::LoadedModel;
use rinfer_model::chat_template::{
    ChatMessage, ChatTemplate, ChatTemplateError, TemplateOrigin, resolve, resolve_with,
};
use rinfer_model::tokenizer::Tokenizer;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures");

fn vocab(name: &str) -> GgufFile {
    GgufFile::open(format!("{FIXTURES}/tokenizer/ggml-vocab-{name}.gguf")).unwrap()
}

fn tokenizer(name: &str) -> Tokenizer {
    Tokenizer::from_gguf(vocab(name).metadata()).unwrap()
}

/// The Qwen2 vocabulary, and the template its file carries.
fn qwen2_and_its_template() -> (Tokenizer, Arc<ChatTemplate>) {
    let file = vocab("qwen2");
    let own = ChatTemplate::from_metadata(file.metadata()).unwrap();
    let tokenizer = Tokenizer::from_gguf(file.metadata()).unwrap();
    (tokenizer, Arc::new(own.unwrap()))
}

fn hi() -> Vec<ChatMessage> {
    vec![ChatMessage::user("Hi")]
}

/// A Gemma vocabulary without a template gets the built-in Gemma format (what `rinfer chat`
/// needs on the default model), with the vocabulary's BOS text.
#[test]
fn gemma_vocabulary_without_template_gets_builtin_gemma() {
    let tok = tokenizer("gemma3");
    let chosen = resolve_with(None, None, None, &tok).unwrap();
    assert_eq!(chosen.origin, TemplateOrigin::Builtin("gemma"));
    assert_eq!(chosen.origin.to_string(), "built-in gemma");
    assert!(chosen.warning.is_none());
    assert_eq!(
        chosen.template.render(&hi(), true).unwrap(),
        "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
    );
}

/// ChatML for a vocabulary with `<|im_start|>`; the model's own template comes first.
#[test]
fn model_template_comes_before_the_family_format() {
    let (tok, own) = qwen2_and_its_template();
    let chosen = resolve_with(None, Some(&own), None, &tok).unwrap();
    assert_eq!(chosen.origin, TemplateOrigin::Model);
    assert!(Arc::ptr_eq(&chosen.template, &own));
    let family = resolve_with(None, None, None, &tok).unwrap();
    assert_eq!(family.origin, TemplateOrigin::Builtin("chatml"));
}

/// `--chat-template NAME` and `--chat-template FILE` override the model's template.
#[test]
fn the_users_choice_comes_first() {
    let (tok, own) = qwen2_and_its_template();

    let named = resolve_with(Some("llama2"), Some(&own), None, &tok).unwrap();
    assert_eq!(named.origin, TemplateOrigin::Builtin("llama2"));

    let path = std::env::temp_dir().join(format!("rinfer-template-{}.jinja", std::process::id()));
    std::fs::write(
        &path,
        "{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}",
    )
    .unwrap();
    let from_file = resolve_with(Some(path.to_str().unwrap()), Some(&own), None, &tok).unwrap();
    assert_eq!(from_file.origin, TemplateOrigin::File(path.clone()));
    assert_eq!(from_file.template.render(&hi(), true).unwrap(), "[user] Hi");

    // A chosen file that does not parse is an error: the user asked for it.
    std::fs::write(&path, "{% for m in messages %}").unwrap();
    let err = resolve_with(Some(path.to_str().unwrap()), None, None, &tok).unwrap_err();
    assert!(matches!(err, ChatTemplateError::Syntax(_)), "{err}");
    std::fs::remove_file(&path).unwrap();

    let err = resolve_with(Some("no-such-format"), None, None, &tok).unwrap_err();
    assert!(matches!(err, ChatTemplateError::UnknownName(_)), "{err}");
    assert!(err.to_string().contains("gemma, llama3, chatml"), "{err}");
}

/// Nothing fits: the error names the flag.
#[test]
fn no_template_error_names_the_flag() {
    let tok = tokenizer("llama-spm");
    let err = resolve_with(None, None, None, &tok).unwrap_err();
    assert!(matches!(err, ChatTemplateError::NoTemplate { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains("--chat-template FILE|NAME"), "{message}");
    assert!(!message.contains('\n'), "{message}");
}

/// The tiny Gemma fixture model with `tokenizer.chat_template` set to `text`, written to a
/// temporary file.
fn model_with_template(text: &str) -> PathBuf {
    let source =
        GgufFile::open(Path::new(FIXTURES).join("models/gemma3-tiny-q4_k_m.gguf")).unwrap();
    let mut writer = GgufWriter::from_file(&source).unwrap();
    writer.set_metadata(
        "tokenizer.chat_template",
        MetadataValue::String(text.into()),
    );
    let path = std::env::temp_dir().join(format!(
        "rinfer-broken-template-{}-{}.gguf",
        std::process::id(),
        text.len()
    ));
    writer.write_file(&path).unwrap();
    path
}

/// A model whose template does not parse still loads (so `run`, `logits` and `serve`'s
/// completions work); chatting falls back to the family's format with a one-line warning.
#[test]
fn template_that_does_not_parse_falls_back_with_one_warning_line() {
    let path = model_with_template("{% for m in messages %}{{ m.content }");
    let loaded = LoadedModel::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(loaded.chat_template.is_none());
    let error = loaded.chat_template_error.as_ref().unwrap();
    assert!(matches!(error, ChatTemplateError::Syntax(_)), "{error}");

    let chosen = resolve(None, &loaded).unwrap();
    assert_eq!(chosen.origin, TemplateOrigin::Builtin("gemma"));
    let warning = chosen.warning.unwrap();
    assert!(!warning.contains('\n'), "{warning}");
    assert!(warning.contains("does not parse"), "{warning}");
    assert!(
        warning.ends_with("using the built-in gemma format"),
        "{warning}"
    );
    assert!(chosen.template.render(&hi(), true).is_ok());

    // With a choice, the broken template is not even mentioned.
    let chosen = resolve(Some("chatml"), &loaded).unwrap();
    assert!(chosen.warning.is_none());
}

/// Qwen3.5 (a hybrid model) carries no template in the fixture and gets ChatML from its
/// `<|im_start|>` token, which `rinfer chat` renders and tokenizes as control tokens.
#[test]
fn qwen35_without_template_chats_in_chatml() {
    let loaded = LoadedModel::open(format!("{FIXTURES}/models/qwen35-tiny-q8_0.gguf")).unwrap();
    let chosen = resolve(None, &loaded).unwrap();
    assert_eq!(chosen.origin, TemplateOrigin::Builtin("chatml"));
    let text = chosen.template.render(&hi(), true).unwrap();
    assert_eq!(
        text,
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
    let ids = loaded.tokenizer.encode(&text, true, true).unwrap();
    assert_eq!(
        ids.first(),
        Some(&2001),
        "<|im_start|> is one control token"
    );
}
