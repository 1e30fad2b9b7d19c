//! Chat formats built into rinfer, for models whose file carries no usable template: chosen by
//! name (`--chat-template gemma`) or by the control tokens the model's vocabulary has.

/// A built-in chat format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltinFormat {
    /// Its name, as `--chat-template` takes it.
    pub name: &'static str,
    /// The Jinja source.
    pub source: &'static str,
    /// A token whose presence in a vocabulary shows the model was trained on this format;
    /// `None` for a format only chosen by name.
    pub marker: Option<&'static str>,
}

/// Every built-in format. A model without a template gets the first whose marker token its
/// vocabulary has.
pub const FORMATS: &[BuiltinFormat] = &[
    BuiltinFormat {
        // Gemma 4's turns: `<|turn>role` … `<turn|>`, with a system turn of its own.
        name: "gemma4",
        source: include_str!("builtin/gemma4.jinja"),
        marker: Some("<|turn>"),
    },
    BuiltinFormat {
        // Gemma's turns, as in Gemma 3's own template.
        name: "gemma",
        source: include_str!("builtin/gemma.jinja"),
        marker: Some("<start_of_turn>"),
    },
    BuiltinFormat {
        // Llama 3's headers.
        name: "llama3",
        source: include_str!("builtin/llama3.jinja"),
        marker: Some("<|start_header_id|>"),
    },
    BuiltinFormat {
        // ChatML (Qwen and many fine-tunes).
        name: "chatml",
        source: include_str!("builtin/chatml.jinja"),
        marker: Some("<|im_start|>"),
    },
    BuiltinFormat {
        // Phi-3's role tags.
        name: "phi3",
        source: include_str!("builtin/phi3.jinja"),
        marker: Some("<|assistant|>"),
    },
    BuiltinFormat {
        // Llama 2's `[INST]` (plain text, so no marker token).
        name: "llama2",
        source: include_str!("builtin/llama2.jinja"),
        marker: None,
    },
];

/// The format called `name`.
pub fn by_name(name: &str) -> Option<&'static BuiltinFormat> {
    FORMATS.iter().find(|f| f.name == name)
}

/// The format of a vocabulary: the first whose marker token `has_token` finds.
pub fn for_vocabulary(has_token: impl Fn(&str) -> bool) -> Option<&'static BuiltinFormat> {
    FORMATS.iter().find(|f| f.marker.is_some_and(&has_token))
}

/// The names of every format, for messages.
pub fn names() -> Vec<&'static str> {
    FORMATS.iter().map(|f| f.name).collect()
}
