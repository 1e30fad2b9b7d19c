//! Answers in the Messages API's shape: a whole `message`, or its stream of events
//! (`message_start`, `ping`, per block `content_block_start` / `content_block_delta` /
//! `content_block_stop`, then `message_delta` and `message_stop`).
//!
//! Both read the answer through the same [`ChatOutput`] as chat completions: reasoning
//! becomes a `thinking` block, text a `text` block, each call a `tool_use` block, so a
//! streamed answer holds the same blocks as the whole one.

use rinfer_model::FinishReason;
use serde_json::{Value, json};

use crate::scheduler::job::TokenCounts;
use crate::tools::{ChatOutput, Delta, StreamShaper, ToolCall};

/// What every event of one answer repeats.
pub struct MessageMeta {
    /// `msg_…`.
    pub id: String,
    /// The model id.
    pub model: String,
    /// The request's stop sequences (one is reported as `stop_sequence` when it ended the
    /// answer; with several, the engine does not say which, and `stop_sequence` is null).
    pub stops: Vec<String>,
}

impl MessageMeta {
    /// A fresh id.
    pub fn new(model: &str, stops: Vec<String>) -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Self {
            id: format!("msg_{nanos:016x}{n:08x}"),
            model: model.to_string(),
            stops,
        }
    }

    /// `stop_reason` and `stop_sequence` of an answer that ended for `finish`.
    fn stop(&self, finish: FinishReason, called: bool) -> (&'static str, Value) {
        match finish {
            FinishReason::Length => ("max_tokens", Value::Null),
            _ if called => ("tool_use", Value::Null),
            FinishReason::StopString => (
                "stop_sequence",
                match self.stops.as_slice() {
                    [one] => json!(one),
                    _ => Value::Null,
                },
            ),
            _ => ("end_turn", Value::Null),
        }
    }
}

/// Token counts as the Messages API reports them.
#[derive(Clone, Copy, Debug, Default)]
pub struct MessageUsage {
    /// Prompt tokens computed (those the prefix cache reused are not among them).
    pub input: usize,
    /// Prompt tokens the prefix cache reused.
    pub cached: usize,
    /// Generated tokens.
    pub output: usize,
}

impl MessageUsage {
    /// From the engine's counts.
    pub fn new(counts: TokenCounts) -> Self {
        Self {
            input: counts.prompt.saturating_sub(counts.cached),
            cached: counts.cached,
            output: counts.completion,
        }
    }

    fn json(self) -> Value {
        json!({
            "input_tokens": self.input,
            "output_tokens": self.output,
            "cache_read_input_tokens": self.cached,
            "cache_creation_input_tokens": 0,
        })
    }
}

/// A `tool_use` block's id.
fn tool_use_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("toolu_{:016x}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A call's input: its arguments as JSON (text that is not an object is kept as a string).
fn input_of(call: &ToolCall) -> Value {
    serde_json::from_str::<Value>(&call.arguments)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({"arguments": call.arguments}))
}

fn tool_use_block(call: &ToolCall) -> Value {
    json!({"type": "tool_use", "id": tool_use_id(), "name": call.name, "input": input_of(call)})
}

/// The whole `message` of an answer `text` that ended for `finish`.
pub fn message(
    meta: &MessageMeta,
    output: &ChatOutput,
    text: &str,
    finish: FinishReason,
    usage: MessageUsage,
) -> Value {
    let (reasoning, content, calls) = output.read(text);
    let mut blocks = Vec::new();
    if let Some(reasoning) = reasoning {
        blocks.push(json!({"type": "thinking", "thinking": reasoning, "signature": ""}));
    }
    if !content.is_empty() {
        blocks.push(json!({"type": "text", "text": content}));
    }
    blocks.extend(calls.iter().map(tool_use_block));
    let (stop_reason, stop_sequence) = meta.stop(finish, !calls.is_empty());
    json!({
        "id": meta.id,
        "type": "message",
        "role": "assistant",
        "model": meta.model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": usage.json(),
    })
}

/// One server-sent event.
pub fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The kind of the block being streamed.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Block {
    Thinking,
    Text,
}

/// The events of one streamed answer.
pub struct MessageStream {
    shaper: StreamShaper,
    /// The index of the next block.
    next: usize,
    /// The block open now.
    open: Option<Block>,
}

impl MessageStream {
    /// The stream of an answer read as `output`.
    pub fn new(output: &ChatOutput) -> Self {
        Self {
            shaper: output.stream(),
            next: 0,
            open: None,
        }
    }

    /// `message_start` (with the prompt's `input_tokens`) and a `ping`.
    pub fn start(meta: &MessageMeta, prompt_tokens: usize) -> String {
        let message = json!({
            "id": meta.id,
            "type": "message",
            "role": "assistant",
            "model": meta.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": MessageUsage::new(TokenCounts {
                prompt: prompt_tokens,
                ..TokenCounts::default()
            })
            .json(),
        });
        let mut out = event(
            "message_start",
            &json!({"type": "message_start", "message": message}),
        );
        out.push_str(&event("ping", &json!({"type": "ping"})));
        out
    }

    /// The events `text` (the answer's next piece) releases.
    pub fn push(&mut self, text: &str) -> String {
        let deltas = self.shaper.push(text);
        self.deltas(deltas)
    }

    /// The last events: the held text and calls, the block ends, `message_delta` and
    /// `message_stop`.
    pub fn finish(
        &mut self,
        meta: &MessageMeta,
        finish: FinishReason,
        usage: MessageUsage,
    ) -> String {
        let (deltas, called) = self.shaper.finish();
        let mut out = self.deltas(deltas);
        self.close(&mut out);
        let (stop_reason, stop_sequence) = meta.stop(finish, called);
        out.push_str(&event(
            "message_delta",
            &json!({
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                "usage": usage.json(),
            }),
        ));
        out.push_str(&event("message_stop", &json!({"type": "message_stop"})));
        out
    }

    fn close(&mut self, out: &mut String) {
        if self.open.take().is_some() {
            out.push_str(&event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": self.next - 1}),
            ));
        }
    }

    /// Opens a block of `kind` (closing another) unless it is open.
    fn ensure(&mut self, kind: Block, out: &mut String) {
        if self.open == Some(kind) {
            return;
        }
        self.close(out);
        let block = match kind {
            Block::Thinking => json!({"type": "thinking", "thinking": "", "signature": ""}),
            Block::Text => json!({"type": "text", "text": ""}),
        };
        out.push_str(&event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": self.next, "content_block": block}),
        ));
        self.next += 1;
        self.open = Some(kind);
    }

    fn deltas(&mut self, deltas: Vec<Delta>) -> String {
        let mut out = String::new();
        for delta in deltas {
            let (kind, delta) = match delta {
                Delta::Reasoning(text) => (
                    Block::Thinking,
                    json!({"type": "thinking_delta", "thinking": text}),
                ),
                Delta::Content(text) => (Block::Text, json!({"type": "text_delta", "text": text})),
                Delta::ToolCalls(calls) => {
                    self.close(&mut out);
                    for call in calls {
                        let index = self.next;
                        self.next += 1;
                        let mut block = tool_use_block(&call);
                        let input = std::mem::replace(&mut block["input"], json!({}));
                        out.push_str(&event(
                            "content_block_start",
                            &json!({"type": "content_block_start", "index": index, "content_block": block}),
                        ));
                        out.push_str(&event(
                            "content_block_delta",
                            &json!({"type": "content_block_delta", "index": index,
                                    "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
                        ));
                        out.push_str(&event(
                            "content_block_stop",
                            &json!({"type": "content_block_stop", "index": index}),
                        ));
                    }
                    continue;
                }
            };
            self.ensure(kind, &mut out);
            out.push_str(&event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": self.next - 1, "delta": delta}),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolFormat;
    use std::sync::Arc;

    fn output() -> ChatOutput {
        ChatOutput {
            tools: Some(ToolFormat::Hermes),
            declared: Arc::from(["get_weather".to_string()]),
            markup: Default::default(),
        }
    }

    /// `(event name, data)` of a stream's text.
    fn parse_events(text: &str) -> Vec<(String, Value)> {
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let (name, data) = e.split_once('\n').unwrap();
                let name = name.strip_prefix("event: ").unwrap().to_string();
                let data = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
                (name, data)
            })
            .collect()
    }

    #[test]
    fn streamed_blocks_follow_the_event_sequence_and_match_the_whole_message() {
        let text = "<think>Need weather.</think>Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
        let meta = MessageMeta::new("m", Vec::new());
        let usage = MessageUsage::new(TokenCounts {
            prompt: 10,
            cached: 4,
            completion: 20,
        });
        let whole = message(&meta, &output(), text, FinishReason::EndOfGeneration, usage);
        assert_eq!(whole["stop_reason"], "tool_use");
        assert_eq!(whole["usage"]["input_tokens"], 6);
        assert_eq!(whole["usage"]["cache_read_input_tokens"], 4);
        let kinds: Vec<&str> = whole["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["thinking", "text", "tool_use"]);
        assert_eq!(whole["content"][2]["input"], json!({"city": "Paris"}));

        let mut stream = MessageStream::new(&output());
        let mut all = MessageStream::start(&meta, 10);
        for piece in text.chars().collect::<Vec<_>>().chunks(3) {
            all.push_str(&stream.push(&piece.iter().collect::<String>()));
        }
        all.push_str(&stream.finish(&meta, FinishReason::EndOfGeneration, usage));
        let events = parse_events(&all);
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[..2], ["message_start", "ping"]);
        assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
        // Rebuild the blocks from the events, as the SDK does.
        let mut blocks: Vec<Value> = Vec::new();
        let mut open = None;
        for (name, data) in &events {
            assert_eq!(data["type"], name.as_str());
            match name.as_str() {
                "content_block_start" => {
                    assert_eq!(open, None, "one block open at a time");
                    assert_eq!(data["index"], blocks.len());
                    open = Some(blocks.len());
                    blocks.push(data["content_block"].clone());
                }
                "content_block_delta" => {
                    let i = open.expect("a delta inside a block");
                    assert_eq!(data["index"], i);
                    let d = &data["delta"];
                    match d["type"].as_str().unwrap() {
                        "text_delta" => {
                            let t = blocks[i]["text"].as_str().unwrap().to_string();
                            blocks[i]["text"] = json!(t + d["text"].as_str().unwrap());
                        }
                        "thinking_delta" => {
                            let t = blocks[i]["thinking"].as_str().unwrap().to_string();
                            blocks[i]["thinking"] = json!(t + d["thinking"].as_str().unwrap());
                        }
                        _ => {
                            blocks[i]["input"] =
                                serde_json::from_str(d["partial_json"].as_str().unwrap()).unwrap();
                        }
                    }
                }
                "content_block_stop" => {
                    assert_eq!(open.take(), data["index"].as_u64().map(|i| i as usize));
                }
                _ => {}
            }
        }
        assert_eq!(blocks.len(), 3);
        assert_eq!(blocks[0]["thinking"], whole["content"][0]["thinking"]);
        assert_eq!(blocks[1]["text"], whole["content"][1]["text"]);
        assert_eq!(blocks[2]["name"], "get_weather");
        assert_eq!(blocks[2]["input"], whole["content"][2]["input"]);
        let (_, delta) = &events[events.len() - 2];
        assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    }

    #[test]
    fn stop_reasons_follow_the_finish() {
        let one = MessageMeta::new("m", vec!["END".into()]);
        let plain = ChatOutput {
            tools: None,
            declared: Arc::from([]),
            markup: Default::default(),
        };
        let usage = MessageUsage::default();
        let m = message(&one, &plain, "Hi", FinishReason::StopString, usage);
        assert_eq!(
            (m["stop_reason"].as_str(), m["stop_sequence"].as_str()),
            (Some("stop_sequence"), Some("END"))
        );
        let m = message(&one, &plain, "Hi", FinishReason::Length, usage);
        assert_eq!(m["stop_reason"], "max_tokens");
        let m = message(&one, &plain, "Hi", FinishReason::EndOfGeneration, usage);
        assert_eq!(m["stop_reason"], "end_turn");
        assert_eq!(m["content"], json!([{"type": "text", "text": "Hi"}]));
    }
}
