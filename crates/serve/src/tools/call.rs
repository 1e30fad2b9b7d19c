//! A tool call as every format reads it back and every API writes it out.

/// One call the model made.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The function.
    pub name: String,
    /// Its arguments, as JSON text (as OpenAI returns them).
    pub arguments: String,
}
