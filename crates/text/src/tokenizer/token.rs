//! One vocabulary entry and its type: what the vocabulary, the special-token matcher and the
//! token index share.

/// What a token is, from `tokenizer.ggml.token_type` (llama.cpp's `llama_token_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenType {
    /// An ordinary piece of text.
    Normal,
    /// The unknown token (`<unk>`); matched in text only with `parse_special`.
    Unknown,
    /// A control token such as `<bos>` or `<|im_end|>`; matched in text only with
    /// `parse_special`, and printed as nothing by [`super::Tokenizer::decode`].
    Control,
    /// A token added by the model's authors; always matched whole in text, before splitting.
    UserDefined,
    /// A reserved, unused slot.
    Unused,
    /// A byte-fallback token `<0xAB>`.
    Byte,
    /// A type value llama.cpp does not know.
    Undefined,
}

impl TokenType {
    pub(crate) fn from_gguf(v: i128) -> Self {
        match v {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Undefined,
        }
    }
}

/// One vocabulary entry.
#[derive(Clone, Debug)]
pub(crate) struct TokenData {
    pub text: String,
    pub score: f32,
    pub ty: TokenType,
    /// Strip whitespace to the left of this token when it is matched in text.
    pub lstrip: bool,
    /// Strip whitespace to the right of this token when it is matched in text.
    pub rstrip: bool,
}
