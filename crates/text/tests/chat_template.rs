//! Chat templates render as Hugging Face's `apply_chat_template` would: the templates stored in
//! the phi-3 and qwen2 vocabularies, and gemma-3's template (which needs `raise_exception`,
//! `trim` and loop variables). Expected strings are written out from each template's logic.

use rinfer_formats::gguf::GgufFile;
use rinfer_text::chat_template::{ChatMessage, ChatTemplate, ChatTemplateError};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures");

fn from_vocab(vocab: &str) -> Option<ChatTemplate> {
    let path = format!("{FIXTURES}/tokenizer/ggml-vocab-{vocab}.gguf");
    let file = GgufFile::open(&path).unwrap();
    ChatTemplate::from_metadata(file.metadata()).unwrap()
}

fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::user("What is 2+2?"),
        ChatMessage::assistant("4."),
        ChatMessage::user("And 3+3?"),
    ]
}

#[test]
fn phi3_template_from_gguf() {
    let t = from_vocab("phi-3").expect("phi-3 vocab has a chat template");
    // {{ bos_token }} then, per user message, "<|user|>\n{content}<|end|>\n<|assistant|>\n",
    // per assistant message "{content}<|end|>\n"; no generation-prompt branch.
    let expected = "<s><|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n4.<|end|>\n\
                    <|user|>\nAnd 3+3?<|end|>\n<|assistant|>\n";
    assert_eq!(t.render(&conversation(), true).unwrap(), expected);
    assert_eq!(t.render(&conversation(), false).unwrap(), expected);
}

#[test]
fn qwen2_template_from_gguf() {
    let t = from_vocab("qwen2").expect("qwen2 vocab has a chat template");
    // No system message: the template inserts its default one before the first message.
    let expected = "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n\
                    <|im_start|>user\nWhat is 2+2?<|im_end|>\n\
                    <|im_start|>assistant\n4.<|im_end|>\n\
                    <|im_start|>user\nAnd 3+3?<|im_end|>\n";
    assert_eq!(t.render(&conversation(), false).unwrap(), expected);
    assert_eq!(
        t.render(&conversation(), true).unwrap(),
        format!("{expected}<|im_start|>assistant\n")
    );

    let mut with_system = vec![ChatMessage::system("Be brief.")];
    with_system.push(ChatMessage::user("Hi"));
    assert_eq!(
        t.render(&with_system, true).unwrap(),
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n\
         <|im_start|>assistant\n"
    );
}

#[test]
fn vocab_without_template_gives_none() {
    assert!(from_vocab("gemma3").is_none());
}

/// Gemma 3's template as published with the model (tokenizer_config.json).
const GEMMA3_TEMPLATE: &str = r#"{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '

' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '

' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '
' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>
' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model
'}}
{%- endif -%}
"#;

#[test]
fn gemma3_template() {
    let t = ChatTemplate::new(GEMMA3_TEMPLATE, "<bos>", "<eos>").unwrap();
    let messages = vec![
        ChatMessage::system("You are terse."),
        ChatMessage::user("  Capital of France? "),
        ChatMessage::assistant("Paris."),
        ChatMessage::user("Germany?"),
    ];
    // The system text joins the first user turn; contents are trimmed; assistant is "model".
    let expected = "<bos><start_of_turn>user\nYou are terse.\n\nCapital of France?<end_of_turn>\n\
                    <start_of_turn>model\nParis.<end_of_turn>\n\
                    <start_of_turn>user\nGermany?<end_of_turn>\n\
                    <start_of_turn>model\n";
    assert_eq!(t.render(&messages, true).unwrap(), expected);
}

#[test]
fn raise_exception_becomes_an_error() {
    let t = ChatTemplate::new(GEMMA3_TEMPLATE, "<bos>", "<eos>").unwrap();
    let err = t
        .render(&[ChatMessage::assistant("I speak first")], true)
        .unwrap_err();
    match err {
        ChatTemplateError::Rejected(msg) => {
            assert_eq!(
                msg,
                "Conversation roles must alternate user/assistant/user/assistant/..."
            );
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
}

#[test]
fn python_string_methods_work() {
    let t = ChatTemplate::new(
        "{% for m in messages %}{% if m.content.startswith('/') %}[cmd]{% endif %}\
         {{ m.content.strip().upper() }}|{% endfor %}{{ eos_token }}",
        "",
        "</s>",
    )
    .unwrap();
    let out = t
        .render(
            &[ChatMessage::user("/help "), ChatMessage::user("hi")],
            false,
        )
        .unwrap();
    assert_eq!(out, "[cmd]/HELP|HI|</s>");
}

#[test]
fn syntax_errors_are_reported() {
    let err = ChatTemplate::new("{% for m in messages %}", "", "").unwrap_err();
    assert!(matches!(err, ChatTemplateError::Syntax(_)), "{err}");
}

/// The end of Qwen3's template: `enable_thinking: false` pre-fills an empty reasoning block.
const QWEN3_GENERATION_PROMPT: &str = "{%- for m in messages %}<|im_start|>{{ m.role }}\n\
    {{ m.content }}<|im_end|>\n{% endfor %}\
    {%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}\
    {%- if enable_thinking is defined and enable_thinking is false %}\
    {{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}\
    {%- if reasoning_effort is defined %}[{{ reasoning_effort }}]{%- endif %}";

#[test]
fn extra_variables_reach_the_template_as_chat_template_kwargs_do() {
    let t = ChatTemplate::new(QWEN3_GENERATION_PROMPT, "", "").unwrap();
    let messages = [ChatMessage::user("Hi")];
    let plain = t.render(&messages, true).unwrap();
    assert_eq!(
        plain,
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
    let mut vars = serde_json::Map::new();
    vars.insert("enable_thinking".into(), serde_json::json!(false));
    vars.insert("reasoning_effort".into(), serde_json::json!("low"));
    let off = t.render_with_vars(&messages, None, &vars, true).unwrap();
    assert_eq!(off, format!("{plain}<think>\n\n</think>\n\n[low]"));
    // The server's own variables cannot be replaced by a var.
    vars.insert("messages".into(), serde_json::json!([]));
    vars.insert("add_generation_prompt".into(), serde_json::json!(false));
    let fixed = t.render_with_vars(&messages, None, &vars, true).unwrap();
    assert_eq!(fixed, off);
}
