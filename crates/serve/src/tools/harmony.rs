//! gpt-oss's harmony format read back into reasoning, content and tool calls.
//!
//! A harmony answer is a list of messages, each a header and a body:
//! `<|channel|>analysis<|message|>…<|end|>` (the prompt already opened the first with
//! `<|start|>assistant`), then `<|start|>assistant<|channel|>final<|message|>…`. A call is a
//! message to a function, in the commentary channel:
//! `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}` (the recipient may
//! also stand before the channel, `<|start|>assistant to=functions.NAME<|channel|>…`). The
//! answer ends with `<|return|>` or `<|call|>`, end-of-generation tokens that the text never
//! holds.
//!
//! Bodies of the `analysis` channel are reasoning; calls of functions (`to=functions.NAME`)
//! whose body is a JSON object are calls; every other body (`final`, `commentary` without a
//! recipient, a channel we do not know, text written without any header) is content. The
//! markers themselves are never content or reasoning. Messages of one kind are joined by a
//! newline. A call whose body is not JSON (cut by `max_tokens`, or malformed) gives its body as
//! content, as does a call to anything but a function (`to=browser.search`).
//!
//! [`Reader`] reads the text piece by piece, as it is streamed: a body is released as it comes,
//! minus any end that may still become a marker; a call is held until its message ends. A whole
//! answer is read by the same reader in one piece, so both give the same text.

use serde_json::Value;

use super::call::ToolCall;

const START: &str = "<|start|>";
const CHANNEL: &str = "<|channel|>";
const MESSAGE: &str = "<|message|>";
const END: &str = "<|end|>";
const CALL: &str = "<|call|>";
const RETURN: &str = "<|return|>";
const CONSTRAIN: &str = "<|constrain|>";

/// Every marker of the format, as a model's vocabulary spells its control tokens.
pub const MARKERS: &[&str] = &[START, CHANNEL, MESSAGE, END, CALL, RETURN, CONSTRAIN];

/// What ends a body: the end of its message, or (for a model that left the end out) the start
/// of the next.
const BODY_ENDS: &[&str] = &[END, CALL, RETURN, START, CHANNEL];

/// A piece of a harmony answer.
#[derive(Debug, PartialEq)]
pub enum Event {
    /// Reasoning text.
    Reasoning(String),
    /// Answer text.
    Content(String),
    /// A whole call of a function.
    Call(ToolCall),
    /// The body of a message that was meant as a call but is not one (not JSON, cut short, not
    /// to a function): content, once the answer's calls are known.
    NotACall(String),
}

/// What a message's body is, by its header.
#[derive(Clone, Debug, PartialEq)]
enum Kind {
    Reasoning,
    Content,
    /// A message to `recipient` (`functions.NAME`, or another tool).
    Call {
        recipient: String,
    },
}

#[derive(Debug, PartialEq)]
enum Part {
    /// Between messages, or inside a header.
    Header,
    /// Inside a body.
    Body(Kind),
}

/// Reads a harmony answer as it is streamed.
#[derive(Debug)]
pub struct Reader {
    /// Text not yet read.
    held: String,
    part: Part,
    /// The body of the call being read.
    call_body: String,
    /// Some reasoning (some content) was released: the next message of the kind starts with a
    /// newline.
    reasoning_seen: bool,
    content_seen: bool,
}

impl Default for Reader {
    fn default() -> Self {
        Self::new()
    }
}

/// The length of the longest end of `s` that may still become one of `markers`.
fn partial_len(s: &str, markers: &[&str]) -> usize {
    let Some(at) = s.rfind('<') else {
        return 0;
    };
    let tail = &s[at..];
    if markers.iter().any(|m| m.starts_with(tail)) {
        s.len() - at
    } else {
        0
    }
}

/// The kind of a message by its header (`<|start|>assistant to=… <|channel|>NAME …`).
fn kind_of(header: &str) -> Kind {
    let words = || {
        header
            .split(|c: char| c.is_whitespace() || c == '<' || c == '>' || c == '|')
            .filter(|w| !w.is_empty())
    };
    if let Some(recipient) = words().find_map(|w| w.strip_prefix("to=")) {
        return Kind::Call {
            recipient: recipient.to_string(),
        };
    }
    let channel = header.find(CHANNEL).and_then(|at| {
        header[at + CHANNEL.len()..]
            .split(|c: char| c.is_whitespace() || c == '<')
            .find(|w| !w.is_empty())
    });
    match channel {
        Some("analysis") => Kind::Reasoning,
        _ => Kind::Content,
    }
}

/// The call a message to `recipient` with `body` makes, if it is one.
fn call_of(recipient: &str, body: &str) -> Option<ToolCall> {
    let name = recipient.strip_prefix("functions.")?;
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    let arguments: Value = serde_json::from_str(body.trim()).ok()?;
    (valid && arguments.is_object()).then(|| ToolCall {
        name: name.to_string(),
        arguments: arguments.to_string(),
    })
}

impl Reader {
    /// A reader at the start of an answer.
    pub fn new() -> Self {
        Self {
            held: String::new(),
            part: Part::Header,
            call_body: String::new(),
            reasoning_seen: false,
            content_seen: false,
        }
    }

    /// The events `text` (the next piece of the answer) releases.
    pub fn push(&mut self, text: &str) -> Vec<Event> {
        self.held.push_str(text);
        let mut out = Vec::new();
        loop {
            match &self.part {
                Part::Header => {
                    let start = self.held.trim_start();
                    if let Some(at) = self.held.find(MESSAGE) {
                        let kind = kind_of(&self.held[..at]);
                        self.held.drain(..at + MESSAGE.len());
                        self.open(kind, &mut out);
                    } else if start.is_empty() || start.starts_with('<') && may_be_markup(start) {
                        return out;
                    } else {
                        // Text without a header: a model that does not write harmony.
                        self.open(Kind::Content, &mut out);
                    }
                }
                Part::Body(kind) => {
                    let kind = kind.clone();
                    let end = BODY_ENDS
                        .iter()
                        .filter_map(|m| self.held.find(m).map(|at| (at, *m)))
                        .min();
                    match end {
                        Some((at, marker)) => {
                            let body: String = self.held.drain(..at).collect();
                            if matches!(marker, END | CALL | RETURN) {
                                self.held.drain(..marker.len());
                            }
                            self.body(&kind, body, &mut out);
                            self.close(&kind, &mut out);
                            self.part = Part::Header;
                        }
                        None => {
                            let keep = partial_len(&self.held, BODY_ENDS);
                            let cut = self.held.len() - keep;
                            let body: String = self.held.drain(..cut).collect();
                            self.body(&kind, body, &mut out);
                            return out;
                        }
                    }
                }
            }
        }
    }

    /// The events left at the end of the answer.
    pub fn finish(&mut self) -> Vec<Event> {
        let mut out = Vec::new();
        let mut rest = std::mem::take(&mut self.held);
        // A header cut short is markup only: nothing of it is shown; nor is the start of a
        // marker that a body was cut in.
        rest.truncate(rest.len() - partial_len(&rest, BODY_ENDS));
        if let Part::Body(kind) = std::mem::replace(&mut self.part, Part::Header) {
            self.body(&kind, rest, &mut out);
            self.close(&kind, &mut out);
        }
        out
    }

    fn open(&mut self, kind: Kind, out: &mut Vec<Event>) {
        match kind {
            Kind::Reasoning if self.reasoning_seen => out.push(Event::Reasoning("\n".into())),
            Kind::Content if self.content_seen => out.push(Event::Content("\n".into())),
            _ => {}
        }
        self.part = Part::Body(kind);
    }

    fn body(&mut self, kind: &Kind, text: String, out: &mut Vec<Event>) {
        if text.is_empty() {
            return;
        }
        match kind {
            Kind::Reasoning => {
                self.reasoning_seen = true;
                out.push(Event::Reasoning(text));
            }
            Kind::Content => {
                self.content_seen = true;
                out.push(Event::Content(text));
            }
            Kind::Call { .. } => self.call_body.push_str(&text),
        }
    }

    fn close(&mut self, kind: &Kind, out: &mut Vec<Event>) {
        if let Kind::Call { recipient } = kind {
            let body = std::mem::take(&mut self.call_body);
            match call_of(recipient, &body) {
                Some(call) => out.push(Event::Call(call)),
                None if body.is_empty() => {}
                None => out.push(Event::NotACall(body)),
            }
        }
    }
}

/// Whether `s` (starting with `<`) may be, or become, harmony markup rather than text.
fn may_be_markup(s: &str) -> bool {
    MARKERS.iter().any(|m| m.starts_with(s) || s.starts_with(m))
}

/// Every event of a whole answer.
pub fn read(text: &str) -> Vec<Event> {
    let mut reader = Reader::new();
    let mut events = reader.push(text);
    events.extend(reader.finish());
    events
}
