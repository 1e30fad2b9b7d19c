//! A tool call as every format reads it back and every API writes it out, and an answer read
//! as text and calls.

/// One call the model made.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The function.
    pub name: String,
    /// Its arguments, as JSON text (as OpenAI returns them).
    pub arguments: String,
}

/// What an answer says: text and calls.
#[derive(Debug, Default, PartialEq)]
pub struct ParsedAnswer {
    /// Text outside the calls (trimmed; empty when there is none).
    pub content: String,
    /// The calls, in order.
    pub calls: Vec<ToolCall>,
}
