//! A response's output items, and the events that stream them.
//!
//! One builder serves whole and streamed answers: it takes the answer's pieces as
//! [`Delta`]s (from [`crate::tools::ChatOutput::read`] for a whole answer, from the stream
//! shaper as they come), opens an item when the kind of piece changes (`reasoning`, `message`,
//! one `function_call` per call), and writes the events of each step. The final response is
//! made of the items it built, so the streamed and whole answers hold the same items.

use rinfer_model::FinishReason;
use serde_json::{Map, Value, json};

use crate::response_store::random_id;
use crate::scheduler::job::TokenCounts;
use crate::tools::{Delta, ToolCall};

/// What a response object repeats besides its output: its id, creation time, model and the
/// request's settings echoed back.
pub struct ResponseHead {
    /// `resp_…`.
    pub id: String,
    /// Unix seconds.
    pub created_at: u64,
    /// Settings echoed in the object (model, instructions, tools, …).
    pub echo: Map<String, Value>,
}

impl ResponseHead {
    /// The response object with `status`, `output` and `usage`.
    pub fn object(
        &self,
        status: &str,
        output: Vec<Value>,
        counts: TokenCounts,
        finish: Option<FinishReason>,
    ) -> Value {
        let mut object = json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": null,
            "incomplete_details": match finish {
                Some(FinishReason::Length) => json!({"reason": "max_output_tokens"}),
                _ => Value::Null,
            },
            "output": output,
            "usage": {
                "input_tokens": counts.prompt,
                "input_tokens_details": {"cached_tokens": counts.cached},
                "output_tokens": counts.completion,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": counts.prompt + counts.completion,
            },
        });
        if let Some(map) = object.as_object_mut() {
            for (k, v) in &self.echo {
                map.insert(k.clone(), v.clone());
            }
        }
        object
    }
}

/// The status of an answer that ended for `finish`.
pub fn status(finish: FinishReason) -> &'static str {
    match finish {
        FinishReason::Length => "incomplete",
        _ => "completed",
    }
}

/// Builds the output items and their events.
#[derive(Default)]
pub struct OutputBuilder {
    /// Items so far (the last may be open).
    items: Vec<Value>,
    /// The last item is open for more text.
    open: bool,
    /// The next event's `sequence_number`.
    sequence: u64,
}

impl OutputBuilder {
    /// An event of `kind` with `fields`, as server-sent event text.
    pub fn event(&mut self, kind: &str, mut fields: Value) -> String {
        fields["type"] = json!(kind);
        fields["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        format!("event: {kind}\ndata: {fields}\n\n")
    }

    /// The events of `deltas`.
    pub fn push(&mut self, deltas: Vec<Delta>) -> String {
        let mut out = String::new();
        for delta in deltas {
            match delta {
                Delta::Reasoning(text) => self.text(&mut out, "reasoning", &text),
                Delta::Content(text) => self.text(&mut out, "message", &text),
                Delta::ToolCalls(calls) => {
                    self.close(&mut out);
                    for call in calls {
                        self.call(&mut out, &call);
                    }
                }
            }
        }
        out
    }

    /// Closes the open item; the items.
    pub fn finish(&mut self, out: &mut String) -> Vec<Value> {
        self.close(out);
        self.items.clone()
    }

    fn text(&mut self, out: &mut String, kind: &str, text: &str) {
        if text.is_empty() {
            return;
        }
        let same = self.open && self.items.last().is_some_and(|i| i["type"] == kind);
        if !same {
            self.close(out);
            let index = self.items.len();
            let (item, part) = match kind {
                "reasoning" => (
                    json!({"type": "reasoning", "id": random_id("rs"), "summary": [],
                           "content": [], "status": "in_progress"}),
                    json!({"type": "reasoning_text", "text": ""}),
                ),
                _ => (
                    json!({"type": "message", "id": random_id("msg"), "status": "in_progress",
                           "role": "assistant", "content": []}),
                    json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []}),
                ),
            };
            let id = item["id"].clone();
            *out += &self.event(
                "response.output_item.added",
                json!({"output_index": index, "item": item}),
            );
            *out += &self.event(
                "response.content_part.added",
                json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
            );
            let mut item = item;
            item["content"] = json!([part]);
            self.items.push(item);
            self.open = true;
        }
        let index = self.items.len() - 1;
        let item = &mut self.items[index];
        let id = item["id"].clone();
        let so_far = item["content"][0]["text"].as_str().unwrap_or_default();
        item["content"][0]["text"] = json!(format!("{so_far}{text}"));
        let kind = match kind {
            "reasoning" => "response.reasoning_text.delta",
            _ => "response.output_text.delta",
        };
        *out += &self.event(
            kind,
            json!({"item_id": id, "output_index": index, "content_index": 0, "delta": text,
                   "logprobs": []}),
        );
    }

    fn call(&mut self, out: &mut String, call: &ToolCall) {
        let index = self.items.len();
        let mut item = json!({
            "type": "function_call", "id": random_id("fc"), "call_id": random_id("call"),
            "name": call.name, "arguments": "", "status": "in_progress",
        });
        let id = item["id"].clone();
        *out += &self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
        );
        *out += &self.event(
            "response.function_call_arguments.delta",
            json!({"item_id": id, "output_index": index, "delta": call.arguments}),
        );
        *out += &self.event(
            "response.function_call_arguments.done",
            json!({"item_id": id, "output_index": index, "arguments": call.arguments,
                   "name": call.name}),
        );
        item["arguments"] = json!(call.arguments);
        item["status"] = json!("completed");
        *out += &self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
        self.items.push(item);
    }

    fn close(&mut self, out: &mut String) {
        if !std::mem::take(&mut self.open) {
            return;
        }
        let index = self.items.len() - 1;
        self.items[index]["status"] = json!("completed");
        let item = self.items[index].clone();
        let part = item["content"][0].clone();
        let text = part["text"].clone();
        let (done, item_id) = match item["type"].as_str() {
            Some("reasoning") => ("response.reasoning_text.done", item["id"].clone()),
            _ => ("response.output_text.done", item["id"].clone()),
        };
        *out += &self.event(
            done,
            json!({"item_id": item_id, "output_index": index, "content_index": 0, "text": text,
                   "logprobs": []}),
        );
        *out += &self.event(
            "response.content_part.done",
            json!({"item_id": item_id, "output_index": index, "content_index": 0, "part": part}),
        );
        *out += &self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_become_items_with_their_events() {
        let mut builder = OutputBuilder::default();
        let mut events = builder.push(vec![
            Delta::Reasoning("Think".into()),
            Delta::Reasoning("ing.".into()),
            Delta::Content("Hel".into()),
        ]);
        events += &builder.push(vec![
            Delta::Content("lo.".into()),
            Delta::ToolCalls(vec![ToolCall {
                name: "f".into(),
                arguments: "{}".into(),
            }]),
        ]);
        let items = builder.finish(&mut events);
        let kinds: Vec<&str> = items.iter().map(|i| i["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["reasoning", "message", "function_call"]);
        assert_eq!(items[0]["content"][0]["text"], "Thinking.");
        assert_eq!(items[1]["content"][0]["text"], "Hello.");
        assert_eq!(items[2]["arguments"], "{}");
        assert!(items.iter().all(|i| i["status"] == "completed"));
        let names: Vec<&str> = events
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        assert_eq!(
            names,
            [
                "response.output_item.added",
                "response.content_part.added",
                "response.reasoning_text.delta",
                "response.reasoning_text.delta",
                "response.reasoning_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
            ]
        );
        // Sequence numbers count up from 0.
        let numbers: Vec<u64> = events
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| {
                serde_json::from_str::<Value>(d).unwrap()["sequence_number"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>());
    }
}
