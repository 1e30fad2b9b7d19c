//! The log-probabilities of a whole (non-streamed) answer, written as JSON text as the tokens
//! come, never as a `serde_json::Value` tree: a tree of a token's twenty alternatives (each a
//! map of a string, a number and an array of byte numbers) takes about fifty times the bytes
//! of its text, so an answer of 100 MB cost 5 GB. Here the answer costs its own size once,
//! and is embedded in the response as it is ([`RawValue`]).

use serde_json::value::RawValue;

use crate::request::Endpoint;
use crate::scheduler::job::TokenLogprob;

/// JSON has no -inf; OpenAI reports impossible tokens at -9999.
fn clamp(l: f32) -> f32 {
    if l.is_finite() {
        l.max(-9999.0)
    } else {
        -9999.0
    }
}

/// One choice's log-probabilities in the endpoint's shape, as JSON text so far.
pub struct LogprobText {
    endpoint: Endpoint,
    /// Chat: the items of `content`. Completions: the items of `tokens`, `token_logprobs`,
    /// `top_logprobs` and `text_offset`.
    parts: [Vec<u8>; 4],
    /// Completions: the byte offset of the next token in the text.
    offset: usize,
}

impl LogprobText {
    /// Nothing yet, for `endpoint`.
    pub fn new(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            parts: Default::default(),
            offset: 0,
        }
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        self.parts.iter().map(Vec::len).sum()
    }

    /// Appends `entries`.
    pub fn push(&mut self, entries: &[TokenLogprob]) {
        for e in entries {
            match self.endpoint {
                Endpoint::Chat => {
                    let out = &mut self.parts[0];
                    separate(out);
                    out.extend_from_slice(b"{\"token\":");
                    string(out, &e.bytes);
                    out.extend_from_slice(b",\"logprob\":");
                    number(out, e.logprob);
                    out.extend_from_slice(b",\"bytes\":");
                    byte_array(out, &e.bytes);
                    out.extend_from_slice(b",\"top_logprobs\":[");
                    for (i, (bytes, l)) in e.top.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        out.extend_from_slice(b"{\"token\":");
                        string(out, bytes);
                        out.extend_from_slice(b",\"logprob\":");
                        number(out, *l);
                        out.extend_from_slice(b",\"bytes\":");
                        byte_array(out, bytes);
                        out.push(b'}');
                    }
                    out.extend_from_slice(b"]}");
                }
                Endpoint::Completions => {
                    let [tokens, logprobs, top, offsets] = &mut self.parts;
                    separate(tokens);
                    string(tokens, &e.bytes);
                    separate(logprobs);
                    number(logprobs, e.logprob);
                    separate(top);
                    top.push(b'{');
                    for (i, (bytes, l)) in e.top.iter().enumerate() {
                        if i > 0 {
                            top.push(b',');
                        }
                        string(top, bytes);
                        top.push(b':');
                        number(top, *l);
                    }
                    top.push(b'}');
                    separate(offsets);
                    offsets.extend_from_slice(self.offset.to_string().as_bytes());
                    self.offset += e.bytes.len();
                }
            }
        }
    }

    /// The whole object, ready to embed.
    pub fn finish(self) -> Box<RawValue> {
        let mut out = Vec::with_capacity(self.len() + 64);
        let [a, b, c, d] = self.parts;
        match self.endpoint {
            Endpoint::Chat => {
                out.extend_from_slice(b"{\"content\":[");
                out.extend_from_slice(&a);
                out.extend_from_slice(b"]}");
            }
            Endpoint::Completions => {
                for (i, (key, items)) in [
                    ("tokens", a),
                    ("token_logprobs", b),
                    ("top_logprobs", c),
                    ("text_offset", d),
                ]
                .into_iter()
                .enumerate()
                {
                    out.push(if i == 0 { b'{' } else { b',' });
                    string(&mut out, key.as_bytes());
                    out.extend_from_slice(b":[");
                    out.extend_from_slice(&items);
                    out.push(b']');
                }
                out.push(b'}');
            }
        }
        let text = String::from_utf8(out).expect("JSON text written from strings is UTF-8");
        RawValue::from_string(text).expect("the log-probabilities are valid JSON")
    }
}

/// A comma before every item but the first.
fn separate(out: &mut Vec<u8>) {
    if !out.is_empty() {
        out.push(b',');
    }
}

/// `bytes` (lossily as UTF-8) as a JSON string.
fn string(out: &mut Vec<u8>, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    serde_json::to_writer(&mut *out, text.as_ref()).expect("writing to memory cannot fail");
}

fn number(out: &mut Vec<u8>, l: f32) {
    // As a `Value` would hold it (an f64), so that whole and streamed answers agree.
    serde_json::to_writer(&mut *out, &f64::from(clamp(l))).expect("writing to memory cannot fail");
}

fn byte_array(out: &mut Vec<u8>, bytes: &[u8]) {
    serde_json::to_writer(&mut *out, bytes).expect("writing to memory cannot fail");
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::response::logprobs_json;

    fn entries() -> Vec<TokenLogprob> {
        vec![
            TokenLogprob {
                bytes: b"Hi \"x\"".to_vec(),
                logprob: -0.5,
                top: vec![
                    (b"Hi".to_vec(), -0.5),
                    (vec![0xff, b'a'], f32::NEG_INFINITY),
                ],
            },
            TokenLogprob {
                bytes: b"!".to_vec(),
                logprob: -1.25,
                top: vec![],
            },
        ]
    }

    #[test]
    fn the_text_equals_the_tree_it_replaces_for_both_endpoints() {
        for endpoint in [Endpoint::Chat, Endpoint::Completions] {
            let all = entries();
            let mut text = LogprobText::new(endpoint);
            text.push(&all[..1]);
            text.push(&all[1..]);
            let got: Value = serde_json::from_str(text.finish().get()).unwrap();
            assert_eq!(got, logprobs_json(endpoint, &all, &mut 0), "{endpoint:?}");
        }
        let empty = LogprobText::new(Endpoint::Chat).finish();
        assert_eq!(
            serde_json::from_str::<Value>(empty.get()).unwrap(),
            json!({"content": []})
        );
    }

    #[test]
    fn the_text_is_about_the_size_of_the_answer() {
        let top: Vec<(Vec<u8>, f32)> = (0..20).map(|i| (vec![b'a' + i], -1.5)).collect();
        let entry = TokenLogprob {
            bytes: b"word".to_vec(),
            logprob: -0.25,
            top,
        };
        let mut text = LogprobText::new(Endpoint::Chat);
        for _ in 0..1_000 {
            text.push(std::slice::from_ref(&entry));
        }
        let held = text.len();
        let answer = text.finish().get().len();
        assert!(held <= answer, "{held} > {answer}");
    }
}
