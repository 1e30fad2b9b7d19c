//! A chat answer shaped for the client: text inside a leading `<think>…</think>` becomes
//! `reasoning_content` (all text up to `</think>` when the prompt itself opened the block, as
//! DeepSeek R1's and Qwen3's thinking templates do), and, when tools are offered, calls become
//! `tool_calls` (whole answers and streams alike). A gpt-oss answer is read by its harmony
//! channels instead ([`super::harmony`]). A whole answer is read as the same answer streamed
//! would be, so both give the same text.

use std::sync::Arc;

use serde_json::{Value, json};

use super::ToolFormat;
use super::call::ToolCall;
use super::harmony::{self, Event};
use super::parse::{end_at_first_repeat, parse_calls};

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";
const HERMES_OPEN: &str = "<tool_call>";

/// How a chat request's answer is read.
#[derive(Clone, Debug)]
pub struct ChatOutput {
    /// The tool-call format, when tools are offered.
    pub tools: Option<ToolFormat>,
    /// The functions the request declared: only calls of these are calls.
    pub declared: Arc<[String]>,
    /// How reasoning is marked.
    pub markup: Markup,
}

/// How a model marks its reasoning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Markup {
    /// `<think>…</think>` before the answer.
    #[default]
    Think,
    /// As [`Markup::Think`], the block opened by the prompt: the answer starts inside it.
    ThinkOpen,
    /// gpt-oss's harmony channels.
    Harmony,
}

/// A piece of a streamed answer.
#[derive(Debug, PartialEq)]
pub enum Delta {
    /// Answer text.
    Content(String),
    /// Reasoning text.
    Reasoning(String),
    /// Calls, each whole.
    ToolCalls(Vec<ToolCall>),
}

/// `(reasoning, answer)` of a whole text: the reasoning when it starts with `<think>`.
fn split_think(text: &str) -> (Option<&str>, &str) {
    let Some(inner) = text.trim_start().strip_prefix(THINK_OPEN) else {
        return (None, text);
    };
    match inner.find(THINK_CLOSE) {
        Some(end) => (
            Some(inner[..end].trim()),
            inner[end + THINK_CLOSE.len()..].trim_start(),
        ),
        None => (Some(inner.trim()), ""),
    }
}

/// OpenAI's `tool_calls` entries; `first` numbers the ids and indices.
pub fn calls_json(calls: &[ToolCall], first: usize, with_index: bool) -> Value {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    Value::Array(
        calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut entry = json!({
                    "id": format!("call_{:016x}", NEXT.fetch_add(1, Ordering::Relaxed)),
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                });
                if with_index {
                    entry["index"] = json!(first + i);
                }
                entry
            })
            .collect(),
    )
}

impl ChatOutput {
    /// How the answer of a request with tool plan `plan` (if any) is read, its reasoning marked
    /// by `markup`.
    pub fn new(plan: Option<&super::ToolPlan>, markup: Markup) -> Self {
        Self {
            tools: plan.map(|p| p.format),
            declared: plan
                .map(|p| p.functions.iter().map(|f| f.name.clone()).collect())
                .unwrap_or_default(),
            markup,
        }
    }

    /// As [`Self::new`], with `<think>` blocks.
    pub fn of_plan(plan: Option<&super::ToolPlan>) -> Self {
        Self::new(plan, Markup::Think)
    }

    /// The reasoning, the content and the calls of a whole answer.
    pub fn read(&self, text: &str) -> (Option<String>, String, Vec<ToolCall>) {
        if self.markup == Markup::Harmony {
            return self.read_streamed(text);
        }
        let opened;
        let text = match self.markup {
            Markup::ThinkOpen => {
                opened = format!("{THINK_OPEN}{text}");
                &opened
            }
            _ => text,
        };
        let (reasoning, answer) = split_think(text);
        let reasoning = reasoning.map(str::to_string);
        match self.tools {
            Some(format) => {
                let parsed = parse_calls(answer, format, &self.declared);
                match parsed.calls.is_empty() {
                    true => (reasoning, answer.to_string(), Vec::new()),
                    false => (reasoning, parsed.content, parsed.calls),
                }
            }
            None => (reasoning, answer.to_string(), Vec::new()),
        }
    }

    /// The assistant message of a whole answer, and whether it calls tools.
    pub fn message(&self, text: &str) -> (Value, bool) {
        let (reasoning, content, calls) = self.read(text);
        let mut message = json!({"role": "assistant", "content": content});
        let called = !calls.is_empty();
        if called {
            if content.is_empty() {
                message["content"] = Value::Null;
            }
            message["tool_calls"] = calls_json(&calls, 0, false);
        }
        if let Some(reasoning) = reasoning {
            message["reasoning_content"] = json!(reasoning);
        }
        (message, called)
    }

    /// A shaper for the same answer, streamed.
    pub fn stream(&self) -> StreamShaper {
        StreamShaper {
            tools: self.tools,
            declared: Arc::clone(&self.declared),
            think: match self.markup {
                Markup::ThinkOpen => ThinkState::Inside,
                _ => ThinkState::Undecided,
            },
            held: String::new(),
            calls: CallState::Undecided,
            call_text: String::new(),
            after_think: false,
            harmony: (self.markup == Markup::Harmony).then(HarmonyShaper::default),
        }
    }

    /// A whole answer read as its stream is.
    fn read_streamed(&self, text: &str) -> (Option<String>, String, Vec<ToolCall>) {
        let mut shaper = self.stream();
        let mut deltas = shaper.push(text);
        deltas.extend(shaper.finish().0);
        joined(deltas)
    }
}

/// A harmony answer's stream: reasoning and content as they come, calls held to the end.
#[derive(Debug, Default)]
struct HarmonyShaper {
    reader: harmony::Reader,
    calls: Vec<ToolCall>,
    /// Bodies of messages meant as calls that are none.
    not_calls: Vec<String>,
    content_seen: bool,
}

impl HarmonyShaper {
    fn take(&mut self, events: Vec<Event>, out: &mut Vec<Delta>) {
        for event in events {
            match event {
                Event::Reasoning(text) => push_nonempty(out, Delta::Reasoning(text)),
                Event::Content(text) => {
                    self.content_seen |= !text.is_empty();
                    push_nonempty(out, Delta::Content(text));
                }
                Event::Call(call) => self.calls.push(call),
                Event::NotACall(text) => self.not_calls.push(text),
            }
        }
    }

    /// The held calls, when tools are offered and every call is of a declared function; else
    /// their text, as content.
    fn finish(&mut self, tools: bool, declared: &[String], out: &mut Vec<Delta>) -> bool {
        let events = self.reader.finish();
        self.take(events, out);
        let mut calls = std::mem::take(&mut self.calls);
        let accepted = tools && calls.iter().all(|c| declared.contains(&c.name));
        let mut rest = std::mem::take(&mut self.not_calls);
        if !accepted {
            rest.splice(0..0, calls.drain(..).map(|c| c.arguments));
        }
        for text in rest {
            if self.content_seen {
                out.push(Delta::Content("\n".into()));
            }
            self.content_seen = true;
            out.push(Delta::Content(text));
        }
        end_at_first_repeat(&mut calls);
        let called = !calls.is_empty();
        push_nonempty(out, Delta::ToolCalls(calls));
        called
    }
}

#[derive(Debug, PartialEq)]
enum ThinkState {
    Undecided,
    Inside,
    Outside,
}

#[derive(Debug, PartialEq)]
enum CallState {
    /// Nothing but white space or the start of a call marker seen yet.
    Undecided,
    /// Plain text: streamed (Hermes blocks may still start later).
    Streaming,
    /// A call started: held to the end.
    Holding,
}

/// Turns streamed text into deltas, holding back what may still turn out to be a marker or a
/// call.
pub struct StreamShaper {
    tools: Option<ToolFormat>,
    declared: Arc<[String]>,
    think: ThinkState,
    /// Text not yet given to the think stage's decision.
    held: String,
    calls: CallState,
    /// Text held by the call stage.
    call_text: String,
    /// The reasoning just ended: white space before the answer is dropped.
    after_think: bool,
    /// A harmony answer's reader (the other fields are unused then).
    harmony: Option<HarmonyShaper>,
}

/// Whether `s` may still become a text starting with `marker`.
/// The reasoning (`None` when there is none), content and calls of a stream's `deltas`, joined.
pub(super) fn joined(deltas: Vec<Delta>) -> (Option<String>, String, Vec<ToolCall>) {
    let (mut reasoning, mut content, mut calls) = (None::<String>, String::new(), Vec::new());
    for delta in deltas {
        match delta {
            Delta::Reasoning(text) => reasoning.get_or_insert_default().push_str(&text),
            Delta::Content(text) => content.push_str(&text),
            Delta::ToolCalls(more) => calls.extend(more),
        }
    }
    (reasoning, content, calls)
}

fn may_start(s: &str, marker: &str) -> bool {
    marker.starts_with(s) || s.starts_with(marker)
}

/// The length of the longest end of `s` that starts `marker` (held back while streaming).
fn partial_marker_len(s: &str, marker: &str) -> usize {
    (1..marker.len().min(s.len() + 1))
        .rev()
        .find(|&n| s.is_char_boundary(s.len() - n) && marker.starts_with(&s[s.len() - n..]))
        .unwrap_or(0)
}

impl StreamShaper {
    /// The deltas `text` (the next piece of the answer) releases.
    pub fn push(&mut self, text: &str) -> Vec<Delta> {
        let mut out = Vec::new();
        if let Some(harmony) = &mut self.harmony {
            let events = harmony.reader.push(text);
            harmony.take(events, &mut out);
            return out;
        }
        self.held.push_str(text);
        loop {
            match self.think {
                ThinkState::Undecided => {
                    let start = self.held.trim_start();
                    if start.is_empty() || (THINK_OPEN.starts_with(start) && start != THINK_OPEN) {
                        return out;
                    }
                    if let Some(rest) = start.strip_prefix(THINK_OPEN) {
                        self.held = rest.to_string();
                        self.think = ThinkState::Inside;
                    } else {
                        self.think = ThinkState::Outside;
                    }
                }
                ThinkState::Inside => {
                    if let Some(end) = self.held.find(THINK_CLOSE) {
                        let reasoning = self.held[..end].to_string();
                        self.held = self.held[end + THINK_CLOSE.len()..]
                            .trim_start()
                            .to_string();
                        push_nonempty(&mut out, Delta::Reasoning(reasoning));
                        self.think = ThinkState::Outside;
                        self.after_think = true;
                    } else {
                        let keep = partial_marker_len(&self.held, THINK_CLOSE);
                        let cut = self.held.len() - keep;
                        let reasoning: String = self.held.drain(..cut).collect();
                        push_nonempty(&mut out, Delta::Reasoning(reasoning));
                        return out;
                    }
                }
                ThinkState::Outside => {
                    let mut text = std::mem::take(&mut self.held);
                    if self.after_think {
                        // White space between the reasoning and the answer belongs to neither.
                        text = text.trim_start().to_string();
                        self.after_think = text.is_empty();
                    }
                    self.push_answer(&text, &mut out);
                    return out;
                }
            }
        }
    }

    /// Answer text (after any reasoning) through the call stage.
    fn push_answer(&mut self, text: &str, out: &mut Vec<Delta>) {
        let Some(format) = self.tools else {
            push_nonempty(out, Delta::Content(text.to_string()));
            return;
        };
        self.call_text.push_str(text);
        // What a call may start with: the format's marker, or (for the JSON formats, whose
        // parser reads any JSON shape of calls) any JSON object or list.
        let inline = inline_openers(format);
        let openers: &[&str] = match format {
            ToolFormat::Mistral | ToolFormat::Generic => &["{", "["],
            ToolFormat::Llama3 => &["{", "[", "<|python_tag|>"],
            _ => inline,
        };
        if self.calls == CallState::Undecided {
            let start = self.call_text.trim_start();
            let opened = openers.iter().any(|o| start.starts_with(o));
            if start.is_empty() || (!opened && openers.iter().any(|o| may_start(start, o))) {
                return;
            }
            self.calls = if opened {
                CallState::Holding
            } else {
                CallState::Streaming
            };
        }
        if self.calls == CallState::Streaming {
            if let Some(at) = inline.iter().filter_map(|o| self.call_text.find(o)).min() {
                // Space before a call is not content, as in the whole answer's.
                let before: String = self.call_text.drain(..at).collect();
                push_nonempty(out, Delta::Content(before.trim_end().to_string()));
                self.calls = CallState::Holding;
                return;
            }
            let keep = match inline.is_empty() {
                false => {
                    // A marker's start, and the space before it, wait for what follows.
                    let marker = inline
                        .iter()
                        .map(|o| partial_marker_len(&self.call_text, o))
                        .max()
                        .unwrap_or(0);
                    let body = &self.call_text[..self.call_text.len() - marker];
                    marker + body.len() - body.trim_end().len()
                }
                true => 0,
            };
            let cut = self.call_text.len() - keep;
            let released: String = self.call_text.drain(..cut).collect();
            push_nonempty(out, Delta::Content(released));
        }
    }

    /// The deltas left at the end of the answer, and whether it called tools.
    pub fn finish(&mut self) -> (Vec<Delta>, bool) {
        let mut out = Vec::new();
        if let Some(harmony) = &mut self.harmony {
            let called = harmony.finish(self.tools.is_some(), &self.declared, &mut out);
            return (out, called);
        }
        let held = std::mem::take(&mut self.held);
        match self.think {
            ThinkState::Inside => push_nonempty(&mut out, Delta::Reasoning(held)),
            _ => {
                if self.tools.is_some() {
                    self.call_text.push_str(&held);
                } else {
                    push_nonempty(&mut out, Delta::Content(held));
                }
            }
        }
        let text = std::mem::take(&mut self.call_text);
        let mut called = false;
        if let Some(format) = self.tools {
            let parsed = parse_calls(&text, format, &self.declared);
            if parsed.calls.is_empty() {
                push_nonempty(&mut out, Delta::Content(text));
            } else {
                called = true;
                push_nonempty(&mut out, Delta::Content(parsed.content));
                out.push(Delta::ToolCalls(parsed.calls));
            }
        }
        (out, called)
    }
}

/// The markers that open calls in the middle of text, in the formats that have them.
fn inline_openers(format: ToolFormat) -> &'static [&'static str] {
    match format {
        ToolFormat::Hermes => &[HERMES_OPEN],
        ToolFormat::DeepSeekV3 | ToolFormat::DeepSeekV31 => {
            &[super::deepseek::CALLS_BEGIN, super::deepseek::CALL_BEGIN]
        }
        _ => &[],
    }
}

fn push_nonempty(out: &mut Vec<Delta>, delta: Delta) {
    let empty = match &delta {
        Delta::Content(s) | Delta::Reasoning(s) => s.is_empty(),
        Delta::ToolCalls(c) => c.is_empty(),
    };
    if !empty {
        out.push(delta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streams `text` in pieces of `n` bytes and returns every delta.
    fn stream(output: &ChatOutput, text: &str, n: usize) -> (Vec<Delta>, bool) {
        let mut shaper = output.stream();
        let mut deltas = Vec::new();
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(n) {
            deltas.extend(shaper.push(&piece.iter().collect::<String>()));
        }
        let (rest, called) = shaper.finish();
        deltas.extend(rest);
        (deltas, called)
    }

    fn joined(deltas: &[Delta], reasoning: bool) -> String {
        deltas
            .iter()
            .filter_map(|d| match (d, reasoning) {
                (Delta::Content(s), false) | (Delta::Reasoning(s), true) => Some(s.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn think_blocks_become_reasoning_streamed_or_not() {
        let output = ChatOutput {
            tools: None,
            declared: Arc::from([]),
            markup: Default::default(),
        };
        let text = "<think>\nThe user greets.\n</think>\n\nHello!";
        let (message, called) = output.message(text);
        assert!(!called);
        assert_eq!(message["reasoning_content"], "The user greets.");
        assert_eq!(message["content"], "Hello!");
        for n in [1, 2, 5, 100] {
            let (deltas, _) = stream(&output, text, n);
            assert_eq!(joined(&deltas, true).trim(), "The user greets.", "{n}");
            assert_eq!(joined(&deltas, false), "Hello!", "{n}");
        }
    }

    #[test]
    fn plain_answers_stream_unchanged() {
        let output = ChatOutput {
            tools: Some(ToolFormat::Generic),
            declared: Arc::from([]),
            markup: Default::default(),
        };
        let text = " <b>Paris</b> is the capital.";
        let (message, called) = output.message(text);
        assert!(!called);
        assert_eq!(message["content"], text);
        for n in [1, 3, 100] {
            let (deltas, called) = stream(&output, text, n);
            assert!(!called);
            assert_eq!(joined(&deltas, false), text, "{n}");
        }
    }

    #[test]
    fn calls_are_held_and_sent_whole_at_the_end() {
        for (format, text, content) in [
            (
                ToolFormat::Generic,
                r#"{"tool_calls": [{"name": "f", "arguments": {"a": 1}}]}"#,
                "",
            ),
            (
                ToolFormat::Hermes,
                "Checking.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
                "Checking.",
            ),
        ] {
            let output = ChatOutput {
                tools: Some(format),
                declared: Arc::from(["f".to_string()]),
                markup: Default::default(),
            };
            let (message, called) = output.message(text);
            assert!(called, "{format:?}");
            assert_eq!(message["tool_calls"][0]["function"]["name"], "f");
            assert_eq!(
                message["tool_calls"][0]["function"]["arguments"],
                r#"{"a":1}"#
            );
            for n in [1, 4, 200] {
                let (deltas, called) = stream(&output, text, n);
                assert!(called);
                assert_eq!(joined(&deltas, false), content, "{format:?} {n}");
                let Some(Delta::ToolCalls(calls)) = deltas.last() else {
                    panic!("{deltas:?}");
                };
                assert_eq!(calls[0].name, "f");
            }
        }
    }
}
