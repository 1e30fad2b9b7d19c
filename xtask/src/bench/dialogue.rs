//! A multi-turn conversation as the multi-turn chat bench sends it: the system prompt and each
//! answered turn, resent whole with every new question, as chat clients do.
//!
//! A model whose file carries a chat template gets OpenAI chat messages
//! (`/v1/chat/completions`), which each server renders with that template. A model without one
//! (the synthetic models) gets one plain-text transcript on `/v1/completions`, the same bytes
//! to both servers, so that neither falls back on a template of its own choosing:
//!
//! ```text
//! SYSTEM PROMPT
//!
//! User: first question
//! Assistant: first reply
//!
//! User: second question
//! Assistant:
//! ```
//!
//! Each reply is appended exactly as the server streamed it (after `Assistant:`).

use serde_json::{Value, json};

/// How the conversation goes to a server.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Format {
    /// Chat messages on `/v1/chat/completions`, rendered with the model's own template.
    Chat,
    /// One plain-text transcript on `/v1/completions`, for a model without a template.
    Transcript,
}

impl Format {
    /// The endpoint requests of this format go to.
    pub fn path(self) -> &'static str {
        match self {
            Self::Chat => "/v1/chat/completions",
            Self::Transcript => "/v1/completions",
        }
    }

    /// The generated text a streamed chunk carries, if any.
    pub fn text_of(self, chunk: &Value) -> Option<&str> {
        let choice = &chunk["choices"][0];
        match self {
            Self::Chat => choice["delta"]["content"].as_str(),
            Self::Transcript => choice["text"].as_str(),
        }
    }

    /// The words this format is described by in the bench's output.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Chat => "chat messages rendered with the model's template",
            Self::Transcript => {
                "a plain-text transcript on /v1/completions (the model has no chat template)"
            }
        }
    }
}

/// A conversation so far.
pub struct Dialogue {
    format: Format,
    system: String,
    /// Each answered turn: the question and the reply.
    turns: Vec<(String, String)>,
}

impl Dialogue {
    /// A conversation that opens with `system` (none when empty).
    pub fn new(format: Format, system: String) -> Self {
        Self {
            format,
            system,
            turns: Vec::new(),
        }
    }

    /// The request fields (`messages` or `prompt`) that ask for the answer to `question` after
    /// the turns so far.
    pub fn ask(&self, question: &str) -> (&'static str, Value) {
        match self.format {
            Format::Chat => {
                let mut messages = Vec::with_capacity(2 + 2 * self.turns.len());
                if !self.system.is_empty() {
                    messages.push(json!({"role": "system", "content": self.system}));
                }
                for (asked, answered) in &self.turns {
                    messages.push(json!({"role": "user", "content": asked}));
                    messages.push(json!({"role": "assistant", "content": answered}));
                }
                messages.push(json!({"role": "user", "content": question}));
                ("messages", Value::Array(messages))
            }
            Format::Transcript => {
                let mut prompt = String::new();
                if !self.system.is_empty() {
                    prompt.push_str(&self.system);
                    prompt.push_str("\n\n");
                }
                for (asked, answered) in &self.turns {
                    prompt.push_str(&format!("User: {asked}\nAssistant:{answered}\n\n"));
                }
                prompt.push_str(&format!("User: {question}\nAssistant:"));
                ("prompt", Value::String(prompt))
            }
        }
    }

    /// Records the reply to `question`.
    pub fn answered(&mut self, question: &str, reply: String) {
        self.turns.push((question.to_string(), reply));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_turns(format: Format) -> Value {
        let mut dialogue = Dialogue::new(format, "Be brief.".into());
        dialogue.answered("Hi?", " Hello.".into());
        dialogue.ask("Bye?").1
    }

    #[test]
    fn chat_resends_every_message_in_order() {
        let messages = two_turns(Format::Chat);
        let roles: Vec<&str> = messages
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert_eq!(messages[2]["content"], " Hello.");
    }

    #[test]
    fn a_transcript_extends_the_previous_prompt_with_the_reply_as_streamed() {
        let mut dialogue = Dialogue::new(Format::Transcript, "Be brief.".into());
        let first = dialogue.ask("Hi?").1;
        assert_eq!(first, "Be brief.\n\nUser: Hi?\nAssistant:");
        dialogue.answered("Hi?", " Hello.".into());
        let second = dialogue.ask("Bye?").1;
        let second = second.as_str().unwrap();
        assert!(second.starts_with(&format!("{} Hello.", first.as_str().unwrap())));
        assert_eq!(two_turns(Format::Transcript), second);
    }

    #[test]
    fn each_format_reads_its_own_chunks() {
        let chat = json!({"choices": [{"delta": {"content": "a"}}]});
        let completion = json!({"choices": [{"text": "b"}]});
        assert_eq!(Format::Chat.text_of(&chat), Some("a"));
        assert_eq!(Format::Transcript.text_of(&completion), Some("b"));
        assert_eq!(Format::Chat.text_of(&completion), None);
    }
}
