//! The JSON OpenAI clients expect back: whole responses, streamed chunks, usage.

use std::time::{SystemTime, UNIX_EPOCH};

use rinfer_model::FinishReason;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::request::Endpoint;
use crate::scheduler::job::{TokenCounts, TokenLogprob};

/// What every response and chunk of one request repeats.
pub struct ResponseMeta {
    /// `cmpl-…` or `chatcmpl-…`.
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    /// The model id.
    pub model: String,
    /// Which endpoint answers.
    pub endpoint: Endpoint,
}

impl ResponseMeta {
    /// A fresh id for a request to `endpoint`.
    pub fn new(endpoint: Endpoint, model: &str) -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let prefix = match endpoint {
            Endpoint::Completions => "cmpl",
            Endpoint::Chat => "chatcmpl",
        };
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Self {
            id: format!("{prefix}-{created:x}{n:08x}"),
            created,
            model: model.to_string(),
            endpoint,
        }
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.endpoint, chunk) {
            (Endpoint::Completions, _) => "text_completion",
            (Endpoint::Chat, false) => "chat.completion",
            (Endpoint::Chat, true) => "chat.completion.chunk",
        }
    }

    fn envelope(&self, chunk: bool, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": self.object(chunk),
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }
}

/// Token counts of one request.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt: usize,
    /// Of those, tokens the prefix cache reused instead of computing them.
    pub cached: usize,
    /// Generated tokens.
    pub completion: usize,
}

impl Usage {
    /// Counts one finished choice: the prompt and its cached tokens as the first choice saw
    /// them (the prompt is sent once), the generated tokens of every choice.
    pub fn add_choice(&mut self, index: usize, counts: TokenCounts) {
        self.prompt = counts.prompt;
        if index == 0 {
            self.cached = counts.cached;
        }
        self.completion += counts.completion;
    }

    fn json(self) -> Value {
        json!({
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.prompt + self.completion,
            "prompt_tokens_details": { "cached_tokens": self.cached },
        })
    }
}

/// OpenAI's name for a finish reason.
pub fn finish_name(finish: FinishReason) -> &'static str {
    finish.api_name()
}

/// Log-probabilities in the endpoint's shape. `offset` is the byte offset of the first token
/// in the generated text (completions' `text_offset`) and is advanced past them.
pub fn logprobs_json(endpoint: Endpoint, entries: &[TokenLogprob], offset: &mut usize) -> Value {
    // JSON has no -inf; OpenAI reports impossible tokens at -9999.
    let lp = |l: f32| {
        if l.is_finite() {
            l.max(-9999.0)
        } else {
            -9999.0
        }
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match endpoint {
        Endpoint::Chat => {
            let content: Vec<Value> = entries
                .iter()
                .map(|e| {
                    json!({
                        "token": text(&e.bytes),
                        "logprob": lp(e.logprob),
                        "bytes": e.bytes,
                        "top_logprobs": e.top.iter().map(|(b, l)| json!({
                            "token": text(b),
                            "logprob": lp(*l),
                            "bytes": b,
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect();
            json!({ "content": content })
        }
        Endpoint::Completions => {
            let mut offsets = Vec::with_capacity(entries.len());
            for e in entries {
                offsets.push(*offset);
                *offset += e.bytes.len();
            }
            json!({
                "tokens": entries.iter().map(|e| text(&e.bytes)).collect::<Vec<_>>(),
                "token_logprobs": entries.iter().map(|e| lp(e.logprob)).collect::<Vec<_>>(),
                "top_logprobs": entries.iter().map(|e| {
                    e.top.iter().map(|(b, l)| (text(b), json!(lp(*l)))).collect::<serde_json::Map<_, _>>()
                }).collect::<Vec<_>>(),
                "text_offset": offsets,
            })
        }
    }
}

/// One choice of a whole response.
pub struct Choice<'t> {
    /// Its text.
    pub text: &'t str,
    /// Why it ended, as the API names it.
    pub finish: &'static str,
    /// Its log-probabilities, when asked for, as JSON text
    /// ([`crate::logprob_json::LogprobText`]).
    pub logprobs: Option<Box<RawValue>>,
    /// Chat: the message, when it is more than the text (reasoning, tool calls).
    pub message: Option<Value>,
}

/// A whole response, serialized as it is written: its log-probabilities are text already.
#[derive(Serialize)]
struct Full<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: Vec<FullChoice<'a>>,
    usage: Value,
}

#[derive(Serialize)]
struct FullChoice<'a> {
    index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<Value>,
    logprobs: Option<Box<RawValue>>,
    finish_reason: &'static str,
}

/// A whole (non-streamed) response, as JSON text.
pub fn full(meta: &ResponseMeta, choices: Vec<Choice<'_>>, usage: Usage) -> String {
    let choices = choices
        .into_iter()
        .enumerate()
        .map(|(index, choice)| {
            let (text, message) =
                match meta.endpoint {
                    Endpoint::Completions => (Some(choice.text), None),
                    Endpoint::Chat => (
                        None,
                        Some(choice.message.unwrap_or_else(
                            || json!({ "role": "assistant", "content": choice.text }),
                        )),
                    ),
                };
            FullChoice {
                index,
                text,
                message,
                logprobs: choice.logprobs,
                finish_reason: choice.finish,
            }
        })
        .collect();
    let body = Full {
        id: &meta.id,
        object: meta.object(false),
        created: meta.created,
        model: &meta.model,
        choices,
        usage: usage.json(),
    };
    serde_json::to_string(&body).expect("a response serializes")
}

/// One streamed chunk of choice `index`. `role` opens a chat choice (its first chunk names the
/// assistant).
pub fn chunk(
    meta: &ResponseMeta,
    index: usize,
    text: Option<&str>,
    role: bool,
    logprobs: Option<Value>,
    finish: Option<FinishReason>,
) -> Value {
    let finish = finish.map(finish_name);
    let choice = match meta.endpoint {
        Endpoint::Completions => json!({
            "index": index,
            "text": text.unwrap_or(""),
            "logprobs": logprobs,
            "finish_reason": finish,
        }),
        Endpoint::Chat => {
            let mut delta = serde_json::Map::new();
            if role {
                delta.insert("role".into(), json!("assistant"));
            }
            if let Some(text) = text {
                delta.insert("content".into(), json!(text));
            }
            json!({
                "index": index,
                "delta": delta,
                "logprobs": logprobs,
                "finish_reason": finish,
            })
        }
    };
    meta.envelope(true, json!([choice]))
}

/// One streamed chat chunk with `delta` as given (reasoning, tool calls).
pub fn chat_chunk(meta: &ResponseMeta, index: usize, delta: Value, finish: Option<&str>) -> Value {
    meta.envelope(
        true,
        json!([{"index": index, "delta": delta, "logprobs": null, "finish_reason": finish}]),
    )
}

/// The last chunk of a stream with `include_usage`: no choices, only the counts.
pub fn usage_chunk(meta: &ResponseMeta, usage: Usage) -> Value {
    let mut body = meta.envelope(true, json!([]));
    body["usage"] = usage.json();
    body
}
